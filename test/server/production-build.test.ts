// The production build as `npm start` runs it: src/ compiled to dist/, the server started with
// plain `node dist/main.js`, thread and process workers started from compiled JavaScript
// (no tsx, no esbuild helper process), answered, and stopped by SIGTERM with exit code 0.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "../..");

/** Command lines of the processes whose parent is `pid` (Linux /proc). */
function childrenOf(pid: number): string[] {
  const children: string[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // The parent pid is the 4th field, after "(comm)" which may itself hold spaces.
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === pid) children.push(readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0").join(" ").trim());
    } catch {
      // The process ended while we looked.
    }
  }
  return children;
}

describe("production build (npm run build, node dist/main.js)", () => {
  let server: ChildProcess;
  let baseURL: string;
  let out = "";
  const exited = () => new Promise<number | null>((resolve) => server.once("exit", (code) => resolve(code)));

  beforeAll(async () => {
    const build = spawnSync(process.execPath, [join(ROOT, "scripts/ensure-build.mjs"), "--force"], { cwd: ROOT, encoding: "utf8" });
    expect(build.status, build.stderr).toBe(0);
    const dir = mkdtempSync(join(tmpdir(), "radixgate-build-"));
    const config = join(dir, "config.yml");
    writeFileSync(
      config,
      [
        "server: { host: 127.0.0.1, port: 0, logLevel: info }",
        "models:",
        "  - { id: tiny-thread, source: 'preset:tiny', workers: 1, slots: 2, contextSize: 1024, threads: 1, isolation: thread }",
        "  - { id: tiny-process, source: 'preset:tiny', workers: 1, slots: 2, contextSize: 1024, threads: 1, isolation: process }",
        "",
      ].join("\n"),
    );
    // Plain node on the compiled entry, no loader: what `npm start` execs.
    server = spawn(process.execPath, [join(ROOT, "dist/main.js"), "serve", "--config", config], {
      cwd: dir,
      env: { ...process.env, LD_PRELOAD: "" },
      stdio: ["ignore", "pipe", "inherit"],
    });
    baseURL = await new Promise<string>((resolve, reject) => {
      server.stdout!.on("data", (chunk: Buffer) => {
        out += chunk.toString();
        const match = /Radixgate serving on (http:\/\/[\d.:]+)/.exec(out);
        if (match) resolve(match[1]!);
      });
      server.once("exit", (code) => reject(new Error(`the server exited (${code}) before serving:\n${out}`)));
    });
  }, 120_000);

  afterAll(() => {
    if (server.exitCode === null) server.kill("SIGKILL");
  });

  it("answers on a thread worker and on a process worker", async () => {
    for (const model of ["tiny-thread", "tiny-process"]) {
      const response = await fetch(`${baseURL}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model, prompt: "the build", max_tokens: 4, temperature: 0 }),
      });
      expect(response.status, model).toBe(200);
      expect(((await response.json()) as { usage: { completion_tokens: number } }).usage.completion_tokens).toBe(4);
    }
  });

  it("warns at start that its thread worker runs on glibc's malloc (plain node, nothing preloaded)", () => {
    expect(out).toMatch(/1 thread worker\(s\) on glibc's malloc/);
  });

  it("runs its workers from compiled JavaScript, with no tsx and no esbuild process", () => {
    const children = childrenOf(server.pid!);
    // The process worker is the server's only child; under tsx there would be esbuild too.
    expect(children).toHaveLength(1);
    expect(children[0]).toMatch(/dist\/engine\/worker\/process-main\.js$/);
    for (const child of children) expect(child).not.toMatch(/tsx|esbuild/);
  });

  it("stops on SIGTERM with exit code 0", async () => {
    const code = exited();
    server.kill("SIGTERM");
    expect(await code).toBe(0);
  });
});
