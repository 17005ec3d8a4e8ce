// The commit a benchmark ran on, for its report: the short hash, plus the paths under
// `watched` that had uncommitted changes (so a result is never mistaken for the commit's).
// Files under bench/results/ are left out: they are outputs.
import { execFileSync } from "node:child_process";
import { cpus, totalmem } from "node:os";

export function gitCommit(watched: readonly string[] = ["src", "bench"]): string {
  try {
    const commit = execFileSync("git", ["rev-parse", "--short", "HEAD"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
    const changed = execFileSync("git", ["status", "--porcelain", "--", ...watched], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] })
      .split("\n")
      .map((line) => line.slice(3).trim())
      .filter((line) => line !== "")
      // Results are what a benchmark writes, not what it runs: an earlier run's files do not count.
      .filter((line) => !line.startsWith("bench/results/"));
    return changed.length === 0 ? commit : `${commit} + uncommitted changes to ${changed.join(", ")}`;
  } catch {
    return "unknown";
  }
}

/** The machine, as every report names it: CPU model x logical cores, memory. */
export function machineDescription(): string {
  const cpu = cpus();
  return `${cpu[0]?.model ?? "cpu"} x ${cpu.length}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB`;
}

/** What a benchmark's report names first: when, on which commit, machine and Node it ran. */
export function runIdentity(watched?: readonly string[]): { date: string; commit: string; machine: string; node: string } {
  return { date: new Date().toISOString(), commit: gitCommit(watched), machine: machineDescription(), node: process.version };
}
