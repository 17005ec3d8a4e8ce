// What a person at a terminal sees, and what a pipe gets: the server's logs are coloured
// single lines on a terminal and JSON lines otherwise (server.logFormat: auto), and
// make-model draws a progress bar only on a terminal. A terminal is a real pseudo-terminal
// (util-linux `script`), not a flag.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { isPretty } from "../../src/http/logger.js";

const ROOT = join(import.meta.dirname, "../..");
const BIN = join(ROOT, "bin/radixgate.mjs");
const dir = mkdtempSync(join(tmpdir(), "radixgate-output-"));
const ESC = "\u001b[";

/** A command line run in a pseudo-terminal: its stdout and stderr are a terminal; what it prints comes back on our pipe. */
function inTerminal(args: string[]): { command: string; args: string[] } {
  const line = [process.execPath, ...args].map((arg) => `'${arg.replaceAll("'", "'\\''")}'`).join(" ");
  return { command: "script", args: ["-qfec", line, "/dev/null"] };
}

function config(format: string): string {
  const path = join(dir, `${format}.yml`);
  writeFileSync(
    path,
    [
      `server: { host: 127.0.0.1, port: 0, logLevel: info, logFormat: ${format} }`,
      "models:",
      "  - { id: tiny, source: 'preset:tiny', workers: 1, slots: 2, contextSize: 512, threads: 1 }",
      "",
    ].join("\n"),
  );
  return path;
}

let server: ChildProcess | undefined;

/** Starts `radixgate serve`; resolves with everything it printed up to and including one completion's log line. */
async function serveOneRequest(format: string, terminal: boolean, env: NodeJS.ProcessEnv = process.env): Promise<string> {
  const args = [BIN, "serve", "--config", config(format)];
  const { command, args: argv } = terminal ? inTerminal(args) : { command: process.execPath, args };
  const child = spawn(command, argv, { cwd: dir, env, stdio: ["ignore", "pipe", "inherit"], detached: true });
  server = child;
  let out = "";
  child.stdout!.on("data", (chunk: Buffer) => (out += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  await expect.poll(() => /Radixgate serving on (http:\/\/[\d.:]+)/.exec(out)?.[1], { timeout: 60_000 }).toBeDefined();
  const baseURL = /Radixgate serving on (http:\/\/[\d.:]+)/.exec(out)![1]!;
  const answer = await fetch(`${baseURL}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-request-id": "humane-1" },
    body: JSON.stringify({ model: "tiny", prompt: "hello", max_tokens: 2 }),
  });
  expect(answer.status).toBe(200);
  // "request completed" is logged after the request's own completion line.
  await expect.poll(() => out.split(/\r?\n/).some((line) => line.includes("humane-1") && line.includes("request completed")), { timeout: 10_000 }).toBe(true);
  process.kill(-child.pid!, "SIGTERM");
  await exited;
  return out;
}

afterEach(() => {
  if (server?.exitCode === null) process.kill(-server.pid!, "SIGKILL");
  server = undefined;
});

beforeAll(() => {
  // Compiles dist/ first if it is stale, outside the timed parts.
  expect(spawnSync(process.execPath, [BIN, "--version"], { encoding: "utf8" }).status).toBe(0);
}, 120_000);

describe("server logs", () => {
  it("chooses pretty lines for a terminal under auto, always under pretty, never under json", () => {
    expect([isPretty("auto", true), isPretty("auto", false), isPretty("pretty", false), isPretty("json", true)]).toEqual([true, false, true, false]);
  });

  it("on a terminal (auto): coloured single lines with the level in words, the request's fields on its line", async () => {
    const out = await serveOneRequest("auto", true);
    const serving = out.split(/\r?\n/).find((line) => line.includes("Radixgate serving on"))!;
    expect(serving).toContain(`${ESC}32mINFO${ESC}39m`);
    expect(serving.trimStart().startsWith("{")).toBe(false);
    const plain = out
      .split(ESC)
      .map((piece, i) => (i === 0 ? piece : piece.replace(/^[\d;]*m/, "")))
      .join("");
    const completion = plain.split(/\r?\n/).find((line) => /INFO: completion /.test(line))!;
    expect(completion).toContain(`"requestId":"humane-1"`);
    expect(completion).toContain(`"worker":"w0"`);
  });

  it("through a pipe (auto): one JSON object per line, no colour", async () => {
    const out = await serveOneRequest("auto", false);
    expect(out).not.toContain(ESC);
    const lines = out.split("\n").filter((line) => line.startsWith("{"));
    const records = lines.map((line) => JSON.parse(line) as { msg?: string; requestId?: string; level: number });
    expect(records.find((record) => record.msg?.startsWith("Radixgate serving on"))?.level).toBe(30);
    expect(records.some((record) => record.requestId === "humane-1" && record.msg === "completion")).toBe(true);
  });

  it("on a terminal with NO_COLOR set: the same readable lines, without colour", async () => {
    const out = await serveOneRequest("auto", true, { ...process.env, NO_COLOR: "1" });
    expect(out).toMatch(/\] INFO: Radixgate serving on/);
    expect(out).not.toContain(`${ESC}32m`);
  });

  it("logFormat: pretty through a pipe: readable lines without colour", async () => {
    const out = await serveOneRequest("pretty", false);
    expect(out).not.toContain(ESC);
    expect(out).toMatch(/^\[[\d:.]+\] INFO: Radixgate serving on/m);
  });
});

describe("make-model progress", () => {
  it("draws a bar on a terminal and prints none through a pipe", () => {
    const args = [BIN, "make-model", "--preset", "tiny", "--seed", "5"];
    const { command, args: argv } = inTerminal([...args, "--out", join(dir, "terminal.gguf")]);
    const terminal = spawnSync(command, argv, { cwd: dir, encoding: "utf8" });
    expect(terminal.status).toBe(0);
    expect(terminal.stdout).toMatch(/writing tiny .*100% \| [\d.]+\/[\d.]+ MiB/);
    const piped = spawnSync(process.execPath, [...args, "--out", join(dir, "piped.gguf")], { cwd: dir, encoding: "utf8" });
    expect(piped.status).toBe(0);
    expect(piped.stderr + piped.stdout).not.toContain("writing tiny");
    expect(piped.stdout).toContain("piped.gguf");
  });
});

describe("benchmark progress", () => {
  it("radixgate bench sim: a bar over the capacity searches on a terminal with each probe's line above it; the lines alone through a pipe", () => {
    const out = join(dir, "sim");
    const args = [
      BIN,
      "bench",
      "sim",
      "--workload",
      "toolbench-zipf",
      "--workers",
      "2",
      "--loads",
      "0.1",
      "--policies",
      "roundrobin,dynamo",
      "--requests",
      "40",
      "--out",
      out,
    ];
    const { command, args: argv } = inTerminal(args);
    const terminal = spawnSync(command, argv, { cwd: dir, encoding: "utf8" });
    expect(terminal.status).toBe(0);
    const shown = terminal.stdout.split(ESC).join("");
    expect(shown).toMatch(/sim .*100% \| 2\/2 capacities/);
    expect(shown).toMatch(/\[2\/2\] toolbench-zipf .* dynamo: n=40/);
    const piped = spawnSync(process.execPath, args, { cwd: dir, encoding: "utf8" });
    expect(piped.status).toBe(0);
    expect(piped.stderr).toMatch(/\[1\/2\] toolbench-zipf .* roundrobin: n=40/);
    expect(piped.stderr).not.toMatch(/% \| \d+\/2 capacities/);
  });
});
