// The last minutes of traffic, for the status page: requests, placements by reason, the
// fraction of prompt tokens served from the KV cache and TTFT percentiles, in 10-second
// buckets. Fed by the serving observer; bounded (a fixed number of buckets, a capped TTFT
// sample per bucket).
import type { RequestRecord, ServingObserver } from "./observer.js";

export const BUCKET_MS = 10_000;
/** Ten minutes of buckets. */
export const BUCKETS = 60;
/** TTFT samples kept per bucket: enough for p99 of a busy bucket, bounded under any load. */
const TTFT_SAMPLES = 512;

interface Bucket {
  start: number;
  requests: number;
  errors: number;
  promptTokens: number;
  cachedTokens: number;
  placements: Record<string, number>;
  ttftMs: number[];
  /** TTFTs seen in the bucket, kept or not: the reservoir's denominator. */
  ttftSeen: number;
}

export interface ActivityPoint {
  /** Bucket start, ms since the epoch. */
  t: number;
  requests: number;
  errors: number;
  /** Cached over prompt tokens in the bucket; null with no prompt tokens. */
  cachedFraction: number | null;
  placements: Record<string, number>;
  ttftP50Ms: number | null;
  ttftP90Ms: number | null;
  ttftP99Ms: number | null;
}

export class RecentActivity implements ServingObserver {
  private readonly buckets: Bucket[] = [];

  constructor(private readonly now: () => number = Date.now) {}

  requestFinished(record: RequestRecord): void {
    const bucket = this.current();
    bucket.requests++;
    if (record.outcome !== "ok" && record.outcome !== "cancelled") bucket.errors++;
    bucket.promptTokens += record.promptTokens;
    bucket.cachedTokens += record.cachedTokens;
    if (record.placement) bucket.placements[record.placement.reason] = (bucket.placements[record.placement.reason] ?? 0) + 1;
    if (record.ttftMs !== undefined) {
      // Past the cap, the i-th TTFT replaces a kept one with probability cap / i (reservoir sampling).
      bucket.ttftSeen++;
      if (bucket.ttftMs.length < TTFT_SAMPLES) bucket.ttftMs.push(record.ttftMs);
      else {
        const index = Math.floor(Math.random() * bucket.ttftSeen);
        if (index < TTFT_SAMPLES) bucket.ttftMs[index] = record.ttftMs;
      }
    }
  }

  /** Every bucket of the window, oldest first, empty ones included. */
  points(): ActivityPoint[] {
    const last = this.bucketStart(this.now());
    const byStart = new Map(this.buckets.map((bucket) => [bucket.start, bucket]));
    const points: ActivityPoint[] = [];
    for (let i = BUCKETS - 1; i >= 0; i--) {
      const start = last - i * BUCKET_MS;
      const bucket = byStart.get(start);
      const sorted = [...(bucket?.ttftMs ?? [])].sort((a, b) => a - b);
      points.push({
        t: start,
        requests: bucket?.requests ?? 0,
        errors: bucket?.errors ?? 0,
        cachedFraction: bucket && bucket.promptTokens > 0 ? bucket.cachedTokens / bucket.promptTokens : null,
        placements: { ...(bucket?.placements ?? {}) },
        ttftP50Ms: percentile(sorted, 0.5),
        ttftP90Ms: percentile(sorted, 0.9),
        ttftP99Ms: percentile(sorted, 0.99),
      });
    }
    return points;
  }

  private bucketStart(time: number): number {
    return Math.floor(time / BUCKET_MS) * BUCKET_MS;
  }

  private current(): Bucket {
    const start = this.bucketStart(this.now());
    let bucket = this.buckets.at(-1);
    if (bucket?.start !== start) {
      bucket = { start, requests: 0, errors: 0, promptTokens: 0, cachedTokens: 0, placements: {}, ttftMs: [], ttftSeen: 0 };
      this.buckets.push(bucket);
      while (this.buckets.length > 0 && this.buckets[0]!.start <= start - BUCKETS * BUCKET_MS) this.buckets.shift();
    }
    return bucket;
  }
}

/** Nearest-rank percentile of ascending values; null when there are none. */
function percentile(sorted: readonly number[], q: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
}
