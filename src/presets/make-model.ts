/**
 * Deterministic generator of small GGUF "llama" models with random weights and a ChatML
 * chat template, so tests can run real llama.cpp inference without downloading a model.
 *
 *   radixgate make-model --preset tiny [--seed 1] [--out path]   (src/cli/)
 *
 * Same preset + seed => byte-identical file (seeded PRNG, no Math.random, no clock).
 */
import { MODELS_DIR } from "../common/models-dir.js";
import { mulberry32 } from "../common/random.js";
import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, rename, rm } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { gguf, writeGguf, type GgufFile, type GgufMetadata, type GgufTensor } from "./gguf-writer.js";
import { buildVocab, type Vocab } from "./vocab.js";

export const DEFAULT_SEED = 1;

export const CHATML_TEMPLATE =
  "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

export interface ModelPreset {
  readonly nEmbd: number;
  readonly nLayer: number;
  readonly nHead: number;
  /** < nHead gives grouped-query attention, which is what most real models use. */
  readonly nHeadKv: number;
  readonly nFf: number;
  readonly contextLength: number;
}

export const PRESETS = {
  /** ~0.3M parameters: a token costs well under a millisecond on one CPU core. */
  tiny: { nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 176, contextLength: 4096 },
  /** ~25M parameters (~100 MB F32): prompt processing is slow enough on one core that a prefix-cache hit shows. */
  bench: { nEmbd: 512, nLayer: 8, nHead: 8, nHeadKv: 4, nFf: 1408, contextLength: 16384 },
} as const satisfies Record<string, ModelPreset>;

export type PresetName = keyof typeof PRESETS;

export interface MakeModelOptions {
  readonly preset: PresetName;
  readonly seed?: number | undefined;
  /** Defaults to defaultModelPath(preset). */
  readonly outPath?: string | undefined;
  /** Called as the file is written (after the weights are generated in memory). */
  readonly onProgress?: ((writtenBytes: number, totalBytes: number) => void) | undefined;
}

export interface MadeModel {
  readonly path: string;
  readonly bytes: number;
  readonly sha256: string;
  readonly parameters: number;
}

export function isPresetName(name: string): name is PresetName {
  return Object.hasOwn(PRESETS, name);
}

/** `models/<preset>.gguf` in the repository, independent of the working directory. */
export function defaultModelPath(preset: PresetName): string {
  return join(MODELS_DIR, `${preset}.gguf`);
}

// ---------------------------------------------------------------------------------------------
// Seeded randomness

/** murmur3's 32-bit finalizer: spreads nearby seeds (1, 2, 3...) into unrelated PRNG states. */
function mixSeed(seed: number): number {
  let h = seed >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/**
 * Approximately standard-normal values (Irwin-Hall sum of 4 uniforms, rescaled to unit
 * variance). Uses only + - * so results do not depend on Math.log/cos implementations.
 */
function fillNormal(out: Float32Array, rand: () => number, std: number): Float32Array {
  const scale = std * Math.sqrt(3); // var(sum of 4 U(0,1)) = 4/12
  for (let i = 0; i < out.length; i++) {
    out[i] = (rand() + rand() + rand() + rand() - 2) * scale;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Model layout

/** Weights in a model of this shape; matches MadeModel.parameters without building it. */
export function countParameters(p: ModelPreset, nVocab = buildVocab().tokens.length): number {
  const nEmbdKv = (p.nEmbd / p.nHead) * p.nHeadKv;
  const perLayer = 2 * p.nEmbd + 2 * p.nEmbd * p.nEmbd + 2 * p.nEmbd * nEmbdKv + 3 * p.nEmbd * p.nFf;
  return 2 * p.nEmbd * nVocab + p.nEmbd + p.nLayer * perLayer;
}

function validatePreset(p: ModelPreset): void {
  if (p.nEmbd % p.nHead !== 0) throw new Error("nEmbd must be divisible by nHead");
  if (p.nHead % p.nHeadKv !== 0) throw new Error("nHead must be divisible by nHeadKv");
  if ((p.nEmbd / p.nHead) % 2 !== 0) throw new Error("head dimension must be even for RoPE");
}

function buildMetadata(name: string, p: ModelPreset, vocab: Vocab): GgufMetadata {
  const headDim = p.nEmbd / p.nHead;
  return {
    "general.architecture": gguf.str("llama"),
    "general.name": gguf.str(`radixgate-random-${name}`),
    "general.file_type": gguf.u32(0), // LLAMA_FTYPE_ALL_F32
    "general.alignment": gguf.u32(32),
    "llama.vocab_size": gguf.u32(vocab.tokens.length),
    "llama.context_length": gguf.u32(p.contextLength),
    "llama.embedding_length": gguf.u32(p.nEmbd),
    "llama.block_count": gguf.u32(p.nLayer),
    // Without this key llama.cpp aborts the whole process instead of failing the load.
    "llama.feed_forward_length": gguf.u32(p.nFf),
    "llama.attention.head_count": gguf.u32(p.nHead),
    "llama.attention.head_count_kv": gguf.u32(p.nHeadKv),
    "llama.attention.layer_norm_rms_epsilon": gguf.f32(1e-5),
    "llama.rope.dimension_count": gguf.u32(headDim),
    "llama.rope.freq_base": gguf.f32(10000),
    "tokenizer.ggml.model": gguf.str("llama"),
    "tokenizer.ggml.tokens": gguf.strArray(vocab.tokens),
    "tokenizer.ggml.scores": gguf.f32Array(vocab.scores),
    "tokenizer.ggml.token_type": gguf.i32Array(vocab.types),
    "tokenizer.ggml.bos_token_id": gguf.u32(vocab.bosId),
    // ChatML models (Qwen, OpenHermes...) use <|im_end|> as EOS: it ends an assistant turn,
    // so plain completions stop there too. It is also declared as EOT for tools that look there.
    "tokenizer.ggml.eos_token_id": gguf.u32(vocab.imEndId),
    "tokenizer.ggml.eot_token_id": gguf.u32(vocab.imEndId),
    "tokenizer.ggml.unknown_token_id": gguf.u32(vocab.unkId),
    "tokenizer.ggml.padding_token_id": gguf.u32(vocab.sentenceEndId),
    "tokenizer.ggml.add_bos_token": gguf.bool(true),
    "tokenizer.ggml.add_eos_token": gguf.bool(false),
    "tokenizer.chat_template": gguf.str(CHATML_TEMPLATE),
  };
}

/**
 * Tensors in llama.cpp's expected names and GGUF dim order ([input, output]). Weights are
 * drawn with std 1/sqrt(fan_in) so every block changes the residual stream about as much as
 * the token embedding does: with much smaller weights the next token depends only on the
 * current one and greedy decoding falls into short loops.
 */
function buildTensors(p: ModelPreset, vocab: Vocab, seed: number): GgufTensor[] {
  const rand = mulberry32(mixSeed(seed));
  const nVocab = vocab.tokens.length;
  const nEmbdKv = (p.nEmbd / p.nHead) * p.nHeadKv;
  const tensors: GgufTensor[] = [];

  const matrix = (name: string, nIn: number, nOut: number, std = 1 / Math.sqrt(nIn)): Float32Array => {
    const data = fillNormal(new Float32Array(nIn * nOut), rand, std);
    tensors.push({ name, dims: [nIn, nOut], data });
    return data;
  };
  const ones = (name: string): void => {
    tensors.push({ name, dims: [p.nEmbd], data: new Float32Array(p.nEmbd).fill(1) });
  };

  matrix("token_embd.weight", p.nEmbd, nVocab, 1);
  ones("output_norm.weight");
  // Logit std ~3 keeps sampled text from being uniform noise while greedy stays varied.
  const output = matrix("output.weight", p.nEmbd, nVocab, 3 / Math.sqrt(p.nEmbd));
  // Zero rows give control/byte tokens a logit of exactly 0, far below the best normal token,
  // so generations are readable text and greedy decoding always runs to maxTokens.
  for (const id of vocab.specialIds) output.fill(0, id * p.nEmbd, (id + 1) * p.nEmbd);

  for (let i = 0; i < p.nLayer; i++) {
    const blk = `blk.${i}`;
    ones(`${blk}.attn_norm.weight`);
    matrix(`${blk}.attn_q.weight`, p.nEmbd, p.nEmbd);
    matrix(`${blk}.attn_k.weight`, p.nEmbd, nEmbdKv);
    matrix(`${blk}.attn_v.weight`, p.nEmbd, nEmbdKv);
    matrix(`${blk}.attn_output.weight`, p.nEmbd, p.nEmbd);
    ones(`${blk}.ffn_norm.weight`);
    matrix(`${blk}.ffn_gate.weight`, p.nEmbd, p.nFf);
    matrix(`${blk}.ffn_up.weight`, p.nEmbd, p.nFf);
    matrix(`${blk}.ffn_down.weight`, p.nFf, p.nEmbd);
  }
  return tensors;
}

/** The whole model in memory (~4 bytes per parameter), ready for writeGguf. */
export function buildModel(preset: PresetName, seed: number = DEFAULT_SEED): GgufFile {
  if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) throw new Error(`seed must be a u32, got ${seed}`);
  const p: ModelPreset = PRESETS[preset];
  validatePreset(p);
  const vocab = buildVocab();
  return { metadata: buildMetadata(preset, p, vocab), tensors: buildTensors(p, vocab, seed) };
}

// ---------------------------------------------------------------------------------------------
// Files

/** Writes the model to a temp name beside `outPath` then renames it, so readers never see half a file. */
export async function makeModel(options: MakeModelOptions): Promise<MadeModel> {
  const { preset, seed = DEFAULT_SEED } = options;
  const path = resolve(options.outPath ?? defaultModelPath(preset));
  const file = buildModel(preset, seed);

  await mkdir(dirname(path), { recursive: true });
  const tmp = `${path}.tmp-${process.pid}-${randomUUID()}`;
  try {
    const written = await writeGguf(tmp, file, options.onProgress);
    await rename(tmp, path);
    const parameters = file.tensors.reduce((n, t) => n + t.data.length, 0);
    return { path, bytes: written.bytes, sha256: written.sha256, parameters };
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}

/**
 * Returns the path of `models/<preset>.gguf` (or `path`), generating it only if missing.
 * An existing file is trusted as is: delete it after changing the generator or the seed.
 * Concurrent callers may both generate, but the rename is atomic and the bytes identical.
 */
export async function ensureModel(
  preset: PresetName,
  options: { readonly seed?: number | undefined; readonly path?: string | undefined } = {},
): Promise<string> {
  const path = resolve(options.path ?? defaultModelPath(preset));
  if (existsSync(path)) return path;
  return (await makeModel({ preset, seed: options.seed, outPath: path })).path;
}
