// The rest of the error matrix: 413 body too large, 429 with Retry-After when queues are
// full (no request lost or left hanging), 503 with no live worker.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/load-config.js";
import { createRadixgate, type Radixgate } from "../../src/radixgate.js";
import { TINY_MODEL } from "../helpers/server.js";
import { until } from "../helpers/until.js";

let radixgate: Radixgate;
let base: string;

beforeAll(async () => {
  const config = parseConfig({
    server: { port: 0, logLevel: "warn", bodyLimitBytes: 64 * 1024, maxConcurrentRequests: 1000 },
    models: [{ id: TINY_MODEL, source: "preset:tiny", workers: 1, slots: 1, contextSize: 2048 }],
    // Refused at once: waiting at the host for a place is tested in late-binding.test.ts.
    scheduler: { policy: "preble", maxQueuePerWorker: 2, maxQueueWaitMs: 0 },
  });
  radixgate = await createRadixgate({ config, path: "test", dir: process.cwd() });
  base = await radixgate.listen();
});

afterAll(async () => {
  await radixgate?.close();
});

async function post(body: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(`${base}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  return {
    status: response.status,
    retryAfter: response.headers.get("retry-after"),
    body: (await response.json()) as { error?: { code: string; message: string; type: string } },
  };
}

describe("back-pressure and the rest of the error matrix", () => {
  it("answers a body over server.bodyLimitBytes with 413", async () => {
    const { status, body } = await post({ model: TINY_MODEL, messages: [{ role: "user", content: "x".repeat(100_000) }] });
    expect(status).toBe(413);
    expect(body.error).toMatchObject({ code: "body_too_large", type: "invalid_request_error" });
  });

  it("refuses a burst beyond the queue with 429 and Retry-After, and loses nothing", async () => {
    // One slot and a queue of 2: at most 3 requests on the worker at once.
    const burst = await Promise.all(
      Array.from({ length: 10 }, (_, i) => post({ model: TINY_MODEL, messages: [{ role: "user", content: `burst ${i}` }], max_tokens: 300 })),
    );
    const ok = burst.filter((response) => response.status === 200);
    const refused = burst.filter((response) => response.status === 429);
    expect(ok.length + refused.length).toBe(10); // every request answered, none hanging
    expect(ok.length).toBeGreaterThanOrEqual(3);
    expect(refused.length).toBeGreaterThanOrEqual(1);
    for (const response of refused) {
      expect(response.retryAfter).toBe("1");
      expect(response.body.error).toMatchObject({ code: "queue_full", type: "rate_limit_error" });
      expect(response.body.error!.message).toMatch(/scheduler\.maxQueuePerWorker/);
    }
    const after = await post({ model: TINY_MODEL, messages: [{ role: "user", content: "after" }], max_tokens: 2 });
    expect(after.status).toBe(200);
  });

  it("refuses a burst beyond a pinned worker's queue with 429 (not 503: the worker is alive)", async () => {
    const pinned = { "x-radixgate-worker": "w0" };
    const burst = await Promise.all(
      Array.from({ length: 8 }, (_, i) => post({ model: TINY_MODEL, messages: [{ role: "user", content: `pinned ${i}` }], max_tokens: 300 }, pinned)),
    );
    const refused = burst.filter((response) => response.status !== 200);
    expect(burst.filter((response) => response.status === 200).length).toBeGreaterThanOrEqual(3);
    expect(refused.length).toBeGreaterThanOrEqual(1);
    for (const response of refused) {
      expect(response.status).toBe(429);
      expect(response.retryAfter).toBe("1");
      expect(response.body.error).toMatchObject({
        code: "queue_full",
        message: expect.stringMatching(/Worker w0 \(named by x-radixgate-worker\) has a full queue/),
      });
    }
  });

  it("answers 503 with Retry-After when no worker of the model is alive, and recovers", async () => {
    radixgate.scheduler.setAlive("w0", false);
    const down = await post({ model: TINY_MODEL, messages: [{ role: "user", content: "anyone?" }], max_tokens: 2 });
    expect(down.status).toBe(503);
    expect(down.retryAfter).toBe("1");
    expect(down.body.error).toMatchObject({ code: "no_live_worker", type: "service_unavailable_error" });
    expect((await fetch(`${base}/ready`)).status).toBe(503);
    radixgate.scheduler.setAlive("w0", true);
    expect((await post({ model: TINY_MODEL, messages: [{ role: "user", content: "back" }], max_tokens: 2 })).status).toBe(200);
  });
});

describe("back-pressure while a worker restarts", () => {
  let server: Radixgate;
  let url: string;

  beforeAll(async () => {
    const config = parseConfig({
      server: { port: 0, logLevel: "silent" },
      models: [{ id: TINY_MODEL, source: "preset:tiny", workers: 2, slots: 1, contextSize: 2048, isolation: "thread" }],
      scheduler: { policy: "roundrobin", maxQueuePerWorker: 1, maxQueueWaitMs: 0 },
    });
    server = await createRadixgate({ config, path: "test", dir: process.cwd() });
    url = `${await server.listen()}/v1/chat/completions`;
  });

  afterAll(async () => {
    await server?.close();
  });

  const burst = (n: number) =>
    Promise.all(
      Array.from({ length: n }, async (_, i) => {
        const response = await fetch(url, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model: TINY_MODEL, messages: [{ role: "user", content: `restart ${i}` }], max_tokens: 200 }),
        });
        return { status: response.status, retryAfter: response.headers.get("retry-after"), body: (await response.json()) as { error?: { message: string } } };
      }),
    );

  it("tells a refused client to come back when the worker is expected back, not at once", async () => {
    const w0 = server.fleet.get("w0")!;
    await w0.engine.crash();
    await until(
      async () => w0.alive,
      (alive) => !alive,
    );
    const refused = (await burst(6)).filter((answer) => answer.status === 429);
    expect(refused.length).toBeGreaterThan(0);
    // The worker's last start took seconds (loading the model): that is the wait it names.
    for (const answer of refused) {
      expect(Number(answer.retryAfter)).toBeGreaterThanOrEqual(2);
      expect(answer.body.error!.message).toMatch(/restarting, expected back in about \d+ s/);
    }
    await until(
      async () => w0.alive,
      (alive) => alive,
    );
    const later = (await burst(8)).filter((answer) => answer.status === 429);
    for (const answer of later) expect(answer.retryAfter).toBe("1");
  });
});
