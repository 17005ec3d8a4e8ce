// What an operator relies on: API keys, readiness, per-model lookup, live config reload,
// and a clean SIGTERM.
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { until } from "../helpers/until.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfigFile } from "../../src/config/load-config.js";
import { createRadixgate, type Radixgate } from "../../src/radixgate.js";
import { TINY_MODEL } from "../helpers/server.js";

function configText(options: { policy?: string; priorityGroups?: number; apiKeys?: string[]; port?: number; raw?: string } = {}): string {
  if (options.raw !== undefined) return options.raw;
  return [
    "server:",
    "  host: 127.0.0.1",
    `  port: ${options.port ?? 0}`,
    "  logLevel: warn",
    "  shutdownTimeoutMs: 20000",
    ...(options.apiKeys ? ["  apiKeys:", ...options.apiKeys.map((key) => `    - ${key}`)] : []),
    "models:",
    `  - id: ${TINY_MODEL}`,
    "    source: preset:tiny",
    "    workers: 2",
    "    slots: 2",
    "    contextSize: 2048",
    "scheduler:",
    `  policy: ${options.policy ?? "roundrobin"}`,
    "  local:",
    `    priorityGroups: ${options.priorityGroups ?? 10}`,
    "",
  ].join("\n");
}

function configFile(text: string): string {
  const path = join(mkdtempSync(join(tmpdir(), "radixgate-ops-")), "config.yml");
  writeFileSync(path, text);
  return path;
}

interface Health {
  policy: string;
  local: { priorityGroups: number; quotaPerGroup: number };
  config_error: string | null;
}

describe("API keys, readiness and models", () => {
  let radixgate: Radixgate;
  let base: string;

  beforeAll(async () => {
    radixgate = await createRadixgate(loadConfigFile(configFile(configText({ apiKeys: ["sk-one", "sk-two"] })), {}));
    base = await radixgate.listen();
  });

  afterAll(async () => {
    await radixgate?.close();
  });

  it("refuses a request without a key or with a wrong one, in OpenAI's shape", async () => {
    const attempts: Record<string, string>[] = [{}, { authorization: "Bearer sk-wrong" }, { authorization: "sk-one" }];
    for (const headers of attempts) {
      const response = await fetch(`${base}/v1/models`, { headers });
      expect(response.status).toBe(401);
      const body = (await response.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe("invalid_api_key");
      expect(body.error.message).toMatch(/Authorization: Bearer <key>/);
    }
  });

  it("serves a client that sends any configured key", async () => {
    const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "sk-two", maxRetries: 0 });
    const completion = await client.chat.completions.create({ model: TINY_MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 2 });
    expect(completion.usage?.completion_tokens).toBe(2);
  });

  it("keeps the probes open and reports readiness", async () => {
    const health = await fetch(`${base}/health`);
    expect(health.status).toBe(200);
    // Which llama.cpp each worker computes with: node-llama-cpp's npm binary here, or one built on this machine.
    const { workers } = (await health.json()) as {
      workers: { llama: { backend: string; binary: string; compute_pool: string; inline_decode: boolean; native_generation: boolean } | null }[];
    };
    expect(workers).toHaveLength(2);
    for (const worker of workers) {
      expect(worker.llama).toEqual({
        backend: "cpu",
        binary: expect.stringMatching(/^(prebuilt|localBuild)$/),
        compute_pool: expect.stringMatching(/^(single-thread|persistent|per-step)$/),
        // The test run builds the llama-context addon, so generation steps run on the worker's
        // thread, and plain requests in the generation loop.
        inline_decode: true,
        native_generation: true,
      });
    }
    const ready = await fetch(`${base}/ready`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ ready: true, not_ready: [] });
  });

  it("describes one model, and answers 404 for an unknown one with the served ids", async () => {
    const headers = { authorization: "Bearer sk-one" };
    const model = (await (await fetch(`${base}/v1/models/${TINY_MODEL}`, { headers })).json()) as { id: string; object: string };
    expect(model).toMatchObject({ id: TINY_MODEL, object: "model" });
    const missing = await fetch(`${base}/v1/models/gpt-9`, { headers });
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { error: { message: string } }).error.message).toMatch(/Served models: radixgate-tiny/);
  });
});

describe("hot reload", () => {
  let radixgate: Radixgate;
  let base: string;
  let path: string;

  beforeAll(async () => {
    path = configFile(configText({ policy: "roundrobin", priorityGroups: 10 }));
    radixgate = await createRadixgate(loadConfigFile(path, {}));
    base = await radixgate.listen();
    radixgate.reloader.watchFile();
  });

  afterAll(async () => {
    await radixgate?.close();
  });

  const health = async () => (await (await fetch(`${base}/health`)).json()) as Health;

  it("applies a new policy and priority groups while requests run, and refuses an invalid edit", async () => {
    const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "unused", maxRetries: 0 });
    let running = true;
    const failures: unknown[] = [];
    let served = 0;
    const traffic = (async () => {
      while (running) {
        await client.chat.completions.create({ model: TINY_MODEL, messages: [{ role: "user", content: `load ${served}` }], max_tokens: 20 }).then(
          () => served++,
          (error: unknown) => failures.push(error),
        );
      }
    })();

    writeFileSync(path, configText({ policy: "shape", priorityGroups: 4 }));
    const changed = await until(health, (h) => h.policy === "shape" && h.local.priorityGroups === 4);
    expect(changed.policy).toBe("shape");
    expect(changed.local.priorityGroups).toBe(4);
    // The workers' own local schedulers, not only the host's copy shown in /health.
    for (const worker of radixgate.fleet.workers) expect((await worker.engine.stats()).local.priorityGroups).toBe(4);
    expect(changed.config_error).toBeNull();

    writeFileSync(path, configText({ raw: "scheduler:\n  policy: [unclosed\n" }));
    const refused = await until(health, (h) => h.config_error !== null);
    expect(refused.config_error).toMatch(/not valid YAML/);
    expect(refused.policy).toBe("shape"); // the old config keeps running

    writeFileSync(path, configText({ policy: "no-such-policy" }));
    const unknown = await until(health, (h) => (h.config_error ?? "").includes("no-such-policy"));
    expect(unknown.config_error).toMatch(/unknown policy "no-such-policy"/);
    expect(unknown.policy).toBe("shape");

    running = false;
    await traffic;
    expect(served).toBeGreaterThan(0);
    expect(failures).toEqual([]);
  });

  it("applies a reload while a worker is down or restarting; the worker comes back with the new settings", async () => {
    const w0 = radixgate.fleet.get("w0")!;
    const restarts = w0.restarts;
    await w0.engine.crash();
    await until(
      async () => w0.alive,
      (alive) => !alive,
    );
    writeFileSync(path, configText({ policy: "roundrobin", priorityGroups: 3 }));
    const result = await radixgate.reloader.reload("test");
    // The live worker took it; the down one keeps it for its restart. Not a reload failure.
    expect(result).toMatchObject({ ok: true });
    expect((await health()).config_error).toBeNull();
    expect((await radixgate.fleet.get("w1")!.engine.stats()).local.priorityGroups).toBe(3);
    await until(
      async () => w0.alive && w0.restarts > restarts,
      (back) => back,
    );
    expect((await w0.engine.stats()).local.priorityGroups).toBe(3);
  });

  it("reloads on demand (SIGHUP calls this), naming keys that need a restart", async () => {
    writeFileSync(path, configText({ policy: "affinity", port: 9999 }));
    const result = await radixgate.reloader.reload("test");
    expect(result.ok).toBe(true);
    expect(result.restartNeeded).toContain("server.port");
    expect(radixgate.scheduler.policy.name).toBe("affinity");
  });
});

describe("SIGTERM", () => {
  it("lets a running stream finish, refuses new connections, and exits 0", async () => {
    const port = 20000 + (process.pid % 20000);
    const path = configFile(configText({ port }));
    const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts", "serve", "--config", path], { stdio: ["ignore", "pipe", "pipe"] });
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    try {
      const base = `http://127.0.0.1:${port}`;
      await until(
        () =>
          fetch(`${base}/ready`).then(
            (r) => r.status,
            () => 0,
          ),
        (status) => status === 200,
        1200,
      );
      const response = await fetch(`${base}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: TINY_MODEL, messages: [{ role: "user", content: "long" }], max_tokens: 1500, stream: true }),
      });
      const reader = response.body!.getReader();
      const decoder = new TextDecoder();
      let text = decoder.decode((await reader.read()).value);
      child.kill("SIGTERM");
      await new Promise((resolve) => setTimeout(resolve, 100));
      const refused = await fetch(`${base}/health`).then(
        () => "answered",
        () => "refused",
      );
      for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) text += decoder.decode(chunk.value);
      expect(text.trimEnd().endsWith("data: [DONE]")).toBe(true);
      expect(text).toMatch(/"finish_reason":"length"/);
      expect(refused).toBe("refused");
      expect(await exited).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  });
});
