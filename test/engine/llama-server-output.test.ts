// What the host makes of llama-server refusing its own model's output: the real binary, made
// to generate a byte that is not UTF-8, ends its stream with an error that reads back as a
// ModelOutputError (the worker is fine), while its other errors stay plain errors.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ModelOutputError } from "../../src/engine/host/worker-errors.js";
import { completionBody, readCompletionStream } from "../../src/engine/llama-server/completion-request.js";
import { findLlamaServer } from "../../src/engine/llama-server/binary.js";
import { LlamaServerProcess, llamaServerArgs } from "../../src/engine/llama-server/server-process.js";
import { ensureModel } from "../../src/presets/make-model.js";
import { buildVocab } from "../../src/presets/vocab.js";

const vocab = buildVocab();
/** A lone UTF-8 continuation byte: no text starts with it. */
const CONTINUATION_BYTE = vocab.tokens.indexOf("<0x80>");

function sse(...events: unknown[]): AsyncIterable<Uint8Array> {
  const text = events.map((event) => `data: ${JSON.stringify(event)}\n\n`).join("");
  return (async function* () {
    yield new TextEncoder().encode(text);
  })();
}

describe("llama-server's error events", () => {
  it("a refusal of the model's own output is a ModelOutputError; any other error is not", async () => {
    const refused = { error: { code: 500, message: "The model produced output that does not match the expected Content-only format", type: "server_error" } };
    await expect(readCompletionStream(sse({ content: "a", tokens: [5] }, refused), undefined, () => {})).rejects.toBeInstanceOf(ModelOutputError);
    const other = readCompletionStream(sse({ error: { code: 500, message: "slot unavailable", type: "server_error" } }), undefined, () => {});
    await expect(other).rejects.toThrow("llama-server: slot unavailable");
    await expect(other).rejects.not.toBeInstanceOf(ModelOutputError);
  });
});

describe("the real llama-server generating a byte that is not UTF-8", () => {
  let server: LlamaServerProcess;
  beforeAll(async () => {
    const args = llamaServerArgs({ modelPath: await ensureModel("tiny"), slots: 1, contextPerSlot: 512, batchSize: 64, threads: 1, gpu: false });
    server = await LlamaServerProcess.start({ binary: await findLlamaServer(undefined), args });
  }, 120_000);
  afterAll(async () => {
    await server?.close();
  });

  it("ends the stream with the error the host reads as a refusal of the model's output", async () => {
    expect(CONTINUATION_BYTE).toBeGreaterThan(0);
    const prompt = [1, ...Array.from({ length: 8 }, (_, i) => 300 + i)];
    const body = { ...completionBody(prompt, { temperature: 0, stop: [], maxTokens: 4 }), logit_bias: [[CONTINUATION_BYTE, 100]] };
    const response = await fetch(`${server.baseURL}/completion`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    expect(response.status).toBe(200);
    await expect(readCompletionStream(response.body!, undefined, () => {})).rejects.toBeInstanceOf(ModelOutputError);
  });
});
