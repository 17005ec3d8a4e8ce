// jemalloc under `npm start`: scripts/with-jemalloc.sh preloads it when the system has it
// (thread workers' restarts otherwise leave their freed memory in glibc's arenas), and the
// server names the allocator it runs on.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { arch } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { allocatorOf } from "../../src/cli/serve.js";

const ROOT = join(import.meta.dirname, "../..");
const LIB = `/usr/lib/${arch() === "arm64" ? "aarch64" : "x86_64"}-linux-gnu/libjemalloc.so.2`;
const HAS_JEMALLOC = existsSync(LIB);

/** Whether a node started through the wrapper has jemalloc mapped, and what LD_PRELOAD it saw. */
function runWrapped(env: NodeJS.ProcessEnv): { mapped: boolean; preload: string } {
  const probe =
    "const maps = require('fs').readFileSync('/proc/self/maps', 'utf8');" +
    "console.log(JSON.stringify({ mapped: maps.includes('libjemalloc'), preload: process.env.LD_PRELOAD ?? '' }))";
  const run = spawnSync("sh", [join(ROOT, "scripts/with-jemalloc.sh"), process.execPath, "-e", probe], { env, encoding: "utf8" });
  expect(run.status, run.stderr).toBe(0);
  return JSON.parse(run.stdout) as { mapped: boolean; preload: string };
}

describe("jemalloc for npm start", () => {
  const base = { ...process.env };
  delete base.LD_PRELOAD;
  delete base.RADIXGATE_NO_JEMALLOC;

  it.skipIf(!HAS_JEMALLOC)("preloads the system's jemalloc when nothing else is preloaded (skipped where libjemalloc2 is not installed)", () => {
    const run = runWrapped(base);
    expect(run.preload).toBe(LIB);
    expect(run.mapped).toBe(true);
    expect(allocatorOf({ LD_PRELOAD: run.preload })).toBe("jemalloc");
  });

  it("leaves glibc's malloc when RADIXGATE_NO_JEMALLOC is set, and a preload of the user's own alone", () => {
    const off = runWrapped({ ...base, RADIXGATE_NO_JEMALLOC: "1" });
    expect(off).toEqual({ mapped: false, preload: "" });
    expect(allocatorOf({ LD_PRELOAD: off.preload })).toBe("glibc");
    // Someone else's preload is kept as it is (an empty one: the wrapper must not add jemalloc).
    const own = runWrapped({ ...base, LD_PRELOAD: " " });
    expect(own.mapped).toBe(false);
  });

  it("npm start and npm run bench:soak go through the wrapper", async () => {
    const { scripts } = (await import("../../package.json", { with: { type: "json" } })).default as { scripts: Record<string, string> };
    for (const name of ["start", "dev", "bench:soak"]) expect(scripts[name], name).toContain("scripts/with-jemalloc.sh");
  });
});
