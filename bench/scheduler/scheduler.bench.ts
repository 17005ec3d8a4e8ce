// Decision speed of the REAL global scheduler (GlobalScheduler + createPolicy, no copy of
// any policy logic) on a warm tree of over 1M tokens, driven the way the server drives it:
// for each request `place` (timed on its own), then the worker's `slot-holds` report for a
// rotating slot and its first token, then `complete` for the requests that fall out of the
// in-flight window.
//
//   node --expose-gc --import tsx bench/scheduler/scheduler.bench.ts [--seed N] [--salt N] [--repeats N] [--quick] [--dump-decisions DIR]
//
// Fleet: 8 workers of one model, 200k tokens of KV each, Preble's A6000 / Mistral-7B time
// model. Workloads (bench/workloads/): (a) ToolBench-like, 1000 shared ~2000-token prefixes
// picked with Zipf(1.1), a unique ~200-token suffix each, Poisson arrivals; (b) the Mooncake
// conversation trace (real arrivals, lengths and 512-token prefix blocks). Policies:
// preble, cache-aware, and roundrobin as the floor.
//
// Each (workload, policy) arm runs in a fresh child process (same flags as this one), so no
// arm inherits another's heap, garbage or JIT state; arms of a workload place the same
// requests (same warm-up, same measured sample). Each arm runs --repeats times (default 3),
// the arms of a workload taking turns, and the report keeps the run with the median rate,
// with every run's rate, cycle rate and p99 beside it: on a shared 2-core machine one run of
// one tree can be 30 % off the next. Heap per tree token needs --expose-gc (the
// script says whether it has it). Writes bench/results/scheduler.json and scheduler.md, with
// the targets (TARGETS: preble's place rate and p99 and full cycle rate on ToolBench, its
// place rate on Mooncake) and whether the run met each.
// Measures; asserts nothing. Each arm also reports a digest of every decision it made
// (warm-up included: chosen worker and reason, in order) and of the priced costs, so two
// versions of the scheduler can be shown to decide identically for the same seed and salt;
// --dump-decisions DIR writes them one per line (DIR/<workload>-<policy>.txt) for a diff.
import { fork } from "node:child_process";
import { randomInt } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import os from "node:os";
import { fileURLToPath } from "node:url";
import { GlobalScheduler } from "../../src/scheduler/global-scheduler.js";
import type { PlacementTicket } from "../../src/scheduler/ticket.js";
import { createPolicy } from "../../src/scheduler/registry.js";
import { TIME_MODEL_PRESETS, TimeModel } from "../../src/scheduler/time-model.js";
import type { TokenIds } from "../../src/common/tokens.js";
import type { RadixNode } from "../../src/scheduler/radix/node.js";
import { gitCommit, machineDescription } from "../git-commit.js";
import {
  CAPACITY_TOKENS,
  IN_FLIGHT_PER_WORKER,
  MODEL,
  mooncakeRecordCount,
  type PlacedRequest,
  placedRequests,
  plan,
  TIME_MODEL,
  TOOLBENCH_SLOTS,
  TREE_TARGET_TOKENS,
  ServedRequests,
  WORKER_IDS,
  WORKERS,
  WORKLOADS,
  type WorkloadName,
  type WorkloadPlan,
} from "./decision-fleet.js";

const POLICIES = ["preble", "cache-aware", "roundrobin"] as const;
type PolicyArm = (typeof POLICIES)[number];

/** What the default policy must sustain on this bench. */
const TARGET_POLICY: PolicyArm = "preble";
const TARGETS = {
  toolbench: { decisionsPerS: 300_000, p99Us: 20, cyclesPerS: 150_000 },
  mooncake: { decisionsPerS: 100_000 },
} as const;

// ---------------------------------------------------------------------------------------------
// One arm, in a child process

interface LatencySummary {
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
  mean: number;
}

interface ArmResult {
  policy: PolicyArm;
  workload: WorkloadName;
  /** measured.decisionsPerS, at the top for tools that read one figure per arm. */
  decisions_per_s: number;
  slotsPerWorker: number;
  gcExposed: boolean;
  warmup: { requests: number; treeTokens: number; treeNodes: number; reachedTarget: boolean; cachedTokensAllWorkers: number };
  measured: {
    requests: number;
    promptTokensMean: number;
    simulatedSeconds: number;
    wallSeconds: number;
    decisionsPerS: number;
    cyclesPerS: number;
    placeUs: LatencySummary;
    cycleUs: LatencySummary;
    timerOverheadNs: number;
  };
  tree: { tokens: number; nodes: number; cachedTokensAllWorkers: number; cachedTokensPerWorker: number[] };
  heap: {
    measured: boolean;
    schedulerBytes?: number;
    bytesPerTreeToken?: number;
    /** Prompt arrays reachable after gc from the slots' last reports (through the scheduler
     *  only: the bench's references are weak) and from the requests in flight. */
    slotMirrorBytes: number;
    bytesPerTreeTokenWithoutMirror?: number;
  };
  reasons: Record<string, number>;
  /** Place time by the decision's reason: where a rate's time goes and what its p99 is made of. */
  placeByReason: { reason: string; share: number; timeShare: number; meanUs: number; p50Us: number; p99Us: number }[];
  /** FNV-1a over every decision of the arm (warm-up and measured): worker index and reason. */
  decisionDigest: string;
  /** Every run of the arm (--repeats), in order: the report's figures are the median run's. */
  runs?: { decisionsPerS: number[]; cyclesPerS: number[]; placeP99Us: number[] };
  /** FNV-1a over the costs each decision priced (worker index and float64 bits). */
  costsDigest: string;
  matchedFractionMean: number;
  hitFractionMean: number;
  hitTokenFraction: number;
  placementShareMaxOverMean: number;
}

const gc = (globalThis as { gc?: () => void }).gc;

/** JS heap plus ArrayBuffer backing stores (the tree's token segments are Int32Arrays, whose
 *  storage lives outside the JS heap). */
function heapUsed(): number {
  gc?.();
  gc?.();
  const usage = process.memoryUsage();
  return usage.heapUsed + usage.arrayBuffers;
}

function summarize(samplesNs: Float64Array): LatencySummary {
  const sorted = Float64Array.from(samplesNs).sort();
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]! / 1000;
  let sum = 0;
  for (const v of sorted) sum += v;
  return { p50: at(0.5), p90: at(0.9), p99: at(0.99), p999: at(0.999), max: sorted[sorted.length - 1]! / 1000, mean: sum / sorted.length / 1000 };
}

/** 32-bit FNV-1a, fed 32-bit words. */
class Fnv {
  private h = 0x811c9dc5;

  word(value: number): void {
    for (let shift = 0; shift < 32; shift += 8) {
      this.h ^= (value >>> shift) & 0xff;
      this.h = Math.imul(this.h, 0x01000193);
    }
  }

  string(value: string): void {
    for (let i = 0; i < value.length; i++) this.word(value.charCodeAt(i));
    this.word(0xffffffff);
  }

  get hex(): string {
    return (this.h >>> 0).toString(16).padStart(8, "0");
  }
}

const float64 = new Float64Array(1);
const float64Words = new Uint32Array(float64.buffer);

async function runArm(policy: PolicyArm, workload: WorkloadName, args: Args): Promise<ArmResult> {
  const { seed, salt, quick } = args;
  const records = workload === "mooncake" ? mooncakeRecordCount() : 0;
  const p = plan(workload, quick, records, args.toolbenchSlots);
  const label = `${workload}/${policy}`;
  // Prompts reach the scheduler as Int32Arrays, made outside the timed calls.
  const take = placedRequests(workload, seed, salt);
  // Measured-phase tallies, allocated before the heap baseline.
  const placeNs = new Float64Array(p.measuredRequests);
  const cycleNs = new Float64Array(p.measuredRequests);
  const reasons: Record<string, number> = {};
  /** Per measured request, the index of its reason in `reasonNames`. */
  const reasonOf = new Uint8Array(p.measuredRequests);
  const reasonNames: string[] = [];
  const placements = new Float64Array(WORKERS);
  let matchedFractionSum = 0;
  let hitFractionSum = 0;
  let hitTokens = 0;
  let promptTokens = 0;
  const decisionHash = new Fnv();
  const costsHash = new Fnv();
  const dump: string[] | undefined = args.dumpDecisions === undefined ? undefined : [];
  // The first request is drawn before the baseline: the generator's own tables are then
  // allocated and stay out of the scheduler's heap.
  let pending: PlacedRequest | undefined = take();
  const heapBefore = heapUsed();

  const clock = { t: 0 };
  const scheduler = new GlobalScheduler(createPolicy(policy), { now: () => clock.t });
  for (const id of WORKER_IDS) {
    scheduler.addWorker({ id, modelId: MODEL, slots: p.slots, capacityTokens: CAPACITY_TOKENS, timeModel: new TimeModel(TIME_MODEL_PRESETS[TIME_MODEL]!) });
  }
  const tree = scheduler.tree(MODEL)!;
  const served = new ServedRequests<PlacementTicket>(p.slots, (workerId) => scheduler.timeModel(workerId)!);
  // What each slot was last told to hold, held WEAKLY: the heap reading below counts a prompt
  // array as the scheduler's slot mirror only if something else (the scheduler) keeps it.
  const slotHolds: (WeakRef<Int32Array> | undefined)[][] = WORKER_IDS.map(() => new Array<WeakRef<Int32Array> | undefined>(p.slots).fill(undefined));

  /** One request through place -> started -> finished; returns [place ns, cycle ns]. */
  /** The reason of the last decision `serve` made. */
  let lastReason = "";
  const serve = (request: PlacedRequest, measure: boolean): [number, number] => {
    clock.t = request.arrivalMs;
    const placement = { modelId: MODEL, tokens: request.tokens, messageCount: 1, maxTokens: 256 };
    // Untimed and read-only: what each worker holds of THIS prompt before the decision,
    // for the per-request hit on the chosen worker and the modelled TTFT.
    const before = tree.match(request.tokens);
    const t0 = process.hrtime.bigint();
    const ticket = scheduler.place(placement);
    const t1 = process.hrtime.bigint();
    if (!ticket) throw new Error(`${label}: no placement`);
    const w = served.workerIndex(ticket.workerId);
    const hit = before.perWorker.get(ticket.workerId) ?? 0;
    const n = request.tokens.length;
    const { slot, ttftMs } = served.slotFor(ticket, hit);
    if (!measure) slotHolds[w]![slot] = new WeakRef(request.tokens);
    const t2 = process.hrtime.bigint();
    served.serve(ticket, slot, hit, ttftMs, request.outputTokens);
    const t3 = process.hrtime.bigint();
    decisionHash.word(w);
    decisionHash.string(ticket.placement.reason);
    const costs = ticket.placement.costs;
    if (costs !== undefined) {
      for (const [id, cost] of Object.entries(costs)) {
        costsHash.word(served.workerIndex(id));
        float64[0] = cost;
        costsHash.word(float64Words[0]!);
        costsHash.word(float64Words[1]!);
      }
    }
    costsHash.word(0xffffffff);
    dump?.push(`${w} ${ticket.placement.reason}${costs === undefined ? "" : ` ${JSON.stringify(costs)}`}`);
    lastReason = ticket.placement.reason;
    if (measure) {
      reasons[ticket.placement.reason] = (reasons[ticket.placement.reason] ?? 0) + 1;
      placements[w]!++;
      matchedFractionSum += ticket.placement.matchedTokens / n;
      hitFractionSum += hit / n;
      hitTokens += hit;
      promptTokens += n;
    }
    return [Number(t1 - t0), Number(t1 - t0) + Number(t3 - t2)];
  };

  const progress = (phase: string, done: number, total: number) =>
    process.stderr.write(`  [${label}] ${phase} ${done}/${total}: tree ${(tree.tokenCount / 1e6).toFixed(2)}M tokens, ${tree.nodeCount} nodes\n`);

  // Warm-up: the same cycle, untimed, until the tree is large (and the JIT is warm).
  for (let i = 0; i < p.warmupRequests; i++) {
    const request = pending ?? take();
    pending = undefined;
    serve(request, false);
    if ((i + 1) % Math.ceil(p.warmupRequests / 2) === 0) progress("warm-up", i + 1, p.warmupRequests);
  }
  const cachedAll = () => WORKER_IDS.reduce((sum, id) => sum + tree.cachedTokens(id), 0);
  const warmup = {
    requests: p.warmupRequests,
    treeTokens: tree.tokenCount,
    treeNodes: tree.nodeCount,
    reachedTarget: tree.tokenCount >= TREE_TARGET_TOKENS,
    cachedTokensAllWorkers: cachedAll(),
  };

  // Heap of everything the scheduler keeps, the tree and its slot mirror (the prompts it
  // was told each slot holds, if it keeps them: shared with the requests in flight). A
  // WeakRef keeps its target alive until the end of the job that made or read it: yield once
  // so that only what is strongly reachable is counted.
  await new Promise<void>((resolve) => setImmediate(resolve));
  const heapAfter = heapUsed();
  const mirror = new Set<TokenIds>();
  for (const slots of slotHolds) {
    for (const ref of slots) {
      const tokens = ref?.deref();
      if (tokens) mirror.add(tokens);
    }
  }
  for (const ticket of served.inFlight()) mirror.add(ticket.request.tokens);
  // A prompt some node borrows its segment from is the tree's own storage, not the mirror's.
  const borrowedByTree = (tokens: TokenIds) =>
    tokens instanceof Int32Array && tree.match(tokens).path.some((node) => (node as RadixNode).buf.buffer === tokens.buffer);
  let slotMirrorBytes = 0;
  for (const tokens of mirror) {
    if (borrowedByTree(tokens)) continue;
    slotMirrorBytes += tokens instanceof Int32Array ? 64 + tokens.byteLength : 16 + 8 * tokens.length;
  }
  const schedulerBytes = heapAfter - heapBefore;

  // Timer overhead: two back-to-back reads.
  const overhead = new Float64Array(10_000);
  for (let i = 0; i < overhead.length; i++) {
    const a = process.hrtime.bigint();
    overhead[i] = Number(process.hrtime.bigint() - a);
  }
  const timerOverheadNs = summarize(overhead).p50 * 1000;

  const firstArrivalMs = clock.t;
  const wallStart = performance.now();
  for (let i = 0; i < p.measuredRequests; i++) {
    const [place, cycle] = serve(take(), true);
    placeNs[i] = place;
    cycleNs[i] = cycle;
    let reason = reasonNames.indexOf(lastReason);
    if (reason < 0) reason = reasonNames.push(lastReason) - 1;
    reasonOf[i] = reason;
    if ((i + 1) % Math.ceil(p.measuredRequests / 4) === 0) progress("measured", i + 1, p.measuredRequests);
  }
  const wallSeconds = (performance.now() - wallStart) / 1000;
  let placeTotal = 0;
  let cycleTotal = 0;
  for (let i = 0; i < p.measuredRequests; i++) {
    placeTotal += placeNs[i]!;
    cycleTotal += cycleNs[i]!;
  }
  const n = p.measuredRequests;
  const meanPlacements = n / WORKERS;
  if (dump !== undefined) {
    mkdirSync(args.dumpDecisions!, { recursive: true });
    writeFileSync(`${args.dumpDecisions}/${workload}-${policy}.txt`, `${dump.join("\n")}\n`);
  }
  const decisionsPerS = n / (placeTotal / 1e9);
  return {
    policy,
    workload,
    decisions_per_s: decisionsPerS,
    slotsPerWorker: p.slots,
    gcExposed: gc !== undefined,
    warmup,
    measured: {
      requests: n,
      promptTokensMean: promptTokens / n,
      simulatedSeconds: (clock.t - firstArrivalMs) / 1000,
      wallSeconds,
      decisionsPerS,
      cyclesPerS: n / (cycleTotal / 1e9),
      placeUs: summarize(placeNs),
      cycleUs: summarize(cycleNs),
      timerOverheadNs,
    },
    tree: {
      tokens: tree.tokenCount,
      nodes: tree.nodeCount,
      cachedTokensAllWorkers: cachedAll(),
      cachedTokensPerWorker: WORKER_IDS.map((id) => tree.cachedTokens(id)),
    },
    heap: {
      measured: gc !== undefined,
      ...(gc !== undefined
        ? {
            schedulerBytes,
            bytesPerTreeToken: schedulerBytes / warmup.treeTokens,
            bytesPerTreeTokenWithoutMirror: (schedulerBytes - slotMirrorBytes) / warmup.treeTokens,
          }
        : {}),
      slotMirrorBytes,
    },
    reasons: Object.fromEntries(Object.entries(reasons).map(([reason, count]) => [reason, count / n])),
    placeByReason: reasonNames.map((reason, index) => {
      const samples = placeNs.filter((_, i) => reasonOf[i] === index);
      let total = 0;
      for (const v of samples) total += v;
      const summary = summarize(samples);
      return { reason, share: samples.length / n, timeShare: total / placeTotal, meanUs: summary.mean, p50Us: summary.p50, p99Us: summary.p99 };
    }),
    decisionDigest: decisionHash.hex,
    costsDigest: costsHash.hex,
    matchedFractionMean: matchedFractionSum / n,
    hitFractionMean: hitFractionSum / n,
    hitTokenFraction: hitTokens / promptTokens,
    placementShareMaxOverMean: Math.max(...placements) / meanPlacements,
  };
}

// ---------------------------------------------------------------------------------------------
// The parent: runs every arm in a child, writes the results

interface Args {
  seed: number;
  salt: number;
  quick: boolean;
  repeats: number;
  toolbenchSlots: number;
  arm: string | undefined;
  dumpDecisions: string | undefined;
}

function parseArgs(argv: readonly string[]): Args {
  const value = (flag: string): string | undefined => {
    const i = argv.indexOf(flag);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const int = (flag: string, fallback: number): number => {
    const raw = value(flag);
    if (raw === undefined) return fallback;
    const parsed = Number(raw);
    if (!Number.isSafeInteger(parsed) || parsed < 0) throw new Error(`${flag} needs a non-negative integer, got ${raw}`);
    return parsed;
  };
  // A fresh salt per run unless one is given: one run's tree must not favour the next.
  return {
    seed: int("--seed", 1),
    salt: int("--salt", randomInt(2 ** 31)),
    quick: argv.includes("--quick"),
    repeats: Math.max(1, int("--repeats", 3)),
    toolbenchSlots: int("--toolbench-slots", TOOLBENCH_SLOTS),
    arm: value("--arm"),
    dumpDecisions: value("--dump-decisions"),
  };
}

function runChild(args: Args, policy: PolicyArm, workload: WorkloadName): Promise<ArmResult> {
  const script = fileURLToPath(import.meta.url);
  const childArgs = [
    ...["--arm", `${workload}/${policy}`, "--seed", String(args.seed), "--salt", String(args.salt), "--toolbench-slots", String(args.toolbenchSlots)],
    ...(args.quick ? ["--quick"] : []),
    ...(args.dumpDecisions !== undefined ? ["--dump-decisions", args.dumpDecisions] : []),
  ];
  return new Promise((resolve, reject) => {
    let result: ArmResult | undefined;
    const child = fork(script, childArgs, { execArgv: process.execArgv, stdio: ["ignore", "inherit", "inherit", "ipc"] });
    child.on("message", (message) => {
      result = message as ArmResult;
    });
    child.on("error", reject);
    child.on("exit", (code) => (code === 0 && result ? resolve(result) : reject(new Error(`arm ${workload}/${policy} exited with ${code}`))));
  });
}

/** The run with the median place rate, with every run's figures attached. The runs of one
 *  arm place the same requests, so they must decide alike: a difference is a bug. */
function medianRun(runs: readonly ArmResult[]): ArmResult {
  const first = runs[0]!;
  for (const run of runs) {
    if (run.decisionDigest !== first.decisionDigest || run.costsDigest !== first.costsDigest) {
      throw new Error(`${first.workload}/${first.policy}: two runs decided differently (${first.decisionDigest} vs ${run.decisionDigest})`);
    }
  }
  const byRate = [...runs].sort((a, b) => a.measured.decisionsPerS - b.measured.decisionsPerS);
  return {
    ...byRate[(byRate.length - 1) >> 1]!,
    runs: {
      decisionsPerS: runs.map((run) => run.measured.decisionsPerS),
      cyclesPerS: runs.map((run) => run.measured.cyclesPerS),
      placeP99Us: runs.map((run) => run.measured.placeUs.p99),
    },
  };
}

const fmt = (value: number, digits = 0) => value.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
const pct = (value: number) => (value > 0 && value < 0.0001 ? "<0.01%" : `${(value * 100).toFixed(value > 0 && value < 0.01 ? 2 : 1)}%`);

/** The command as a person would type it: tsx's own loader flags read as `--import tsx`. */
function commandLine(): string {
  const flags: string[] = [];
  let viaTsx = false;
  const execArgv = process.execArgv;
  for (let i = 0; i < execArgv.length; i++) {
    const flag = execArgv[i]!;
    const next = execArgv[i + 1];
    if ((flag === "--require" || flag === "--import") && next !== undefined && /[\\/]tsx[\\/]|^tsx$/.test(next)) {
      viaTsx = true;
      i++;
    } else flags.push(flag);
  }
  if (viaTsx) flags.push("--import", "tsx");
  const script = process.argv[1]?.replace(`${process.cwd()}/`, "") ?? "bench/scheduler/scheduler.bench.ts";
  return ["node", ...flags, script, ...process.argv.slice(2)].join(" ");
}

/** One target of the bench and whether the run met it. */
interface TargetCheck {
  target: string;
  arm: string;
  measured: string;
  met: boolean;
}

/** The targets, checked against the arms of the default policy (not met when an arm is missing). */
function checkTargets(arms: readonly ArmResult[]): TargetCheck[] {
  const arm = (workload: WorkloadName) => arms.find((a) => a.workload === workload && a.policy === TARGET_POLICY);
  const check = (workload: WorkloadName, target: string, value: (a: ArmResult) => number, unit: string, met: (v: number) => boolean): TargetCheck => {
    const a = arm(workload);
    const v = a === undefined ? Number.NaN : value(a);
    return { target, arm: `${workload}/${TARGET_POLICY}`, measured: a === undefined ? "not run" : `${fmt(v, unit === "us" ? 1 : 0)} ${unit}`, met: met(v) };
  };
  const t = TARGETS.toolbench;
  return [
    check(
      "toolbench",
      `place >= ${fmt(t.decisionsPerS)} decisions/s`,
      (a) => a.measured.decisionsPerS,
      "decisions/s",
      (v) => v >= t.decisionsPerS,
    ),
    check(
      "toolbench",
      `place p99 < ${t.p99Us} us`,
      (a) => a.measured.placeUs.p99,
      "us",
      (v) => v < t.p99Us,
    ),
    check(
      "toolbench",
      `full cycle (place + slot report + complete) >= ${fmt(t.cyclesPerS)}/s`,
      (a) => a.measured.cyclesPerS,
      "cycles/s",
      (v) => v >= t.cyclesPerS,
    ),
    check(
      "mooncake",
      `place >= ${fmt(TARGETS.mooncake.decisionsPerS)} decisions/s`,
      (a) => a.measured.decisionsPerS,
      "decisions/s",
      (v) => v >= TARGETS.mooncake.decisionsPerS,
    ),
  ];
}

interface Report {
  machine: string;
  node: string;
  commit: string;
  command: string;
  seed: number;
  salt: number;
  gcExposed: boolean;
  workloads: Record<string, WorkloadPlan>;
  arms: ArmResult[];
  targetsMet: TargetCheck[];
  totalSeconds: number;
  repeats: number;
  /** os.loadavg() before the first arm and after the last. */
  loadAverage: { before: number[]; after: number[] };
}

function markdown(report: Report): string {
  const lines = [
    "# Global scheduler: decision speed on a warm tree",
    "",
    `Machine: ${report.machine}, load ${report.loadAverage.before[0]!.toFixed(2)} at the start and ${report.loadAverage.after[0]!.toFixed(2)} at the end; Node ${report.node}; commit ${report.commit}; seed ${report.seed}, salt ${report.salt}; ${fmt(report.totalSeconds)} s in all.`,
    "",
    `Command: \`${report.command}\``,
    "",
    `Fleet: ${WORKERS} workers of one model x ${fmt(CAPACITY_TOKENS)} tokens of KV, time model \`${TIME_MODEL}\`; the oldest request completes once more than ` +
      `${IN_FLIGHT_PER_WORKER * WORKERS} are in flight (${IN_FLIGHT_PER_WORKER} per worker on average). Each arm runs in a fresh process; the arms of a workload place the same requests. ` +
      `Each arm ran ${report.repeats} time${report.repeats === 1 ? "" : "s"}, the arms of a workload taking turns; the table gives the run with the median decisions/s (all runs below it).`,
    "",
    ...Object.entries(report.workloads).map(
      ([name, w]) =>
        `- ${name}: ${w.describe}; ${w.slots} slots per worker; warm-up ${fmt(w.warmupRequests)} requests, then ${fmt(w.measuredRequests)} measured.`,
    ),
    "",
    "| workload | policy | n | decisions/s | cycles/s | place p50 / p99 / max (us) | tree tokens / nodes | heap B per tree token (w/o slot mirror) | reasons | matched | hit on chosen |",
    "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |",
  ];
  for (const arm of report.arms) {
    const m = arm.measured;
    const heap =
      arm.heap.bytesPerTreeToken === undefined ? "no gc" : `${fmt(arm.heap.bytesPerTreeToken, 1)} (${fmt(arm.heap.bytesPerTreeTokenWithoutMirror!, 1)})`;
    const reasons = Object.entries(arm.reasons)
      .sort((a, b) => b[1] - a[1])
      .map(([reason, share]) => `${reason} ${pct(share)}`)
      .join(", ");
    lines.push(
      `| ${arm.workload} | ${arm.policy} | ${fmt(m.requests)} | ${fmt(m.decisionsPerS)} | ${fmt(m.cyclesPerS)} | ${fmt(m.placeUs.p50, 1)} / ${fmt(m.placeUs.p99, 1)} / ${fmt(m.placeUs.max)} | ` +
        `${fmt(arm.warmup.treeTokens)} / ${fmt(arm.warmup.treeNodes)} | ${heap} | ${reasons} | ${pct(arm.matchedFractionMean)} | ${pct(arm.hitFractionMean)} |`,
    );
  }
  const short = report.arms.filter((arm) => !arm.warmup.reachedTarget);
  lines.push(
    "",
    "Runs of each arm, in order (decisions/s; cycles/s; place p99 us):",
    "",
    ...report.arms.map(
      (arm) =>
        `- ${arm.workload}/${arm.policy}: ${(arm.runs?.decisionsPerS ?? [arm.measured.decisionsPerS]).map((v) => fmt(v)).join(", ")}; ` +
        `${(arm.runs?.cyclesPerS ?? [arm.measured.cyclesPerS]).map((v) => fmt(v)).join(", ")}; ` +
        `${(arm.runs?.placeP99Us ?? [arm.measured.placeUs.p99]).map((v) => fmt(v, 1)).join(", ")}`,
    ),
    "",
    "- decisions/s = measured requests / summed `place` time (each call timed on its own with process.hrtime.bigint); " +
      "cycles/s adds the `slot-holds` report and the `complete` calls each placement triggers (which pass prefillMs and decodeMsPerToken, so the time models refit online).",
    "- Tree tokens (distinct) and nodes at the end of the warm-up, where the heap is measured: JS heap + ArrayBuffers after vs before building the scheduler, " +
      (report.gcExposed ? "with gc() before each reading" : "NOT measured: gc was not exposed (run with node --expose-gc)") +
      ". In parentheses, without the prompt arrays (Int32Array, 4 B per token, as the server hands them over) still reachable after gc from the slots' last reports " +
      "(the scheduler's slot mirror, when it keeps them: the bench itself holds them only weakly) or from the requests in flight, " +
      "unless a tree node borrows its segment from one (then that array is the tree's own storage).",
    "- matched = Preble's matched / prompt (the longest prefix cached on any worker); hit on chosen = the part of the prompt the chosen worker held; per-request means.",
    `- Decision digests (FNV-1a over every decision, warm-up included: chosen worker and reason / over the priced costs): ${report.arms
      .map((arm) => `${arm.workload}/${arm.policy} ${arm.decisionDigest} / ${arm.costsDigest}`)
      .join("; ")}.`,
    ...(short.length > 0
      ? [
          `- Below ${fmt(TREE_TARGET_TOKENS)} distinct tokens after the warm-up: ${short
            .map(
              (arm) =>
                `${arm.workload}/${arm.policy} (${fmt(arm.warmup.treeTokens)} distinct, ${fmt(arm.warmup.cachedTokensAllWorkers)} summed over workers: it keeps the same prefixes on several workers)`,
            )
            .join("; ")}.`,
        ]
      : []),
    "- Max latencies include GC pauses.",
    "",
    "Place time by the decision's reason (the median run of each arm): share of decisions, share of place time, mean / p50 / p99 us.",
    "",
    ...report.arms.map(
      (arm) =>
        `- ${arm.workload}/${arm.policy}: ${[...arm.placeByReason]
          .sort((a, b) => b.timeShare - a.timeShare)
          .map((r) => `${r.reason} ${pct(r.share)} of decisions, ${pct(r.timeShare)} of time, ${fmt(r.meanUs, 1)} / ${fmt(r.p50Us, 1)} / ${fmt(r.p99Us, 1)}`)
          .join("; ")}`,
    ),
    "",
    `## Targets (${TARGET_POLICY}, the default policy)`,
    "",
    "| target | arm | measured | met |",
    "| --- | --- | ---: | --- |",
    ...report.targetsMet.map((t) => `| ${t.target} | ${t.arm} | ${t.measured} | ${t.met ? "yes" : "**no**"} |`),
    "",
  );
  return lines.join("\n");
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  if (args.arm !== undefined) {
    const [workload, policy] = args.arm.split("/") as [WorkloadName, PolicyArm];
    if (!WORKLOADS.includes(workload) || !POLICIES.includes(policy)) throw new Error(`unknown arm ${args.arm}`);
    const result = await runArm(policy, workload, args);
    // Run by hand (e.g. under --cpu-prof) there is no parent: print the result instead.
    if (process.send === undefined) console.log(JSON.stringify(result, null, 2));
    else await new Promise<void>((resolve, reject) => process.send!(result, (error: Error | null) => (error ? reject(error) : resolve())));
    return;
  }
  const started = performance.now();
  const machine = machineDescription();
  const command = commandLine();
  console.log(`scheduler bench: ${machine}, Node ${process.version}, seed ${args.seed}, salt ${args.salt}${args.quick ? ", quick" : ""}`);
  console.log(
    gc
      ? "gc is exposed: heap per tree token is measured"
      : "gc is NOT exposed: heap per tree token is not measured (run with node --expose-gc --import tsx bench/scheduler/scheduler.bench.ts)",
  );
  const loadBefore = os.loadavg();
  const arms: ArmResult[] = [];
  for (const workload of WORKLOADS) {
    // The arms of a workload take turns, so a slow minute of the machine falls on all of them.
    const runs = new Map<PolicyArm, ArmResult[]>(POLICIES.map((policy) => [policy, []]));
    for (let repeat = 1; repeat <= args.repeats; repeat++) {
      for (const policy of POLICIES) {
        console.log(`${workload}/${policy}: run ${repeat} of ${args.repeats}`);
        const arm = await runChild(args, policy, workload);
        runs.get(policy)!.push(arm);
        const m = arm.measured;
        console.log(
          `${workload}/${policy}: ${fmt(m.decisionsPerS)} decisions/s, ${fmt(m.cyclesPerS)} cycles/s, place p50 ${fmt(m.placeUs.p50, 1)} us, p99 ${fmt(m.placeUs.p99, 1)} us, ` +
            `max ${fmt(m.placeUs.max)} us (n=${m.requests}); tree ${fmt(arm.warmup.treeTokens)} tokens; decisions ${arm.decisionDigest}, costs ${arm.costsDigest}`,
        );
      }
    }
    for (const policy of POLICIES) arms.push(medianRun(runs.get(policy)!));
  }
  const totalSeconds = (performance.now() - started) / 1000;
  const report = {
    benchmark: "scheduler",
    date: new Date().toISOString(),
    machine,
    cpuModel: os.cpus()[0]?.model ?? "unknown",
    cpuCount: os.cpus().length,
    node: process.version,
    commit: gitCommit(["src/scheduler", "src/common", "bench/scheduler", "bench/workloads"]),
    command,
    seed: args.seed,
    salt: args.salt,
    quick: args.quick,
    repeats: args.repeats,
    gcExposed: gc !== undefined,
    loadAverage: { before: loadBefore, after: os.loadavg() },
    fleet: {
      workers: WORKERS,
      capacityTokensPerWorker: CAPACITY_TOKENS,
      timeModel: TIME_MODEL,
      inFlightPerWorker: IN_FLIGHT_PER_WORKER,
      treeTargetTokens: TREE_TARGET_TOKENS,
    },
    workloads: Object.fromEntries(
      WORKLOADS.map((workload) => {
        const records = workload === "mooncake" ? mooncakeRecordCount() : 0;
        return [workload, plan(workload, args.quick, records, args.toolbenchSlots)];
      }),
    ),
    target: { policy: TARGET_POLICY, ...TARGETS },
    targetsMet: checkTargets(arms),
    totalSeconds,
    arms,
  };
  const results = fileURLToPath(new URL("../results/", import.meta.url));
  writeFileSync(`${results}scheduler.json`, `${JSON.stringify(report, null, 2)}\n`);
  writeFileSync(`${results}scheduler.md`, markdown(report));
  console.log(`wrote bench/results/scheduler.json and bench/results/scheduler.md (${fmt(totalSeconds)} s)`);
}

await main();
