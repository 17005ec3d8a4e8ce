// Late binding: when every worker of a model is full, a request waits at the host for a
// place (first come, first placed) instead of getting 429 at once; a client that leaves
// while it waits leaves the line; a wait longer than scheduler.maxQueueWaitMs ends in 429.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/load-config.js";
import { createRadixgate, type Radixgate } from "../../src/radixgate.js";
import { TINY_MODEL } from "../helpers/server.js";
import { until } from "../helpers/until.js";

/** One worker with one slot and no queue of its own: a second request has no place. */
async function start(isolation: "thread" | "process", maxQueueWaitMs: number): Promise<{ radixgate: Radixgate; base: string }> {
  const config = parseConfig({
    server: { port: 0, logLevel: "silent" },
    models: [{ id: TINY_MODEL, source: "preset:tiny", workers: 1, slots: 1, contextSize: 2048, isolation }],
    scheduler: { policy: "roundrobin", maxQueuePerWorker: 0, maxQueueWaitMs },
  });
  const radixgate = await createRadixgate({ config, path: "test", dir: process.cwd() });
  return { radixgate, base: await radixgate.listen() };
}

function chat(base: string, content: string, options: { maxTokens: number; stream?: boolean; signal?: AbortSignal }) {
  return fetch(`${base}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: TINY_MODEL,
      messages: [{ role: "user", content }],
      max_tokens: options.maxTokens,
      temperature: 0,
      stream: options.stream ?? false,
    }),
    ...(options.signal ? { signal: options.signal } : {}),
  });
}

async function waiting(base: string): Promise<number> {
  const health = (await (await fetch(`${base}/health`)).json()) as { waiting: Record<string, number> };
  return health.waiting[TINY_MODEL]!;
}

describe("waiting at the host for a place (thread workers)", () => {
  let server: { radixgate: Radixgate; base: string };

  beforeAll(async () => {
    server = await start("thread", 60_000);
  });

  afterAll(async () => {
    await server?.radixgate.close();
  });

  it("serves a burst beyond every worker's places, first come first placed, a stream included", async () => {
    const { base } = server;
    const finished: number[] = [];
    const requests = [chat(base, "first", { maxTokens: 400 })];
    for (let i = 1; i <= 4; i++) {
      // Each one joins the line after the one before it.
      await until(
        () => waiting(base),
        (count) => count === i - 1,
      );
      requests.push(chat(base, `waiter ${i}`, { maxTokens: 60, stream: i === 2 }));
    }
    await until(
      () => waiting(base),
      (count) => count === 4,
    );
    const answers = await Promise.all(
      requests.map(async (request, i) => {
        const response = await request;
        const text = await response.text();
        finished.push(i);
        return { status: response.status, text };
      }),
    );
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200, 200, 200]);
    expect(answers[2]!.text).toMatch(/data: \[DONE\]/);
    // One slot: each waiter ran after the one before it.
    expect(finished).toEqual([0, 1, 2, 3, 4]);
    expect(await waiting(base)).toBe(0);
  });

  it("takes a client that leaves while it waits out of the line (the worker never sees it), and serves the rest", async () => {
    const { base } = server;
    const worker = server.radixgate.fleet.get("w0")!.engine;
    const total = () => Object.values(worker.finished).reduce((sum, count) => sum + count, 0);
    const before = total();
    const busy = chat(base, "busy", { maxTokens: 400 });
    await until(
      async () => (await server.radixgate.scheduler.views())[0]!.inFlight,
      (count) => count === 1,
    );
    const leaving = new AbortController();
    const gone = chat(base, "leaving", { maxTokens: 10, signal: leaving.signal }).catch((error: Error) => error);
    await until(
      () => waiting(base),
      (count) => count === 1,
    );
    leaving.abort();
    expect(await gone).toBeInstanceOf(Error);
    expect(
      await until(
        () => waiting(base),
        (count) => count === 0,
      ),
    ).toBe(0);
    expect((await busy).status).toBe(200);
    expect((await chat(base, "after", { maxTokens: 4 })).status).toBe(200);
    // Two generations ran, "busy" and "after": the one that left was never placed.
    expect(total() - before).toBe(2);
  });
});

describe("a wait longer than scheduler.maxQueueWaitMs (process workers)", () => {
  let server: { radixgate: Radixgate; base: string };

  beforeAll(async () => {
    server = await start("process", 500);
  });

  afterAll(async () => {
    await server?.radixgate.close();
  });

  it("ends in 429 queue_full naming the setting, while the worker that holds the place is frozen", async () => {
    const { base, radixgate } = server;
    const worker = radixgate.fleet.get("w0")!.engine;
    const busy = chat(base, "held", { maxTokens: 1900 });
    await until(
      async () => worker.inFlight,
      (count) => count === 1,
    );
    process.kill(worker.pid!, "SIGSTOP");
    try {
      const refused = await chat(base, "no place", { maxTokens: 4 });
      expect(refused.status).toBe(429);
      expect(refused.headers.get("retry-after")).toBe("1");
      const body = (await refused.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe("queue_full");
      expect(body.error.message).toMatch(/no place freed within 500 ms \(scheduler\.maxQueueWaitMs\)/);
    } finally {
      process.kill(worker.pid!, "SIGCONT");
    }
    expect((await busy).status).toBe(200);
    expect(await waiting(base)).toBe(0);
  });
});
