// What a worker tells the user when the llama.cpp build its environment asks for is missing.
import { describe, expect, it } from "vitest";
import { buildAdvice, NATIVE_CPU_BUILD_OPTIONS, requestedCmakeOptions } from "../../src/engine/worker/llama-binary.js";

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
});
