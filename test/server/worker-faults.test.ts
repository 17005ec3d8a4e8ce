// A worker killed mid-run, in each isolation (a crash in its thread, SIGKILL of its process)
// and with each engine (SIGKILL of a llama-server worker's process):
// no request without a first token is lost (they are placed again on the live worker), the
// worker comes back with the live settings, the server never stops answering.
import { until } from "../helpers/until.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { healthOf, startTestServer, TINY_MODEL, type TestServer } from "../helpers/server.js";
import { streamChat } from "../helpers/stream-chat.js";

/** Tokens the worker has decoded so far. */
async function decodedOn(server: TestServer, workerId: string): Promise<number> {
  return (await server.radixgate.fleet.get(workerId)!.engine.stats()).decodeTokens;
}

/** Waits until the worker holds a request and has decoded 20 more tokens than `decoded`. */
async function untilGenerating(server: TestServer, workerId: string, decoded: number): Promise<void> {
  await until(
    () => healthOf(server),
    (h) => (h.workers.find((worker) => worker.id === workerId)?.in_flight ?? 0) >= 1,
  );
  await until(
    () => decodedOn(server, workerId),
    (tokens) => tokens > decoded + 20,
  );
}

/** Kills a worker for real: a crash in its thread (its fatal path), SIGKILL of its process. */
async function kill(server: TestServer, workerId: string): Promise<void> {
  const engine = server.radixgate.fleet.get(workerId)!.engine;
  if (engine.isolation === "process") process.kill(engine.pid!, "SIGKILL");
  else await engine.crash();
}

/** Every way a worker runs; thread isolation is the default on CPU and on a one-GPU box: it goes first. */
const WORKER_MODES = [
  { mode: "thread isolation", isolation: "thread", engine: "node-llama-cpp" },
  { mode: "process isolation", isolation: "process", engine: "node-llama-cpp" },
  // A llama-server worker is a process of its own.
  { mode: "the llama-server engine", isolation: "process", engine: "llama-server" },
] as const;

describe.each(WORKER_MODES)("$mode: a worker that dies", ({ isolation, engine }) => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startTestServer({ workers: 2, slots: 1, policy: "roundrobin", isolation, engine });
  });

  afterAll(async () => {
    await server?.close();
  });

  it(`runs every worker as a ${isolation} of the ${engine} engine`, async () => {
    const { workers } = await healthOf(server);
    expect(workers.map((worker) => worker.isolation)).toEqual([isolation, isolation]);
    expect(workers.map((worker) => worker.engine)).toEqual([engine, engine]);
    const pids = server.radixgate.fleet.workers.map((worker) => worker.engine.pid);
    if (isolation === "process") expect(pids.every((pid) => typeof pid === "number" && pid !== process.pid)).toBe(true);
    else expect(pids).toEqual([undefined, undefined]);
  });

  it("mid-burst: no request without a first token fails, the worker comes back with the live settings", async () => {
    // A live change of the local scheduler's settings, as a config reload makes it.
    const local = { ...server.radixgate.fleet.get("w0")!.engine.init.local, quotaPerGroup: 7 };
    await Promise.all(server.radixgate.fleet.workers.map((worker) => worker.engine.configure(local)));
    const before = await healthOf(server);
    // A non-streamed request takes one worker's only slot; streams queue behind it there.
    const plain = server.client.chat.completions.create({ model: TINY_MODEL, messages: [{ role: "user", content: "plain" }], max_tokens: 600, temperature: 0 });
    const holding = await until(
      () => healthOf(server),
      (h) => h.workers.some((worker) => worker.in_flight === 1),
    );
    const victim = holding.workers.find((worker) => worker.in_flight === 1)!.id;
    const decoded = await decodedOn(server, victim);
    const streams = Array.from({ length: 7 }, (_, i) => streamChat(server, `job ${i}`, 600));
    const busy = await until(
      () => healthOf(server),
      (h) => (h.workers.find((worker) => worker.id === victim)?.in_flight ?? 0) >= 2,
    );
    expect(busy.workers.find((worker) => worker.id === victim)!.in_flight).toBeGreaterThanOrEqual(2);
    // The non-streamed answer is being generated (tokens made, none sent: the client gets it whole).
    await until(
      () => decodedOn(server, victim),
      (tokens) => tokens > decoded + 20,
    );
    await kill(server, victim);

    // The non-streamed request had received nothing: placed again, answered in full.
    const answer = await plain;
    expect(answer.usage?.completion_tokens).toBe(600);
    // So were the streams queued behind it: none had a token out, none fails.
    const seen = await Promise.all(streams);
    for (const stream of seen) expect(stream).toMatchObject({ status: 200, completionTokens: 600 });
    expect(seen.filter((stream) => stream.error !== undefined)).toEqual([]);
    const after = await healthOf(server);
    expect(after.failovers).toBeGreaterThanOrEqual(before.failovers + 2);
    const metrics = await (await fetch(server.baseURL.replace(/\/v1$/, "/metrics"))).text();
    expect(metrics).toMatch(new RegExp(`radixgate_failovers_total\\{worker="${victim}"\\} [2-9]`));

    // The worker comes back on its own, with the settings of the live change, and serves again.
    const back = await until(
      () => healthOf(server),
      (h) => h.workers.find((worker) => worker.id === victim)?.alive === true,
    );
    expect(back.workers.find((worker) => worker.id === victim)).toMatchObject({ alive: true, restarts: 1 });
    const restarted = await (await fetch(server.baseURL.replace(/\/v1$/, "/metrics"))).text();
    expect(restarted).toMatch(new RegExp(`radixgate_worker_restarts_total\\{worker="${victim}"\\} 1`));
    expect((await server.radixgate.fleet.get(victim)!.engine.stats()).local.quotaPerGroup).toBe(7);
    const pinned = await server.client.chat.completions.create(
      { model: TINY_MODEL, messages: [{ role: "user", content: "back?" }], max_tokens: 3 },
      { headers: { "x-radixgate-worker": victim } },
    );
    expect(pinned.usage?.completion_tokens).toBe(3);
  });

  it("while streaming a request: the stream ends with an error event naming the request, nothing internal", async () => {
    // Pinned requests are never placed again; this one is streaming from w1 when w1 dies.
    const decoded = await decodedOn(server, "w1");
    const running = streamChat(server, "long", 1900, { "x-radixgate-worker": "w1", "x-request-id": "req-doomed" });
    // Let it put tokens on the wire first.
    await untilGenerating(server, "w1", decoded);
    await kill(server, "w1");
    const seen = await running;
    expect(seen.contentChunks).toBeGreaterThan(0);
    expect(seen.error).toMatchObject({ code: "worker_failed", message: expect.stringMatching(/request req-doomed/) });
    expect(seen.error!.message).not.toMatch(/\.ts:|node_modules|\n\s+at /);
    await until(
      () => healthOf(server),
      (h) => h.workers.find((worker) => worker.id === "w1")?.alive === true,
    );
  });

  it("while idle: it is reported down at once and restarted", async () => {
    const restarts = (await healthOf(server)).workers.find((worker) => worker.id === "w1")!.restarts;
    await kill(server, "w1");
    const down = await until(
      () => healthOf(server),
      (h) => h.workers.find((worker) => worker.id === "w1")?.alive === false,
    );
    expect(down.workers.find((worker) => worker.id === "w1")!.alive).toBe(false);
    const up = await until(
      () => healthOf(server),
      (h) => h.workers.find((worker) => worker.id === "w1")?.alive === true,
    );
    expect(up.workers.find((worker) => worker.id === "w1")).toMatchObject({ alive: true, restarts: restarts + 1 });
  });

  it("answers a pinned non-streamed request it was generating with a 500 naming the request id (pinned requests stay where they are sent)", async () => {
    const decoded = await decodedOn(server, "w1");
    // Greedy: sampled, the random tiny model soon writes bytes that are not UTF-8, which
    // llama-server refuses (model_output_rejected) before the kill could fail the request.
    const running = fetch(`${server.baseURL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-radixgate-worker": "w1", "x-request-id": "req-plain" },
      body: JSON.stringify({ model: TINY_MODEL, messages: [{ role: "user", content: "long" }], max_tokens: 1900, temperature: 0 }),
    });
    await untilGenerating(server, "w1", decoded);
    await kill(server, "w1");
    const response = await running;
    expect(response.status).toBe(500);
    const body = (await response.json()) as { error: { type: string; code: string; message: string } };
    expect(body.error).toMatchObject({ type: "server_error", code: "worker_failed" });
    expect(body.error.message).toMatch(/request req-plain/);
    await until(
      () => healthOf(server),
      (h) => h.workers.find((worker) => worker.id === "w1")?.alive === true,
    );
  });
});

describe.each(WORKER_MODES.filter((mode) => mode.isolation === "process"))("deadlines kept by the host, $mode", ({ engine }) => {
  let frozen: TestServer;

  beforeAll(async () => {
    frozen = await startTestServer({ workers: 1, slots: 2, isolation: "process", engine, requestTimeoutMs: 1500 });
  });

  afterAll(async () => {
    await frozen?.close();
  });

  async function inFlight(): Promise<number> {
    return (await healthOf(frozen)).workers[0]?.in_flight ?? 0;
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
    // Thawed, the worker receives the cancels, drops both requests and serves again. The
    // scheduler let go of them at the deadline; the worker's handle counts them until the
    // worker itself answers the cancels.
    await until(inFlight, (count) => count === 0);
    await until(
      async () => worker.inFlight,
      (count) => count === 0,
    );
    // Greedy, these answers never end early: both were dropped, neither ran to max_tokens.
    expect(worker.finished.cancelled - before.cancelled).toBe(2);
    expect(worker.finished.length - before.length).toBe(0);
    const quick = await frozen.client.chat.completions.create({ model: TINY_MODEL, messages: [{ role: "user", content: "short" }], max_tokens: 2 });
    expect(quick.usage?.completion_tokens).toBe(2);
  });
});
