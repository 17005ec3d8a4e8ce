// Radixgate in front of other Radixgate hosts: two engine hosts (real servers in child
// processes, the tiny model, one worker of 2 slots each) and routers in front of both
// (`models[].remote: [{kind: radixgate, url}]`, no local worker). What a router knows of a
// host's cache comes from the host's event stream, so a second router that never saw a
// conversation sends its next turn where the first router sent the last one; a router started
// later learns the hosts' caches from the stream's snapshot; and a host killed mid-burst costs
// no request that had not received a token, leaves the routers' trees at once, and is taken
// back when it answers again.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify as stringifyYaml } from "yaml";
import { freePort } from "../helpers/remote-engines.js";
import { type CopySample, type DecodeSample, type PrefillSample, TimeModel } from "../../src/scheduler/time-model.js";
import { salted } from "../helpers/salt.js";
import { healthOf, startTestServer, TINY_MODEL, type TestServer } from "../helpers/server.js";
import { streamChat, type StreamSeen } from "../helpers/stream-chat.js";
import { until } from "../helpers/until.js";

/** A Radixgate host in a process of its own (so that it can be killed for real), on `port`. */
async function startHost(port: number): Promise<ChildProcess> {
  const dir = mkdtempSync(join(tmpdir(), "radixgate-host-"));
  const config = join(dir, "config.yml");
  writeFileSync(
    config,
    stringifyYaml({
      server: { host: "127.0.0.1", port, logLevel: "warn" },
      models: [{ id: TINY_MODEL, source: "preset:tiny", workers: 1, slots: 2, contextSize: 2048, threads: 1, isolation: "thread" }],
    }),
  );
  const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts", "serve", "--config", config], { stdio: ["ignore", "ignore", "inherit"] });
  const ready = await until(
    () =>
      fetch(`http://127.0.0.1:${port}/ready`).then(
        (response) => response.status,
        () => 0,
      ),
    (status) => status === 200 || child.exitCode !== null,
    2400,
  );
  if (ready !== 200) throw new Error(`the host on port ${port} did not get ready (exit ${child.exitCode})`);
  return child;
}

interface Served {
  worker: string;
  cachedTokens: number;
  content: string;
  promptTokens: number;
  completionTokens: number;
  /** The prompt tokens the router's tree found on a host when it placed the request. */
  matchedTokens: number;
}

async function chat(router: TestServer, messages: { role: string; content: string }[], headers: Record<string, string> = {}): Promise<Served> {
  const response = await fetch(`${router.baseURL}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ model: TINY_MODEL, messages, max_tokens: 12, temperature: 0 }),
  });
  expect(response.status).toBe(200);
  const body = (await response.json()) as { choices: { message: { content: string } }[]; usage: { prompt_tokens: number; completion_tokens: number } };
  return {
    worker: response.headers.get("x-radixgate-worker")!,
    cachedTokens: Number(response.headers.get("x-radixgate-cached-tokens")),
    content: body.choices[0]!.message.content,
    promptTokens: body.usage.prompt_tokens,
    completionTokens: body.usage.completion_tokens,
    matchedTokens: Number(/matched=(\d+)/.exec(response.headers.get("x-radixgate-placement") ?? "")?.[1]),
  };
}

/** What a router's tree holds of each of its workers (the hosts), in tokens. */
const treeTokens = (router: TestServer) => Object.fromEntries(router.radixgate.scheduler.views().map((view) => [view.id, view.kvTokens]));

describe("routers in front of Radixgate hosts", () => {
  const hosts: ChildProcess[] = [];
  const ports: number[] = [];
  let first: TestServer;
  let second: TestServer;
  const conversations: { messages: { role: string; content: string }[]; worker: string }[] = [];

  beforeAll(async () => {
    ports.push(await freePort(), await freePort());
    hosts.push(...(await Promise.all(ports.map(startHost))));
    const urls = ports.map((port) => `http://127.0.0.1:${port}`);
    [first, second] = (await Promise.all([0, 1].map(() => startTestServer({ workers: 0, remoteHosts: urls, policy: "preble" })))) as [TestServer, TestServer];
  });

  afterAll(async () => {
    await Promise.allSettled([first?.close(), second?.close()]);
    for (const host of hosts) if (host.exitCode === null) host.kill("SIGKILL");
  });

  it("sees each host as one worker with all of its slots, exact, and the host's events carry its snapshot", async () => {
    const health = await healthOf(first);
    expect(health.workers.map((worker) => [worker.id, worker.engine, worker.isolation, worker.precision, worker.slots, worker.alive])).toEqual([
      ["w0", "radixgate", "remote", "exact", 2, true],
      ["w1", "radixgate", "remote", "exact", 2, true],
    ]);
    expect(health.workers.map((worker) => worker.url)).toEqual(ports.map((port) => `http://127.0.0.1:${port}`));

    // The host's side: a snapshot first, with its worker, slots, calibration and model identity.
    const abort = new AbortController();
    const response = await fetch(`http://127.0.0.1:${ports[0]}/v1/radixgate/events?model=${TINY_MODEL}`, { signal: abort.signal });
    expect(response.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const reader = response.body!.getReader();
    let text = "";
    while (!text.includes("\n\n")) text += new TextDecoder().decode((await reader.read()).value);
    abort.abort();
    const snapshot = JSON.parse(text.slice(text.indexOf("data: ") + 6, text.indexOf("\n\n"))) as {
      type: string;
      workers: { id: string; slots: number[][]; calibration: { prefill: PrefillSample[]; decode: DecodeSample[]; copy: CopySample[] } }[];
      fingerprint: string;
    };
    expect(snapshot.type).toBe("snapshot");
    expect(snapshot.workers.map((worker) => [worker.id, worker.slots.length])).toEqual([["w0", 2]]);
    const calibration = snapshot.workers[0]!.calibration;
    expect(calibration.prefill.length).toBeGreaterThan(0);
    // Its measured state saves and loads too: the router prices a stored state's load on the
    // host from them, not as a recompute.
    expect(calibration.copy.length).toBeGreaterThan(0);
    const fitted = TimeModel.fit(calibration.prefill, calibration.decode, calibration.copy);
    expect(first.radixgate.scheduler.timeModel("w0")!.coefficients).toMatchObject({ copyBase: fitted.copyBase, copyPerToken: fitted.copyPerToken });
    expect(snapshot.fingerprint).toMatch(/^\d+:[0-9a-f]{32}$/);
  });

  it("refuses a bad event stream request in OpenAI's shape", async () => {
    const unknown = await fetch(`http://127.0.0.1:${ports[0]}/v1/radixgate/events?model=nope`);
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: { code: string } }).error.code).toBe("model_not_found");
    const missing = await fetch(`http://127.0.0.1:${ports[0]}/v1/radixgate/events`);
    expect(missing.status).toBe(400);
    expect(((await missing.json()) as { error: { code: string; param: string } }).error.code).toBe("invalid_request");
  });

  it("sends a conversation's next turn, through another router, to the host that holds its start", async () => {
    for (let i = 0; i < 4; i++) {
      const messages = [
        { role: "system", content: `You are assistant number ${i}. `.repeat(40) },
        { role: "user", content: `Question ${i}: what comes next?` },
      ];
      // The first turn goes through the first router, to each host in turn.
      const turn1 = await chat(first, messages, { "x-radixgate-worker": `w${i % 2}` });
      expect(turn1.worker).toBe(`w${i % 2}`);
      // The second router never saw it; the host's events tell it where the prompt is.
      const known = await until(
        async () => treeTokens(second)[turn1.worker] ?? 0,
        (tokens) => tokens >= 200,
      );
      expect(known).toBeGreaterThanOrEqual(200);
      const next = [...messages, { role: "assistant", content: turn1.content }, { role: "user", content: "And after that?" }];
      // The host reports the first answer's tokens with the prompt, and its events carry them:
      // the second router matches through the answer.
      await until(
        async () => treeTokens(second)[turn1.worker] ?? 0,
        (tokens) => tokens >= turn1.promptTokens + turn1.completionTokens - 1,
      );
      const turn2 = await chat(second, next);
      expect(turn2.worker).toBe(turn1.worker);
      expect(turn2.cachedTokens).toBeGreaterThanOrEqual(200);
      // (The answer's last token is sampled, never evaluated: completion_tokens - 1 of it are held.)
      expect(turn2.matchedTokens).toBeGreaterThanOrEqual(turn1.promptTokens + turn1.completionTokens - 1);
      expect(turn2.cachedTokens).toBeGreaterThanOrEqual(turn1.promptTokens + turn1.completionTokens - 1);
      conversations.push({ messages: [...next, { role: "assistant", content: turn2.content }], worker: turn1.worker });
    }
  });

  it("a router started later learns the hosts' caches from the snapshot", async () => {
    await second.close();
    second = await startTestServer({ workers: 0, remoteHosts: ports.map((port) => `http://127.0.0.1:${port}`), policy: "preble" });
    // Before it served anything, its tree already holds what the hosts hold.
    const tokens = treeTokens(second);
    expect(tokens.w0).toBeGreaterThanOrEqual(200);
    expect(tokens.w1).toBeGreaterThanOrEqual(200);
    const last = conversations.at(-1)!;
    const turn3 = await chat(second, [...last.messages, { role: "user", content: "One more?" }]);
    expect(turn3.worker).toBe(last.worker);
    expect(turn3.cachedTokens).toBeGreaterThanOrEqual(200);
  });

  it("sends an agent's next turn to the host whose worker stored its history, once no slot there holds it", async () => {
    const stored = (router: TestServer) => router.radixgate.scheduler.stateSizes().storedStates ?? 0;
    const before = stored(second);
    // A history long enough that loading it clearly beats computing it, on the host's measured
    // speeds (a short one may rightly be computed on the idle host instead).
    const messages = [
      { role: "system", content: salted(400) },
      { role: "user", content: "Step 1: what comes next?" },
    ];
    const turn1 = await chat(second, messages, { "x-radixgate-worker": "w0" });
    // Two other prompts take both slots of that host's one worker: it saves the history to its
    // store first, and its event stream says so. They go through the same router, so its own
    // load sits on w0: a turn that saw no history anywhere would go to w1.
    for (let i = 0; i < 2; i++) await chat(second, [{ role: "user", content: salted(120) }], { "x-radixgate-worker": "w0" });
    const known = await until(
      async () => stored(second),
      (count) => count > before,
    );
    expect(known).toBeGreaterThan(before);
    expect(treeTokens(second).w0).toBeGreaterThan(0);
    const next = [...messages, { role: "assistant", content: turn1.content }, { role: "user", content: "Step 2: and then?" }];
    const turn2 = await chat(second, next);
    expect(turn2.worker).toBe("w0");
    // The router's match was the store's, and the host loaded it: the history was not computed again.
    expect(turn2.matchedTokens).toBeGreaterThanOrEqual(turn1.promptTokens);
    expect(turn2.cachedTokens).toBeGreaterThanOrEqual(turn1.promptTokens);
  });

  it("loses no request without a first token when a host is killed mid-burst, forgets its cache at once, and takes it back", async () => {
    // w0 is the first host. Its tree entry is full from the conversations above.
    expect(treeTokens(first).w0).toBeGreaterThan(0);
    const burst = Array.from({ length: 8 }, (_, i) => streamChat(first, `Burst request ${i}: ${"tell me a story. ".repeat(20)}`, 48));
    await until(
      async () => first.radixgate.scheduler.views().find((view) => view.id === "w0")!.inFlight,
      (inFlight) => inFlight > 0,
    );
    hosts[0]!.kill("SIGKILL");
    const seen: StreamSeen[] = await Promise.all(burst);
    // Every request either completed or failed after some of its answer reached the client.
    for (const request of seen) {
      expect(request.status).toBe(200);
      if (request.error) expect(request.contentChunks).toBeGreaterThan(0);
    }
    expect(seen.filter((request) => !request.error).length).toBeGreaterThan(0);
    const down = await until(
      async () => (await healthOf(first)).workers[0]!.alive,
      (alive) => !alive,
    );
    expect(down).toBe(false);
    expect(treeTokens(first).w0).toBe(0);
    // The other router saw it go too.
    await until(
      async () => (await healthOf(second)).workers[0]!.alive,
      (alive) => !alive,
    );
    expect(treeTokens(second).w0).toBe(0);

    // Back on the same port: the routers connect again and place on it.
    hosts[0] = await startHost(ports[0]!);
    const back = await until(
      async () => (await healthOf(first)).workers[0]!,
      (worker) => worker.alive,
      2400,
    );
    expect(back).toMatchObject({ alive: true, restarts: 1 });
    const served = await chat(first, [{ role: "user", content: "Are you back?" }], { "x-radixgate-worker": "w0" });
    expect(served.worker).toBe("w0");
  });
});

describe("a host that answers /health but fails every request", () => {
  let bad: TestServer;
  let good: TestServer;
  let router: TestServer;
  const hostURL = (server: TestServer) => server.baseURL.replace(/\/v1$/, "");

  beforeAll(async () => {
    // Its deadline is 1 ms: every generation there ends in a 504, while it stays healthy.
    [bad, good] = (await Promise.all([startTestServer({ workers: 1, requestTimeoutMs: 1 }), startTestServer({ workers: 1 })])) as [TestServer, TestServer];
    router = await startTestServer({
      workers: 0,
      remoteHosts: [hostURL(bad), hostURL(good)],
      policy: "preble",
      scheduler: { breakerFailures: 3, breakerOpenMs: 600_000 },
    });
  });

  afterAll(async () => {
    await Promise.allSettled([router?.close(), bad?.close(), good?.close()]);
  });

  it("is held out of placement once its circuit opens, and requests go to the other host", async () => {
    for (let i = 0; i < 3; i++) {
      const failed = await fetch(`${router.baseURL}/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-radixgate-worker": "w0" },
        body: JSON.stringify({ model: TINY_MODEL, messages: [{ role: "user", content: `fail ${i}` }], max_tokens: 8 }),
      });
      // The host's deadline passes before its slot took the request (its 504 passed on) or after
      // (the host's stream ends with an error event: the worker failed): the host's fault either way.
      const code = ((await failed.json()) as { error: { code: string } }).error.code;
      expect([`${failed.status} ${code}`]).toEqual([expect.stringMatching(/^(504 deadline_exceeded|500 worker_failed)$/)]);
    }
    const health = await healthOf(router);
    expect(health.workers[0]).toMatchObject({ alive: true, circuit: "open" });
    expect(health.workers[0]!.circuit_reason).toMatch(/Radixgate host/);
    expect(health.workers[1]).toMatchObject({ alive: true, circuit: "closed" });
    for (let i = 0; i < 4; i++) {
      const served = await chat(router, [{ role: "user", content: `After the breaker opened, request ${i}` }]);
      expect(served.worker).toBe("w1");
    }
  });
});
