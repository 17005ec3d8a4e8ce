// The llama.cpp build `npm run build:engine-native` makes on this machine, as the host sees it:
// whether it is there, the environment that asks node-llama-cpp for it, and what to tell an
// operator whose CPU workers run the prebuilt binary instead. node-llama-cpp keys a local build
// by its custom CMake options, and a process asks for one through NODE_LLAMA_CPP_CMAKE_OPTION_<name>
// variables: this build is for this machine's instruction set, without OpenMP (so the worker's
// compute thread pool runs its graphs). A process without those variables keeps the prebuilt
// binary, even when the build is there.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { PACKAGE_ROOT } from "../../common/package-root.js";
import { CMAKE_OPTION_PREFIX, NATIVE_CPU_BUILD_OPTIONS, requestedCmakeOptions } from "../wire/llama-build-options.js";

/** What `npm run start:native` adds to `npm start`'s environment. */
export const NATIVE_BUILD_ENV: Readonly<Record<string, string>> = Object.fromEntries(
  Object.entries(NATIVE_CPU_BUILD_OPTIONS).map(([name, value]) => [`${CMAKE_OPTION_PREFIX}${name}`, value]),
);

/** Where node-llama-cpp keeps the builds it compiled on this machine. */
export const LOCAL_BUILDS_DIR = join(PACKAGE_ROOT, "node_modules", "node-llama-cpp", "llama", "localBuilds");

/** Whether `npm run build:engine-native` finished its build (a CPU build with exactly those options). */
export function nativeBuildPresent(localBuildsDir: string = LOCAL_BUILDS_DIR): boolean {
  if (!existsSync(localBuildsDir)) return false;
  return readdirSync(localBuildsDir).some((folder) => {
    const metadata = join(localBuildsDir, folder, "Release", "_nlcBuildMetadata.json");
    if (!existsSync(join(localBuildsDir, folder, "buildDone.status")) || !existsSync(metadata)) return false;
    const { buildOptions } = JSON.parse(readFileSync(metadata, "utf8")) as { buildOptions?: { gpu?: unknown; customCmakeOptions?: Record<string, string> } };
    const options = buildOptions?.customCmakeOptions ?? {};
    return (
      buildOptions?.gpu === false &&
      Object.keys(options).length === Object.keys(NATIVE_CPU_BUILD_OPTIONS).length &&
      Object.entries(NATIVE_CPU_BUILD_OPTIONS).every(([name, value]) => options[name] === value)
    );
  });
}

/** What a worker reported it loaded: its backend ("cpu", "cuda", ...) and binary ("prebuilt" or "localBuild"). */
export interface LoadedBinary {
  backend: string;
  binary: string;
}

/**
 * A line for the operator when CPU workers run node-llama-cpp's prebuilt binary: a warning when
 * the build made here is there but this server was started without asking for it, a hint
 * when it was never built. Nothing for GPU workers, local builds, or an environment that
 * already asks for custom options.
 */
export function cpuBinaryAdvice(
  workers: readonly LoadedBinary[],
  buildPresent: boolean,
  env: NodeJS.ProcessEnv = process.env,
): { level: "warn" | "info"; message: string } | undefined {
  if (!workers.some((worker) => worker.backend === "cpu" && worker.binary === "prebuilt")) return undefined;
  if (requestedCmakeOptions(env).length > 0) return undefined;
  if (buildPresent) {
    return {
      level: "warn",
      message:
        "CPU workers run node-llama-cpp's prebuilt llama.cpp binary although `npm run build:engine-native` built one for this machine: start with `npm run start:native` to use it (it evaluates prompts and decodes faster on CPU; docs/engine.md)",
    };
  }
  return {
    level: "info",
    message:
      "CPU workers run node-llama-cpp's prebuilt llama.cpp binary: a build made on this machine is faster on CPU (`npm run build:engine-native` once, about 10 minutes on 2 cores, then `npm run start:native`; docs/engine.md)",
  };
}
