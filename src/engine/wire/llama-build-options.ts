// The custom CMake options a process asks node-llama-cpp's llama.cpp build for, read from its
// environment: both sides need them, the worker to load that build, the host to tell an
// operator which binary a worker runs and why.

export const CMAKE_OPTION_PREFIX = "NODE_LLAMA_CPP_CMAKE_OPTION_";

/** What `npm run build:engine-native` builds with (package.json): this CPU's instruction set, no OpenMP. */
export const NATIVE_CPU_BUILD_OPTIONS: Readonly<Record<string, string>> = { GGML_NATIVE: "ON", GGML_OPENMP: "OFF" };

/** The custom CMake options the environment asks node-llama-cpp's build for ("GGML_NATIVE=ON", ...). */
export function requestedCmakeOptions(env: NodeJS.ProcessEnv = process.env): string[] {
  return Object.entries(env)
    .filter(([name, value]) => name.startsWith(CMAKE_OPTION_PREFIX) && value !== undefined)
    .map(([name, value]) => `${name.slice(CMAKE_OPTION_PREFIX.length)}=${value}`)
    .sort();
}
