// The `radixgate` command line as an operator runs it: bin/radixgate.mjs (which compiles
// src/ to dist/ when stale) with each command, its help, and the exit status it promises:
// 0 done, 1 ran and failed, 2 a usage or config mistake.
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "../..");
const BIN = join(ROOT, "bin/radixgate.mjs");
const dir = mkdtempSync(join(tmpdir(), "radixgate-cli-"));

function radixgate(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, [BIN, ...args], { cwd: dir, encoding: "utf8", env: { ...process.env, PORT: "", RADIXGATE_POLICY: "" } });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

function writeConfig(name: string, lines: string[]): string {
  const path = join(dir, name);
  writeFileSync(path, `${lines.join("\n")}\n`);
  return path;
}

const twoModels = [
  "server: { host: 127.0.0.1, port: 0, logLevel: info }",
  "models:",
  "  - { id: tiny-thread, source: 'preset:tiny', workers: 2, slots: 2, contextSize: 1024, threads: 1, isolation: thread }",
  "  - { id: tiny-process, source: 'preset:tiny', workers: 1, slots: 3, contextSize: 512, threads: 1, isolation: process }",
];

beforeAll(() => {
  // The first run compiles dist/ if it is stale; later ones start at once.
  expect(radixgate("--version").status).toBe(0);
}, 120_000);

describe("radixgate --help", () => {
  it("lists every command, and each command's help names its options", () => {
    const help = radixgate("--help");
    expect(help.status).toBe(0);
    for (const command of ["serve", "check", "make-model", "bench"]) expect(help.stdout).toMatch(new RegExp(`^\\s+${command}\\b`, "m"));
    const serve = radixgate("serve", "--help");
    expect(serve.status).toBe(0);
    for (const option of ["--config <path>", "--port <port>", "--host <address>", "--policy <name>"]) expect(serve.stdout).toContain(option);
    expect(serve.stdout).toContain('"cache-aware"'); // the policies it accepts
    expect(radixgate("make-model", "--help").stdout).toContain("--preset <name>");
    expect(radixgate("check", "--help").stdout).toContain("--json");
  });
});

describe("usage mistakes exit 2 with a message saying what is allowed", () => {
  it.each([
    ["an unknown command", ["chek"], /unknown command 'chek'[\s\S]*Did you mean check\?/],
    ["a port out of range", ["serve", "--port", "99999"], /--port <port>' argument '99999' is invalid. an integer from 0 to 65535/],
    ["an unknown policy", ["serve", "--policy", "fastest"], /Allowed choices are preble, shape, cache-aware, roundrobin, affinity, least-load, dynamo, llm-d/],
    ["a missing config file", ["check", "--config", "nowhere.yml"], /cannot read config file .*nowhere\.yml/],
    ["a config with a wrong key", ["check", "--config", "WRONG"], /models\[0\]\.treads: unknown key/],
    ["an unknown benchmark", ["bench", "fastest"], /unknown benchmark "fastest"; one of:\n\s+cold-warm/],
    ["no command", [], /Usage: radixgate/],
  ])("%s", (_what, args, message) => {
    const wrong = writeConfig("wrong.yml", ["models:", "  - { id: m, source: 'preset:tiny', treads: 2 }"]);
    const result = radixgate(...args.map((arg) => (arg === "WRONG" ? wrong : arg)));
    expect(result.status).toBe(2);
    expect(result.stderr).toMatch(message);
    expect(result.stderr).not.toMatch(/\n\s+at /); // no stack trace
  });
});

describe("radixgate check", () => {
  it("prints the resolved settings, where each model comes from and which worker runs where", () => {
    const config = writeConfig("two-models.yml", twoModels);
    const result = radixgate("check", "--config", config);
    expect(result.status).toBe(0);
    expect(result.stdout).toContain(`${config}: valid`);
    expect(result.stdout).toMatch(/tiny-thread {2}preset:tiny -> .*models\/tiny\.gguf/);
    expect(result.stdout).toMatch(/^ {2}w0 {2}tiny-thread {2}thread {2}cpu {2}2 slots x 1024 tokens, 1 CPU thread$/m);
    expect(result.stdout).toMatch(/^ {2}w1 {2}tiny-thread {2}thread/m);
    expect(result.stdout).toMatch(/^ {2}w2 {2}tiny-process {2}process {2}cpu {2}3 slots x 512 tokens/m);
    expect(result.stdout).toMatch(/^ {2}maxQueuePerWorker: 64$/m); // a default filled in
  });

  it("--json: the same report for a program, with the command line's overrides applied", () => {
    const result = radixgate("check", "--config", writeConfig("two-models.yml", twoModels), "--json", "--policy", "least-load", "--port", "9123");
    expect(result.status).toBe(0);
    const report = JSON.parse(result.stdout) as {
      config: { scheduler: { policy: string }; server: { port: number } };
      workers: { id: string; isolation: string }[];
    };
    expect(report.config.scheduler.policy).toBe("least-load");
    expect(report.config.server.port).toBe(9123);
    expect(report.workers.map((worker) => `${worker.id}:${worker.isolation}`)).toEqual(["w0:thread", "w1:thread", "w2:process"]);
  });
});

describe("radixgate make-model", () => {
  it("writes the preset's GGUF where asked, deterministic in the seed", () => {
    const out = join(dir, "made", "tiny-3.gguf");
    const result = radixgate("make-model", "--preset", "tiny", "--seed", "3", "--out", out);
    expect(result.status).toBe(0);
    expect(result.stdout).toContain(out);
    expect(readFileSync(out).subarray(0, 4).toString()).toBe("GGUF");
    const again = radixgate("make-model", "--preset", "tiny", "--seed", "3", "--out", join(dir, "made", "again.gguf"));
    const sha = (text: string) => /sha256=([0-9a-f]{64})/.exec(text)?.[1];
    expect(sha(again.stdout)).toBe(sha(result.stdout));
    expect(sha(result.stdout)).toBeDefined();
  });
});

describe("radixgate bench", () => {
  it("lists the benchmarks, the package's bench scripts", () => {
    const result = radixgate("bench");
    expect(result.status).toBe(0);
    const scripts = Object.keys((JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts)
      .filter((name) => name.startsWith("bench:"))
      .map((name) => name.slice("bench:".length));
    expect(scripts.length).toBeGreaterThan(3);
    for (const name of scripts) expect(result.stdout).toMatch(new RegExp(`^ {2}${name} `, "m"));
  });
});

describe("radixgate serve", () => {
  it("warns at start, naming the reason, when a worker samples its tokens through node-llama-cpp's call or has no generation loop", async () => {
    const config = writeConfig("serve-sampling.yml", [
      "server: { host: 127.0.0.1, port: 0, logLevel: info }",
      "models:",
      "  - { id: tiny, source: 'preset:tiny', workers: 1, slots: 2, contextSize: 1024, threads: 1 }",
    ]);
    const server = spawn(process.execPath, [BIN, "serve", "--config", config], {
      cwd: dir,
      stdio: ["ignore", "pipe", "inherit"],
      env: { ...process.env, RADIXGATE_NO_INLINE_SAMPLE: "1", RADIXGATE_NO_NATIVE_GENERATION: "1", PORT: "", RADIXGATE_POLICY: "" },
    });
    const exited = new Promise<number | null>((resolve) => server.once("exit", (code) => resolve(code)));
    let out = "";
    try {
      await new Promise<void>((resolve, reject) => {
        server.stdout!.on("data", (chunk: Buffer) => {
          out += chunk.toString();
          if (/Radixgate serving on/.test(out)) resolve();
        });
        void exited.then((code) => reject(new Error(`the server exited (${code}) before serving:\n${out}`)));
      });
      expect(out).toMatch(/"reason":"RADIXGATE_NO_INLINE_SAMPLE=1".*no inline sampling/);
      expect(out).toMatch(/"reason":"RADIXGATE_NO_NATIVE_GENERATION=1".*no generation loop/);
      expect(out).not.toMatch(/no inline decode/);
    } finally {
      server.kill("SIGTERM");
    }
    expect(await exited).toBe(0);
  });

  it("serves with the command line's port and policy, keeps them over a reload, and exits 0 on SIGTERM", async () => {
    const config = writeConfig("serve.yml", [
      "server: { host: 127.0.0.1, port: 8, logLevel: info }",
      "models:",
      "  - { id: tiny, source: 'preset:tiny', workers: 1, slots: 2, contextSize: 1024, threads: 1 }",
    ]);
    const server = spawn(process.execPath, [BIN, "serve", "--config", config, "--port", "0", "--policy", "least-load"], {
      cwd: dir,
      stdio: ["ignore", "pipe", "inherit"],
      // Its worker decodes every batch through node-llama-cpp's hand-offs: the operator is told why.
      env: { ...process.env, RADIXGATE_NO_INLINE_DECODE: "1" },
    });
    const exited = new Promise<number | null>((resolve) => server.once("exit", (code) => resolve(code)));
    let out = "";
    try {
      const baseURL = await new Promise<string>((resolve, reject) => {
        server.stdout!.on("data", (chunk: Buffer) => {
          out += chunk.toString();
          const match = /Radixgate serving on (http:\/\/[\d.:]+)/.exec(out);
          if (match) resolve(match[1]!);
        });
        void exited.then((code) => reject(new Error(`the server exited (${code}) before serving:\n${out}`)));
      });
      const health = async () => (await (await fetch(`${baseURL}/health`)).json()) as { policy: string };
      expect((await health()).policy).toBe("least-load");
      // Its CPU worker runs the prebuilt binary: the operator is told about the build made here (said before serving).
      expect(out).toMatch(/CPU workers run node-llama-cpp's prebuilt llama.cpp binary.*npm run (build:engine-native|start:native)/);
      expect(out).toMatch(/"reason":"RADIXGATE_NO_INLINE_DECODE=1".*no inline decode/);
      // A reload reads the file again with the same overrides: the policy stays the command line's.
      writeFileSync(config, `${readFileSync(config, "utf8")}scheduler: { policy: preble }\nserver: { apiKeys: [reloaded] }\n`.replace(/^server: \{.*\}\n/, ""));
      server.kill("SIGHUP");
      await expect.poll(async () => (await fetch(`${baseURL}/v1/models`)).status, { timeout: 20_000 }).toBe(401);
      expect((await health()).policy).toBe("least-load");
    } finally {
      server.kill("SIGTERM");
    }
    expect(await exited).toBe(0);
  });
});
