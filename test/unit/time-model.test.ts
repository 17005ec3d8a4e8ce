import { describe, expect, it } from "vitest";
import { mulberry32 } from "../../src/common/random.js";
import { nonNegativeActiveSet, solveScaledSystem, type SubsetSolution } from "../../src/scheduler/least-squares.js";
import { TIME_MODEL_PRESETS, TimeModel, type PrefillSample, type TimeModelCoefficients } from "../../src/scheduler/time-model.js";

const known: TimeModelCoefficients = {
  base: 3,
  perExtend: 0.5,
  perContext: 0.01,
  perExtendContext: 2e-5,
  decodeBase: 4,
  decodePerContext: 0.002,
  copyBase: 1.5,
  copyPerToken: 0.03,
};

function prefill(c: TimeModelCoefficients, extend: number, context: number): number {
  return c.base + c.perExtend * extend + c.perContext * context + c.perExtendContext * extend * context;
}

/** Cold prompts of several lengths plus suffixes on cached prefixes: what a calibration profile measures. */
function profileShapes(): { extend: number; context: number }[] {
  const shapes = [32, 128, 512, 2048].map((n) => ({ extend: n, context: n }));
  for (const extend of [32, 128, 512]) shapes.push({ extend, context: 2048 + extend });
  return shapes;
}

function expectCoefficients(actual: TimeModelCoefficients, expected: TimeModelCoefficients, digits: number): void {
  for (const key of Object.keys(expected) as (keyof TimeModelCoefficients)[]) {
    expect(actual[key] / expected[key], key).toBeCloseTo(1, digits);
  }
}

function expectSane(c: TimeModelCoefficients): void {
  for (const [key, value] of Object.entries(c)) {
    expect(Number.isFinite(value), key).toBe(true);
    expect(value, key).toBeGreaterThanOrEqual(0);
  }
}

describe("TimeModel.fit", () => {
  it("recovers known coefficients from noiseless samples", () => {
    const samples = profileShapes().map((s) => ({ ...s, ms: prefill(known, s.extend, s.context) }));
    const decode = [16, 512, 2048].map((context) => ({ context, msPerToken: known.decodeBase + known.decodePerContext * context }));
    const copy = [32, 2048].map((tokens) => ({ tokens, ms: known.copyBase + known.copyPerToken * tokens }));
    expectCoefficients(TimeModel.fit(samples, decode, copy), known, 6);
  });

  it("keeps the quadratic term from cold prompts alone (context = extend), folding the context term into it", () => {
    const samples = [32, 128, 512, 2048].map((n) => ({ extend: n, context: n, ms: prefill(known, n, n) }));
    const model = new TimeModel(TimeModel.fit(samples, []));
    for (const n of [64, 1000, 3000]) expect(model.prefillMs(n, n)).toBeCloseTo(prefill(known, n, n), 6);
  });

  it("clamps coefficients that come out negative and refits the rest", () => {
    // A prefill that gets CHEAPER with context would need perContext < 0.
    const samples = [
      { extend: 100, context: 100, ms: 50 },
      { extend: 100, context: 1100, ms: 40 },
      { extend: 400, context: 400, ms: 200 },
      { extend: 400, context: 1400, ms: 190 },
    ];
    const c = TimeModel.fit(samples, []);
    expectSane(c);
    expect(c.perContext).toBe(0);
  });

  it("gives finite, non-negative coefficients from degenerate inputs", () => {
    const one = TimeModel.fit([{ extend: 100, context: 100, ms: 20 }], []);
    expectSane(one);
    expect(new TimeModel(one).prefillMs(100, 100)).toBeCloseTo(20, 9);
    expect(new TimeModel(one).prefillMs(200, 200)).toBeGreaterThan(20);

    const sameLength = TimeModel.fit(
      [18, 20, 22].map((ms) => ({ extend: 256, context: 256, ms })),
      [5, 5.5].map((msPerToken) => ({ context: 300, msPerToken })),
    );
    expectSane(sameLength);
    expect(new TimeModel(sameLength).prefillMs(256, 256)).toBeCloseTo(20, 0);
    expect(new TimeModel(sameLength).decodeMsPerToken(300)).toBeCloseTo(5.25, 0);

    const withJunk = TimeModel.fit(
      [
        { extend: 0, context: 100, ms: 3 },
        { extend: 10, context: 10, ms: Number.NaN },
        { extend: 10, context: 10, ms: -1 },
        { extend: 50, context: 50, ms: 10 },
      ],
      [{ context: Number.POSITIVE_INFINITY, msPerToken: 1 }],
    );
    expectSane(withJunk);
    expect(() => TimeModel.fit([], [])).toThrow(RangeError);
  });

  it("prices an unmeasured copy no cheaper than recomputing within the profiled range", () => {
    const samples = profileShapes().map((s) => ({ ...s, ms: prefill(known, s.extend, s.context) }));
    const model = new TimeModel(TimeModel.fit(samples, []));
    for (const [tokens, context] of [
      [100, 100],
      [1000, 2000],
      [2560, 2560],
    ] as const) {
      expect(model.copyMs(tokens)).toBeGreaterThanOrEqual(model.prefillMs(tokens, context));
    }
  });
});

describe("TimeModel predictions", () => {
  it("are monotone in extend and 0 for nothing to evaluate", () => {
    for (const c of [known, ...Object.values(TIME_MODEL_PRESETS)]) {
      const model = new TimeModel(c);
      expect(model.prefillMs(0, 500)).toBe(0);
      for (const prefix of [0, 1000, 8000]) {
        let previous = 0;
        for (const extend of [1, 10, 100, 1000, 10_000]) {
          const ms = model.prefillMs(extend, prefix + extend);
          expect(ms).toBeGreaterThan(previous);
          previous = ms;
        }
      }
      expect(model.decodeMsPerToken(4000)).toBeGreaterThanOrEqual(model.decodeMsPerToken(10));
      expect(model.copyMs(0)).toBe(0);
      expect(model.copyMs(2000)).toBeGreaterThan(model.copyMs(100));
    }
  });

  it("refuses negative or non-finite coefficients", () => {
    expect(() => new TimeModel({ ...known, perExtend: -1 })).toThrow(RangeError);
    expect(() => new TimeModel({ ...known, base: Number.NaN })).toThrow(RangeError);
  });
});

describe("TIME_MODEL_PRESETS", () => {
  it("h100-llama3-70b is Preble's published fit: prefillMs(1000, 3000) = 28.93 + 182.2 + 12.012 + 7.65", () => {
    const model = new TimeModel(TIME_MODEL_PRESETS["h100-llama3-70b"]!);
    expect(model.prefillMs(1000, 3000)).toBeCloseTo(28.93 + 182.2 + 12.012 + 7.65, 1);
    expect(model.coefficients.perExtend).toBeCloseTo(0.1822, 4);
    expect(model.coefficients.perContext).toBeCloseTo(0.004004, 6);
    expect(model.coefficients.perExtendContext).toBeCloseTo(2.55e-6, 8);
  });

  it("a6000-mistral-7b is the fit of Preble's published A6000 function on the documented grid", () => {
    // WukLab/preble multi_node/benchmarks/exp_configs/model_equations_numpy.py:
    // LP_mistral_7b_A6000_sglang_extend_flashinfer(extend, total), converted to ms.
    const linear = (n: number) => (n >= 384 ? 0.10842571 * n + 4.209777054806409 : n >= 192 ? -118 + 1.25 * n - 2.56e-3 * n * n : 22);
    const attention = (total: number, unique: number) => {
      if (total <= 1024) return 0.32;
      const t = 1.86e-4 * total + 0.159;
      return unique <= 1024 ? t / 2 : t;
    };
    const preble = (extend: number, total: number) => {
      const quad = extend * total > 1024 * 1024 ? 1.13e-3 * extend + 1.75e-3 * total + 2.19e-6 * extend * total : 0;
      return (linear(extend) + attention(total, extend) + quad) / 0.9;
    };
    const samples: PrefillSample[] = [];
    for (const extend of [384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192]) {
      for (const prefix of [0, 512, 2048, 8192, 16384]) {
        samples.push({ extend, context: prefix + extend, ms: preble(extend, prefix + extend) });
      }
    }
    const fitted = TimeModel.fit(samples, []);
    const preset = TIME_MODEL_PRESETS["a6000-mistral-7b"]!;
    for (const key of ["base", "perExtend", "perContext", "perExtendContext"] as const) {
      expect(fitted[key] / preset[key], key).toBeCloseTo(1, 9);
    }
    const model = new TimeModel(preset);
    for (const s of samples) expect(Math.abs(model.prefillMs(s.extend, s.context) / s.ms - 1)).toBeLessThan(0.09);
    // Decode: the same file's one-request decode, (22 + 0.159 + 1.86e-4 * ctx) / 0.9 ms.
    expect(model.decodeMsPerToken(4096)).toBeCloseTo((22 + 0.159 + 1.86e-4 * 4096) / 0.9, 6);
  });
});

describe("TimeModel online refinement", () => {
  const calibration = profileShapes().map((s) => ({ ...s, ms: prefill(known, s.extend, s.context) }));

  it("moves towards new observations, further with more of them", () => {
    const model = new TimeModel(known, { prior: { prefill: calibration } });
    const before = model.prefillMs(1000, 3000);
    const observeSlower = (count: number) => {
      for (let i = 0; i < count; i++) {
        const extend = 50 + ((i * 373) % 1500);
        const context = extend + ((i * 911) % 2000);
        model.observePrefill(extend, context, 2 * prefill(known, extend, context));
      }
    };
    observeSlower(19);
    expect(model.prefillMs(1000, 3000)).toBe(before); // no refit before refitEvery (20) observations
    observeSlower(1);
    const after20 = model.prefillMs(1000, 3000);
    expect(after20).toBeGreaterThan(1.3 * before);
    expect(after20).toBeLessThan(2 * before);
    observeSlower(180);
    const after200 = model.prefillMs(1000, 3000);
    expect(after200).toBeGreaterThan(after20);
    expect(after200).toBeGreaterThan(1.8 * before);
    expectSane(model.coefficients);
  });

  it("refines decode time per token the same way", () => {
    const model = new TimeModel(known);
    const before = model.decodeMsPerToken(1000);
    for (let i = 0; i < 200; i++) model.observeDecode(100 + i * 10, 0.5 * (known.decodeBase + known.decodePerContext * (100 + i * 10)));
    expect(model.decodeMsPerToken(1000)).toBeLessThan(0.6 * before);
    expect(model.decodeMsPerToken(1000)).toBeGreaterThan(0.45 * before);
  });

  it("is not wrecked by a few wild observations", () => {
    const model = new TimeModel(known, { prior: { prefill: calibration } });
    const before = model.prefillMs(500, 1500);
    for (let i = 0; i < 40; i++) {
      const extend = 40 + i * 37;
      const context = extend + (i % 4) * 500;
      const wild = i % 13 === 5; // 3 of 40 are 50x slower or 50x faster
      const ms = prefill(known, extend, context) * (wild ? (i % 2 ? 50 : 0.02) : 1);
      model.observePrefill(extend, context, ms);
    }
    expect(model.prefillMs(500, 1500) / before).toBeCloseTo(1, 1);
    expectSane(model.coefficients);
  });

  it("ignores unusable observations and keeps the window bounded", () => {
    const model = new TimeModel(known, { learningWindow: 30, refitEvery: 5 });
    model.observePrefill(0, 100, 5);
    model.observePrefill(10, 100, Number.NaN);
    model.observePrefill(10, 100, -3);
    model.observeDecode(100, 0);
    model.observeDecode(100, Number.POSITIVE_INFINITY);
    expect(model.coefficients).toEqual(known);
    // One length only, over and over: the refit stays finite and non-negative.
    for (let i = 0; i < 100; i++) model.observePrefill(64, 64, 9);
    expectSane(model.coefficients);
    expect(model.prefillMs(64, 64)).toBeGreaterThan(0);
  });
});

/**
 * The online refit written the plain way (an array per row, every sum recomputed for every
 * active set, a sort for the median): the model's fit must be exactly this one, to the bit.
 */
type PlainRow = { x: number[]; y: number; w: number };

function plainSolve(rows: readonly PlainRow[], active: readonly number[]): SubsetSolution {
  const n = active.length;
  const norm = active.map((j) => Math.sqrt(rows.reduce((sum, row) => sum + row.w * row.x[j]! ** 2, 0)));
  for (let k = 0; k < n; k++) if (!(norm[k]! > 0) || !Number.isFinite(norm[k]!)) return { dependent: active[k]! };
  const a = active.map((jr, r) => active.map((jc, c) => rows.reduce((sum, row) => sum + row.w * row.x[jr]! * row.x[jc]!, 0) / (norm[r]! * norm[c]!)));
  const b = active.map((jr, r) => rows.reduce((sum, row) => sum + row.w * row.x[jr]! * row.y, 0) / norm[r]!);
  return solveScaledSystem(a, b, norm, active);
}

function plainNnls(rows: readonly PlainRow[]): number[] | undefined {
  const columns = rows[0]?.x.length ?? 0;
  if (rows.length === 0 || columns === 0) return undefined;
  return nonNegativeActiveSet(columns, (active) => plainSolve(rows, active));
}

/** Observations whose relative residual is above max(4 x the median, 20%) go (3 or more). */
function plainTrim<T>(rows: T[], residual: (row: T) => number): T[] {
  if (rows.length < 3) return rows;
  const sorted = rows.map(residual).sort((p, q) => p - q);
  const limit = Math.max(4 * sorted[Math.floor(sorted.length / 2)]!, 0.2);
  return rows.filter((row) => residual(row) <= limit);
}

const plainPrefill = (c: Pick<TimeModelCoefficients, "base" | "perExtend" | "perContext" | "perExtendContext">, e: number, ctx: number) =>
  Math.max(0, c.base + c.perExtend * e + c.perContext * ctx + c.perExtendContext * e * ctx);

/** The model's online refinement, as TimeModel documents it, with its defaults. */
class PlainRefitModel {
  c: TimeModelCoefficients;
  private readonly prefillObs: { e: number; ctx: number; ms: number }[] = [];
  private readonly decodeObs: { ctx: number; ms: number }[] = [];
  private readonly priorPrefill: { e: number; ctx: number; ms: number }[] = [];
  private readonly priorDecode: { ctx: number; ms: number }[] = [];

  constructor(c: TimeModelCoefficients) {
    this.c = { ...c };
    for (const e of [16, 64, 256, 1024, 4096]) {
      for (const p of [0, 1024, 4096]) {
        const ms = plainPrefill(c, e, p + e);
        if (ms > 0) this.priorPrefill.push({ e, ctx: p + e, ms });
      }
    }
    for (const ctx of [16, 1024, 4096, 16384]) {
      const ms = c.decodeBase + c.decodePerContext * ctx;
      if (ms > 0) this.priorDecode.push({ ctx, ms });
    }
  }

  observePrefill(e: number, ctx: number, ms: number): void {
    this.prefillObs.push({ e, ctx, ms });
    if (this.prefillObs.length > 200) this.prefillObs.shift();
    if (this.prefillSeen++ % 20 === 19) this.refitPrefill();
  }

  private prefillSeen = 0;
  private decodeSeen = 0;

  observeDecode(ctx: number, ms: number): void {
    this.decodeObs.push({ ctx, ms });
    if (this.decodeObs.length > 200) this.decodeObs.shift();
    if (this.decodeSeen++ % 20 === 19) this.refitDecode();
  }

  private refitPrefill(): void {
    const scale = (s: { e: number; ctx: number; ms: number }) => plainPrefill(this.c, s.e, s.ctx) || s.ms;
    const each = 20 / this.priorPrefill.length;
    const row = (s: { e: number; ctx: number; ms: number }, weight: number): PlainRow => ({
      x: [s.e, 1, s.e * s.ctx, s.ctx],
      y: s.ms,
      w: weight / scale(s) ** 2,
    });
    const fitRows = (observed: typeof this.prefillObs) => {
      const beta = plainNnls([...this.priorPrefill.map((s) => row(s, each)), ...observed.map((s) => row(s, 1))]);
      return beta && { perExtend: beta[0]!, base: beta[1]!, perExtendContext: beta[2]!, perContext: beta[3]! };
    };
    const first = fitRows(this.prefillObs);
    if (!first) return;
    const kept = plainTrim(
      this.prefillObs,
      (s) => Math.abs(s.ms - plainPrefill(first, s.e, s.ctx)) / Math.max(plainPrefill(first, s.e, s.ctx), Number.MIN_VALUE),
    );
    const fitted = kept.length === this.prefillObs.length ? first : fitRows(kept);
    if (fitted) this.c = { ...this.c, ...fitted };
  }

  private refitDecode(): void {
    const scale = (s: { ctx: number; ms: number }) => this.c.decodeBase + this.c.decodePerContext * s.ctx || s.ms;
    const each = 20 / this.priorDecode.length;
    const row = (s: { ctx: number; ms: number }, weight: number): PlainRow => ({ x: [1, s.ctx], y: s.ms, w: weight / scale(s) ** 2 });
    const fitRows = (observed: typeof this.decodeObs) => {
      const beta = plainNnls([...this.priorDecode.map((s) => row(s, each)), ...observed.map((s) => row(s, 1))]);
      return beta && { decodeBase: beta[0]!, decodePerContext: beta[1]! };
    };
    const first = fitRows(this.decodeObs);
    if (!first) return;
    const kept = plainTrim(
      this.decodeObs,
      (s) =>
        Math.abs(s.ms - (first.decodeBase + first.decodePerContext * s.ctx)) / Math.max(first.decodeBase + first.decodePerContext * s.ctx, Number.MIN_VALUE),
    );
    const fitted = kept.length === this.decodeObs.length ? first : fitRows(kept);
    if (fitted) this.c = { ...this.c, ...fitted };
  }
}

describe("TimeModel online refit, exactly", () => {
  it("gives, refit after refit, the very coefficients of the plain least-squares refit (outliers, a full window, negative columns; or no outliers at all)", () => {
    const random = mulberry32(7);
    // Some wild observations (outliers to drop), or none (every residual within the floor of
    // the outlier limit, which the refit then knows without finding the median).
    for (const [start, wildRate] of [
      [known, 0.05],
      [TIME_MODEL_PRESETS["a6000-mistral-7b"]!, 0.05],
      [known, 0],
    ] as const) {
      const model = new TimeModel(start);
      const plain = new PlainRefitModel(start);
      let refits = 0;
      for (let i = 0; i < 700; i++) {
        const extend = 1 + Math.floor(random() * 4000);
        const context = extend + Math.floor(random() * 8000);
        // Mostly the model with noise, drifting slower; some wild ones; a phase where
        // the context costs nothing (a column comes out negative and is dropped).
        const wild = random() < wildRate ? (random() < 0.5 ? 40 : 0.03) : 1;
        const drift = 1 + i / 500;
        const ms = (i > 300 && i < 450 ? 5 + 0.2 * extend : prefill(start, extend, context)) * drift * wild * (0.9 + 0.2 * random());
        model.observePrefill(extend, context, ms);
        plain.observePrefill(extend, context, ms);
        const decodeContext = Math.floor(random() * 16000);
        const msPerToken = (start.decodeBase + start.decodePerContext * decodeContext) * drift * wild * (0.9 + 0.2 * random());
        model.observeDecode(decodeContext, msPerToken);
        plain.observeDecode(decodeContext, msPerToken);
        if ((i + 1) % 20 === 0) {
          refits++;
          for (const key of Object.keys(start) as (keyof TimeModelCoefficients)[])
            expect(Object.is(model.coefficients[key], plain.c[key]), `${key} after ${i + 1}`).toBe(true);
        }
      }
      expect(refits).toBe(35);
      expect(model.coefficients).not.toEqual(start);
    }
  });
});
