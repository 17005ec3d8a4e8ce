// Start-up calibration of a worker's time model: the scheduler prices placements in
// milliseconds, so each worker is timed once at start (a short profile) and the model is
// refined online from observed timings.
//
// calibrate() asks a worker for a profile (the worker's half is worker/profile.ts), fits the
// coefficients (TimeModel.fit) and caches them as JSON under models/.calibration/, keyed by a
// hash of the worker's identity (model file, threads, backend, CPU, context size...). A cached
// result is reused without profiling.
import { createHash, randomUUID } from "node:crypto";
import { mkdir, readFile, rename, stat, writeFile } from "node:fs/promises";
import { cpus } from "node:os";
import { join } from "node:path";
import { MODELS_DIR } from "../../common/models-dir.js";
import { TimeModel, type CopySample, type DecodeSample, type PrefillSample, type TimeModelCoefficients } from "../../scheduler/time-model.js";
import type { WorkerEngine } from "./worker-engine.js";
import type { LoadResult, ProfileOptions, ProfileResult, WorkerInit } from "../wire/protocol.js";

/** Bumped whenever the profile procedure changes, so older cache files are not reused. */
export const CALIBRATION_VERSION = 2;

/** `models/.calibration/` of this checkout (not git-tracked: add it to .gitignore). */
export const DEFAULT_CALIBRATION_DIR = join(MODELS_DIR, ".calibration");

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
    // A binary compiled here can be much faster than the prebuilt one (prompt evaluation).
    binary: loaded.binary,
    // A persistent thread pool decodes with several threads about twice as fast as one per step.
    computePool: loaded.computePool ?? "none",
    // How the pool's helper threads wait between graphs is part of how it runs.
    threadPoll: loaded.threadPoll ?? null,
    // Generation steps on the worker's thread decode faster than through node-llama-cpp's hand-offs.
    inlineDecode: loaded.inlineDecode ?? false,
    cpuModel: cpus()[0]?.model ?? "unknown",
    contextSize: loaded.contextSize,
    batchSize: init.batchSize,
    slots: init.slots,
    flashAttention: init.flashAttention ?? "auto",
  };
}

/** The cache file of an identity: `<cacheDir>/<first 16 hex of sha256(version + identity)>.json`. */
export function calibrationCachePath(identity: CalibrationIdentity, cacheDir: string = DEFAULT_CALIBRATION_DIR): string {
  const key = createHash("sha256")
    .update(canonicalJson({ version: CALIBRATION_VERSION, identity }))
    .digest("hex")
    .slice(0, 16);
  return join(cacheDir, `${key}.json`);
}

/**
 * The worker's time-model coefficients: from the cache when this identity was calibrated
 * before, else from a profile run now on the worker (which must be started and should be
 * idle: a profile taken while other slots are busy is used but not cached).
 */
export async function calibrate(
  worker: Pick<WorkerEngine, "profile">,
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
