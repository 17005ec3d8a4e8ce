// Start-up calibration of a worker's time model (DESIGN.md 3.1: "calibrate its model per
// worker at start-up (a short profile) and keep refining it from observed timings").
//
// Two halves:
// - profileSequence() runs INSIDE the worker thread (the `profile` task of worker-thread.ts):
//   it times synthetic prompts of random ordinary tokens in one sequence: cold prefills of a
//   few lengths, prefills on top of a cached prefix (the context terms), decoding, and a
//   save + load of the sequence's KV state (the copy cost of DESIGN.md 5). It leaves the
//   sequence empty.
// - calibrate() runs on the host: it asks a worker for a profile, fits the coefficients
//   (TimeModel.fit) and caches them as JSON under models/.calibration/, keyed by a hash of the
//   worker's identity (model file, threads, backend, CPU, context size...). A cached result
//   is reused without profiling.
//
// Only types are imported from node-llama-cpp and from the host's EngineWorker, so this module
// loads in both places without pulling in the other side.
import { createHash, randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { LlamaContextSequence, LlamaModel, Token } from "node-llama-cpp";
import { TimeModel, type CopySample, type DecodeSample, type PrefillSample, type TimeModelCoefficients } from "../scheduler/time-model.js";
import type { EngineWorker } from "./engine-worker.js";
import type { LoadResult, ProfileResult, ProfileTask, WorkerInit } from "./protocol.js";

/** Bumped whenever the profile procedure changes, so older cache files are not reused. */
export const CALIBRATION_VERSION = 1;

/** `models/.calibration/` of this checkout (not git-tracked: add it to .gitignore). */
export const DEFAULT_CALIBRATION_DIR = fileURLToPath(new URL("../../models/.calibration/", import.meta.url));

// ---------------------------------------------------------------------------------------------
// Worker side

export type ProfileOptions = Omit<ProfileTask, "kind">;

/** Cold prompt lengths: 32, 128, 512 and min(2048, contextSize / 2), those that fit. */
export function defaultProfileSizes(contextSize: number): number[] {
  const largest = Math.min(2048, Math.floor(contextSize / 2));
  return [...new Set([32, 128, 512, largest])].filter((n) => n >= 1 && n <= largest).sort((a, b) => a - b);
}

/** Prompts this short are timed 3 times and the fastest kept (on a shared machine, noise only ever adds time). */
const repeatsOf = (tokens: number) => (tokens < 256 ? 3 : 1);

/**
 * Suffixes timed on top of the largest cached prompt. Measured on CPU (tiny model, 2k cached):
 * a 32-token suffix took 31 ms but a 128-token one 5 ms: llama.cpp evaluates small batches on a
 * long context at about the decode cost per token. The linear form cannot follow that; the
 * samples keep it so the fit sees it, and online refinement tracks the real traffic's shapes.
 */
const WARM_EXTENDS = [32, 128, 512];

/**
 * Times prefills, decoding and a state save + load in `sequence` (an idle slot: the caller
 * reserves it), then clears it. Prompts are random ordinary (non-special, non-end) tokens.
 */
export async function profileSequence(
  model: LlamaModel,
  sequence: LlamaContextSequence,
  options: ProfileOptions = {},
): Promise<Omit<ProfileResult, "workerId" | "slot" | "otherBusySlots">> {
  const started = performance.now();
  const contextSize = sequence.contextSize;
  const decodeTokens = Math.max(0, Math.floor(options.decodeTokens ?? 16));
  const sizes = [...new Set(options.sizes ?? defaultProfileSizes(contextSize))]
    .filter((n) => Number.isInteger(n) && n >= 1 && n + decodeTokens + 1 <= contextSize)
    .sort((a, b) => a - b);
  if (sizes.length === 0) throw new RangeError(`profile: no prompt size fits a context of ${contextSize} tokens`);
  const random = randomTokens(model, options.seed ?? 1);
  const stateDir = existsSync("/dev/shm") ? "/dev/shm" : tmpdir();
  const statePath = join(stateDir, `radixgate-profile-${process.pid}-${randomUUID()}.state`);
  const prefill: PrefillSample[] = [];
  const decode: DecodeSample[] = [];
  const copy: (CopySample & { bytes: number })[] = [];

  /** Evaluates `tokens` after what the sequence holds; times the first token, then `generate` more. */
  const run = async (tokens: Token[], generate: number): Promise<{ prefillMs: number; decodeMsPerToken?: number }> => {
    const t0 = performance.now();
    const generator = sequence.evaluate(tokens);
    try {
      await generator.next();
      const t1 = performance.now();
      for (let i = 0; i < generate; i++) await generator.next();
      const t2 = performance.now();
      return generate > 0 ? { prefillMs: t1 - t0, decodeMsPerToken: (t2 - t1) / generate } : { prefillMs: t1 - t0 };
    } finally {
      await generator.return();
    }
  };
  const truncateTo = async (length: number) => {
    if (sequence.nextTokenIndex <= length) return;
    await sequence.eraseContextTokenRanges([{ start: length, end: sequence.nextTokenIndex }]);
  };
  const measureCopy = async () => {
    const tokens = sequence.nextTokenIndex;
    const t0 = performance.now();
    const { fileSize } = await sequence.saveStateToFile(statePath);
    const saveMs = performance.now() - t0;
    await sequence.clearHistory();
    const t1 = performance.now();
    await sequence.loadStateFromFile(statePath, { acceptRisk: true });
    const loadMs = performance.now() - t1;
    await rm(statePath, { force: true });
    if (sequence.nextTokenIndex !== tokens) {
      throw new Error(`profile: state load restored ${sequence.nextTokenIndex} of ${tokens} tokens`);
    }
    copy.push({ tokens, ms: saveMs + loadMs, bytes: fileSize });
  };

  try {
    // Warm-up: the first evaluation after loading pays one-off costs (buffers, page faults).
    await sequence.clearHistory();
    await run(random(Math.min(8, sizes[0]!)), Math.min(2, decodeTokens));

    const largest = sizes[sizes.length - 1]!;
    for (const n of sizes) {
      const timeDecode = decodeTokens > 0 && (n === sizes[0] || n === largest);
      let best = Number.POSITIVE_INFINITY;
      for (let repeat = 0; repeat < repeatsOf(n); repeat++) {
        await sequence.clearHistory();
        const last = repeat === repeatsOf(n) - 1;
        const timed = await run(random(n), timeDecode && last ? decodeTokens : 0);
        best = Math.min(best, timed.prefillMs);
        if (timed.decodeMsPerToken !== undefined) {
          decode.push({ context: n + decodeTokens / 2, msPerToken: timed.decodeMsPerToken });
        }
      }
      prefill.push({ extend: n, context: n, ms: best });
      if (options.measureCopy !== false && (n === sizes[0] || n === largest)) await measureCopy();
    }

    // Prefills on top of the largest prompt, cached: the context terms of the model.
    const prefix = sequence.nextTokenIndex;
    for (const extend of WARM_EXTENDS.filter((e) => e < largest && prefix + e + 1 <= contextSize)) {
      let best = Number.POSITIVE_INFINITY;
      for (let repeat = 0; repeat < repeatsOf(extend); repeat++) {
        best = Math.min(best, (await run(random(extend), 0)).prefillMs);
        await truncateTo(prefix);
      }
      prefill.push({ extend, context: prefix + extend, ms: best });
    }
  } finally {
    await rm(statePath, { force: true });
    await sequence.clearHistory();
  }
  return { prefill, decode, copy, stateDir, totalMs: performance.now() - started };
}

/** A generator of random ordinary tokens of the model (seeded, deterministic). */
function randomTokens(model: LlamaModel, seed: number): (count: number) => Token[] {
  const pool: Token[] = [];
  for (const token of model.iterateAllTokens()) {
    if (!model.isSpecialToken(token) && !model.isEogToken(token)) pool.push(token);
  }
  if (pool.length === 0) throw new Error("profile: the model has no ordinary tokens");
  let state = seed >>> 0;
  const next = () => {
    // mulberry32
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return (count) => Array.from({ length: count }, () => pool[Math.floor(next() * pool.length)]!);
}

// ---------------------------------------------------------------------------------------------
// Host side

/**
 * What makes two workers time alike. Every field goes into the cache key, so add whatever
 * else changes the speed (batch size, GPU model, flash attention...).
 */
export interface CalibrationIdentity {
  modelPath: string;
  modelBytes: number;
  modelMtimeMs: number;
  threads: number;
  /** "cpu", "cuda", "vulkan", "metal". */
  backend: string;
  cpuModel: string;
  /** Tokens per slot. */
  contextSize: number;
  [key: string]: string | number | boolean | null;
}

export interface CalibrationResult {
  coefficients: TimeModelCoefficients;
  /** True when read from the cache file: no profile ran. */
  fromCache: boolean;
  /** The cache file (written only for a profile taken with no other slot busy). */
  cachePath: string;
  /** The samples the coefficients were fitted from: pass them as the TimeModel's prior. */
  samples: { prefill: PrefillSample[]; decode: DecodeSample[]; copy: CopySample[] };
  /** The profile that ran now; absent on a cache hit. */
  profile?: ProfileResult;
}

interface CacheFile {
  version: number;
  identity: CalibrationIdentity;
  createdAt: string;
  profileMs: number;
  coefficients: TimeModelCoefficients;
  samples: CalibrationResult["samples"];
}

/** The identity of a started worker: its model file, settings and this machine's CPU. */
export async function calibrationIdentity(init: WorkerInit, loaded: LoadResult): Promise<CalibrationIdentity> {
  const file = await stat(init.modelPath);
  return {
    modelPath: init.modelPath,
    modelBytes: file.size,
    modelMtimeMs: file.mtimeMs,
    threads: init.threads,
    backend: loaded.backend,
    cpuModel: cpus()[0]?.model ?? "unknown",
    contextSize: loaded.contextSize,
    batchSize: init.batchSize,
    slots: init.slots,
  };
}

/** The cache file of an identity: `<cacheDir>/<first 16 hex of sha256(version + identity)>.json`. */
export function calibrationCachePath(identity: CalibrationIdentity, cacheDir: string = DEFAULT_CALIBRATION_DIR): string {
  const key = createHash("sha256").update(canonicalJson({ version: CALIBRATION_VERSION, identity })).digest("hex").slice(0, 16);
  return join(cacheDir, `${key}.json`);
}

/**
 * The worker's time-model coefficients: from the cache when this identity was calibrated
 * before, else from a profile run now on the worker (which must be started and should be
 * idle: a profile taken while other slots are busy is used but not cached).
 */
export async function calibrate(
  worker: Pick<EngineWorker, "profile">,
  identity: CalibrationIdentity,
  cacheDir: string = DEFAULT_CALIBRATION_DIR,
  options: ProfileOptions = {},
): Promise<CalibrationResult> {
  const cachePath = calibrationCachePath(identity, cacheDir);
  const cached = await readCache(cachePath, identity);
  if (cached) return { coefficients: cached.coefficients, fromCache: true, cachePath, samples: cached.samples };

  const profile = await worker.profile(options);
  const samples = {
    prefill: profile.prefill.map(({ extend, context, ms }) => ({ extend, context, ms })),
    decode: profile.decode.map(({ context, msPerToken }) => ({ context, msPerToken })),
    copy: profile.copy.map(({ tokens, ms }) => ({ tokens, ms })),
  };
  const coefficients = TimeModel.fit(samples.prefill, samples.decode, samples.copy);
  if (profile.otherBusySlots === 0) {
    const file: CacheFile = {
      version: CALIBRATION_VERSION,
      identity,
      createdAt: new Date().toISOString(),
      profileMs: profile.totalMs,
      coefficients,
      samples,
    };
    await mkdir(cacheDir, { recursive: true });
    const temporary = `${cachePath}.${process.pid}.${randomUUID()}.tmp`;
    await writeFile(temporary, `${JSON.stringify(file, null, 2)}\n`);
    await rename(temporary, cachePath);
  }
  return { coefficients, fromCache: false, cachePath, samples, profile };
}

/** A TimeModel that starts from a calibration and refines online around its samples. */
export function timeModelFromCalibration(
  result: CalibrationResult,
  options: { learningWindow?: number; refitEvery?: number; priorWeight?: number } = {},
): TimeModel {
  return new TimeModel(result.coefficients, { ...options, prior: { prefill: result.samples.prefill, decode: result.samples.decode } });
}

const COEFFICIENT_KEYS: readonly (keyof TimeModelCoefficients)[] = [
  "base",
  "perExtend",
  "perContext",
  "perExtendContext",
  "decodeBase",
  "decodePerContext",
  "copyBase",
  "copyPerToken",
];

/** A cache file that is readable, of this version and identity, with sane coefficients; else undefined (profile again). */
async function readCache(path: string, identity: CalibrationIdentity): Promise<CacheFile | undefined> {
  let file: CacheFile;
  try {
    file = JSON.parse(await readFile(path, "utf8")) as CacheFile;
  } catch {
    return undefined;
  }
  if (file?.version !== CALIBRATION_VERSION || canonicalJson(file.identity) !== canonicalJson(identity)) return undefined;
  if (!file.coefficients || COEFFICIENT_KEYS.some((key) => typeof file.coefficients[key] !== "number")) return undefined;
  try {
    new TimeModel(file.coefficients);
  } catch {
    return undefined;
  }
  const samples = file.samples ?? { prefill: [], decode: [], copy: [] };
  return { ...file, samples: { prefill: samples.prefill ?? [], decode: samples.decode ?? [], copy: samples.copy ?? [] } };
}

/** JSON with object keys sorted, so equal identities hash equally whatever their key order. */
function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (!v || typeof v !== "object" || Array.isArray(v)) return v;
    return Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  });
}
