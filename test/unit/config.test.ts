// config.yml: defaults, env overrides, and start-up refusing wrong keys and types with the key path.
import { execFile } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { ConfigError, loadConfigFile, parseConfig, resolveConfigPath } from "../../src/config/load-config.js";
import { LIVE_KEYS } from "../../src/config/schema.js";

const run = promisify(execFile);
const minimal = { models: [{ id: "m", source: "preset:tiny" }] };

function writeConfig(text: string): string {
  const path = join(mkdtempSync(join(tmpdir(), "radixgate-config-")), "config.yml");
  writeFileSync(path, text);
  return path;
}

describe("parseConfig", () => {
  it("fills every default", () => {
    const config = parseConfig(minimal);
    expect(config.server).toEqual({
      host: "127.0.0.1",
      port: 8080,
      bodyLimitBytes: 8388608,
      apiKeys: [],
      maxConcurrentRequests: 1024,
      shutdownTimeoutMs: 30000,
      logLevel: "info",
      logFormat: "auto",
      maxJsonDepth: 64,
      maxIdLength: 256,
    });
    expect(config.spill).toEqual({ budgetBytes: 8589934592, minTokens: 64, recentMs: 600000, dir: "" });
    expect(config.generation).toEqual({ defaultMaxTokens: 256, maxChoices: 8, requestTimeoutMs: 600000 });
    expect(config.models[0]).toMatchObject({
      workers: "auto",
      isolation: "auto",
      slots: 4,
      contextSize: 4096,
      threads: 1,
      threadPoll: 0,
      gpu: false,
      seed: 1,
    });
    expect(config.scheduler.policy).toBe("preble");
    expect(config.scheduler.preble).toEqual({ hotTtftRatio: 2, hotMinSamples: 3 });
    expect(config.scheduler.local).toEqual({ priorityGroups: 10, quotaPerGroup: 10, chunkTokens: 1024, hitRatioWindowMs: 180000 });
    expect(config.scheduler.cacheAware).toEqual({ balanceAbsThreshold: 64, balanceRelThreshold: 1.5, cacheThreshold: 0.3 });
  });

  it("names the path of an unknown key and lists the allowed ones", () => {
    expect(() => parseConfig({ models: [{ id: "m", source: "preset:tiny", slotz: 3 }] })).toThrow(
      /models\[0\]\.slotz: unknown key \(allowed here: id, source, workers, slots,/,
    );
    expect(() => parseConfig({ ...minimal, sheduler: {} })).toThrow(/sheduler: unknown key/);
  });

  it("names the path of a wrong type and says what is allowed", () => {
    expect(() => parseConfig({ models: [{ id: "m", source: "preset:tiny", slots: "four" }] })).toThrow(
      /models\[0\]\.slots: expected integer; got "four", allowed: integer >= 1 <= 256/,
    );
    expect(() => parseConfig({ ...minimal, server: { port: 70000 } })).toThrow(/server\.port: .*got 70000/);
    expect(() => parseConfig({ ...minimal, scheduler: { local: { priorityGroups: 0 } } })).toThrow(
      /scheduler\.local\.priorityGroups: expected integer to be greater or equal to 1; got 0/,
    );
    expect(() => parseConfig({ models: [{ id: "m", source: "preset:tiny", threadPoll: 101 }] })).toThrow(
      /models\[0\]\.threadPoll: expected integer to be less or equal to 100; got 101/,
    );
    expect(() => parseConfig({ models: [{ id: "m", source: "preset:tiny", gpu: "cpu" }] })).toThrow(/models\[0\]\.gpu: .*false \| "auto" \| "cuda"/);
  });

  it("refuses an unknown policy from the file or the environment, listing the known ones", () => {
    expect(() => parseConfig({ ...minimal, scheduler: { policy: "random" } })).toThrow(
      /scheduler\.policy: unknown policy "random"; available: preble, shape, cache-aware, roundrobin, affinity, least-load/,
    );
    expect(() => parseConfig(minimal, { RADIXGATE_POLICY: "fastest" })).toThrow(/env RADIXGATE_POLICY: unknown policy "fastest"/);
  });

  it("refuses a config without models and a repeated model id", () => {
    expect(() => parseConfig({})).toThrow(/models: expected required property/);
    expect(() => parseConfig({ models: [minimal.models[0], minimal.models[0]] })).toThrow(/id "m" is used twice/);
  });

  it("reloads live exactly the policy, its settings, the local scheduler and the API keys", () => {
    expect([...LIVE_KEYS].sort()).toEqual([
      "scheduler.cacheAware",
      "scheduler.dynamo",
      "scheduler.llmD",
      "scheduler.local",
      "scheduler.policy",
      "scheduler.preble",
      "server.apiKeys",
    ]);
  });

  it("lets PORT, HOST and RADIXGATE_POLICY override the file", () => {
    const config = parseConfig(minimal, { PORT: "9001", HOST: "0.0.0.0", RADIXGATE_POLICY: "affinity", RADIXGATE_API_KEYS: "sk-a, sk-b" });
    expect(config.server.apiKeys).toEqual(["sk-a", "sk-b"]);
    expect(config.server.port).toBe(9001);
    expect(config.server.host).toBe("0.0.0.0");
    expect(config.scheduler.policy).toBe("affinity");
    expect(() => parseConfig(minimal, { PORT: "eighty" })).toThrow(/env PORT must be an integer/);
  });
});

describe("config file", () => {
  it("finds the file from --config, then RADIXGATE_CONFIG, then ./config.yml", () => {
    expect(resolveConfigPath("a.yml", { RADIXGATE_CONFIG: "b.yml" }, "/srv")).toBe("/srv/a.yml");
    expect(resolveConfigPath(undefined, { RADIXGATE_CONFIG: "b.yml" }, "/srv")).toBe("/srv/b.yml");
    expect(resolveConfigPath(undefined, {}, "/srv")).toBe("/srv/config.yml");
  });

  it("reports invalid YAML with the file name", () => {
    const path = writeConfig("models: [\n");
    expect(() => loadConfigFile(path, {})).toThrow(ConfigError);
    expect(() => loadConfigFile(path, {})).toThrow(/is not valid YAML/);
  });

  it("accepts the shipped config.yml", () => {
    const { config } = loadConfigFile(join(process.cwd(), "config.yml"), {});
    expect(config.models.map((model) => model.source)).toEqual(["preset:tiny"]);
    expect(config.models[0]?.workers).toBe("auto");
  });

  for (const [what, yaml, message] of [
    ["a wrong key", "models:\n  - id: m\n    source: preset:tiny\n    treads: 2\n", "models[0].treads: unknown key"],
    ["a wrong type", "server:\n  port: eighty\nmodels:\n  - id: m\n    source: preset:tiny\n", 'server.port: expected integer; got "eighty"'],
  ] as const) {
    it(`stops start-up on ${what}, naming the key path`, async () => {
      const path = writeConfig(yaml);
      const failure = await run("npx", ["tsx", "src/main.ts", "serve", "--config", path], { cwd: process.cwd() }).then(
        () => undefined,
        (error: { code: number; stderr: string }) => error,
      );
      expect(failure?.code).toBe(2); // a config mistake: nothing ran
      expect(failure?.stderr).toContain(message);
      expect(failure?.stderr).not.toMatch(/\n\s+at /); // one clear message, no stack trace
    });
  }
});
