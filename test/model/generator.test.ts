import { createHash } from "node:crypto";
import { mkdtemp, readdir, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { isAbsolute, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ChatMLChatWrapper,
  getLlama,
  LlamaChatSession,
  LlamaLogLevel,
  readGgufFileInfo,
  resolveChatWrapper,
  type Llama,
  type LlamaContext,
  type LlamaModel,
} from "node-llama-cpp";
import { CHATML_TEMPLATE, countParameters, defaultModelPath, ensureModel, makeModel, PRESETS } from "../../src/presets/make-model.js";
import { buildVocab } from "../../src/presets/vocab.js";

// Loading the native addon and the model takes ~1 s; generation itself is milliseconds.
const SLOW = 60_000;

const vocab = buildVocab();
let dir = "";

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "radixgate-model-"));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function fileSha256(path: string): Promise<string> {
  return createHash("sha256")
    .update(await readFile(path))
    .digest("hex");
}

describe("make-model", () => {
  it("is deterministic in the seed", async () => {
    const a = await makeModel({ preset: "tiny", seed: 1, outPath: join(dir, "a.gguf") });
    const b = await makeModel({ preset: "tiny", seed: 1, outPath: join(dir, "b.gguf") });
    const c = await makeModel({ preset: "tiny", seed: 2, outPath: join(dir, "c.gguf") });

    expect(await fileSha256(a.path)).toBe(a.sha256);
    expect(b.sha256).toBe(a.sha256);
    expect(c.sha256).not.toBe(a.sha256);
    expect(c.bytes).toBe(a.bytes); // same layout, different weights
    expect((await stat(a.path)).size).toBe(a.bytes);
    expect(a.parameters).toBe(countParameters(PRESETS.tiny));
  });

  it("ensureModel creates the file once and leaves no temp files", async () => {
    const path = join(dir, "ensure", "tiny.gguf");
    expect(await ensureModel("tiny", { seed: 1, path })).toBe(path);
    const first = await stat(path);
    expect(await ensureModel("tiny", { seed: 1, path })).toBe(path);
    expect((await stat(path)).mtimeMs).toBe(first.mtimeMs);
    expect(await readdir(join(dir, "ensure"))).toEqual(["tiny.gguf"]);
  });

  it("defaultModelPath points into models/", () => {
    const path = defaultModelPath("bench");
    expect(isAbsolute(path)).toBe(true);
    expect(path.endsWith(join("models", "bench.gguf"))).toBe(true);
  });

  it("writes GGUF that node-llama-cpp's own parser reads back", async () => {
    const info = await readGgufFileInfo(join(dir, "a.gguf"));
    const p = PRESETS.tiny;
    expect(info.version).toBe(3);
    expect(info.metadata.general.architecture).toBe("llama");
    expect(info.architectureMetadata.embedding_length).toBe(p.nEmbd);
    expect(info.architectureMetadata.feed_forward_length).toBe(p.nFf);
    expect(info.metadata.tokenizer.ggml.tokens).toEqual(vocab.tokens);
    expect(info.metadata.tokenizer.chat_template).toBe(CHATML_TEMPLATE);
    expect(info.tensorInfo?.length).toBe(3 + 9 * p.nLayer);
    expect(info.tensorInfo?.find((t) => t.name === "blk.0.ffn_down.weight")?.dimensions).toEqual([p.nFf, p.nEmbd]);
  });
});

describe("tiny model under llama.cpp", () => {
  let llama: Llama;
  let model: LlamaModel;
  let context: LlamaContext;

  beforeAll(async () => {
    const { path } = await makeModel({ preset: "tiny", seed: 1, outPath: join(dir, "llama.gguf") });
    llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
    model = await llama.loadModel({ modelPath: path });
    // threads: 1 explicitly: the default oversubscribes small CI machines and is ~500x slower.
    context = await model.createContext({ threads: 1, contextSize: 512 });
  }, SLOW);

  afterAll(async () => {
    await context?.dispose();
    await model?.dispose();
    await llama?.dispose();
  });

  it("reports the preset's training context", () => {
    expect(model.trainContextSize).toBe(PRESETS.tiny.contextLength);
  });

  it("tokenizes ChatML control tokens as single tokens", () => {
    const tokens = model.tokenize("<|im_start|>user\nhello<|im_end|>", true);
    expect(tokens[0]).toBe(vocab.imStartId);
    expect(tokens.at(-1)).toBe(vocab.imEndId);
    expect(tokens.length).toBeLessThan("user\nhello".length); // multi-char pieces, not bytes
    // Without special-token parsing the same text must not produce control tokens.
    expect(model.tokenize("<|im_start|>", false)).not.toContain(vocab.imStartId);
  });

  it("ends turns at <|im_end|>", () => {
    const [imEnd] = model.tokenize("<|im_end|>", true);
    expect(imEnd).toBe(vocab.imEndId);
    expect(model.tokens.eos).toBe(imEnd);
    expect(model.isEogToken(imEnd)).toBe(true);
  });

  it("resolves the ChatML chat wrapper from the embedded template", () => {
    expect(resolveChatWrapper(model)).toBeInstanceOf(ChatMLChatWrapper);
  });

  it(
    "generates the same non-empty text greedily on fresh sequences",
    async () => {
      const generate = async (): Promise<string> => {
        const sequence = context.getSequence();
        const session = new LlamaChatSession({ contextSequence: sequence });
        try {
          expect(session.chatWrapper).toBeInstanceOf(ChatMLChatWrapper);
          return await session.prompt("hello, how are you?", { temperature: 0, maxTokens: 16 });
        } finally {
          session.dispose();
          sequence.dispose();
        }
      };
      const first = await generate();
      const second = await generate();
      expect(first.trim().length).toBeGreaterThan(0);
      expect(second).toBe(first);
      // Random weights must still give varied output, not one token repeated.
      expect(new Set(model.tokenize(first)).size).toBeGreaterThan(4);
    },
    SLOW,
  );
});
