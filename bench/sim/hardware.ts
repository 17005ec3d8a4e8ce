// The simulated cards: a time model (src/scheduler/time-model.ts) plus the worker Radixgate runs
// on it, as node-llama-cpp 3.21.1 sets one up:
//
// - KV cells per slot, no shared pool: node-llama-cpp gives every sequence (slot) its own
//   contextSize cells, so a worker's KV is slots x contextSize and no sequence (prompt +
//   output) is longer than contextSize (the host refuses longer ones). A slot keeps what it ran
//   until the next request takes it. In the simulator: capacityTokens = slots x contextSize,
//   maxSequenceTokens = contextSize (simulator.ts: with these, the pool is never short).
// - Slots and contextSize from the KV that really fits on the card:
//     KV tokens = (card memory x 0.9 usable - weights) / KV bytes per token,
//     slots     = floor(KV tokens / contextSize), at most 256 (config.yml's limit).
//   0.9 leaves room for the CUDA context and llama.cpp's compute buffers. Memory in decimal GB
//   (the cards have GiB: the difference is headroom). KV bytes per token: F16 K and V of every
//   layer (kvBytesPerToken below).
// - contextSize 32768 on both cards (DEFAULT_CONTEXT_SIZE): the longest requests of the
//   workloads decide it. Every workload but Mooncake fits in 32768 (agent-loops' longest turn is
//   ~17.3k tokens, so 16384 would refuse some; llmd's 8200 rules out 8192); Mooncake's
//   conversation trace runs to ~124k tokens and ~9% of its first 2000 records are longer than
//   32768: those are refused (the report counts them). A context that fits all of Mooncake
//   (131072) would leave one slot per A6000. `--context-size` in run.ts picks another;
//   `--context-size fit` sizes the slots per workload, as an operator serving that workload
//   alone would (fitContextSize: the smallest power of two holding its longest request), so a
//   card of short prompts gets many more slots (ToolBench-Zipf: 53 slots of 4096).
// - Decode: a step carries the next token of every generating sequence (full batches), and a
//   GPU's decode is memory-bound: one decode cost per step ("shared").
// - No context lock: a request given a used slot no longer waits for node-llama-cpp's context
//   lock until the others finish; erasing its tail, saving and loading a state wait at most for
//   the decode step in flight (in the simulator a request joins at the next step in any case,
//   its save and load timed from when it takes the slot). The `contextLock` option stays in
//   simulator.ts to show the old stall; no GPU card uses it.
// - The state store of evicted slot contents in host memory, with config.yml's defaults:
//   spill.budgetBytes (8 GiB per worker, llama-server's --cache-ram default) / KV bytes per
//   token, spill.minTokens (64), and a stored state is loaded when it holds at least
//   MIN_RESTORE_GAIN (16) tokens more than the slot keeps. The real worker gets at most half its
//   state folder shared by the host's workers: 8 x 8 GiB fit the /dev/shm of a GPU box with
//   128 GiB of RAM or more (half of it by default). `--spill-bytes` in run.ts sets another.
//
// The cards:
//   a6000-mistral-7b: 1 x RTX A6000, 48 GB x 0.9 = 43.2 GB - 14.5 GB of bf16 weights (7.24 B
//     parameters) = 28.7 GB of KV. Mistral-7B: 32 layers x 8 KV heads x 128 dims x 2 (K, V) x
//     2 B = 128 KiB per token: 218,963 tokens. 32768 per slot: 6 slots, 196,608 tokens.
//     State store: 8 GiB / 128 KiB = 65,536 tokens.
//   h100-llama3-70b: the memory is an ASSUMPTION. The preset's decode figures assume the
//     bandwidth of 2 H100 SXM, but 2 x 80 GB x 0.9 = 144 GB leaves ~4 GB next to 140 GB of bf16
//     weights (~12k tokens: not one 32768-token slot). So 4 x H100 SXM 80 GB are assumed for
//     memory: 320 GB x 0.9 = 288 GB - 140 GB = 148 GB of KV. Llama-3-70B: 80 layers x 8 KV
//     heads x 128 x 2 x 2 B = 320 KiB per token: 451,660 tokens. 32768 per slot: 13 slots,
//     425,984 tokens. State store: 8 GiB / 320 KiB = 26,214 tokens. The time model is the
//     preset's, unchanged.
//   <card>-idealised: the simulator's earlier, SGLang-like card, NOT the worker Radixgate has:
//     256 slots over one shared pool of 200k tokens (any slot may hold up to the whole pool, idle
//     slots' contents evicted LRU when cells run short), no state store. Kept for comparison.
//   cpu: what config.yml gives a CPU worker: slots x contextSize, and no sequence longer than
//     contextSize. One decode pass per run of consecutive busy slots, a pass of several
//     sequences costing CPU_MULTI_SEQUENCE_PASS x one alone (a CPU decode is compute-bound); the
//     state store and node-llama-cpp's old context lock only when asked for (bench/live/compare.ts
//     does).
// Batch: 2048 tokens per forward pass on a GPU (a full decode batch plus the 1024-token prefill
// chunk fits), config.yml's default on CPU. Chunk and local scheduler: config.yml's defaults
// (Preble's).
import { readFileSync } from "node:fs";
import { ConfigSchema, ModelConfigSchema } from "../../src/config/schema.js";
import { MIN_RESTORE_GAIN } from "../../src/engine/wire/protocol.js";
import { LOCAL_SCHEDULER_DEFAULTS } from "../../src/scheduler/local-scheduler-settings.js";
import { TIME_MODEL_PRESETS, type TimeModelCoefficients } from "../../src/scheduler/time-model.js";
import type { SpillSpec, WorkerSpec } from "./simulator.js";

const LOCAL: Pick<WorkerSpec, "chunkTokens" | "priorityGroups" | "quotaPerGroup"> = {
  chunkTokens: LOCAL_SCHEDULER_DEFAULTS.chunkTokens,
  priorityGroups: LOCAL_SCHEDULER_DEFAULTS.priorityGroups,
  quotaPerGroup: LOCAL_SCHEDULER_DEFAULTS.quotaPerGroup,
};
const GPU_BATCH_TOKENS = 2048;

/** Share of a card's memory llama.cpp may fill with weights and KV (the rest: CUDA context, compute buffers). */
export const USABLE_MEMORY = 0.9;
/** Tokens per slot on the GPU cards (see the file comment for why). */
export const DEFAULT_CONTEXT_SIZE = 32_768;

const MISTRAL_7B = { nLayer: 32, nEmbd: 4096, nHead: 32, nHeadKv: 8 } as const;
const LLAMA3_70B = { nLayer: 80, nEmbd: 8192, nHead: 64, nHeadKv: 8 } as const;

/** Slots no smaller than this with --context-size fit. */
const MIN_FITTED_CONTEXT = 1024;

/**
 * The context per slot an operator serving only this workload would give a worker: the smallest
 * power of two that holds the longest request (prompt + output), between 1024 and
 * DEFAULT_CONTEXT_SIZE (longer requests are then refused, as at the default). Smaller slots
 * mean more of them in the same KV: more requests decoding together and more prompts held.
 */
export function fitContextSize(requests: readonly { tokens: readonly number[]; outputTokens: number }[]): number {
  let longest = 0;
  for (const request of requests) longest = Math.max(longest, request.tokens.length + Math.max(1, request.outputTokens));
  let size = MIN_FITTED_CONTEXT;
  while (size < longest && size < DEFAULT_CONTEXT_SIZE) size *= 2;
  return size;
}

/** A card with fitted slots, named after its base card and context (report tables and chart files). */
export function fittedCardName(gpu: string, contextSize: number): string {
  return `${gpu}-ctx${contextSize}`;
}

/** The base card of a fitted card's name (the name itself otherwise). */
export function baseCardName(name: string): string {
  return name.replace(/-ctx\d+$/, "");
}

/** What one worker's GPUs hold: the arithmetic the card's slots come from. */
export interface GpuCard {
  /** Its TIME_MODEL_PRESETS entry. */
  timeModel: string;
  /** Memory of the GPUs one worker uses, bytes. */
  memoryBytes: number;
  /** The model's weights, bytes. */
  weightsBytes: number;
  /** The model's KV bytes per token (F16 K and V). */
  kvBytesPerToken: number;
}

const GPU_CARDS = {
  "a6000-mistral-7b": { timeModel: "a6000-mistral-7b", memoryBytes: 48e9, weightsBytes: 14.5e9, kvBytesPerToken: kvBytesPerToken(MISTRAL_7B) },
  // 4 H100 SXM for memory: an assumption (see the file comment).
  "h100-llama3-70b": { timeModel: "h100-llama3-70b", memoryBytes: 4 * 80e9, weightsBytes: 140e9, kvBytesPerToken: kvBytesPerToken(LLAMA3_70B) },
} as const satisfies Record<string, GpuCard>;

type CardName = keyof typeof GPU_CARDS;
const CARD_NAMES = Object.keys(GPU_CARDS) as CardName[];
const IDEALISED_SUFFIX = "-idealised";

export const GPU_NAMES: readonly string[] = [...CARD_NAMES, ...CARD_NAMES.map((name) => `${name}${IDEALISED_SUFFIX}`)];
/** run.ts's --gpu when none is given: the worker Radixgate really has. */
export const DEFAULT_GPU: CardName = "a6000-mistral-7b";

/** Whether a --gpu name is an idealised card (one shared KV pool, no state store), not Radixgate's worker. */
export function isIdealised(name: string): boolean {
  return name.endsWith(IDEALISED_SUFFIX);
}

/** The card behind a GPU name (an idealised one's too). */
export function gpuCard(name: string): GpuCard {
  const base = isIdealised(name) ? name.slice(0, -IDEALISED_SUFFIX.length) : name;
  const card = (GPU_CARDS as Record<string, GpuCard>)[base];
  if (!card) throw new Error(`unknown --gpu "${name}"; available: ${[...GPU_NAMES, "cpu"].join(", ")}`);
  return card;
}

/** KV tokens that fit on the card next to the weights. */
export function kvTokensOf(card: GpuCard): number {
  return Math.floor((card.memoryBytes * USABLE_MEMORY - card.weightsBytes) / card.kvBytesPerToken);
}

/** The state store a worker gets from `budgetBytes` of host memory (config spill), or none when it holds less than spill.minTokens. */
export function spillSpecOf(budgetBytes: number, bytesPerToken: number): SpillSpec | undefined {
  const budgetTokens = Math.floor(budgetBytes / bytesPerToken);
  const minTokens = SPILL_DEFAULTS.minTokens;
  return budgetTokens >= minTokens ? { budgetTokens, minTokens, minRestoreGain: MIN_RESTORE_GAIN } : undefined;
}

/** config.yml's spill defaults, read from the schema so the two cannot drift apart. */
export const SPILL_DEFAULTS = {
  budgetBytes: schemaNumber(ConfigSchema.properties.spill.properties.budgetBytes.default),
  minTokens: schemaNumber(ConfigSchema.properties.spill.properties.minTokens.default),
};
/** The most slots config.yml lets a worker have. */
const MAX_SLOTS = schemaNumber(ModelConfigSchema.properties.slots.maximum);
/** A CPU worker's defaults in config.yml. */
const CPU_DEFAULTS = {
  slots: schemaNumber(ModelConfigSchema.properties.slots.default),
  contextSize: schemaNumber(ModelConfigSchema.properties.contextSize.default),
  batchTokens: schemaNumber(ModelConfigSchema.properties.batchSize.default),
};

function schemaNumber(value: unknown): number {
  if (typeof value !== "number") throw new Error("config schema: a figure the simulator reads is not a number");
  return value;
}

export interface GpuOptions {
  /** Tokens per slot (default DEFAULT_CONTEXT_SIZE); not for an idealised card. */
  contextSize?: number;
  /** Slots (default: as many contextSize slots as the KV holds, at most config's 256; more than fit is an error). */
  slots?: number;
  /** Host memory of the state store, bytes (default config's spill.budgetBytes; 0: none); not for an idealised card. */
  spillBytes?: number;
  /** An idealised card's shared pool, tokens (default 200k); only for an idealised card. */
  capacityTokens?: number;
}

/** A GPU worker: Radixgate's (see the file comment), or with `-idealised`, the shared-pool card. */
export function gpuSpec(name: string, options: GpuOptions = {}): WorkerSpec {
  const card = gpuCard(name);
  const timeModel = TIME_MODEL_PRESETS[card.timeModel];
  if (!timeModel) throw new Error(`no time model preset "${card.timeModel}"`);
  if (isIdealised(name)) return idealisedSpec(name, timeModel, options);
  if (options.capacityTokens !== undefined)
    throw new Error(`${name}: KV is slots x contextSize per slot; set --context-size or --slots, not --capacity-tokens`);
  const kvTokens = kvTokensOf(card);
  const contextSize = options.contextSize ?? DEFAULT_CONTEXT_SIZE;
  const slots = options.slots ?? Math.min(MAX_SLOTS, Math.floor(kvTokens / contextSize));
  if (slots > MAX_SLOTS) throw new Error(`${name}: ${slots} slots; config.yml allows at most ${MAX_SLOTS}`);
  if (slots < 1) throw new Error(`${name}: a ${contextSize}-token slot does not fit the card's KV (${kvTokens} tokens)`);
  if (slots * contextSize > kvTokens)
    throw new Error(`${name}: ${slots} slots x ${contextSize} tokens = ${slots * contextSize} do not fit the card's KV (${kvTokens} tokens)`);
  const spill = spillSpecOf(options.spillBytes ?? SPILL_DEFAULTS.budgetBytes, card.kvBytesPerToken);
  return {
    timeModel,
    slots,
    capacityTokens: slots * contextSize,
    maxSequenceTokens: contextSize,
    batchTokens: GPU_BATCH_TOKENS,
    ...LOCAL,
    // One pass per run of consecutive busy slots (llama.cpp's split of a batch over
    // node-llama-cpp's per-sequence KV streams), each bound by reading the weights once.
    decodeBatching: "micro-batch",
    multiSequencePassFactor: 1,
    ...(spill ? { spill } : {}),
  };
}

/** The earlier SGLang-like card: 256 slots over one shared 200k-token pool, no state store, no per-slot limit. */
function idealisedSpec(name: string, timeModel: TimeModelCoefficients, options: GpuOptions): WorkerSpec {
  if (options.contextSize !== undefined || options.spillBytes !== undefined) {
    throw new Error(`${name}: an idealised card has one shared pool and no state store; --context-size and --spill-bytes apply to the real cards`);
  }
  return {
    timeModel,
    slots: options.slots ?? 256,
    capacityTokens: options.capacityTokens ?? 200_000,
    batchTokens: GPU_BATCH_TOKENS,
    ...LOCAL,
    decodeBatching: "shared",
  };
}

/**
 * What one decode pass of two to four sequences in consecutive slots costs on a CPU worker,
 * in steps of one sequence alone: `npm run bench:engine-loop` (bench/results/engine-loop.md,
 * the prebuilt binary) measured 1.61-1.68 at 1 thread and 1.60-1.76 at 2 in one run (997e01e),
 * 1.66-2.00 and 1.84-2.17 in another (93aba29), 2.20-2.44 and 1.78-1.86 on another machine
 * (afe2e25, an AVX-512 CPU where the prebuilt binary runs its zen4 variant); 1.6 is the low
 * end, and the committed bench:sim-vs-live results were run with it. A CPU decode pass
 * is not bound by reading the weights as a GPU's is, so a second sequence is not free, but
 * the third and fourth add little.
 */
export const CPU_MULTI_SEQUENCE_PASS = 1.6;

/**
 * A CPU worker as config.yml sets one up, with a calibrated time model: one decode pass per
 * run of consecutive busy slots (see simulator.ts), and, when given, the worker's state store
 * and node-llama-cpp's old context lock.
 */
export function cpuSpec(
  timeModel: TimeModelCoefficients,
  options: { slots?: number; contextSize?: number; batchTokens?: number; spill?: SpillSpec; contextLock?: boolean; multiSequencePassFactor?: number } = {},
): WorkerSpec {
  const slots = options.slots ?? CPU_DEFAULTS.slots;
  const contextSize = options.contextSize ?? CPU_DEFAULTS.contextSize;
  return {
    timeModel,
    slots,
    capacityTokens: slots * contextSize,
    maxSequenceTokens: contextSize,
    batchTokens: options.batchTokens ?? CPU_DEFAULTS.batchTokens,
    ...LOCAL,
    decodeBatching: "micro-batch",
    multiSequencePassFactor: options.multiSequencePassFactor ?? CPU_MULTI_SEQUENCE_PASS,
    ...(options.spill ? { spill: options.spill } : {}),
    ...(options.contextLock ? { contextLock: true } : {}),
  };
}

/**
 * KV bytes per token of a llama model with an F16 KV cache (node-llama-cpp's default): K and V
 * of every layer, nHeadKv heads of nEmbd / nHead each, 2 bytes a value. The `bench` preset:
 * 8 x 2 x 4 x 64 x 2 = 8 KiB. A saved state holds a little more (its header, the logits).
 */
export function kvBytesPerToken(model: { nLayer: number; nEmbd: number; nHead: number; nHeadKv: number }): number {
  return model.nLayer * 2 * model.nHeadKv * (model.nEmbd / model.nHead) * 2;
}

const COEFFICIENT_KEYS = ["base", "perExtend", "perContext", "perExtendContext", "decodeBase", "decodePerContext", "copyBase", "copyPerToken"] as const;

/**
 * Coefficients from a file: a calibration cache file (models/.calibration/*.json, written by
 * src/engine/host/calibration.ts: `{ coefficients: {...} }`) or a bare coefficients object.
 */
export function readTimeModelFile(path: string): TimeModelCoefficients {
  const json = JSON.parse(readFileSync(path, "utf8")) as { coefficients?: Record<string, unknown> } & Record<string, unknown>;
  const source = json.coefficients ?? json;
  const out: Partial<TimeModelCoefficients> = {};
  for (const key of COEFFICIENT_KEYS) {
    const value = source[key];
    if (typeof value !== "number" || !Number.isFinite(value) || value < 0) throw new Error(`${path}: coefficient ${key} missing or not a non-negative number`);
    out[key] = value;
  }
  return out as TimeModelCoefficients;
}
