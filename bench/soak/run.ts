// `npm run bench:soak`: a real server under a steady mix at 80 % of its measured capacity,
// a worker killed every 2 minutes and config.yml reloaded every minute, in thread and in
// process isolation (one after the other, never at once). soak.ts says what a run does,
// summary.ts what is counted; results go to bench/results/<stem>.{md,json}.
//
//   npm run bench:soak -- [--minutes 10] [--isolation thread|process|both] [--capacity-seconds 60]
//     [--capacity-concurrency 8] [--load-fraction 0.8] [--kill-every-s 120] [--reload-every-s 60]
//     [--hang-s 60] [--seed 1] [--results soak]
//     [--search-step-s 40] [--search-start 0.5] [--search-bisections 3] [--search-ttft-p99-ms 2000]
// Capacity is the highest Poisson rate kept up with in short steps (capacity.ts), searched
// from --search-start x the closed loop's rate, never above the closed loop's rate.
// The policy is the default (preble) unless env RADIXGATE_POLICY names another.
//
// A short check: --minutes 2 --capacity-seconds 15 --search-step-s 15 --search-bisections 1 --kill-every-s 40 --reload-every-s 20.
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, loadavg, totalmem } from "node:os";
import { parseArgs } from "node:util";
import type { Isolation } from "../../src/engine/host/worker-handle.js";
import { allocatorOf } from "../../src/cli/serve.js";
import { gitCommit } from "../git-commit.js";
import { DEFAULT_WEIGHTS, RequestMix } from "./mix.js";
import { renderReport, type RunHeader } from "./report.js";
import { SOAK_MODEL } from "./server.js";
import { runIsolation, type IsolationResult } from "./soak.js";

const { values } = parseArgs({
  options: {
    minutes: { type: "string", default: "10" },
    isolation: { type: "string", default: "both" },
    "capacity-seconds": { type: "string", default: "60" },
    "capacity-concurrency": { type: "string", default: "8" },
    "load-fraction": { type: "string", default: "0.8" },
    "kill-every-s": { type: "string", default: "120" },
    "reload-every-s": { type: "string", default: "60" },
    "hang-s": { type: "string", default: "60" },
    seed: { type: "string", default: "1" },
    "search-step-s": { type: "string", default: "40" },
    "search-start": { type: "string", default: "0.5" },
    "search-bisections": { type: "string", default: "3" },
    "search-ttft-p99-ms": { type: "string", default: "2000" },
    results: { type: "string", default: "soak" },
  },
});

const RESULTS = values.results;
if (!/^[a-z0-9-]+$/.test(RESULTS)) throw new RangeError("--results: a file name stem of lowercase letters, digits and dashes (bench/results/<stem>.md)");
const ISOLATIONS: Isolation[] =
  values.isolation === "both" ? ["thread", "process"] : values.isolation === "thread" || values.isolation === "process" ? [values.isolation] : [];
if (ISOLATIONS.length === 0) throw new RangeError("--isolation: thread, process or both");
const numbers = {
  minutes: Number(values.minutes),
  capacitySeconds: Number(values["capacity-seconds"]),
  capacityConcurrency: Number(values["capacity-concurrency"]),
  loadFraction: Number(values["load-fraction"]),
  killEveryS: Number(values["kill-every-s"]),
  reloadEveryS: Number(values["reload-every-s"]),
  hangS: Number(values["hang-s"]),
  seed: Number(values.seed),
  searchStepS: Number(values["search-step-s"]),
  searchStart: Number(values["search-start"]),
  searchBisections: Number(values["search-bisections"]),
  searchTtftP99Ms: Number(values["search-ttft-p99-ms"]),
};
for (const [name, value] of Object.entries(numbers)) {
  if (!Number.isFinite(value) || value < 0 || (name !== "seed" && value === 0))
    throw new RangeError(`--${name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}: a positive number, not ${value}`);
}
if (!(numbers.loadFraction <= 1)) throw new RangeError("--load-fraction: at most 1");
if (!(numbers.searchStart <= 1)) throw new RangeError("--search-start: at most 1 (a fraction of the closed loop's rate)");

const SHAPE = { workers: 2, slots: 4, contextSize: 2048, threads: 1 };
const soakSeconds = numbers.minutes * 60;
const warmUpS = Math.min(60, soakSeconds / 2);
const log = (line: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} [bench:soak] ${line}\n`);

const commit = gitCommit();
const loadAverageAtStart = loadavg();
const began = performance.now();
const date = new Date().toISOString();
// The settings every isolation runs with, as the report states them.
const settings = {
  capacitySeconds: numbers.capacitySeconds,
  capacityConcurrency: Math.round(numbers.capacityConcurrency),
  search: {
    stepSeconds: numbers.searchStepS,
    startFraction: numbers.searchStart,
    bisectionSteps: Math.round(numbers.searchBisections),
    ttftP99BoundMs: numbers.searchTtftP99Ms,
  },
  loadFraction: numbers.loadFraction,
  killEveryS: numbers.killEveryS,
  reloadEveryS: numbers.reloadEveryS,
  warmUpS,
};
const results: IsolationResult[] = [];
for (const isolation of ISOLATIONS) {
  results.push(await runIsolation({ isolation, shape: SHAPE, soakSeconds, ...settings, hangMs: numbers.hangS * 1000, seed: numbers.seed, onProgress: log }));
}

const header: RunHeader = {
  commit,
  treeClean: !commit.includes("uncommitted"),
  date,
  command: `npm run bench:soak -- ${process.argv.slice(2).join(" ")}`.trim(),
  node: process.version,
  allocator:
    allocatorOf() === "jemalloc" ? `jemalloc (LD_PRELOAD=${process.env.LD_PRELOAD})` : `glibc (MALLOC_ARENA_MAX=${process.env.MALLOC_ARENA_MAX ?? "unset"})`,
  machine: {
    cores: cpus().length,
    cpu: cpus()[0]?.model ?? "cpu",
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    loadAverageAtStart,
    loadAverageAtEnd: loadavg(),
  },
  server: {
    model: `${SOAK_MODEL} (preset:tiny)`,
    ...SHAPE,
    policy: process.env.RADIXGATE_POLICY ? `${process.env.RADIXGATE_POLICY} (env RADIXGATE_POLICY)` : "preble (default)",
    logLevel: "warn",
  },
  durations: {
    soakMinutes: numbers.minutes,
    ...settings,
    hangBoundS: numbers.hangS,
    wallMinutes: (performance.now() - began) / 60_000,
  },
  mix: DEFAULT_WEIGHTS,
  agentTurnsFrom: new RequestMix({ model: SOAK_MODEL, seed: 0, salt: "" }).transcriptSource,
  loadGenerator:
    "The load generator runs in a child process of its own (`node --import tsx bench/soak/load.ts`): the event-loop lag measured is the server's alone (with the soak's own timers and /health polls).",
  gcExposed: typeof (globalThis as { gc?: unknown }).gc === "function",
};

mkdirSync("bench/results", { recursive: true });
// Failures are kept in full up to a bound; /health samples every 2 s.
const forJson = results.map((r) => ({
  ...r,
  soak: { ...r.soak, failures: r.soak.failures.slice(0, 500), failuresKept: Math.min(500, r.soak.failures.length) },
}));
writeFileSync(`bench/results/${RESULTS}.json`, `${JSON.stringify({ ...header, results: forJson }, null, 2)}\n`);
const md = renderReport(header, results);
writeFileSync(`bench/results/${RESULTS}.md`, `${md}\n`);
console.log(md);
log(`wrote bench/results/${RESULTS}.md and .json`);
// Nothing should be left running; exit anyway so a stray handle cannot keep the run alive.
process.exit(0);
