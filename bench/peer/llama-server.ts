// The peer Radixgate is measured against: llama-server built from the very llama.cpp source
// that the installed node-llama-cpp bundles, so both sides run the same kernels (the build and
// its cache: src/engine/llama-server/binary.ts; native/README.md has the recipe by hand).
import { LlamaServerProcess, llamaServerArgs } from "../../src/engine/llama-server/server-process.js";

export { findOrBuildLlamaServer } from "../../src/engine/llama-server/binary.js";

export interface LlamaServerOptions {
  binary: string;
  model: string;
  slots: number;
  threads: number;
  /** Tokens per slot; the server gets slots x this in all. */
  contextPerSlot: number;
  batchSize: number;
}

export interface RunningLlamaServer {
  baseURL: string;
  pid: number | undefined;
  close(): Promise<void>;
}

/** Starts llama-server with its own defaults but for the shape (slots, context, threads, batch) and waits until /health answers 200. */
export async function startLlamaServer(options: LlamaServerOptions): Promise<RunningLlamaServer> {
  const args = llamaServerArgs({
    modelPath: options.model,
    slots: options.slots,
    contextPerSlot: options.contextPerSlot,
    batchSize: options.batchSize,
    threads: options.threads,
    gpu: false,
  });
  const server = await LlamaServerProcess.start({ binary: options.binary, args });
  return { baseURL: server.baseURL, pid: server.pid, close: () => server.close() };
}
