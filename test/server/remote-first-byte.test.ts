// An engine elsewhere that answers its health checks but never answers a generation (a
// half-open path: here a proxy in front of a real engine that holds every generation request
// it sees without a byte of answer). With `firstByteTimeoutS`, the router closes that
// connection once the timeout passes (the engine drops the request) and places the request
// on another engine, since nothing reached the client yet; with no other engine, the client
// gets a 504 `engine_timeout`. For each kind of remote engine (llama-server, a Radixgate host,
// an OpenAI-compatible server), plain and streamed.
import { createServer, type IncomingMessage, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LlamaServerProcess } from "../../src/engine/llama-server/server-process.js";
import { startLlamaServers } from "../helpers/remote-engines.js";
import { startTestServer, TINY_MODEL, type TestServer } from "../helpers/server.js";
import { streamChat } from "../helpers/stream-chat.js";
import { until } from "../helpers/until.js";

/** Paths that start a generation on each kind of engine. */
const GENERATIONS = new Set(["/completion", "/v1/completions", "/v1/radixgate/generate"]);

interface StallingProxy {
  url: string;
  /** Off until the router in front has started (its calibration requests pass). */
  stalling: boolean;
  /** Generation requests held without an answer, and those of them whose connection the router closed. */
  held: number;
  dropped: number;
  close(): Promise<void>;
}

/** A proxy to `target` that passes everything through but, once `stalling`, holds every generation request silently. */
async function stallingProxy(target: string): Promise<StallingProxy> {
  const state = { held: 0, dropped: 0, stalling: false };
  const server: Server = createServer((incoming: IncomingMessage, outgoing) => {
    const path = (incoming.url ?? "/").split("?")[0]!;
    if (state.stalling && incoming.method === "POST" && GENERATIONS.has(path)) {
      state.held++;
      incoming.resume();
      outgoing.on("close", () => state.dropped++);
      return;
    }
    const upstream = httpRequest(`${target}${incoming.url}`, { method: incoming.method, headers: incoming.headers, agent: false }, (answer) => {
      outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(outgoing);
    });
    upstream.on("error", () => outgoing.destroy());
    outgoing.on("close", () => upstream.destroy());
    incoming.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    get stalling() {
      return state.stalling;
    },
    set stalling(on: boolean) {
      state.stalling = on;
    },
    get held() {
      return state.held;
    },
    get dropped() {
      return state.dropped;
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const SYSTEM = "You answer from behind a router that keeps its engines honest. ".repeat(8);

async function chat(router: TestServer, question: string) {
  const response = await fetch(`${router.baseURL}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: TINY_MODEL,
      messages: [
        { role: "system", content: SYSTEM },
        { role: "user", content: question },
      ],
      max_tokens: 6,
      temperature: 0,
    }),
  });
  const body = (await response.json()) as {
    choices?: { message: { content: string } }[];
    error?: { message: string; type: string; param: unknown; code: string };
  };
  return { status: response.status, worker: response.headers.get("x-radixgate-worker"), body };
}

async function failovers(router: TestServer): Promise<number> {
  const text = await (await fetch(`${router.baseURL.replace(/\/v1$/, "")}/metrics`)).text();
  return text
    .split("\n")
    .filter((line) => line.startsWith("radixgate_failovers_total"))
    .reduce((sum, line) => sum + Number(line.split(" ").pop()), 0);
}

describe("a remote engine that sends no first byte", () => {
  const servers: LlamaServerProcess[] = [];
  const hosts: TestServer[] = [];
  const proxies: StallingProxy[] = [];
  const routers: TestServer[] = [];

  beforeAll(async () => {
    servers.push(...(await startLlamaServers(2)));
    for (let i = 0; i < 2; i++) hosts.push(await startTestServer({ workers: 1 }));
  });

  afterAll(async () => {
    await Promise.allSettled(routers.map((router) => router.close()));
    await Promise.allSettled(proxies.map((proxy) => proxy.close()));
    await Promise.allSettled(hosts.map((host) => host.close()));
    await Promise.allSettled(servers.map((server) => server.close(1000)));
  });

  /** A router in front of `stalled` (through a stalling proxy) and, when given, `healthy`, with a 1 s first-byte timeout. */
  async function routerFor(kind: string, stalled: string, healthy?: string): Promise<{ router: TestServer; proxy: StallingProxy }> {
    const proxy = await stallingProxy(stalled);
    proxies.push(proxy);
    const entry = (url: string) => ({ kind, url, firstByteTimeoutS: 1, ...(kind === "openai" ? { slots: 2 } : {}) });
    const router = await startTestServer({
      workers: 0,
      // Fewest in flight, first worker among equals: an idle pair sends every request to w0
      // first, and so would a second try that did not avoid the silent engine.
      policy: "least-load",
      remoteEntries: [entry(proxy.url), ...(healthy ? [entry(healthy)] : [])],
    });
    routers.push(router);
    proxy.stalling = true;
    return { router, proxy };
  }

  const baseOf = (host: TestServer) => host.baseURL.replace(/\/v1$/, "");
  const kinds = [
    { kind: "llama-server", stalled: () => servers[0]!.baseURL, healthy: () => servers[1]!.baseURL },
    { kind: "radixgate", stalled: () => baseOf(hosts[0]!), healthy: () => baseOf(hosts[1]!) },
    { kind: "openai", stalled: () => servers[0]!.baseURL, healthy: () => servers[1]!.baseURL },
  ];

  for (const { kind, stalled, healthy } of kinds) {
    for (const streamed of [false, true]) {
      it(`${kind}, ${streamed ? "streamed" : "plain"}: a request whose engine stays silent runs on the other engine, and the silent one is told to drop it`, async () => {
        const { router, proxy } = await routerFor(kind, stalled(), healthy());
        // Both engines idle: least-load takes w0, the silent one, first.
        if (streamed) {
          const seen = await streamChat(router, "Which engine answers, streamed?", 6);
          expect([seen.status, seen.error, seen.contentChunks > 0]).toEqual([200, undefined, true]);
        } else {
          const plain = await chat(router, "Which engine answers?");
          expect([plain.status, plain.worker]).toEqual([200, "w1"]);
          expect(plain.body.choices?.[0]?.message.content.length).toBeGreaterThan(0);
        }
        // It was held on w0, its connection closed by the router, and it was placed again.
        expect(proxy.held).toBe(1);
        await until(
          async () => proxy.dropped,
          (dropped) => dropped === 1,
          100,
        );
        expect(proxy.dropped).toBe(1);
        expect(await failovers(router)).toBe(1);
      });
    }
  }

  it("with no other engine the client gets a 504 engine_timeout in OpenAI's shape, plain and streamed, and the server stays up", async () => {
    const { router, proxy } = await routerFor("llama-server", servers[0]!.baseURL);
    const plain = await chat(router, "Anyone there?");
    expect(plain.status).toBe(504);
    expect(plain.body.error).toMatchObject({ type: "timeout_error", code: "engine_timeout", param: null });
    expect(plain.body.error!.message).toMatch(/firstByteTimeoutS/);
    const streamed = await streamChat(router, "Anyone there, streamed?", 6);
    expect(streamed.error?.code).toBe("engine_timeout");
    await until(
      async () => proxy.dropped,
      (dropped) => dropped === 2,
      100,
    );
    expect([proxy.held, proxy.dropped]).toEqual([2, 2]);
    expect((await fetch(`${router.baseURL.replace(/\/v1$/, "")}/health`)).status).toBe(200);
  });
});
