// Decision speed of this checkout's global scheduler against another commit's, timed side by
// side in one process: both place the same requests on the same fleet (decision-fleet.ts),
// request by request, taking turns at going first. On a shared 2-core machine one run of
// bench:scheduler can be 30 % off the next with nothing changed, and its speed moves more from
// one day to the next, so two versions measured one after the other, in separate runs, cannot
// be told apart below that. Interleaved at the scale of one call, both meet the same machine:
// the same code against itself read 0.976x-1.013x on ToolBench over 5 runs (and 0.833x-1.384x
// on Mooncake's 11k requests: docs/scheduler-tree.md), so the report gives the median of
// several runs (5 by default).
//
//   npm run bench:scheduler-compare -- --base REV [--workload toolbench|mooncake|all] [--runs 5] [--seed 1] [--salt N] [--quick] [--results NAME]
//
// --quick places a few thousand requests: a smoke run of the tool, too short for a ratio (the
// code of each version is still being compiled).
// The base is checked out in a temporary git worktree (removed at the end) with this
// checkout's node_modules; both versions run under the preble policy, each in its own
// scheduler with its own tree. Each run is a fresh process. A request's cycle is what
// bench:scheduler times: place, then what ServedRequests (decision-fleet.ts) does after it.
// Absolute rates are below bench:scheduler's: two trees share the process's caches. Writes
// bench/results/<--results, default scheduler-compare>.md and .json; asserts nothing.
import { execFileSync, fork } from "node:child_process";
import { randomInt } from "node:crypto";
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { gitCommit, machineDescription } from "../git-commit.js";
import {
  CAPACITY_TOKENS,
  MODEL,
  mooncakeRecordCount,
  placedRequests,
  plan,
  ServedRequests,
  type ServedTicket,
  type ServedTimeModel,
  TIME_MODEL,
  WORKER_IDS,
  WORKERS,
  WORKLOADS,
  type WorkloadName,
} from "./decision-fleet.js";

const POLICY = "preble";
const REPO = fileURLToPath(new URL("../../", import.meta.url));
const USAGE =
  "usage: npm run bench:scheduler-compare -- --base REV [--workload toolbench|mooncake|all] [--runs 5] [--seed 1] [--salt N] [--quick] [--results NAME]";

/** What a run measured of one version. */
interface SideTotals {
  placeNs: number;
  cycleNs: number;
}

interface RunResult {
  workload: WorkloadName;
  measured: number;
  base: SideTotals;
  work: SideTotals;
  /** Requests (warm-up included) the two versions placed on different workers or for different reasons. */
  differingDecisions: number;
  placed: number;
}

/** The parts of a version's scheduler the comparison drives (the same names in every version it can compare). */
interface SchedulerModules {
  GlobalScheduler: new (
    policy: unknown,
    options: { now: () => number },
  ) => {
    addWorker(spec: object): void;
    place(request: object): Ticket | undefined;
    timeModel(workerId: string): ServedTimeModel | undefined;
  };
  createPolicy: (name: string) => unknown;
  TimeModel: new (coefficients: object) => object;
  TIME_MODEL_PRESETS: Record<string, object>;
}

interface Ticket extends ServedTicket {
  placement: { reason: string };
  uncachedTokens?: number;
}

async function loadScheduler(root: string): Promise<SchedulerModules> {
  const module = (path: string) => import(pathToFileURL(join(root, path)).href);
  const [scheduler, registry, timeModel] = await Promise.all([
    module("src/scheduler/global-scheduler.ts"),
    module("src/scheduler/registry.ts"),
    module("src/scheduler/time-model.ts"),
  ]);
  return {
    GlobalScheduler: scheduler.GlobalScheduler,
    createPolicy: registry.createPolicy,
    TimeModel: timeModel.TimeModel,
    TIME_MODEL_PRESETS: timeModel.TIME_MODEL_PRESETS,
  };
}

/** One version's fleet: `serve` runs one request's cycle and adds its times to the totals once `measure` is set. */
function fleetOf(modules: SchedulerModules, clock: { t: number }, slots: number) {
  const scheduler = new modules.GlobalScheduler(modules.createPolicy(POLICY), { now: () => clock.t });
  for (const id of WORKER_IDS) {
    scheduler.addWorker({
      id,
      modelId: MODEL,
      slots,
      capacityTokens: CAPACITY_TOKENS,
      timeModel: new modules.TimeModel(modules.TIME_MODEL_PRESETS[TIME_MODEL]!),
    });
  }
  const served = new ServedRequests<Ticket>(slots, (workerId) => scheduler.timeModel(workerId)!);
  const totals: SideTotals = { placeNs: 0, cycleNs: 0 };

  const serve = (tokens: Int32Array, outputTokens: number, measure: boolean): string => {
    const t0 = process.hrtime.bigint();
    const ticket = scheduler.place({ modelId: MODEL, tokens, messageCount: 1, maxTokens: 256 });
    const t1 = process.hrtime.bigint();
    if (!ticket) throw new Error("no placement");
    // What the scheduler expects the worker to reuse (a version without the figure: nothing).
    const hit = tokens.length - (ticket.uncachedTokens ?? tokens.length);
    const { slot, ttftMs } = served.slotFor(ticket, hit);
    const t2 = process.hrtime.bigint();
    served.serve(ticket, slot, hit, ttftMs, outputTokens);
    const t3 = process.hrtime.bigint();
    if (measure) {
      totals.placeNs += Number(t1 - t0);
      totals.cycleNs += Number(t1 - t0) + Number(t3 - t2);
    }
    return `${ticket.workerId} ${ticket.placement.reason}`;
  };
  return { serve, totals };
}

/** One run, in this (child) process: both versions on the same requests, taking turns at going first. */
async function runBoth(workload: WorkloadName, baseRoot: string, seed: number, salt: number, quick: boolean): Promise<RunResult> {
  const p = plan(workload, quick, workload === "mooncake" ? mooncakeRecordCount() : 0);
  const [baseModules, workModules] = await Promise.all([loadScheduler(baseRoot), loadScheduler(REPO)]);
  const clock = { t: 0 };
  const base = fleetOf(baseModules, clock, p.slots);
  const work = fleetOf(workModules, clock, p.slots);
  const take = placedRequests(workload, seed, salt);
  let differingDecisions = 0;
  const placed = p.warmupRequests + p.measuredRequests;
  for (let i = 0; i < placed; i++) {
    const request = take();
    clock.t = request.arrivalMs;
    const measure = i >= p.warmupRequests;
    // Whichever goes second finds the prompt in the processor's caches: each goes first half the time.
    const first = i % 2 === 0 ? base : work;
    const second = first === base ? work : base;
    const a = first.serve(request.tokens, request.outputTokens, measure);
    const b = second.serve(request.tokens, request.outputTokens, measure);
    if (a !== b) differingDecisions++;
  }
  return { workload, measured: p.measuredRequests, base: base.totals, work: work.totals, differingDecisions, placed };
}

function runChild(workload: WorkloadName, baseRoot: string, seed: number, salt: number, quick: boolean): Promise<RunResult> {
  const childArgs = ["--child", workload, "--base-root", baseRoot, "--seed", String(seed), "--salt", String(salt), ...(quick ? ["--quick"] : [])];
  return new Promise((resolve, reject) => {
    let result: RunResult | undefined;
    const child = fork(fileURLToPath(import.meta.url), childArgs, { execArgv: process.execArgv, stdio: ["ignore", "inherit", "inherit", "ipc"] });
    child.on("message", (message) => {
      result = message as RunResult;
    });
    child.on("error", reject);
    child.on("exit", (code) => (code === 0 && result ? resolve(result) : reject(new Error(`${workload} run exited with ${code}`))));
  });
}

/** A temporary worktree of `rev` with this checkout's node_modules; `remove` takes it away. */
function checkOut(rev: string): { root: string; commit: string; remove: () => void } {
  const git = (...args: string[]) => execFileSync("git", args, { cwd: REPO, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();
  let commit: string;
  try {
    commit = git("rev-parse", "--short", `${rev}^{commit}`);
  } catch {
    throw new Error(`--base ${rev}: not a commit of this repository (give a hash, a tag or a branch)`);
  }
  const root = join(mkdtempSync(join(os.tmpdir(), "radixgate-compare-")), commit);
  git("worktree", "add", "--detach", root, commit);
  symlinkSync(join(REPO, "node_modules"), join(root, "node_modules"), "dir");
  return {
    root,
    commit,
    remove: () => {
      git("worktree", "remove", "--force", root);
      rmSync(join(root, ".."), { recursive: true, force: true });
    },
  };
}

const rate = (n: number, ns: number) => n / (ns / 1e9);
const median = (values: readonly number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};
const fmt = (value: number, digits = 0) => value.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });

interface Summary {
  workload: WorkloadName;
  runs: RunResult[];
  /** Per run: this checkout's rate over the base's (above 1: this checkout is faster). */
  placeRatios: number[];
  cycleRatios: number[];
  medianPlaceRatio: number;
  medianCycleRatio: number;
}

function summarize(workload: WorkloadName, runs: RunResult[]): Summary {
  const placeRatios = runs.map((run) => run.base.placeNs / run.work.placeNs);
  const cycleRatios = runs.map((run) => run.base.cycleNs / run.work.cycleNs);
  return { workload, runs, placeRatios, cycleRatios, medianPlaceRatio: median(placeRatios), medianCycleRatio: median(cycleRatios) };
}

function markdown(report: {
  machine: string;
  node: string;
  commit: string;
  base: { rev: string; commit: string };
  command: string;
  seed: number;
  salt: number;
  loadAverage: { before: number[]; after: number[] };
  totalSeconds: number;
  summaries: Summary[];
}): string {
  const lines = [
    "# Global scheduler: decision speed against another commit, side by side",
    "",
    `Machine: ${report.machine}, load ${report.loadAverage.before[0]!.toFixed(2)} at the start and ${report.loadAverage.after[0]!.toFixed(2)} at the end; Node ${report.node}; ` +
      `this checkout ${report.commit} against ${report.base.commit} (\`--base ${report.base.rev}\`); seed ${report.seed}, salt ${report.salt}; ${fmt(report.totalSeconds)} s in all.`,
    "",
    `Command: \`${report.command}\``,
    "",
    `Both versions, policy ${POLICY}, place the same requests on the fleet of bench:scheduler (${WORKERS} workers x ${fmt(CAPACITY_TOKENS)} tokens of KV, time model \`${TIME_MODEL}\`), ` +
      "each in its own scheduler, request by request in one process, taking turns at going first; each run is a fresh process. " +
      "A ratio is this checkout's rate over the base's (above 1: this checkout is faster). Absolute rates are below bench:scheduler's: two trees share the process's caches.",
    "",
    "| workload | run | requests measured | base decisions/s | this decisions/s | ratio | base cycles/s | this cycles/s | ratio | decisions that differ |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
  ];
  for (const summary of report.summaries) {
    summary.runs.forEach((run, i) => {
      lines.push(
        `| ${run.workload} | ${i + 1} | ${fmt(run.measured)} | ${fmt(rate(run.measured, run.base.placeNs))} | ${fmt(rate(run.measured, run.work.placeNs))} | ${summary.placeRatios[i]!.toFixed(3)}x | ` +
          `${fmt(rate(run.measured, run.base.cycleNs))} | ${fmt(rate(run.measured, run.work.cycleNs))} | ${summary.cycleRatios[i]!.toFixed(3)}x | ${fmt(run.differingDecisions)} of ${fmt(run.placed)} |`,
      );
    });
  }
  lines.push("");
  for (const summary of report.summaries) {
    lines.push(
      `- ${summary.workload}: median ratio ${summary.medianPlaceRatio.toFixed(3)}x decisions/s, ${summary.medianCycleRatio.toFixed(3)}x cycles/s ` +
        `(runs ${summary.placeRatios.map((r) => r.toFixed(3)).join(", ")}; ${summary.cycleRatios.map((r) => r.toFixed(3)).join(", ")}).`,
    );
  }
  lines.push(
    "- Decisions that differ: requests (warm-up included) the two versions sent to different workers or for different reasons; 0 when the change kept every decision.",
    "",
  );
  return lines.join("\n");
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      base: { type: "string" },
      workload: { type: "string", default: "all" },
      runs: { type: "string", default: "5" },
      seed: { type: "string", default: "1" },
      salt: { type: "string" },
      quick: { type: "boolean", default: false },
      results: { type: "string", default: "scheduler-compare" },
      child: { type: "string" },
      "base-root": { type: "string" },
    },
  });
  const int = (name: string, raw: string | undefined, fallback: number): number => {
    if (raw === undefined) return fallback;
    const value = Number(raw);
    if (!Number.isSafeInteger(value) || value < 0) throw new Error(`--${name} needs a non-negative integer, got ${raw}\n${USAGE}`);
    return value;
  };
  const seed = int("seed", values.seed, 1);
  // A fresh salt per invocation unless one is given; every run of one invocation places the same requests.
  const salt = int("salt", values.salt, randomInt(2 ** 31));
  if (values.child !== undefined) {
    const result = await runBoth(values.child as WorkloadName, values["base-root"]!, seed, salt, values.quick!);
    process.send!(result);
    return;
  }
  if (!/^[\w.-]+$/.test(values.results!)) throw new Error(`--results ${values.results}: a file name under bench/results/ (letters, digits, . _ -)\n${USAGE}`);
  if (values.base === undefined) throw new Error(`--base is required: the commit to compare this checkout with\n${USAGE}`);
  const workloads: WorkloadName[] =
    values.workload === "all"
      ? [...WORKLOADS]
      : (WORKLOADS as readonly string[]).includes(values.workload!)
        ? [values.workload as WorkloadName]
        : (() => {
            throw new Error(`--workload ${values.workload}: one of ${WORKLOADS.join(", ")} or all\n${USAGE}`);
          })();
  const runs = Math.max(1, int("runs", values.runs, 5));
  const started = performance.now();
  const loadBefore = os.loadavg();
  const base = checkOut(values.base);
  const results = new Map<WorkloadName, RunResult[]>(workloads.map((workload) => [workload, []]));
  try {
    for (let run = 0; run < runs; run++) {
      for (const workload of workloads) {
        const result = await runChild(workload, base.root, seed, salt, values.quick!);
        results.get(workload)!.push(result);
        const ratio = result.base.placeNs / result.work.placeNs;
        process.stderr.write(`  [${workload}] run ${run + 1}/${runs}: this checkout ${ratio.toFixed(3)}x the base's decisions/s\n`);
      }
    }
  } finally {
    base.remove();
  }
  const report = {
    benchmark: "scheduler-compare",
    date: new Date().toISOString(),
    machine: machineDescription(),
    node: process.version,
    commit: gitCommit(["src/scheduler", "src/common", "bench/scheduler", "bench/workloads"]),
    base: { rev: values.base, commit: base.commit },
    command: `npm run bench:scheduler-compare -- ${process.argv.slice(2).join(" ")}`,
    seed,
    salt,
    quick: values.quick!,
    policy: POLICY,
    loadAverage: { before: loadBefore, after: os.loadavg() },
    totalSeconds: (performance.now() - started) / 1000,
    summaries: workloads.map((workload) => summarize(workload, results.get(workload)!)),
  };
  const out = fileURLToPath(new URL("../results/", import.meta.url));
  writeFileSync(`${out}${values.results}.json`, `${JSON.stringify(report, null, 2)}\n`);
  writeFileSync(`${out}${values.results}.md`, markdown(report));
  for (const summary of report.summaries) {
    console.log(
      `${summary.workload}: this checkout ${summary.medianPlaceRatio.toFixed(3)}x the base's decisions/s, ${summary.medianCycleRatio.toFixed(3)}x its cycles/s (median of ${runs})`,
    );
  }
  console.log(`wrote bench/results/${values.results}.md and .json`);
}

await main();
