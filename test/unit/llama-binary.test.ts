// What a worker tells the user when the llama.cpp build its environment asks for is missing.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { buildAdvice } from "../../src/engine/worker/llama-binary.js";
import { CMAKE_OPTION_PREFIX, NATIVE_CPU_BUILD_OPTIONS, requestedCmakeOptions } from "../../src/engine/wire/llama-build-options.js";

describe("the llama.cpp build a process asks for", () => {
  it("reads node-llama-cpp's custom CMake options from the environment, sorted", () => {
    const env = { NODE_LLAMA_CPP_CMAKE_OPTION_GGML_OPENMP: "OFF", NODE_LLAMA_CPP_CMAKE_OPTION_GGML_NATIVE: "ON", PATH: "/bin" };
    expect(requestedCmakeOptions(env)).toEqual(["GGML_NATIVE=ON", "GGML_OPENMP=OFF"]);
    expect(requestedCmakeOptions({ PATH: "/bin" })).toEqual([]);
  });

  it("names npm run build:engine-native for exactly its options, and a source build for any others", () => {
    const native = Object.entries(NATIVE_CPU_BUILD_OPTIONS).map(([name, value]) => `${name}=${value}`);
    expect(buildAdvice(native.sort())).toContain("npm run build:engine-native");
    expect(buildAdvice(["GGML_NATIVE=ON"])).toContain("node-llama-cpp source download");
    expect(buildAdvice([...native, "GGML_AVX512=OFF"].sort())).not.toContain("build:engine-native");
  });

  it("asks, in npm run build:engine-native and start:native, for the options the error names", () => {
    const { scripts } = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { scripts: Record<string, string> };
    const variables = Object.entries(NATIVE_CPU_BUILD_OPTIONS).map(([name, value]) => `${CMAKE_OPTION_PREFIX}${name}=${value}`);
    for (const script of ["build:engine-native", "start:native"]) {
      const asked = scripts[script]!.split(/\s+/).filter((word) => word.startsWith(CMAKE_OPTION_PREFIX));
      expect(asked.sort()).toEqual(variables.sort());
    }
  });
});
