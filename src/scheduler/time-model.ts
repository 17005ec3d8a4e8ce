// Per-worker time model for the scheduler's cost model (Preble's form): how long a prefill,
// a decoded token and a prefix copy take on one worker, in milliseconds.
//
// Prefill uses Preble's regression form (WukLab/preble, multi_node/benchmarks/exp_configs/
// model_equations*.py):
//
//   prefillMs(extend, ctx) = base + perExtend*extend + perContext*ctx + perExtendContext*extend*ctx
//
// where `extend` is the number of tokens evaluated (the uncached suffix) and `ctx` the total
// tokens in the sequence once the prefill is done (cached prefix + extend). Decode is linear
// in the context, and a prefix copy (KV state save on one worker + load on another) is linear
// in the prefix's tokens.
//
// Pure: no node-llama-cpp, no I/O, no clock. The coefficients come from a short profile of
// the worker at start-up (src/engine/host/calibration.ts) or from a preset, and are refined online
// from observed timings (observePrefill / observeDecode, see the class comment).

export interface TimeModelCoefficients {
  /** Prefill: fixed cost of one prefill, ms. */
  base: number;
  /** Prefill: ms per evaluated token. */
  perExtend: number;
  /** Prefill: ms per token of total context (attention reads of the whole sequence). */
  perContext: number;
  /** Prefill: ms per (evaluated token x context token): the quadratic attention term. */
  perExtendContext: number;
  /** Decode: fixed ms per generated token. */
  decodeBase: number;
  /** Decode: extra ms per generated token per context token. */
  decodePerContext: number;
  /** Copy of a prefix's KV state (save + load): fixed ms. */
  copyBase: number;
  /** Copy: ms per prefix token. */
  copyPerToken: number;
}

export interface PrefillSample {
  /** Tokens evaluated. */
  extend: number;
  /** Tokens in the sequence after the prefill (cached prefix + extend). */
  context: number;
  ms: number;
}

export interface DecodeSample {
  /** Tokens in the sequence while decoding (prompt + half the output is a fair summary). */
  context: number;
  msPerToken: number;
}

export interface CopySample {
  tokens: number;
  /** Save + load. */
  ms: number;
}

export interface TimeModelOptions {
  /** Observations kept for online refinement, per kind (prefill, decode). Default 200. */
  learningWindow?: number;
  /** Refit after this many new observations of a kind. Default 20. */
  refitEvery?: number;
  /**
   * Weight of the prior (the calibration) in an online refit, in observations: with the
   * default 20, twenty observations pull the model half way towards what they show, two
   * hundred (a full window) nine tenths of the way.
   */
  priorWeight?: number;
  /**
   * The calibration samples the coefficients were fitted from. Online refits blend recent
   * observations with these; without them the prior is the coefficients' own predictions
   * on a fixed grid of shapes (PRIOR_GRID).
   */
  prior?: { prefill?: readonly PrefillSample[]; decode?: readonly DecodeSample[] };
}

const DEFAULT_LEARNING_WINDOW = 200;
const DEFAULT_REFIT_EVERY = 20;
const DEFAULT_PRIOR_WEIGHT = 20;

/** Shapes the prior is sampled at when no calibration samples are given: extend x cached prefix. */
const PRIOR_GRID = { extend: [16, 64, 256, 1024, 4096], prefix: [0, 1024, 4096] } as const;

/**
 * The time model of one worker.
 *
 * Online refinement: the last `learningWindow` prefill and decode observations are kept
 * (each kind separately). Every `refitEvery` new observations of a kind, that part of the
 * model is refitted by weighted least squares over (a) the recent observations, one weight
 * each, and (b) the prior (calibration samples, or the coefficients' own predictions on a
 * grid), sharing `priorWeight` weights between them. Rows are weighted by 1/predicted^2 (the
 * current model's prediction), i.e. the fit minimises relative error, so a 5 ms prefill counts
 * as much as a 5 s one (TimeModel.fit, having no model yet, uses 1/measured^2). Before the
 * final fit, observations whose relative residual exceeds max(4 x the median, 20%) are
 * dropped: a few noisy points (a GC pause, a neighbour's burst) cannot wreck the model, while
 * a real, systematic change (every observation slower) moves it. A refit that fails (not
 * finite) keeps the previous coefficients. Copy coefficients are never refitted here.
 */
export class TimeModel {
  private current: TimeModelCoefficients;
  private readonly learningWindow: number;
  private readonly refitEvery: number;
  private readonly priorWeight: number;
  private readonly priorPrefill: PrefillSample[];
  private readonly priorDecode: DecodeSample[];
  private readonly prefillObservations: PrefillSample[] = [];
  private readonly decodeObservations: DecodeSample[] = [];
  private prefillSinceRefit = 0;
  private decodeSinceRefit = 0;

  constructor(coefficients: TimeModelCoefficients, options: TimeModelOptions = {}) {
    assertCoefficients(coefficients);
    this.current = { ...coefficients };
    this.learningWindow = positiveInteger(options.learningWindow ?? DEFAULT_LEARNING_WINDOW, "learningWindow");
    this.refitEvery = positiveInteger(options.refitEvery ?? DEFAULT_REFIT_EVERY, "refitEvery");
    this.priorWeight = options.priorWeight ?? DEFAULT_PRIOR_WEIGHT;
    if (!(this.priorWeight > 0 && Number.isFinite(this.priorWeight))) {
      throw new RangeError(`TimeModel: priorWeight must be > 0, got ${this.priorWeight}`);
    }
    const prefill = (options.prior?.prefill ?? []).filter(isUsablePrefill);
    const decode = (options.prior?.decode ?? []).filter(isUsableDecode);
    // An all-zero part has no usable prior points: its refits then follow the observations alone.
    this.priorPrefill = prefill.length > 0 ? prefill.map((s) => ({ ...s })) : gridPrefill(coefficients);
    this.priorDecode = decode.length > 0 ? decode.map((s) => ({ ...s })) : gridDecode(coefficients);
  }

  /** A copy of the coefficients in use now. */
  get coefficients(): TimeModelCoefficients {
    return { ...this.current };
  }

  /**
   * Prefill time of `extendTokens` new tokens that end at `contextTokens` tokens in the
   * sequence (so the cached prefix is contextTokens - extendTokens). 0 when nothing is
   * evaluated. A context shorter than the extend is read as equal to it.
   */
  prefillMs(extendTokens: number, contextTokens: number): number {
    if (!(extendTokens > 0)) return 0;
    return prefillFormula(this.current, extendTokens, Math.max(contextTokens, extendTokens));
  }

  /** Time of one decoded token with `contextTokens` tokens in the sequence. */
  decodeMsPerToken(contextTokens: number): number {
    const c = this.current;
    return Math.max(0, c.decodeBase + c.decodePerContext * Math.max(0, contextTokens));
  }

  /** Time to copy a prefix of `tokens` tokens to another worker: save its KV state + load it there. */
  copyMs(tokens: number): number {
    if (!(tokens > 0)) return 0;
    const c = this.current;
    return Math.max(0, c.copyBase + c.copyPerToken * tokens);
  }

  /** An observed prefill (from taking the slot to the first token). Non-finite or empty ones are ignored. */
  observePrefill(extendTokens: number, contextTokens: number, ms: number): void {
    const sample = { extend: extendTokens, context: Math.max(contextTokens, extendTokens), ms };
    if (!isUsablePrefill(sample)) return;
    pushBounded(this.prefillObservations, sample, this.learningWindow);
    if (++this.prefillSinceRefit >= this.refitEvery) this.refitPrefill();
  }

  /** An observed decode speed at a context length. Non-finite or non-positive ones are ignored. */
  observeDecode(contextTokens: number, msPerToken: number): void {
    const sample = { context: contextTokens, msPerToken };
    if (!isUsableDecode(sample)) return;
    pushBounded(this.decodeObservations, sample, this.learningWindow);
    if (++this.decodeSinceRefit >= this.refitEvery) this.refitDecode();
  }

  /**
   * Least-squares fit of all coefficients from calibration samples (see fitPrefill,
   * fitDecode, fitCopy for the rules). Needs at least one usable prefill sample (extend > 0,
   * ms > 0). Missing decode samples: a decoded token is priced as a one-token prefill. Missing
   * copy samples: a copy is priced as a full recompute at the longest context profiled, so an
   * unmeasured copy never looks cheaper than recomputing within the profiled range.
   */
  static fit(samples: readonly PrefillSample[], decode: readonly DecodeSample[], copy: readonly CopySample[] = []): TimeModelCoefficients {
    const prefill = fitPrefill(samples.filter(isUsablePrefill).map((s) => ({ sample: s, weight: 1 })));
    if (!prefill) throw new RangeError("TimeModel.fit: needs at least one prefill sample with extend > 0 and ms > 0");
    const decodePart =
      fitDecode(decode.filter(isUsableDecode).map((s) => ({ sample: s, weight: 1 }))) ??
      ({ decodeBase: prefill.base + prefill.perExtend, decodePerContext: prefill.perContext + prefill.perExtendContext } as const);
    const maxContext = Math.max(...samples.filter(isUsablePrefill).map((s) => s.context));
    const copyPart =
      fitCopy(copy.filter(isUsableCopy)) ??
      ({
        copyBase: prefill.base + prefill.perContext * maxContext,
        copyPerToken: prefill.perExtend + prefill.perExtendContext * maxContext,
      } as const);
    return { ...prefill, ...decodePart, ...copyPart };
  }

  private refitPrefill(): void {
    this.prefillSinceRefit = 0;
    const observed = this.prefillObservations.map((sample) => ({ sample, weight: 1 }));
    const priorEach = this.priorWeight / Math.max(1, this.priorPrefill.length);
    const prior = this.priorPrefill.map((sample) => ({ sample, weight: priorEach }));
    // Relative to what the model predicts now, not to the observation: a wildly fast outlier
    // must not get a wildly large weight.
    const scale = (s: PrefillSample) => prefillFormula(this.current, s.extend, s.context) || s.ms;
    const first = fitPrefill([...prior, ...observed], scale);
    if (!first) return;
    const kept = trimOutliers(
      observed,
      (s) => s.ms,
      (s) => prefillFormula(first, s.extend, s.context),
    );
    const fitted = kept.length === observed.length ? first : fitPrefill([...prior, ...kept], scale);
    if (fitted) this.current = { ...this.current, ...fitted };
  }

  private refitDecode(): void {
    this.decodeSinceRefit = 0;
    const observed = this.decodeObservations.map((sample) => ({ sample, weight: 1 }));
    const priorEach = this.priorWeight / Math.max(1, this.priorDecode.length);
    const prior = this.priorDecode.map((sample) => ({ sample, weight: priorEach }));
    const scale = (s: DecodeSample) => this.current.decodeBase + this.current.decodePerContext * s.context || s.msPerToken;
    const first = fitDecode([...prior, ...observed], scale);
    if (!first) return;
    const kept = trimOutliers(
      observed,
      (s) => s.msPerToken,
      (s) => first.decodeBase + first.decodePerContext * s.context,
    );
    const fitted = kept.length === observed.length ? first : fitDecode([...prior, ...kept], scale);
    if (fitted) this.current = { ...this.current, ...fitted };
  }
}

// ---------------------------------------------------------------------------------------------
// Presets

/**
 * Published fits, for the simulator and for workers that skip calibration.
 *
 * "h100-llama3-70b": Preble's published prefill fit (28.93 + 0.1822*extend +
 * 0.004004*total + 2.55e-6*extend*total), at the precision it is published with in WukLab/preble
 * multi_node/benchmarks/exp_configs/model_equations_numpy.py (commit 21bb7f6f), where the
 * function carrying these numbers is named `llama3_70b_A100_tp2_sglang_extend_flashinfer`:
 * Preble's later global_scheduler_with_time.py imports an `LP_Llama3_70B_H100_...` variant whose
 * body is not in the sources searched, so the H100 label is the one this project was given, not verified. The same
 * source gives no decode or copy figures for this model: those below are ASSUMPTIONS, derived
 * from memory bandwidth (decode of a 70B model is bound by reading its weights once per token):
 *   decodeBase       = 140 GB of bf16 weights / (2 x 3.35 TB/s HBM3, 2 H100 SXM) / 70% = 29.85 ms
 *   decodePerContext = 320 KiB of KV per context token (80 layers x 8 KV heads x 128 x 2 x 2 B)
 *                      / 6.7 TB/s / 70% = 7.0e-5 ms
 *   copy             = 320 KiB per token, saved and loaded (2 x 320 KiB moved) at 3 GB/s each
 *                      way, the rate measured through a /dev/shm state file on this project's
 *                      CPU machines (bench model: 16.9 MB saved + loaded in 11 ms); PCIe is
 *                      faster than that, so the file is the bottleneck: 0.218 ms per token,
 *                      plus an assumed 5 ms fixed (measured 0.4-0.9 ms on CPU for a small state;
 *                      two GPU workers must also synchronise).
 *
 * "a6000-mistral-7b": Preble publishes no fit of this form for the A6000; its global scheduler
 * (multi_node/global_scheduler_with_time.py) prices prefills with the piecewise function
 * `LP_mistral_7b_A6000_sglang_extend_flashinfer(extend, total_context)` from
 * multi_node/benchmarks/exp_configs/model_equations_numpy.py (commit 21bb7f6f; an older
 * model_equations.py holds a variant with slightly different constants). The prefill numbers
 * below are the least-squares fit of that function by TimeModel.fit on the grid extend in {384,
 * 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192} x cached prefix in {0, 512, 2048, 8192,
 * 16384} (below 384 tokens the published function is a constant and a quadratic that is not
 * monotone, so it is left out); they stay within 9% of it on that grid, and
 * test/unit/time-model.test.ts re-derives them. Decode is that
 * file's `mistrial_7b_A6000_sglang_decode_flashinfer` for one request, which is linear:
 * (22 ms linear layers + 0.159 + 1.86e-4*ctx attention) / 0.9. Copy is an ASSUMPTION as above:
 * 128 KiB of KV per token (32 layers x 8 KV heads x 128 x 2 x 2 B) at 3 GB/s each way + 5 ms.
 */
export const TIME_MODEL_PRESETS: Record<string, TimeModelCoefficients> = {
  "h100-llama3-70b": {
    base: 28.931389307785594,
    perExtend: 0.182233431,
    perContext: 0.00400365142,
    perExtendContext: 2.55050069e-6,
    decodeBase: (140e9 / (2 * 3.35e12) / 0.7) * 1000,
    decodePerContext: (327_680 / (2 * 3.35e12) / 0.7) * 1000,
    copyBase: 5,
    copyPerToken: ((2 * 327_680) / 3e9) * 1000,
  },
  "a6000-mistral-7b": {
    base: 0.6213544049468712,
    perExtend: 0.12336615056571815,
    perContext: 0.0023191386672580514,
    perExtendContext: 2.3555440143099822e-6,
    decodeBase: 22.159 / 0.9,
    decodePerContext: 1.86e-4 / 0.9,
    copyBase: 5,
    copyPerToken: ((2 * 131_072) / 3e9) * 1000,
  },
};

// ---------------------------------------------------------------------------------------------
// Fitting

interface Weighted<T> {
  sample: T;
  weight: number;
}

type PrefillPart = Pick<TimeModelCoefficients, "base" | "perExtend" | "perContext" | "perExtendContext">;
type DecodePart = Pick<TimeModelCoefficients, "decodeBase" | "decodePerContext">;
type CopyPart = Pick<TimeModelCoefficients, "copyBase" | "copyPerToken">;

/**
 * Prefill: columns in order of preference [extend, 1, extend*ctx, ctx]. A column that the
 * samples cannot tell apart from earlier ones (all samples of one length; cold prompts only,
 * where ctx = extend) is left out (coefficient 0); a column that comes out negative is left out
 * and the rest refitted. So every coefficient is >= 0: predictions are >= 0 and grow with extend.
 */
function fitPrefill(rows: readonly Weighted<PrefillSample>[], scale: (s: PrefillSample) => number = (s) => s.ms): PrefillPart | undefined {
  const beta = nonNegativeLeastSquares(
    rows.map(({ sample: s }) => [s.extend, 1, s.extend * s.context, s.context]),
    rows.map(({ sample: s }) => s.ms),
    rows.map(({ sample: s, weight }) => weight / scale(s) ** 2),
  );
  if (!beta) return undefined;
  return { perExtend: beta[0]!, base: beta[1]!, perExtendContext: beta[2]!, perContext: beta[3]! };
}

/** Decode: columns [1, ctx]; one context length only gives a constant. */
function fitDecode(rows: readonly Weighted<DecodeSample>[], scale: (s: DecodeSample) => number = (s) => s.msPerToken): DecodePart | undefined {
  const beta = nonNegativeLeastSquares(
    rows.map(({ sample: s }) => [1, s.context]),
    rows.map(({ sample: s }) => s.msPerToken),
    rows.map(({ sample: s, weight }) => weight / scale(s) ** 2),
  );
  if (!beta) return undefined;
  return { decodeBase: beta[0]!, decodePerContext: beta[1]! };
}

/** Copy: columns [tokens, 1]; one size only gives a cost proportional to the tokens. */
function fitCopy(samples: readonly CopySample[]): CopyPart | undefined {
  const beta = nonNegativeLeastSquares(
    samples.map((s) => [s.tokens, 1]),
    samples.map((s) => s.ms),
    samples.map((s) => 1 / (s.ms * s.ms)),
  );
  if (!beta) return undefined;
  return { copyPerToken: beta[0]!, copyBase: beta[1]! };
}

/**
 * Weighted least squares with every coefficient >= 0, over columns given in order of
 * preference. Solves the normal equations of the still-active columns (scaled to unit weighted
 * norm, so a column of extend*ctx ~ 1e7 and a column of ones are equally well conditioned) by
 * Gaussian elimination. The normal matrix is symmetric positive semi-definite, so elimination
 * runs without pivoting and a pivot that vanishes marks its column as a combination of the
 * columns before it: that column is dropped. A negative coefficient drops its column (the most
 * negative first) and the rest is refitted. Undefined when no column is left or no rows.
 */
function nonNegativeLeastSquares(x: readonly number[][], y: readonly number[], w: readonly number[]): number[] | undefined {
  const columns = x[0]?.length ?? 0;
  if (x.length === 0 || columns === 0) return undefined;
  let active = Array.from({ length: columns }, (_, j) => j);
  while (active.length > 0) {
    const solved = solveNormalEquations(x, y, w, active);
    if ("dependent" in solved) {
      active = active.filter((j) => j !== solved.dependent);
      continue;
    }
    let worst = -1;
    let worstValue = 0;
    for (let k = 0; k < active.length; k++) {
      const scaled = solved.beta[k]! * solved.scale[k]!;
      if (!Number.isFinite(scaled)) return undefined;
      if (scaled < worstValue) {
        worstValue = scaled;
        worst = active[k]!;
      }
    }
    if (worst >= 0) {
      active = active.filter((j) => j !== worst);
      continue;
    }
    const beta = new Array<number>(columns).fill(0);
    active.forEach((j, k) => {
      beta[j] = solved.beta[k]!;
    });
    return beta;
  }
  return undefined;
}

/** A pivot below this (relative to the unit-scaled diagonal) marks a dependent column. */
const DEPENDENT_PIVOT = 1e-9;

function solveNormalEquations(
  x: readonly number[][],
  y: readonly number[],
  w: readonly number[],
  active: readonly number[],
): { beta: number[]; scale: number[] } | { dependent: number } {
  const n = active.length;
  const norm = active.map((j) => Math.sqrt(x.reduce((sum, row, i) => sum + w[i]! * row[j]! ** 2, 0)));
  for (let k = 0; k < n; k++) if (!(norm[k]! > 0) || !Number.isFinite(norm[k]!)) return { dependent: active[k]! };
  // a[r][c] = sum_i w_i x_ir x_ic / (norm_r norm_c); b[r] = sum_i w_i x_ir y_i / norm_r
  const a = active.map((jr, r) => active.map((jc, c) => x.reduce((sum, row, i) => sum + w[i]! * row[jr]! * row[jc]!, 0) / (norm[r]! * norm[c]!)));
  const b = active.map((jr, r) => x.reduce((sum, row, i) => sum + w[i]! * row[jr]! * y[i]!, 0) / norm[r]!);
  for (let k = 0; k < n; k++) {
    const pivot = a[k]![k]!;
    if (!(pivot > DEPENDENT_PIVOT)) return { dependent: active[k]! };
    for (let r = k + 1; r < n; r++) {
      const factor = a[r]![k]! / pivot;
      if (factor === 0) continue;
      for (let c = k; c < n; c++) a[r]![c]! -= factor * a[k]![c]!;
      b[r]! -= factor * b[k]!;
    }
  }
  const scaled = new Array<number>(n).fill(0);
  for (let k = n - 1; k >= 0; k--) {
    let sum = b[k]!;
    for (let c = k + 1; c < n; c++) sum -= a[k]![c]! * scaled[c]!;
    scaled[k] = sum / a[k]![k]!;
  }
  return { beta: scaled.map((v, k) => v / norm[k]!), scale: norm };
}

/** Drops observations whose relative residual is above max(4 x the median one, 20%). */
function trimOutliers<T>(rows: Weighted<T>[], observed: (s: T) => number, predicted: (s: T) => number): Weighted<T>[] {
  if (rows.length < 3) return rows;
  const residual = (s: T) => Math.abs(observed(s) - predicted(s)) / Math.max(predicted(s), Number.MIN_VALUE);
  const sorted = rows.map(({ sample }) => residual(sample)).sort((p, q) => p - q);
  const median = sorted[Math.floor(sorted.length / 2)]!;
  const limit = Math.max(4 * median, 0.2);
  return rows.filter(({ sample }) => residual(sample) <= limit);
}

// ---------------------------------------------------------------------------------------------
// Helpers

function prefillFormula(c: PrefillPart, extend: number, context: number): number {
  return Math.max(0, c.base + c.perExtend * extend + c.perContext * context + c.perExtendContext * extend * context);
}

function gridPrefill(c: TimeModelCoefficients): PrefillSample[] {
  const samples: PrefillSample[] = [];
  for (const extend of PRIOR_GRID.extend) {
    for (const prefix of PRIOR_GRID.prefix) {
      const ms = prefillFormula(c, extend, prefix + extend);
      if (ms > 0) samples.push({ extend, context: prefix + extend, ms });
    }
  }
  return samples;
}

function gridDecode(c: TimeModelCoefficients): DecodeSample[] {
  return [16, 1024, 4096, 16384].map((context) => ({ context, msPerToken: c.decodeBase + c.decodePerContext * context })).filter((s) => s.msPerToken > 0);
}

function isUsablePrefill(s: PrefillSample): boolean {
  return s.extend > 0 && s.context >= s.extend && s.ms > 0 && Number.isFinite(s.extend + s.context + s.ms);
}

function isUsableDecode(s: DecodeSample): boolean {
  return s.context >= 0 && s.msPerToken > 0 && Number.isFinite(s.context + s.msPerToken);
}

function isUsableCopy(s: CopySample): boolean {
  return s.tokens > 0 && s.ms > 0 && Number.isFinite(s.tokens + s.ms);
}

function pushBounded<T>(list: T[], item: T, limit: number): void {
  list.push(item);
  if (list.length > limit) list.splice(0, list.length - limit);
}

function positiveInteger(value: number, name: string): number {
  if (!Number.isInteger(value) || value < 1) throw new RangeError(`TimeModel: ${name} must be an integer >= 1, got ${value}`);
  return value;
}

function assertCoefficients(c: TimeModelCoefficients): void {
  for (const [key, value] of Object.entries(c)) {
    if (!(Number.isFinite(value) && value >= 0)) {
      throw new RangeError(`TimeModel: coefficient ${key} must be finite and >= 0, got ${value}`);
    }
  }
}
