// node-llama-cpp compiled on this machine, for the benchmarks that compare it with the
// prebuilt npm binary in one run. node-llama-cpp keys a local build by its custom CMake
// options, and a process asks for one through NODE_LLAMA_CPP_CMAKE_OPTION_<name> variables:
// `npm run build:engine-native` makes a CPU build for this machine's instruction set without
// OpenMP (so the worker's compute thread pool runs its graphs; built with OpenMP, a worker
// decoded one sequence slower with two threads than with one, 108 against 140 tokens/s in
// bench/results/peer.md at a264068). A process with NATIVE_BUILD_ENV loads that build; one
// without it keeps the prebuilt binary (it looks for a build with no custom options).
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { CMAKE_OPTION_PREFIX, NATIVE_CPU_BUILD_OPTIONS } from "../src/engine/worker/llama-binary.js";

export const NATIVE_BUILD_ENV: Readonly<Record<string, string>> = Object.fromEntries(
  Object.entries(NATIVE_CPU_BUILD_OPTIONS).map(([name, value]) => [`${CMAKE_OPTION_PREFIX}${name}`, value]),
);

/** Whether `npm run build:engine-native` finished its build (a CPU build with exactly those options). */
export function nativeBuildPresent(): boolean {
  const builds = fileURLToPath(new URL("../node_modules/node-llama-cpp/llama/localBuilds", import.meta.url));
  if (!existsSync(builds)) return false;
  return readdirSync(builds).some((folder) => {
    const metadata = join(builds, folder, "Release", "_nlcBuildMetadata.json");
    if (!existsSync(join(builds, folder, "buildDone.status")) || !existsSync(metadata)) return false;
    const { buildOptions } = JSON.parse(readFileSync(metadata, "utf8")) as { buildOptions?: { gpu?: unknown; customCmakeOptions?: Record<string, string> } };
    const options = buildOptions?.customCmakeOptions ?? {};
    return (
      buildOptions?.gpu === false &&
      Object.keys(options).length === Object.keys(NATIVE_CPU_BUILD_OPTIONS).length &&
      Object.entries(NATIVE_CPU_BUILD_OPTIONS).every(([name, value]) => options[name] === value)
    );
  });
}
