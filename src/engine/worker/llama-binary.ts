// Which llama.cpp binary a worker or prompt thread loads. node-llama-cpp 3.21.1 reads custom
// CMake options from NODE_LLAMA_CPP_CMAKE_OPTION_<name> variables and keys a build compiled on
// this machine by them: with none set it loads its prebuilt npm binary; with some set, only a
// local build made with exactly those options (`npm run build:engine-native` makes one for this
// machine's CPU, `npm run start:native` asks for it). Every thread of a process must load the
// same binary, so the choice is the process environment's, never a per-model setting.
// (node-llama-cpp also turns a few GGML_* variables, such as GGML_CUDA, into custom options;
// only the NODE_LLAMA_CPP_CMAKE_OPTION_ ones are checked here.)
import { getLlama, type Llama, type LlamaOptions, NoBinaryFoundError } from "node-llama-cpp";
import { CMAKE_OPTION_PREFIX, NATIVE_CPU_BUILD_OPTIONS, requestedCmakeOptions } from "../wire/llama-build-options.js";

const asOptionList = (options: Readonly<Record<string, string>>) =>
  Object.entries(options)
    .map(([name, value]) => `${name}=${value}`)
    .sort();

/** What to run when the build the environment asks for is missing. */
export function buildAdvice(asked: readonly string[]): string {
  const native = asOptionList(NATIVE_CPU_BUILD_OPTIONS);
  if (asked.length === native.length && asked.every((option, i) => option === native[i])) {
    return "run `npm run build:engine-native` first (about 10 minutes on 2 cores)";
  }
  return "build it with those variables set (`npx --no node-llama-cpp source download --gpu false` for a CPU build, or --gpu cuda / vulkan for a GPU one)";
}

/**
 * getLlama. When the environment asks for custom options, only a local build with them will do:
 * node-llama-cpp would otherwise fall back to its prebuilt binary without a word, and the
 * error says what to run instead.
 */
export async function loadLlama(options: LlamaOptions): Promise<Llama> {
  const asked = requestedCmakeOptions();
  try {
    return await getLlama({ ...options, usePrebuiltBinaries: asked.length === 0 });
  } catch (error) {
    if (!(error instanceof NoBinaryFoundError) || asked.length === 0) throw error;
    throw new Error(
      `no llama.cpp build made on this machine with ${asked.join(", ")}, which the environment asks node-llama-cpp for ` +
        `(${CMAKE_OPTION_PREFIX}* variables): ${buildAdvice(asked)}, or start without those variables to use the prebuilt binary (\`npm start\`)`,
    );
  }
}
