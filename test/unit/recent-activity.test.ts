// The status page's last ten minutes: 10-second buckets, a fixed window, percentiles per bucket.
import { describe, expect, it } from "vitest";
import type { RequestRecord } from "../../src/serving/observer.js";
import { BUCKET_MS, BUCKETS, RecentActivity } from "../../src/serving/recent-activity.js";

const record = (overrides: Partial<RequestRecord>): RequestRecord => ({
  requestId: "r",
  modelId: "m",
  outcome: "ok",
  totalMs: 10,
  promptTokens: 100,
  cachedTokens: 0,
  restoredTokens: 0,
  evictedTokens: 0,
  spilledTokens: 0,
  completionTokens: 5,
  ...overrides,
});

describe("RecentActivity", () => {
  it("counts requests, errors, placements and the cached fraction per bucket, and TTFT percentiles", () => {
    let now = 1_000 * BUCKET_MS;
    const activity = new RecentActivity(() => now);
    for (let ttft = 1; ttft <= 100; ttft++) {
      activity.requestFinished(
        record({ ttftMs: ttft, cachedTokens: 50, placement: { workerId: "w0", reason: ttft % 2 ? "exploit" : "explore", matchedTokens: 0 } }),
      );
    }
    activity.requestFinished(record({ outcome: "queue_full", promptTokens: 0 }));
    now += BUCKET_MS;
    activity.requestFinished(record({ ttftMs: 7, cachedTokens: 100 }));
    const points = activity.points();
    expect(points).toHaveLength(BUCKETS);
    const [previous, last] = points.slice(-2);
    expect(previous).toMatchObject({ t: 1_000 * BUCKET_MS, requests: 101, errors: 1, cachedFraction: 0.5, placements: { exploit: 50, explore: 50 } });
    expect([previous!.ttftP50Ms, previous!.ttftP90Ms, previous!.ttftP99Ms]).toEqual([50, 90, 99]);
    expect(last).toMatchObject({ requests: 1, cachedFraction: 1, ttftP50Ms: 7 });
    expect(points[0]).toMatchObject({ requests: 0, cachedFraction: null, ttftP50Ms: null });
  });

  it("forgets what is older than its window and keeps a bounded sample under any load", () => {
    let now = 0;
    const activity = new RecentActivity(() => now);
    activity.requestFinished(record({ ttftMs: 1 }));
    now = BUCKETS * BUCKET_MS;
    expect(activity.points().reduce((sum, point) => sum + point.requests, 0)).toBe(0);
    for (let i = 0; i < 5_000; i++) activity.requestFinished(record({ ttftMs: i }));
    const last = activity.points().at(-1)!;
    expect(last.requests).toBe(5_000);
    expect(last.ttftP99Ms).toBeGreaterThan(0);
    expect((activity as unknown as { buckets: { ttftMs: number[] }[] }).buckets.at(-1)!.ttftMs.length).toBe(512);
  });
});
