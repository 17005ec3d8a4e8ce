// Any OpenAI-compatible server as a worker (`models[].remote: [{kind: openai, url}]`): here two
// real llama-servers reached only through their OpenAI API (/v1/models, /v1/completions with
// token ids), behind a router with no local worker. The tree about them is approximate: it
// follows the router's own placements, so a conversation's next turn goes where its last one
// went, and a prompt nobody asked for within the TTL leaves the tree. A server that dies costs
// no request that had not received a token.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LlamaServerProcess } from "../../src/engine/llama-server/server-process.js";
import { startLlamaServers } from "../helpers/remote-engines.js";
import { healthOf, startTestServer, TINY_MODEL, type TestServer } from "../helpers/server.js";
import { streamChat, type StreamSeen } from "../helpers/stream-chat.js";
import { until } from "../helpers/until.js";

describe("OpenAI-compatible servers behind a router", () => {
  const servers: LlamaServerProcess[] = [];
  let router: TestServer;

  beforeAll(async () => {
    servers.push(...(await startLlamaServers(2)));
    router = await startTestServer({
      workers: 0,
      remoteEntries: servers.map((server) => ({ kind: "openai", url: server.baseURL, slots: 2, cacheTtlS: 2 })),
      policy: "preble",
    });
  });

  afterAll(async () => {
    await router?.close();
    await Promise.allSettled(servers.map((server) => server.close(1000)));
  });

  const chat = async (messages: { role: string; content: string }[], extra: Record<string, unknown> = {}) => {
    const response = await fetch(`${router.baseURL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: TINY_MODEL, messages, max_tokens: 8, temperature: 0, ...extra }),
    });
    return {
      status: response.status,
      worker: response.headers.get("x-radixgate-worker"),
      cached: Number(response.headers.get("x-radixgate-cached-tokens")),
      body: (await response.json()) as {
        choices?: { message: { content: string } }[];
        usage?: { completion_tokens: number };
        error?: { code: string; param: string };
      },
    };
  };
  const treeTokens = (id: string) => router.radixgate.scheduler.views().find((view) => view.id === id)!.kvTokens;

  it("sees each server as one worker of the slots it was given, approximate", async () => {
    const health = await healthOf(router);
    expect(health.workers.map((worker) => [worker.id, worker.engine, worker.isolation, worker.precision, worker.slots, worker.alive])).toEqual([
      ["w0", "openai", "remote", "approximate", 2, true],
      ["w1", "openai", "remote", "approximate", 2, true],
    ]);
  });

  it("answers through the server's completions API, sends the next turn where the last went, and forgets it after the TTL", async () => {
    const messages = [
      { role: "system", content: "You answer through an OpenAI server. ".repeat(30) },
      { role: "user", content: "First question?" },
    ];
    const first = await chat(messages);
    expect(first.status).toBe(200);
    expect(first.body.usage!.completion_tokens).toBeGreaterThan(0);
    expect(treeTokens(first.worker!)).toBeGreaterThanOrEqual(150);
    const second = await chat([...messages, { role: "assistant", content: first.body.choices![0]!.message.content }, { role: "user", content: "And then?" }]);
    expect(second.status).toBe(200);
    expect(second.worker).toBe(first.worker);
    expect(second.cached).toBeGreaterThanOrEqual(150);
    // Nobody asks for it again: after the TTL the tree no longer counts on the server having it.
    const left = await until(
      async () => treeTokens(first.worker!),
      (tokens) => tokens === 0,
      400,
    );
    expect(left).toBe(0);
  });

  it("streams too", async () => {
    const seen = await streamChat(router, "Stream through the OpenAI server", 8);
    expect(seen).toMatchObject({ status: 200, completionTokens: 8 });
    expect(seen.contentChunks).toBeGreaterThan(0);
  });

  it("refuses what such a server cannot be made to do, naming the parameter", async () => {
    const refused = await chat([{ role: "user", content: "Call it" }], {
      tools: [{ type: "function", function: { name: "lookup", parameters: { type: "object", properties: {} } } }],
      tool_choice: "required",
    });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatchObject({ code: "unsupported_parameter", param: "tool_choice" });
  });

  it("loses no request without a first token when a server dies mid-burst", async () => {
    const burst = Array.from({ length: 6 }, (_, i) => streamChat(router, `Burst ${i}: ${"keep talking. ".repeat(10)}`, 32));
    await until(
      async () => router.radixgate.scheduler.views().find((view) => view.id === "w0")!.inFlight,
      (inFlight) => inFlight > 0,
    );
    servers[0]!.kill();
    const seen: StreamSeen[] = await Promise.all(burst);
    for (const request of seen) {
      expect(request.status).toBe(200);
      if (request.error) expect(request.contentChunks).toBeGreaterThan(0);
    }
    const health = await until(
      () => healthOf(router),
      (h) => !h.workers[0]!.alive,
    );
    expect(health.workers[0]!.alive).toBe(false);
    expect(treeTokens("w0")).toBe(0);
  });
});
