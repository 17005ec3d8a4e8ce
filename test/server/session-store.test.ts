// Sessions shared between routers through Redis (`scheduler.sessionStore`): two routers in
// front of the same two real llama-servers, a real redis-server started here. A session's
// next request through the other router goes to the engine that served it, although that
// router never saw the session; a router without the store places it by its own policy; and
// a store that dies costs nothing but the sharing. Skipped, saying so, where redis-server is
// not installed (.ci/run installs Debian's).
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LlamaServerProcess } from "../../src/engine/llama-server/server-process.js";
import { freePort, startLlamaServers } from "../helpers/remote-engines.js";
import { startTestServer, TINY_MODEL, type TestServer } from "../helpers/server.js";
import { until } from "../helpers/until.js";

const REDIS = ["/usr/bin/redis-server", "/usr/sbin/redis-server"].find((path) => existsSync(path));
if (!REDIS) console.warn("redis-server is not installed: the shared session store's tests are skipped (apt-get install redis-server)");

/** A chat through `router`, plain or streamed; which worker served it and why (x-radixgate-placement). */
async function chat(router: TestServer, content: string, options: { session?: string; stream?: boolean } = {}) {
  const response = await fetch(`${router.baseURL}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(options.session ? { "x-session-id": options.session } : {}) },
    body: JSON.stringify({ model: TINY_MODEL, messages: [{ role: "user", content }], max_tokens: 4, temperature: 0, stream: options.stream === true }),
  });
  const text = await response.text();
  return {
    status: response.status,
    worker: response.headers.get("x-radixgate-worker"),
    reason: response.headers.get("x-radixgate-placement")?.split(";")[0],
    streamedTokens: text.split("\n").filter((line) => line.startsWith("data: {") && line.includes('"content"')).length,
  };
}

/** radixgate_session_store_lookups_total by outcome. */
async function storeLookups(router: TestServer): Promise<Record<string, number>> {
  const text = await (await fetch(`${router.baseURL.replace(/\/v1$/, "")}/metrics`)).text();
  const counts: Record<string, number> = {};
  for (const match of text.matchAll(/^radixgate_session_store_lookups_total\{outcome="(\w+)"\} (\d+)/gm)) counts[match[1]!] = Number(match[2]);
  return counts;
}

describe.skipIf(!REDIS)("sessions shared between routers through Redis", () => {
  const servers: LlamaServerProcess[] = [];
  const routers: TestServer[] = [];
  let redis: ChildProcess;
  let store: string;

  beforeAll(async () => {
    const port = await freePort();
    redis = spawn(REDIS!, ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], { stdio: "ignore" });
    store = `redis://127.0.0.1:${port}`;
    const up = await until(
      () =>
        new Promise<boolean>((resolve) => {
          const probe = connect(port, "127.0.0.1");
          probe.once("connect", () => {
            probe.destroy();
            resolve(true);
          });
          probe.once("error", () => resolve(false));
        }),
      (ok) => ok,
      200,
    );
    if (!up) throw new Error(`redis-server did not listen on ${port}`);
    servers.push(...(await startLlamaServers(2)));
  });

  afterAll(async () => {
    await Promise.allSettled(routers.map((router) => router.close()));
    await Promise.allSettled(servers.map((server) => server.close(1000)));
    redis?.kill("SIGKILL");
  });

  /** A router in front of both servers, with roundrobin (so that where it would go alone is known), sharing sessions or not. */
  async function router(shared: boolean): Promise<TestServer> {
    const started = await startTestServer({
      workers: 0,
      policy: "roundrobin",
      remote: servers.map((server) => server.baseURL),
      ...(shared ? { scheduler: { sessionStore: store } } : {}),
    });
    routers.push(started);
    return started;
  }

  it("a session's next request through the other router goes where the first router sent it, plain and streamed", async () => {
    const [a, b, alone] = [await router(true), await router(true), await router(false)];
    // Router A: a request without a session takes w0, so each session's first request takes w1.
    expect((await chat(a, "No session here.")).worker).toBe("w0");
    expect(await chat(a, "A plain session starts.", { session: "plain" })).toMatchObject({ status: 200, worker: "w1" });
    expect((await chat(a, "No session again.")).worker).toBe("w0");
    expect(await chat(a, "A streamed session starts.", { session: "streamed", stream: true })).toMatchObject({ status: 200, worker: "w1" });
    // Router B never saw either session; alone, roundrobin would send its first request to w0.
    expect(await chat(b, "The plain session goes on.", { session: "plain" })).toMatchObject({ status: 200, worker: "w1", reason: "session" });
    const streamed = await chat(b, "The streamed session goes on.", { session: "streamed", stream: true });
    expect(streamed).toMatchObject({ status: 200, worker: "w1", reason: "session" });
    expect(streamed.streamedTokens).toBeGreaterThan(0);
    expect(await storeLookups(b)).toMatchObject({ hit: 2, failed: 0 });
    // A router without the store knows nothing of them.
    expect(await chat(alone, "The plain session, elsewhere.", { session: "plain" })).toMatchObject({ status: 200, worker: "w0", reason: "roundrobin" });
  });

  it("a store that dies costs only the sharing: requests are still served", async () => {
    const b = routers[1]!;
    redis.kill("SIGKILL");
    await until(
      async () => redis.exitCode !== null || redis.signalCode !== null,
      (gone) => gone,
      200,
    );
    const served = await chat(b, "The store is gone.", { session: "after-the-store" });
    expect(served.status).toBe(200);
    const streamed = await chat(b, "The store is gone, streamed.", { session: "after-the-store-2", stream: true });
    expect([streamed.status, streamed.streamedTokens > 0]).toEqual([200, true]);
    expect((await fetch(`${b.baseURL.replace(/\/v1$/, "")}/health`)).status).toBe(200);
    expect((await storeLookups(b)).failed).toBeGreaterThanOrEqual(2);
  });
});
