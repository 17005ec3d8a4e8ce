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
import { allWithinOutlierFloor, nonNegativeLeastSquares, outlierLimit, WeightedRows } from "./least-squares.js";

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

/** Where each coefficient sits in TimeModel's array of them. */
const BASE = 0;
const PER_EXTEND = 1;
const PER_CONTEXT = 2;
const PER_EXTEND_CONTEXT = 3;
const DECODE_BASE = 4;
const DECODE_PER_CONTEXT = 5;
const COPY_BASE = 6;
const COPY_PER_TOKEN = 7;

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
  /** `current` in a typed array, what the predictions read: every placement asks every
   *  worker's model, and reading one shape of array stays fast where reading the objects
   *  the refits make (their fields change representation) turned into generic lookups. */
  private readonly k = new Float64Array(8);
  private readonly learningWindow: number;
  private readonly refitEvery: number;
  private readonly priorWeight: number;
  private readonly priorPrefill: PrefillSample[];
  private readonly priorDecode: DecodeSample[];
  /** [extend, context, ms] of the last observations, oldest first. */
  private readonly prefillObservations: ObservationWindow;
  /** [context, msPerToken] of the last observations, oldest first. */
  private readonly decodeObservations: ObservationWindow;
  private prefillSinceRefit = 0;
  private decodeSinceRefit = 0;
  /** Scratch of the refits (one refit at a time). */
  private readonly prefillRows = new WeightedRows(4);
  private readonly decodeRows = new WeightedRows(2);
  private residuals = new Float64Array(32);

  constructor(coefficients: TimeModelCoefficients, options: TimeModelOptions = {}) {
    assertCoefficients(coefficients);
    this.current = { ...coefficients };
    this.syncCoefficients();
    this.learningWindow = positiveInteger(options.learningWindow ?? DEFAULT_LEARNING_WINDOW, "learningWindow");
    this.refitEvery = positiveInteger(options.refitEvery ?? DEFAULT_REFIT_EVERY, "refitEvery");
    this.prefillObservations = new ObservationWindow(3, this.learningWindow);
    this.decodeObservations = new ObservationWindow(2, this.learningWindow);
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
    return this.prefillFormula(extendTokens, Math.max(contextTokens, extendTokens));
  }

  /** Time of one decoded token with `contextTokens` tokens in the sequence. */
  decodeMsPerToken(contextTokens: number): number {
    const k = this.k;
    return Math.max(0, k[DECODE_BASE]! + k[DECODE_PER_CONTEXT]! * Math.max(0, contextTokens));
  }

  /** Time to copy a prefix of `tokens` tokens to another worker: save its KV state + load it there. */
  copyMs(tokens: number): number {
    if (!(tokens > 0)) return 0;
    const k = this.k;
    return Math.max(0, k[COPY_BASE]! + k[COPY_PER_TOKEN]! * tokens);
  }

  /**
   * Time to load a prefix of `tokens` tokens from the worker's own state store into a slot:
   * half a copy, which is a save of the same state plus its load.
   */
  restoreMs(tokens: number): number {
    return this.copyMs(tokens) / 2;
  }

  /** An observed prefill (from taking the slot to the first token). Non-finite or empty ones are ignored. */
  observePrefill(extendTokens: number, contextTokens: number, ms: number): void {
    const context = Math.max(contextTokens, extendTokens);
    if (!isUsablePrefillShape(extendTokens, context, ms)) return;
    this.prefillObservations.push(extendTokens, context, ms);
    if (++this.prefillSinceRefit >= this.refitEvery) this.refitPrefill();
  }

  /** An observed decode speed at a context length. Non-finite or non-positive ones are ignored. */
  observeDecode(contextTokens: number, msPerToken: number): void {
    if (!isUsableDecodeShape(contextTokens, msPerToken)) return;
    this.decodeObservations.push(contextTokens, msPerToken);
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
    const prefill = fitPrefill(samples.filter(isUsablePrefill));
    if (!prefill) throw new RangeError("TimeModel.fit: needs at least one prefill sample with extend > 0 and ms > 0");
    const decodePart =
      fitDecode(decode.filter(isUsableDecode)) ??
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

  /**
   * Refits the prefill part: weighted least squares over the prior and the observations
   * (weights relative to what the model predicts now), then once more without the
   * observations that fit the first result badly (trimOutliers' rule), if any.
   */
  private refitPrefill(): void {
    this.prefillSinceRefit = 0;
    const prior = this.priorPrefill;
    const observed = this.prefillObservations;
    const rows = this.prefillRows;
    rows.reserve(prior.length + observed.size);
    const { y, w } = rows;
    const [x0, x1, x2, x3] = rows.x as [Float64Array, Float64Array, Float64Array, Float64Array];
    // Rows [extend, 1, extend*ctx, ctx] -> ms, the prior's first. Weights are relative to what
    // the model predicts now, not to the observation: a wildly fast outlier must not get a
    // wildly large weight.
    const priorEach = this.priorWeight / Math.max(1, prior.length);
    let r = 0;
    for (const s of prior) {
      x0[r] = s.extend;
      x1[r] = 1;
      x2[r] = s.extend * s.context;
      x3[r] = s.context;
      y[r] = s.ms;
      w[r] = priorEach / (this.prefillFormula(s.extend, s.context) || s.ms) ** 2;
      r++;
    }
    const [extends_, contexts, mss] = observed.fields as [number[], number[], number[]];
    for (let k = 0; k < observed.size; k++) {
      const i = observed.index(k);
      const extend = extends_[i]!;
      const context = contexts[i]!;
      const ms = mss[i]!;
      x0[r] = extend;
      x1[r] = 1;
      x2[r] = extend * context;
      x3[r] = context;
      y[r] = ms;
      w[r] = 1 / (this.prefillFormula(extend, context) || ms) ** 2;
      r++;
    }
    rows.count = r;
    const first = prefillPart(nonNegativeLeastSquares(rows));
    if (!first) return;
    // Each observation's residual against the first fit (its row holds its extend, context and ms).
    const residuals = this.residualScratch(observed.size);
    for (let k = 0, r = prior.length; k < residuals.length; k++, r++) residuals[k] = relativeResidual(y[r]!, prefillFormula(first, x0[r]!, x3[r]!));
    const fitted = dropOutliers(rows, prior.length, residuals) ? prefillPart(nonNegativeLeastSquares(rows)) : first;
    if (fitted) this.adopt(fitted);
  }

  /** Refits the decode part, as refitPrefill: rows [1, ctx] -> ms per token. */
  private refitDecode(): void {
    this.decodeSinceRefit = 0;
    const prior = this.priorDecode;
    const observed = this.decodeObservations;
    const rows = this.decodeRows;
    rows.reserve(prior.length + observed.size);
    const { y, w } = rows;
    const [x0, x1] = rows.x as [Float64Array, Float64Array];
    const coef = this.k;
    const base = coef[DECODE_BASE]!;
    const perContext = coef[DECODE_PER_CONTEXT]!;
    const priorEach = this.priorWeight / Math.max(1, prior.length);
    let r = 0;
    for (const s of prior) {
      x0[r] = 1;
      x1[r] = s.context;
      y[r] = s.msPerToken;
      w[r] = priorEach / (base + perContext * s.context || s.msPerToken) ** 2;
      r++;
    }
    const [contexts, msPerTokens] = observed.fields as [number[], number[]];
    for (let k = 0; k < observed.size; k++) {
      const i = observed.index(k);
      const context = contexts[i]!;
      const msPerToken = msPerTokens[i]!;
      x0[r] = 1;
      x1[r] = context;
      y[r] = msPerToken;
      w[r] = 1 / (base + perContext * context || msPerToken) ** 2;
      r++;
    }
    rows.count = r;
    const first = decodePart(nonNegativeLeastSquares(rows));
    if (!first) return;
    const residuals = this.residualScratch(observed.size);
    for (let k = 0, r = prior.length; k < residuals.length; k++, r++)
      residuals[k] = relativeResidual(y[r]!, first.decodeBase + first.decodePerContext * x1[r]!);
    const fitted = dropOutliers(rows, prior.length, residuals) ? decodePart(nonNegativeLeastSquares(rows)) : first;
    if (fitted) this.adopt(fitted);
  }

  /** prefillFormula over the coefficients in use (the same arithmetic, read from the array). */
  private prefillFormula(extend: number, context: number): number {
    const k = this.k;
    return Math.max(0, k[BASE]! + k[PER_EXTEND]! * extend + k[PER_CONTEXT]! * context + k[PER_EXTEND_CONTEXT]! * extend * context);
  }

  /** The refit's part replaces those coefficients. */
  private adopt(part: Partial<TimeModelCoefficients>): void {
    this.current = { ...this.current, ...part };
    this.syncCoefficients();
  }

  private syncCoefficients(): void {
    const c = this.current;
    const k = this.k;
    k[BASE] = c.base;
    k[PER_EXTEND] = c.perExtend;
    k[PER_CONTEXT] = c.perContext;
    k[PER_EXTEND_CONTEXT] = c.perExtendContext;
    k[DECODE_BASE] = c.decodeBase;
    k[DECODE_PER_CONTEXT] = c.decodePerContext;
    k[COPY_BASE] = c.copyBase;
    k[COPY_PER_TOKEN] = c.copyPerToken;
  }

  /** A scratch array of `count` residuals (valid until the next refit). */
  private residualScratch(count: number): Float64Array {
    if (this.residuals.length < count) this.residuals = new Float64Array(Math.max(count, 2 * this.residuals.length));
    return this.residuals.subarray(0, count);
  }
}

/**
 * Removes from `rows` (the prior's `priorRows` first, then one per observation) the
 * observations whose residual is above max(4 x the median one, 20%), when there are at least
 * 3. Returns whether any went; the rows kept stay in order, so a refit over them is the fit
 * of exactly those.
 */
function dropOutliers(rows: WeightedRows, priorRows: number, residuals: Float64Array): boolean {
  const count = residuals.length;
  if (count < 3 || allWithinOutlierFloor(residuals)) return false;
  const limit = outlierLimit(residuals);
  let kept = priorRows;
  for (let k = 0; k < count; k++) {
    if (!(residuals[k]! <= limit)) continue;
    if (kept !== priorRows + k) rows.moveRow(priorRows + k, kept);
    kept++;
  }
  rows.count = kept;
  return kept !== priorRows + count;
}

/**
 * The last `limit` observations of one kind, oldest first: fields in parallel arrays, a
 * ring once full (no object per observation, no shifting).
 */
class ObservationWindow {
  /** Per field, the values by storage index (see `index`). */
  readonly fields: number[][];
  private start = 0;
  size = 0;

  constructor(
    fields: number,
    private readonly limit: number,
  ) {
    this.fields = Array.from({ length: fields }, () => []);
  }

  push(a: number, b: number, c = 0): void {
    const fields = this.fields;
    let i: number;
    if (this.size < this.limit) {
      i = this.size++;
    } else {
      i = this.start;
      this.start = (this.start + 1) % this.limit;
    }
    fields[0]![i] = a;
    fields[1]![i] = b;
    if (fields.length > 2) fields[2]![i] = c;
  }

  /** Where observation k (0 = the oldest) is stored in `fields`. */
  index(k: number): number {
    const i = this.start + k;
    return i >= this.limit ? i - this.limit : i;
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

type PrefillPart = Pick<TimeModelCoefficients, "base" | "perExtend" | "perContext" | "perExtendContext">;
type DecodePart = Pick<TimeModelCoefficients, "decodeBase" | "decodePerContext">;
type CopyPart = Pick<TimeModelCoefficients, "copyBase" | "copyPerToken">;

/**
 * Prefill: columns in order of preference [extend, 1, extend*ctx, ctx]. A column that the
 * samples cannot tell apart from earlier ones (all samples of one length; cold prompts only,
 * where ctx = extend) is left out (coefficient 0); a column that comes out negative is left out
 * and the rest refitted. So every coefficient is >= 0: predictions are >= 0 and grow with extend.
 * Each sample weighs 1 / its ms^2 (relative error).
 */
function fitPrefill(samples: readonly PrefillSample[]): PrefillPart | undefined {
  const rows = new WeightedRows(4, Math.max(1, samples.length));
  for (const s of samples) rows.push(s.ms, 1 / s.ms ** 2, s.extend, 1, s.extend * s.context, s.context);
  return prefillPart(nonNegativeLeastSquares(rows));
}

/** Prefill coefficients from the solution over [extend, 1, extend*ctx, ctx]. */
function prefillPart(beta: number[] | undefined): PrefillPart | undefined {
  if (!beta) return undefined;
  return { perExtend: beta[0]!, base: beta[1]!, perExtendContext: beta[2]!, perContext: beta[3]! };
}

/** Decode: columns [1, ctx]; one context length only gives a constant. */
function fitDecode(samples: readonly DecodeSample[]): DecodePart | undefined {
  const rows = new WeightedRows(2, Math.max(1, samples.length));
  for (const s of samples) rows.push(s.msPerToken, 1 / s.msPerToken ** 2, 1, s.context);
  return decodePart(nonNegativeLeastSquares(rows));
}

/** Decode coefficients from the solution over [1, ctx]. */
function decodePart(beta: number[] | undefined): DecodePart | undefined {
  if (!beta) return undefined;
  return { decodeBase: beta[0]!, decodePerContext: beta[1]! };
}

/** Copy: columns [tokens, 1]; one size only gives a cost proportional to the tokens. */
function fitCopy(samples: readonly CopySample[]): CopyPart | undefined {
  const rows = new WeightedRows(2, Math.max(1, samples.length));
  for (const s of samples) rows.push(s.ms, 1 / (s.ms * s.ms), s.tokens, 1);
  const beta = nonNegativeLeastSquares(rows);
  if (!beta) return undefined;
  return { copyPerToken: beta[0]!, copyBase: beta[1]! };
}

/** How far off a prediction is, relative to it (outlier trimming reads these). */
function relativeResidual(observed: number, predicted: number): number {
  return Math.abs(observed - predicted) / Math.max(predicted, Number.MIN_VALUE);
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
  return isUsablePrefillShape(s.extend, s.context, s.ms);
}

function isUsablePrefillShape(extend: number, context: number, ms: number): boolean {
  return extend > 0 && context >= extend && ms > 0 && Number.isFinite(extend + context + ms);
}

function isUsableDecode(s: DecodeSample): boolean {
  return isUsableDecodeShape(s.context, s.msPerToken);
}

function isUsableDecodeShape(context: number, msPerToken: number): boolean {
  return context >= 0 && msPerToken > 0 && Number.isFinite(context + msPerToken);
}

function isUsableCopy(s: CopySample): boolean {
  return s.tokens > 0 && s.ms > 0 && Number.isFinite(s.tokens + s.ms);
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
