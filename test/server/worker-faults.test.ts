// A worker process killed with SIGKILL mid-run: no queued request is lost (they are placed
// again on the live worker), the worker comes back, the server never stops answering.
import { until } from "../helpers/until.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, TINY_MODEL, type TestServer } from "../helpers/server.js";

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({ workers: 2, slots: 1, policy: "roundrobin", isolation: "process" });
});

afterAll(async () => {
  await server?.close();
});

interface Health {
  failovers: number;
  workers: { id: string; alive: boolean; in_flight: number; restarts: number; isolation: string }[];
}

async function health(): Promise<Health> {
  return (await (await fetch(server.baseURL.replace(/\/v1$/, "/health"))).json()) as Health;
}

describe("process isolation", () => {
  it("runs every worker in a process of its own", async () => {
    const { workers } = await health();
    expect(workers.map((worker) => worker.isolation)).toEqual(["process", "process"]);
    const pids = server.radixgate.fleet.workers.map((worker) => worker.engine.pid);
    expect(pids.every((pid) => typeof pid === "number" && pid !== process.pid)).toBe(true);
  });

  it("survives SIGKILL of a worker: queued requests go elsewhere, the worker restarts", async () => {
    const requests = Array.from({ length: 8 }, (_, i) =>
      server.client.chat.completions
        .create({ model: TINY_MODEL, messages: [{ role: "user", content: `job ${i}` }], max_tokens: 600, temperature: 0 })
        .then(
          (completion) => ({ ok: true as const, tokens: completion.usage?.completion_tokens ?? 0 }),
          (error: { status?: number; message: string }) => ({ ok: false as const, status: error.status, message: error.message }),
        ),
    );
    // Kill w0 once it has one request running and more waiting for its only slot.
    const before = await until(health, (h) => (h.workers.find((worker) => worker.id === "w0")?.in_flight ?? 0) >= 2);
    expect(before.workers.find((worker) => worker.id === "w0")!.in_flight).toBeGreaterThanOrEqual(2);
    process.kill(server.radixgate.fleet.get("w0")!.engine.pid!, "SIGKILL");

    const outcomes = await Promise.all(requests);
    const failed = outcomes.filter((outcome) => !outcome.ok);
    // At most the one request running in w0's only slot fails, with a clear error; the rest complete.
    expect(failed.length).toBeLessThanOrEqual(1);
    // 500 with the request id, nothing internal (no stack, no file paths).
    for (const failure of failed) {
      expect(failure).toMatchObject({ ok: false, status: 500, message: expect.stringMatching(/w0 stopped while generating this request \(request req-\d+/) });
      expect(failure.ok === false && failure.message).not.toMatch(/\.ts:|node_modules|at /);
    }
    for (const outcome of outcomes.filter((o) => o.ok)) expect(outcome).toMatchObject({ ok: true, tokens: 600 });
    expect((await health()).failovers).toBeGreaterThanOrEqual(1);
    const metrics = await (await fetch(server.baseURL.replace(/\/v1$/, "/metrics"))).text();
    expect(metrics).toMatch(/radixgate_failovers_total\{worker="w0"\} [1-9]/);

    // The worker comes back on its own, in a new process, and serves again.
    const after = await until(health, (h) => h.workers.find((worker) => worker.id === "w0")?.alive === true);
    const w0 = after.workers.find((worker) => worker.id === "w0")!;
    expect(w0).toMatchObject({ alive: true, restarts: 1 });
    const restarted = await (await fetch(server.baseURL.replace(/\/v1$/, "/metrics"))).text();
    expect(restarted).toMatch(/radixgate_worker_restarts_total\{worker="w0"\} 1/);
    const pinned = await server.client.chat.completions.create(
      { model: TINY_MODEL, messages: [{ role: "user", content: "back?" }], max_tokens: 3 },
      { headers: { "x-radixgate-worker": "w0" } },
    );
    expect(pinned.usage?.completion_tokens).toBe(3);
  });
});

describe("a worker that dies while generating", () => {
  it("answers the request it had started with a 500 naming the request id, nothing internal", async () => {
    // Pinned requests are never placed again; this one is running on w1 when w1 dies.
    const running = fetch(`${server.baseURL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-radixgate-worker": "w1", "x-request-id": "req-doomed" },
      body: JSON.stringify({ model: TINY_MODEL, messages: [{ role: "user", content: "long" }], max_tokens: 1900 }),
    });
    await until(health, (h) => (h.workers.find((worker) => worker.id === "w1")?.in_flight ?? 0) >= 1);
    process.kill(server.radixgate.fleet.get("w1")!.engine.pid!, "SIGKILL");
    const response = await running;
    expect(response.status).toBe(500);
    const body = (await response.json()) as { error: { type: string; code: string; message: string } };
    expect(body.error).toMatchObject({ type: "server_error", code: "worker_failed" });
    expect(body.error.message).toMatch(/request req-doomed/);
    expect(body.error.message).not.toMatch(/\.ts:|node_modules|\n\s+at /);
    await until(health, (h) => h.workers.find((worker) => worker.id === "w1")?.alive === true);
  });
});

describe("per-request deadlines", () => {
  let strict: TestServer;

  beforeAll(async () => {
    strict = await startTestServer({ workers: 1, slots: 1, requestTimeoutMs: 150 });
  });

  afterAll(async () => {
    await strict?.close();
  });

  it("cancels a request past generation.requestTimeoutMs with a 504, and keeps serving", async () => {
    // ~1900 tokens of the tiny model take well over the 150 ms deadline.
    const late = await strict.client.chat.completions
      .create({ model: TINY_MODEL, messages: [{ role: "user", content: "a long answer" }], max_tokens: 1900 })
      .then(
        () => undefined,
        (error: { status?: number; message: string }) => error,
      );
    expect(late?.status).toBe(504);
    expect(late?.message).toMatch(/deadline of 150 ms \(generation\.requestTimeoutMs\)/);
    const quick = await strict.client.chat.completions.create({ model: TINY_MODEL, messages: [{ role: "user", content: "short" }], max_tokens: 2 });
    expect(quick.usage?.completion_tokens).toBe(2);
  });
});

describe("deadlines kept by the host", () => {
  let frozen: TestServer;

  beforeAll(async () => {
    frozen = await startTestServer({ workers: 1, slots: 2, isolation: "process", requestTimeoutMs: 1500 });
  });

  afterAll(async () => {
    await frozen?.close();
  });

  async function inFlight(): Promise<number> {
    const body = (await (await fetch(frozen.baseURL.replace(/\/v1$/, "/health"))).json()) as Health;
    return body.workers[0]?.in_flight ?? 0;
  }

  it("answers 504 on time while the worker is frozen (SIGSTOP), streamed or not, and the worker drops the requests", async () => {
    const worker = frozen.radixgate.fleet.get("w0")!.engine;
    const pid = worker.pid!;
    const before = { ...worker.finished };
    const plain = frozen.client.chat.completions
      .create({ model: TINY_MODEL, messages: [{ role: "user", content: "frozen" }], max_tokens: 1900, temperature: 0 })
      .then(
        () => undefined,
        (error: { status?: number; message: string }) => error,
      );
    const streamed = fetch(`${frozen.baseURL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: TINY_MODEL, messages: [{ role: "user", content: "frozen stream" }], max_tokens: 1900, temperature: 0, stream: true }),
    }).then((response) => response.text());
    await until(inFlight, (count) => count >= 2);
    process.kill(pid, "SIGSTOP");
    try {
      const late = await plain;
      expect(late?.status).toBe(504);
      expect(late?.message).toMatch(/deadline of 1500 ms \(generation\.requestTimeoutMs\)/);
      // The stream had its headers out: it ends with an error event in OpenAI's shape.
      const events = await streamed;
      expect(events).toMatch(/"code":"deadline_exceeded"/);
    } finally {
      process.kill(pid, "SIGCONT");
    }
    // Thawed, the worker receives the cancels, drops both requests and serves again.
    await until(inFlight, (count) => count === 0);
    // Greedy, these answers never end early: both were dropped, neither ran to max_tokens.
    expect(worker.finished.cancelled - before.cancelled).toBe(2);
    expect(worker.finished.length - before.length).toBe(0);
    const quick = await frozen.client.chat.completions.create({ model: TINY_MODEL, messages: [{ role: "user", content: "short" }], max_tokens: 2 });
    expect(quick.usage?.completion_tokens).toBe(2);
  });
});
