// The simulated cards: a time model (src/scheduler/time-model.ts) plus what the card holds.
//
// KV capacity, in tokens, from memory (an estimate, stated so it can be argued with):
//   a6000-mistral-7b: 48 GB x 0.9 usable - 14.5 GB of bf16 weights = ~28.7 GB of KV; Mistral-7B
//     stores 128 KiB per token (32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B): ~219k tokens;
//     200k is used (the figure bench/scheduler/scheduler.bench.ts uses for the same card).
//   h100-llama3-70b: an ASSUMPTION. The preset's decode figures assume 2 H100 SXM (tensor
//     parallel); with bf16 weights (140 GB) those leave ~4 GB (~13k tokens at 320 KiB per token:
//     80 layers x 8 KV heads x 128 x 2 x 2 B), too little for these workloads. 4 H100s would
//     leave ~148 GB (~470k tokens); 200k is used, as for the A6000, so that the two presets
//     differ in speed only. --capacity-tokens and --slots override both.
//   cpu: what config.yml gives a CPU worker: slots x contextSize, and no sequence longer than
//     contextSize (llama.cpp gives every sequence its own cells; the host refuses longer ones).
//     Decode cost per sequence, not per step (a CPU decode is compute-bound); the state store
//     and node-llama-cpp's context lock only when asked for (bench/live/compare.ts does).
// Slots (sequences run at once): 64 per GPU card (llama.cpp's -np; the project's schema
// allows up to 256), 4 on CPU (config.yml). Batch: 2048 tokens per forward pass on a GPU
// (so a full decode batch plus the 1024-token prefill chunk fits), config.yml's 512 on CPU.
// Chunk and local scheduler: Preble's 1024 tokens, P = 10, k = 10 (config.yml's defaults).
import { readFileSync } from "node:fs";
import { TIME_MODEL_PRESETS, type TimeModelCoefficients } from "../../src/scheduler/time-model.js";
import type { SpillSpec, WorkerSpec } from "./simulator.js";

const LOCAL = { chunkTokens: 1024, priorityGroups: 10, quotaPerGroup: 10 } as const;

export const GPU_NAMES = ["a6000-mistral-7b", "h100-llama3-70b"] as const;

export function gpuSpec(name: string): WorkerSpec {
  const timeModel = TIME_MODEL_PRESETS[name];
  if (!timeModel) throw new Error(`unknown --gpu "${name}"; available: ${[...GPU_NAMES, "cpu"].join(", ")}`);
  return { timeModel, slots: 256, capacityTokens: 200_000, batchTokens: 2048, ...LOCAL };
}

/**
 * A CPU worker as config.yml sets one up, with a calibrated time model: every decoding sequence
 * pays its own decode cost (a CPU decode is compute-bound: see simulator.ts), and, when given,
 * the worker's state store and node-llama-cpp's context lock.
 */
export function cpuSpec(
  timeModel: TimeModelCoefficients,
  options: { slots?: number; contextSize?: number; batchTokens?: number; spill?: SpillSpec; contextLock?: boolean } = {},
): WorkerSpec {
  const slots = options.slots ?? 4;
  const contextSize = options.contextSize ?? 4096;
  return {
    timeModel,
    slots,
    capacityTokens: slots * contextSize,
    maxSequenceTokens: contextSize,
    batchTokens: options.batchTokens ?? 512,
    ...LOCAL,
    decodeBatching: "per-sequence",
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
