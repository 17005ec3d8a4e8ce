// Engine tests on the tiny model: its file and chat prompts for the whole file, and a
// worker started for one describe block (closed after it), in the isolation given.
import { afterAll, beforeAll } from "vitest";
import { PromptPreparer } from "../../src/engine/host/prompt-preparer.js";
import { WorkerHandle, type Isolation } from "../../src/engine/host/worker-handle.js";
import type { WorkerInit } from "../../src/engine/wire/protocol.js";
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

/** Call inside a describe block: the worker is started before its tests and closed after them. */
export function useWorker(init: () => WorkerInit, isolation: Isolation): () => WorkerHandle {
  let worker: WorkerHandle | undefined;
  beforeAll(async () => {
    worker = new WorkerHandle(init(), { isolation });
    await worker.start();
  });
  afterAll(async () => {
    await worker?.close();
  });
  return () => worker!;
}
