// What one simulated arm reports: latency distributions (TTFT, end-to-end), throughput, the
// per-request cached fraction (each request's own verdict, never a lifetime average), and
// per-worker utilisation and imbalance.
import type { SimResult } from "./simulator.js";

export interface Distribution {
  mean: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

export interface ArmSummary {
  policy: string;
  /** Requests completed (the sample size). */
  n: number;
  refused: number;
  ttftMs: Distribution;
  e2eMs: Distribution;
  /** Completed requests and generated tokens per second of simulated time, first arrival to last completion. */
  throughput: { requestsPerS: number; outputTokensPerS: number };
  cached: {
    /** Mean of the per-request cached fractions. */
    meanFraction: number;
    p10: number;
    p50: number;
    p90: number;
    /** Requests that found at least half of their prompt cached. */
    atLeastHalf: number;
    /** Cached prompt tokens / prompt tokens, over all requests. */
    tokenFraction: number;
    /** Requests per tenth of cached fraction: [0, 0.1), ..., [0.9, 1]. */
    histogram: number[];
  };
  workers: {
    id: string;
    utilisation: number;
    busyMs: number;
    placed: number;
    prefillTokens: number;
    decodeTokens: number;
    evictions: number;
    roomWaits: number;
    preemptions: number;
    /** Step time spent decoding and prefilling, ms. */
    decodeMs: number;
    prefillMs: number;
    /** Steps that decoded, and their passes over the weights. */
    decodeSteps: number;
    decodePasses: number;
  }[];
  imbalance: {
    /** Busiest worker's busy time / the mean. 1 = perfectly even. */
    busyMaxOverMean: number;
    /** Most placed worker's placements / the mean. */
    placedMaxOverMean: number;
    /** Most prefill tokens computed on one worker / the mean. */
    prefillMaxOverMean: number;
  };
  /** What the workers' steps were made of, over all of them (null when no step decoded). */
  steps: {
    /** Share of step time spent decoding (the rest: prefill). */
    decodeShare: number;
    /** Passes over the weights per step that decoded. */
    passesPerDecodeStep: number;
    /** Decoded tokens per pass: how much of each pass the batch used. */
    sequencesPerPass: number;
  } | null;
  makespanS: number;
  /** Placements refused with 429 (every queue full) and retried by the client. */
  rejections: number;
  reasons: Record<string, number>;
  copies: SimResult["copies"];
  /** The decisions behind the slowest requests (those at or above the p99 TTFT). */
  tail: TailSummary;
}

/**
 * What the requests in the TTFT tail had in common: the reasons they were placed for, how long
 * they waited on their worker before a slot took them, how long their prefill took, how much
 * of their prompt was cached, and how many of them one worker served. A tail of "exploit" with
 * long slot waits on one worker is a hot holder; of "explore" with long prefills, cold misses.
 */
export interface TailSummary {
  /** The p99 TTFT the tail starts at, ms. */
  fromTtftMs: number;
  n: number;
  /** Tail requests per placement reason. */
  reasons: Record<string, number>;
  /** Means over the tail: time from arrival to taking a slot (prefix copies excluded), and from there to the first token. */
  slotWaitMs: number;
  prefillMs: number;
  cachedFraction: number;
  /** The worker that served most of the tail, and its share of it. */
  topWorker: string;
  topWorkerShare: number;
}

/** Nearest-rank quantile of sorted values. */
export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

export function distribution(values: readonly number[]): Distribution {
  const sorted = [...values].sort((a, b) => a - b);
  const mean = sorted.reduce((sum, v) => sum + v, 0) / Math.max(1, sorted.length);
  return { mean, p50: quantile(sorted, 0.5), p90: quantile(sorted, 0.9), p99: quantile(sorted, 0.99), max: sorted[sorted.length - 1] ?? Number.NaN };
}

const maxOverMean = (values: readonly number[]) => {
  const mean = values.reduce((sum, v) => sum + v, 0) / Math.max(1, values.length);
  return mean > 0 ? Math.max(...values) / mean : 1;
};

function stepMix(workers: SimResult["workers"]): ArmSummary["steps"] {
  const sum = (value: (worker: SimResult["workers"][number]) => number) => workers.reduce((total, worker) => total + value(worker), 0);
  const decodeSteps = sum((w) => w.decodeSteps);
  if (decodeSteps === 0) return null;
  const decodeMs = sum((w) => w.decodeMs);
  const passes = sum((w) => w.decodePasses);
  return {
    decodeShare: decodeMs / Math.max(1e-9, decodeMs + sum((w) => w.prefillMs)),
    passesPerDecodeStep: passes / decodeSteps,
    sequencesPerPass: sum((w) => w.decodeTokens) / passes,
  };
}

export function summarize(result: SimResult): ArmSummary {
  const { records } = result;
  const makespanMs = Math.max(1e-9, result.endMs - result.startMs);
  const fractions = records.map((record) => record.cachedFraction).sort((a, b) => a - b);
  const histogram = new Array<number>(10).fill(0);
  for (const f of fractions) histogram[Math.min(9, Math.floor(f * 10))]!++;
  let cachedTokens = 0;
  let promptTokens = 0;
  let outputTokens = 0;
  for (const record of records) {
    cachedTokens += record.cachedTokens;
    promptTokens += record.promptTokens;
    outputTokens += record.outputTokens;
  }
  return {
    policy: result.policy,
    n: records.length,
    refused: result.refused.length,
    ttftMs: distribution(records.map((record) => record.ttftMs)),
    e2eMs: distribution(records.map((record) => record.e2eMs)),
    throughput: { requestsPerS: (records.length * 1000) / makespanMs, outputTokensPerS: (outputTokens * 1000) / makespanMs },
    cached: {
      meanFraction: fractions.reduce((sum, f) => sum + f, 0) / Math.max(1, fractions.length),
      p10: quantile(fractions, 0.1),
      p50: quantile(fractions, 0.5),
      p90: quantile(fractions, 0.9),
      atLeastHalf: fractions.filter((f) => f >= 0.5).length / Math.max(1, fractions.length),
      tokenFraction: cachedTokens / Math.max(1, promptTokens),
      histogram,
    },
    workers: result.workers.map((worker) => ({
      id: worker.id,
      utilisation: worker.busyMs / makespanMs,
      busyMs: worker.busyMs,
      placed: worker.placed,
      prefillTokens: worker.prefillTokens,
      decodeTokens: worker.decodeTokens,
      evictions: worker.evictions,
      roomWaits: worker.roomWaits,
      preemptions: worker.preemptions,
      decodeMs: worker.decodeMs,
      prefillMs: worker.prefillMs,
      decodeSteps: worker.decodeSteps,
      decodePasses: worker.decodePasses,
    })),
    imbalance: {
      busyMaxOverMean: maxOverMean(result.workers.map((worker) => worker.busyMs)),
      placedMaxOverMean: maxOverMean(result.workers.map((worker) => worker.placed)),
      prefillMaxOverMean: maxOverMean(result.workers.map((worker) => worker.prefillTokens)),
    },
    steps: stepMix(result.workers),
    makespanS: makespanMs / 1000,
    rejections: result.rejections,
    reasons: result.reasons,
    copies: result.copies,
    tail: tailOf(records),
  };
}

export function tailOf(records: SimResult["records"]): TailSummary {
  const fromTtftMs = quantile(
    records.map((record) => record.ttftMs).sort((a, b) => a - b),
    0.99,
  );
  const tail = records.filter((record) => record.ttftMs >= fromTtftMs);
  const reasons: Record<string, number> = {};
  const byWorker = new Map<string, number>();
  let slotWaitMs = 0;
  let prefillMs = 0;
  let cachedFraction = 0;
  for (const record of tail) {
    reasons[record.reason] = (reasons[record.reason] ?? 0) + 1;
    byWorker.set(record.workerId, (byWorker.get(record.workerId) ?? 0) + 1);
    slotWaitMs += record.startMs - record.arrivalMs - record.copyMs;
    prefillMs += record.firstTokenMs - record.startMs;
    cachedFraction += record.cachedFraction;
  }
  let topWorker = "";
  let top = 0;
  for (const [worker, count] of byWorker) {
    if (count > top) {
      topWorker = worker;
      top = count;
    }
  }
  const n = Math.max(1, tail.length);
  return {
    fromTtftMs,
    n: tail.length,
    reasons,
    slotWaitMs: slotWaitMs / n,
    prefillMs: prefillMs / n,
    cachedFraction: cachedFraction / n,
    topWorker,
    topWorkerShare: top / n,
  };
}
