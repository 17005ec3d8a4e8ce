// `radixgate bench <name>`: the benchmarks are the package's `bench:<name>` scripts (one
// list, in package.json). They run from the TypeScript sources, so they need a development
// install (`npm ci`), as `npm run bench:<name>` does.
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { PACKAGE_ROOT as ROOT } from "../common/package-root.js";
import { EXIT, UsageError } from "./exit-codes.js";

/** Benchmark names and the command each runs, from package.json. */
export function benchmarks(): Map<string, string> {
  const scripts = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts;
  return new Map(
    Object.entries(scripts)
      .filter(([name]) => name.startsWith("bench:"))
      .map(([name, command]) => [name.slice("bench:".length), command]),
  );
}

export function listBenchmarks(): string {
  return [...benchmarks()].map(([name, command]) => `  ${name.padEnd(14)} ${command}`).join("\n");
}

/** Runs one benchmark with these arguments; resolves with its exit status. */
export async function runBenchmark(name: string, args: readonly string[]): Promise<number> {
  if (!benchmarks().has(name)) throw new UsageError(`unknown benchmark "${name}"; one of:\n${listBenchmarks()}`);
  if (!existsSync(join(ROOT, "node_modules", "tsx"))) {
    throw new UsageError("benchmarks run from the TypeScript sources: install the development dependencies first (npm ci)");
  }
  const npm = process.platform === "win32" ? "npm.cmd" : "npm";
  const child = spawn(npm, ["run", "--silent", `bench:${name}`, "--", ...args], { cwd: ROOT, stdio: "inherit" });
  return new Promise((resolve) => {
    child.on("error", () => resolve(EXIT.failed));
    child.on("exit", (code, signal) => resolve(signal ? EXIT.failed : (code ?? EXIT.failed)));
  });
}
