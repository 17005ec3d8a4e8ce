// Engine tests on the tiny model: its file and chat prompts for the whole file, and a
// worker started for one describe block (closed after it), in the isolation given.
import { getLlama, type Llama, LlamaLogLevel, type LlamaModel } from "node-llama-cpp";
import { afterAll, beforeAll } from "vitest";
import { PromptPreparer } from "../../src/engine/host/prompt-preparer.js";
import { WorkerHandle, type Isolation } from "../../src/engine/host/worker-handle.js";
import { DEFAULT_THREAD_POLL, type WorkerInit } from "../../src/engine/wire/protocol.js";
import { type BatchedContext, type BatchedContextOptions, createBatchedContext } from "../../src/engine/worker/batched-context.js";
import { ensureModel } from "../../src/presets/make-model.js";

export interface TinyModel {
  /** The model file (valid once the file's beforeAll ran). */
  path(): string;
  /** The chat prompt of one user message, as token ids. */
  prompt(text: string): Promise<Int32Array>;
}

/** Call at the top of a test file. */
export function useTinyModel(): TinyModel {
  let modelPath = "";
  let preparer: PromptPreparer | undefined;
  beforeAll(async () => {
    modelPath = await ensureModel("tiny");
    preparer = new PromptPreparer([{ id: "tiny", path: modelPath }], 1);
  });
  afterAll(async () => {
    await preparer?.close();
  });
  return {
    path: () => modelPath,
    prompt: async (text) => (await preparer!.chat({ modelId: "tiny", messages: [{ role: "user", content: text }] })).tokens,
  };
}

/**
 * Call inside a describe block: the worker is started before its tests and closed after them.
 * `env`: variables set while it starts (a thread copies our environment then, a process gets it).
 */
export function useWorker(init: () => WorkerInit, isolation: Isolation, env: Record<string, string> = {}): () => WorkerHandle {
  let worker: WorkerHandle | undefined;
  beforeAll(async () => {
    worker = await startWorker(init(), isolation, env);
  });
  afterAll(async () => {
    await worker?.close();
  });
  return () => worker!;
}

/** A worker started with `env` set in our environment while it starts. */
export async function startWorker(init: WorkerInit, isolation: Isolation, env: Record<string, string> = {}): Promise<WorkerHandle> {
  const saved = Object.fromEntries(Object.keys(env).map((name) => [name, process.env[name]]));
  Object.assign(process.env, env);
  try {
    const worker = new WorkerHandle(init, { isolation });
    await worker.start();
    return worker;
  } finally {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  }
}

/** Call inside a describe block: a model loaded in this process (no worker) for its tests, on the CPU. */
export function useLoadedModel(path: () => string): () => LlamaModel {
  let llama: Llama | undefined;
  let model: LlamaModel | undefined;
  beforeAll(async () => {
    llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
    model = await llama.loadModel({ modelPath: path() });
  });
  afterAll(async () => {
    await model?.dispose();
    await llama?.dispose();
  });
  return () => model!;
}

/** A batched context of two slots on `model` as the engine tests open it, with `options` over the defaults. */
export function openTestContext(model: LlamaModel, options: Partial<BatchedContextOptions> = {}): Promise<BatchedContext> {
  return createBatchedContext(model, {
    slots: 2,
    contextSize: 1024,
    batchSize: 64,
    threads: 1,
    threadPoll: DEFAULT_THREAD_POLL,
    flashAttention: "auto",
    chunkTokens: () => 64,
    ...options,
  });
}
