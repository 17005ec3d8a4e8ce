// The host's view of the llama.cpp build made on this machine: whether it is there (read from
// node-llama-cpp's build folders, faked here on disk), and what an operator is told when CPU
// workers run the prebuilt binary instead.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { cpuBinaryAdvice, NATIVE_BUILD_ENV, nativeBuildPresent } from "../../src/engine/host/native-build.js";

const made: string[] = [];
afterEach(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A localBuilds folder holding one build with these options; `done`: whether it finished. */
function localBuilds(builds: { gpu: unknown; options: Record<string, string>; done: boolean }[]): string {
  const dir = mkdtempSync(join(tmpdir(), "radixgate-local-builds-"));
  made.push(dir);
  builds.forEach((build, i) => {
    const folder = join(dir, `build-${i}`);
    mkdirSync(join(folder, "Release"), { recursive: true });
    writeFileSync(join(folder, "Release", "_nlcBuildMetadata.json"), JSON.stringify({ buildOptions: { gpu: build.gpu, customCmakeOptions: build.options } }));
    if (build.done) writeFileSync(join(folder, "buildDone.status"), "");
  });
  return dir;
}

const NATIVE = { GGML_NATIVE: "ON", GGML_OPENMP: "OFF" };

describe("the build npm run build:engine-native makes", () => {
  it("is found only finished, for the CPU, with exactly its options", () => {
    expect(nativeBuildPresent(join(tmpdir(), "radixgate-no-such-folder"))).toBe(false);
    expect(nativeBuildPresent(localBuilds([{ gpu: false, options: NATIVE, done: true }]))).toBe(true);
    expect(nativeBuildPresent(localBuilds([{ gpu: false, options: NATIVE, done: false }]))).toBe(false);
    expect(nativeBuildPresent(localBuilds([{ gpu: "cuda", options: NATIVE, done: true }]))).toBe(false);
    expect(nativeBuildPresent(localBuilds([{ gpu: false, options: { GGML_NATIVE: "ON" }, done: true }]))).toBe(false);
    expect(nativeBuildPresent(localBuilds([{ gpu: false, options: { ...NATIVE, GGML_AVX: "OFF" }, done: true }]))).toBe(false);
    expect(
      nativeBuildPresent(
        localBuilds([
          { gpu: false, options: {}, done: true },
          { gpu: false, options: NATIVE, done: true },
        ]),
      ),
    ).toBe(true);
  });

  it("is what npm run start:native asks for", () => {
    expect(NATIVE_BUILD_ENV).toEqual({ NODE_LLAMA_CPP_CMAKE_OPTION_GGML_NATIVE: "ON", NODE_LLAMA_CPP_CMAKE_OPTION_GGML_OPENMP: "OFF" });
  });
});

describe("the start-up advice on CPU workers' binary", () => {
  const prebuiltCpu = { backend: "cpu", binary: "prebuilt" };

  it("warns when the build made here is there but unused, and hints at it when it was never made", () => {
    expect(cpuBinaryAdvice([prebuiltCpu], true, {})).toMatchObject({ level: "warn", message: expect.stringContaining("npm run start:native") });
    const hint = cpuBinaryAdvice([prebuiltCpu], false, {});
    expect(hint).toMatchObject({ level: "info" });
    expect(hint!.message).toContain("npm run build:engine-native");
  });

  it("says nothing for GPU workers, a local build, or an environment that already asks for custom options", () => {
    expect(cpuBinaryAdvice([{ backend: "cuda", binary: "prebuilt" }], true, {})).toBeUndefined();
    expect(cpuBinaryAdvice([{ backend: "cpu", binary: "localBuild" }], true, {})).toBeUndefined();
    expect(cpuBinaryAdvice([prebuiltCpu], true, { ...NATIVE_BUILD_ENV })).toBeUndefined();
    expect(cpuBinaryAdvice([], true, {})).toBeUndefined();
  });
});
