// GET /metrics: every documented name is there, and the per-request figures move.
import { readFileSync } from "node:fs";
import { readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { defaultStateDir } from "../../src/engine/worker/state-store.js";
import { startTestServer, TINY_MODEL, type TestServer } from "../helpers/server.js";

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({ workers: 2, slots: 2, policy: "preble" });
});

afterAll(async () => {
  await server?.close();
});

async function scrape(): Promise<string> {
  const response = await fetch(server.baseURL.replace(/\/v1$/, "/metrics"));
  expect(response.status).toBe(200);
  expect(response.headers.get("content-type")).toMatch(/text\/plain/);
  return response.text();
}

/** The value of one sample line, e.g. value(text, 'radixgate_ttft_seconds_count{model="m"}'). */
function value(text: string, sample: string): number {
  const line = text.split("\n").find((candidate) => candidate.startsWith(`${sample} `));
  return line === undefined ? Number.NaN : Number(line.slice(sample.length + 1));
}

describe("GET /metrics", () => {
  it("exposes every metric the README documents, and documents every one it exposes", async () => {
    const readme = readFileSync(join(import.meta.dirname, "../../README.md"), "utf8");
    const section = readme.slice(readme.indexOf("\n## Metrics\n"), readme.indexOf("\n## ", readme.indexOf("\n## Metrics\n") + 1));
    const documented = new Set(section.match(/\b(radixgate|process|nodejs)_[a-z_]+/g));
    expect(documented.size).toBeGreaterThan(20);
    const text = await scrape();
    for (const name of documented) expect(text, name).toMatch(new RegExp(`^# TYPE ${name} `, "m"));
    const exposed = [...text.matchAll(/^# TYPE (radixgate_[a-z_]+) /gm)].map((match) => match[1]!);
    for (const name of exposed) expect(documented, `${name} is not in the README's Metrics section`).toContain(name);
  });

  it("records each request's prompt, cached and completion tokens, TTFT and placement", async () => {
    const before = await scrape();
    const messages = [
      { role: "system" as const, content: "metrics ".repeat(200) },
      { role: "user" as const, content: "one" },
    ];
    await server.client.chat.completions.create({ model: TINY_MODEL, messages, max_tokens: 5 });
    const stream = await server.client.chat.completions.create({ model: TINY_MODEL, messages, max_tokens: 5, stream: true });
    for await (const _chunk of stream) void _chunk;
    const after = await scrape();
    const model = `{model="${TINY_MODEL}"}`;
    for (const histogram of ["radixgate_prompt_tokens", "radixgate_cached_tokens", "radixgate_completion_tokens", "radixgate_ttft_seconds"]) {
      expect(value(after, `${histogram}_count${model}`) - (value(before, `${histogram}_count${model}`) || 0), histogram).toBe(2);
    }
    // The second request found the first one's prompt in the worker's KV (exploited).
    expect(value(after, `radixgate_cached_tokens_sum${model}`) - (value(before, `radixgate_cached_tokens_sum${model}`) || 0)).toBeGreaterThan(200);
    expect(after).toMatch(/radixgate_placements_total\{policy="preble",reason="(exploit|explore)"\} \d+/);
    expect(value(after, `radixgate_completion_tokens_sum${model}`) - (value(before, `radixgate_completion_tokens_sum${model}`) || 0)).toBe(10);
    expect(after).toMatch(/radixgate_http_requests_total\{route="\/v1\/chat\/completions",method="POST",status="200"\} \d+/);
    expect(after).toMatch(/radixgate_worker_slots\{worker="w0",model="radixgate-tiny"\} 2/);
    expect(after).toMatch(/radixgate_worker_alive\{worker="w1",model="radixgate-tiny"\} 1/);
  });

  it("counts a worker's decode steps and the sequences they carried", async () => {
    const before = await scrape();
    // Pinned to one worker, two long answers side by side: their tokens share decode steps.
    await Promise.all(
      ["first", "second"].map((topic) =>
        server.client.chat.completions.create(
          { model: TINY_MODEL, messages: [{ role: "user", content: `steps ${topic}` }], max_tokens: 300 },
          { headers: { "x-radixgate-worker": "w1" } },
        ),
      ),
    );
    const after = await scrape();
    const delta = (name: string) => value(after, `${name}{worker="w1"}`) - value(before, `${name}{worker="w1"}`);
    expect(delta("radixgate_worker_decode_tokens_total")).toBeGreaterThanOrEqual(598);
    expect(delta("radixgate_worker_decode_tokens_total") / delta("radixgate_worker_decode_steps_total")).toBeGreaterThan(1.8);
    expect(delta("radixgate_worker_prefill_tokens_total")).toBeGreaterThan(0);
  });

  it("counts a stored KV state that fails to load, and still answers the same", async () => {
    const pinned = { headers: { "x-radixgate-worker": "w0" } };
    const turn = (topic: string) => ({
      model: TINY_MODEL,
      messages: [
        { role: "system" as const, content: `${topic} `.repeat(120) },
        { role: "user" as const, content: "go" },
      ],
      max_tokens: 3,
      temperature: 0,
    });
    // w0 has 2 slots: a third conversation evicts the first one's KV into the store...
    const first = await server.client.chat.completions.create(turn("apples"), pinned);
    await server.client.chat.completions.create(turn("bridges"), pinned);
    await server.client.chat.completions.create(turn("comets"), pinned);
    // ...whose file is then deleted under the running worker.
    const store = join(defaultStateDir(), `radixgate-${process.pid}-w0`);
    const files = (await readdir(store)).filter((name) => name.endsWith(".state"));
    expect(files.length).toBeGreaterThan(0);
    for (const file of files) await rm(join(store, file));
    const before = value(await scrape(), 'radixgate_worker_restore_failures_total{worker="w0"}') || 0;
    const again = await server.client.chat.completions.create(turn("apples"), pinned);
    expect(again.choices[0]?.message.content).toBe(first.choices[0]?.message.content);
    expect(value(await scrape(), 'radixgate_worker_restore_failures_total{worker="w0"}') - before).toBe(1);
  });
});

describe("a server's metrics after it closes", () => {
  it("leave nothing of the server reachable: Node's collectors report to a registry of the process", async () => {
    // gc() for this test: the registry is gone once nothing reaches it.
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    /** Starts a server, scrapes it, closes it; only a weak reference to its registry is kept. */
    const serveOnce = async (): Promise<WeakRef<object>> => {
      const other = await startTestServer({ workers: 1, slots: 1 });
      const text = await (await fetch(other.baseURL.replace(/\/v1$/, "/metrics"))).text();
      // Node's own metrics are still in every server's scrape.
      expect(text).toMatch(/^# TYPE nodejs_eventloop_lag_seconds gauge$/m);
      expect(text).toMatch(/^# TYPE process_cpu_seconds_total counter$/m);
      const registry = new WeakRef(other.radixgate.metrics.registry);
      await other.close();
      return registry;
    };
    const registries = [await serveOnce(), await serveOnce()];
    for (let i = 0; i < 10 && registries.some((ref) => ref.deref() !== undefined); i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      gc();
    }
    // With the collectors in each server's registry, prom-client's event-loop monitor and GC
    // observer (never stopped) kept every closed server's registry, and all it held, alive.
    expect(registries.map((ref) => ref.deref() === undefined)).toEqual([true, true]);
  });
});
