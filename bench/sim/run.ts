// The simulator's command line: every policy side by side on simulated GPU fleets.
//
//   npx tsx bench/sim/run.ts [--workload toolbench-zipf,mooncake|all] [--workers 4[,2,8]]
//     [--gpu a6000-mistral-7b|h100-llama3-70b|a6000-mistral-7b-idealised|h100-llama3-70b-idealised|cpu]
//     [--time-model FILE] [--policies preble,cache-aware,roundrobin,shape] [--loads 0.25,0.5,0.75,1]
//     [--seed 1] [--salt N] [--requests N] [--context-size N|fit] [--slots N] [--spill-bytes N]
//     [--capacity-tokens N] [--out DIR] [--per-request] [--capacity [--baseline FILE] [--reuse-ceiling]]
//     [--hosts 2,4,8 [--gpus-per-host 8] [--routers 2] [--latency-ms 0.5] [--bandwidth-gbps 25] [--no-host-copies]]
//
// Defaults: ToolBench-Zipf and Mooncake on 4 A6000 workers as Radixgate runs them (KV cells per
// slot, 32768-token slots, as many as the card's KV holds, the state store with config.yml's
// budget: bench/sim/hardware.ts, docs/simulator.md), policies preble, cache-aware, roundrobin
// and shape, loads 0.25, 0.5, 0.75 and 1 (x r0, see bench/sim/workloads.ts), seed 1, a fresh
// salt per run (so no run reuses another's prompts). A `-idealised` card is the earlier SGLang-like one (256
// slots over one shared 200k-token pool, no state store), not Radixgate's worker. `--gpu cpu`
// simulates CPU workers as config.yml sets them up, with the time model of `--time-model` (a
// calibration file from models/.calibration/, or bare coefficients). `--requests` sets the
// sample size (sessions for agent-loops, prompts per worker at load 1 for cold-burst).
// Card overrides: `--context-size` tokens per slot (GPU and cpu cards; on a GPU card the slots
// follow from the KV; `fit`: per workload, the smallest power of two that holds its longest
// request, at most 32768, as an operator sizes slots for one workload; the card is then named
// <gpu>-ctx<N>), `--slots` (more than the KV holds is an error), `--spill-bytes` the
// state store's host memory per worker (GPU cards; 0 = none), `--capacity-tokens` the shared
// pool (idealised cards only). Writes DIR/NAME.json, DIR/NAME.md and
// DIR/NAME.<workload>-<gpu>-<N>w.svg (DIR: bench/results, NAME: --name, default sim). A progress line per arm on stderr.
// `--baseline FILE` (with --capacity): an earlier run's NAME.json; the report shows its preble and
// best-other capacities beside the new ones, fleet by fleet.
// `--reuse-ceiling` (with --capacity, one box): each fleet's capacity under the ceiling of reuse
// too (bench/sim/reuse-ceiling.ts: every card holds every prompt seen, free), with the best
// balancer: what no placement rule can pass through reuse on that fleet.
// `--hosts`: more than one machine (bench/sim/network.ts): each fleet is hosts x gpus-per-host
// engines (instead of --workers) behind --routers routers, with the network's one-way latency
// and each machine's link bandwidth; --no-host-copies: routers never copy prefixes between
// engines (as the real routers do with remote engines today). GPU cards only.
import { gitCommit, machineDescription } from "../git-commit.js";
import { randomInt } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { isPolicyName, POLICY_NAMES } from "../../src/scheduler/registry.js";
import { terminalProgress } from "../../src/cli/progress.js";
import { cpuSpec, DEFAULT_GPU, fitContextSize, fittedCardName, GPU_NAMES, gpuCard, gpuSpec, readTimeModelFile } from "./hardware.js";
import { NETWORK_DEFAULTS, type NetworkSpec } from "./network.js";
import { CAPACITY_SIZES, type CapacityBaseline, type CapacityReport, capacityAtSlo } from "./capacity-run.js";
import { CEILING_BALANCERS } from "./reuse-ceiling.js";
import { summarize } from "./metrics.js";
import { type ArmRecord, chartFile, headlines, markdown, type SimReport, svgChart } from "./report.js";
import { simulate, type WorkerSpec } from "./simulator.js";
import { atLoad, buildWorkload, DEFAULT_SIZES, isWorkloadName, WORKLOAD_NAMES, type WorkloadName, type WorkloadSample } from "./workloads.js";

interface Args {
  workloads: WorkloadName[];
  workers: number[];
  gpus: string[];
  timeModel: string | undefined;
  policies: string[];
  loads: number[];
  seed: number;
  salt: number;
  requests: number | undefined;
  /** Tokens per slot; "fit": per workload, the smallest power of two that holds its longest request (fitContextSize). */
  contextSize: number | "fit" | undefined;
  slots: number | undefined;
  spillBytes: number | undefined;
  capacityTokens: number | undefined;
  out: string;
  perRequest: boolean;
  /** Capacity at the SLO instead of the load grid (bench/sim/capacity.ts). */
  capacity: boolean;
  /** With --capacity: each fleet's capacity under the ceiling of reuse too (bench/sim/reuse-ceiling.ts). */
  reuseCeiling: boolean;
  /** File stem of the results: DIR/<name>.json, .md. */
  name: string;
  /** An earlier run's sim.json whose capacities the report shows beside the new ones (--capacity). */
  baseline: string | undefined;
  /** With --hosts: machines per fleet and the network between them (the card's KV bytes per token come with the card). */
  hosts: number[] | undefined;
  network: Omit<NetworkSpec, "kvBytesPerToken">;
}

const USAGE = `usage: npx tsx bench/sim/run.ts [--capacity [--baseline FILE] [--reuse-ceiling]] [--name sim] [--hosts 2,4,8 [--gpus-per-host 8] [--routers 2] [--latency-ms 0.5] [--bandwidth-gbps 25] [--no-host-copies]] [--workload ${WORKLOAD_NAMES.join("|")}|all (comma list)] [--workers 2,4,8] [--gpu ${[...GPU_NAMES, "cpu"].join("|")} (comma list; default ${DEFAULT_GPU})] [--time-model FILE] [--policies ${POLICY_NAMES.join(",")}] [--loads 0.25,0.5,0.75,1] [--seed N] [--salt N] [--requests N] [--context-size N|fit] [--slots N] [--spill-bytes N (0 = no state store)] [--capacity-tokens N (idealised cards)] [--out DIR] [--per-request]`;

function parseArgs(argv: readonly string[]): Args {
  const known = new Set([
    "--workload",
    "--workers",
    "--gpu",
    "--time-model",
    "--policies",
    "--loads",
    "--seed",
    "--salt",
    "--requests",
    "--context-size",
    "--slots",
    "--spill-bytes",
    "--capacity-tokens",
    "--out",
    "--name",
    "--hosts",
    "--gpus-per-host",
    "--routers",
    "--latency-ms",
    "--bandwidth-gbps",
    "--baseline",
  ]);
  const values = new Map<string, string>();
  let perRequest = false;
  let capacity = false;
  let reuseCeiling = false;
  let hostCopies = NETWORK_DEFAULTS.hostCopies;
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]!;
    if (flag === "--per-request") perRequest = true;
    else if (flag === "--no-host-copies") hostCopies = false;
    else if (flag === "--capacity") capacity = true;
    else if (flag === "--reuse-ceiling") reuseCeiling = true;
    else if (flag === "--help" || flag === "-h") {
      console.log(USAGE);
      process.exit(0);
    } else if (known.has(flag) && argv[i + 1] !== undefined) values.set(flag, argv[++i]!);
    else throw new Error(`unknown or incomplete argument ${flag}\n${USAGE}`);
  }
  const list = (flag: string, fallback: string) =>
    (values.get(flag) ?? fallback)
      .split(",")
      .map((item) => item.trim())
      .filter((item) => item !== "");
  const positive = (flag: string, raw: string, integer: boolean) => {
    const value = Number(raw);
    if (!(value > 0) || (integer && !Number.isSafeInteger(value)))
      throw new Error(`${flag} needs ${integer ? "positive integers" : "positive numbers"}, got ${raw}`);
    return value;
  };
  const optionalInt = (flag: string) => (values.has(flag) ? positive(flag, values.get(flag)!, true) : undefined);
  const rawWorkloads = list("--workload", "toolbench-zipf,mooncake");
  const workloads = rawWorkloads.includes("all") ? [...WORKLOAD_NAMES] : rawWorkloads;
  for (const name of workloads) if (!isWorkloadName(name)) throw new Error(`unknown workload "${name}"; available: ${WORKLOAD_NAMES.join(", ")}, all`);
  const policies = list("--policies", "preble,cache-aware,roundrobin,shape");
  for (const name of policies) if (!isPolicyName(name)) throw new Error(`unknown policy "${name}"; available: ${POLICY_NAMES.join(", ")}`);
  const gpus = list("--gpu", DEFAULT_GPU);
  if (gpus.includes("cpu") && !values.has("--time-model")) throw new Error("--gpu cpu needs --time-model FILE (a calibration file from models/.calibration/)");
  const seedRaw = values.get("--seed") ?? "1";
  const seed = Number(seedRaw);
  if (!Number.isSafeInteger(seed) || seed < 0) throw new Error(`--seed needs a non-negative integer, got ${seedRaw}`);
  const spillRaw = values.get("--spill-bytes");
  const spillBytes = spillRaw === undefined ? undefined : Number(spillRaw);
  if (spillBytes !== undefined && !(Number.isSafeInteger(spillBytes) && spillBytes >= 0))
    throw new Error(`--spill-bytes needs a non-negative integer, got ${spillRaw}`);
  const networkFlags = ["--gpus-per-host", "--routers", "--latency-ms", "--bandwidth-gbps"];
  if (!values.has("--hosts") && (!hostCopies || networkFlags.some((flag) => values.has(flag))))
    throw new Error(`${[...networkFlags, "--no-host-copies"].join(", ")} describe the machines of --hosts; give --hosts too`);
  if (values.has("--hosts") && values.has("--workers")) throw new Error("--hosts sets each fleet's engines (hosts x --gpus-per-host); leave --workers out");
  if (values.has("--baseline") && !capacity) throw new Error("--baseline compares capacities: give --capacity too");
  if (reuseCeiling && !capacity) throw new Error("--reuse-ceiling is a capacity beside the policies' capacities: give --capacity too");
  if (reuseCeiling && values.has("--hosts")) throw new Error("--reuse-ceiling is for one box: leave --hosts out");
  if (values.has("--hosts") && gpus.includes("cpu")) throw new Error("--hosts simulates GPU machines; --gpu cpu is one box");
  const number = (flag: string, fallback: number, integer: boolean) => (values.has(flag) ? positive(flag, values.get(flag)!, integer) : fallback);
  const saltRaw = values.get("--salt");
  const salt = saltRaw === undefined ? randomInt(2 ** 31) : Number(saltRaw);
  if (!Number.isSafeInteger(salt) || salt < 0) throw new Error(`--salt needs a non-negative integer, got ${saltRaw}`);
  return {
    workloads: workloads as WorkloadName[],
    workers: list("--workers", "4").map((raw) => positive("--workers", raw, true)),
    gpus,
    timeModel: values.get("--time-model"),
    policies,
    loads: list("--loads", "0.25,0.5,0.75,1").map((raw) => positive("--loads", raw, false)),
    seed,
    salt,
    requests: optionalInt("--requests"),
    contextSize: values.get("--context-size") === "fit" ? "fit" : optionalInt("--context-size"),
    slots: optionalInt("--slots"),
    spillBytes,
    capacityTokens: optionalInt("--capacity-tokens"),
    out: values.get("--out") ?? fileURLToPath(new URL("../results/", import.meta.url)),
    perRequest,
    capacity,
    reuseCeiling,
    name: stemOf(values.get("--name") ?? "sim"),
    baseline: values.get("--baseline"),
    hosts: values.has("--hosts") ? list("--hosts", "").map((raw) => positive("--hosts", raw, true)) : undefined,
    network: {
      gpusPerHost: number("--gpus-per-host", NETWORK_DEFAULTS.gpusPerHost, true),
      routers: number("--routers", NETWORK_DEFAULTS.routers, true),
      latencyMs: number("--latency-ms", NETWORK_DEFAULTS.latencyMs, false),
      bandwidthGbps: number("--bandwidth-gbps", NETWORK_DEFAULTS.bandwidthGbps, false),
      loadEveryMs: NETWORK_DEFAULTS.loadEveryMs,
      hostCopies,
    },
  };
}

/** The capacities of an earlier run's sim.json (--baseline). */
function readBaseline(path: string): CapacityBaseline {
  const report = JSON.parse(readFileSync(path, "utf8")) as Partial<SimReport>;
  if (!Array.isArray(report.capacity)) throw new Error(`--baseline ${path}: no capacity list (a run of bench:sim --capacity writes one)`);
  return { file: relative(process.cwd(), path), commit: report.commit ?? "unknown", capacity: report.capacity };
}

/** A workload's sample size: --requests, else what capacity or the load grid needs of it. */
function sizeOf(name: WorkloadName, args: Args): number {
  return args.requests ?? (args.capacity ? CAPACITY_SIZES[name] : undefined) ?? DEFAULT_SIZES[name];
}

function stemOf(name: string): string {
  if (!/^[a-z0-9-]+$/.test(name)) throw new Error(`--name needs a file stem of lowercase letters, digits and dashes, got ${name}`);
  return name;
}

/** The card with the command line's overrides (hardware.ts refuses those that do not apply, or do not fit). */
function specOf(gpu: string, args: Args, contextSize = args.contextSize === "fit" ? undefined : args.contextSize): WorkerSpec {
  const { slots, spillBytes, capacityTokens } = args;
  if (gpu !== "cpu") return gpuSpec(gpu, { contextSize, slots, spillBytes, capacityTokens });
  if (spillBytes !== undefined || capacityTokens !== undefined)
    throw new Error("--gpu cpu: --spill-bytes and --capacity-tokens apply to GPU cards; the cpu card is slots x --context-size");
  return cpuSpec(readTimeModelFile(args.timeModel!), { slots, contextSize });
}

function commandLine(): string {
  const script = process.argv[1]?.replace(`${process.cwd()}/`, "") ?? "bench/sim/run.ts";
  return ["npx tsx", script, ...process.argv.slice(2)].join(" ");
}

const fmt = (value: number, digits = 0) => value.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });

/** One simulated fleet: a workload's sample on `workers` cards of one kind. */
export interface Fleet {
  name: WorkloadName;
  gpu: string;
  spec: WorkerSpec;
  workers: number;
  size: number;
  sample: WorkloadSample;
  /** More than one machine (--hosts). */
  network?: NetworkSpec;
}

/** Simulates one arm (a policy on a fleet at a load) and logs its line. */
async function runArm(fleet: Fleet, load: number, policy: string, args: Args, log: (line: string) => void, reuseCeiling = false): Promise<ArmRecord> {
  const loaded = atLoad(fleet.sample, load, fleet.spec, fleet.workers, fleet.size);
  const machines = fleet.network ? ` (${fleet.workers / fleet.network.gpusPerHost} hosts, ${fleet.network.routers} routers)` : "";
  const label = `${fleet.name} ${fleet.workers}x${fleet.gpu}${machines} load ${fmt(load, 3)} ${policy}${reuseCeiling ? " (reuse ceiling)" : ""}`;
  const armStarted = performance.now();
  const result = await simulate({
    policy,
    reuseCeiling,
    workers: fleet.workers,
    spec: fleet.spec,
    requests: loaded.requests,
    ...(fleet.network ? { network: fleet.network } : {}),
    progressEvery: Math.max(100, Math.ceil(loaded.requests.length / 4)),
    // Within an arm, only when it runs long.
    onProgress: (completed, all, simulatedMs) => {
      if (performance.now() - armStarted > 5000) log(`  ${label}: ${completed}/${all} done, ${fmt(simulatedMs / 1000)} s simulated`);
    },
  });
  const summary = summarize(result);
  const wallS = (performance.now() - armStarted) / 1000;
  log(
    `${label}: n=${summary.n}${summary.refused ? ` (+${summary.refused} refused)` : ""}, TTFT mean ${fmt(summary.ttftMs.mean)} ms p99 ${fmt(summary.ttftMs.p99)} ms, ` +
      `E2E mean ${fmt(summary.e2eMs.mean)} ms p99 ${fmt(summary.e2eMs.p99)} ms, cached ${(summary.cached.meanFraction * 100).toFixed(0)}%, ${fmt(wallS, 1)} s`,
  );
  return {
    workload: fleet.name,
    gpu: fleet.gpu,
    workers: fleet.workers,
    load,
    ratePerS: loaded.ratePerS,
    r0PerS: loaded.r0PerS,
    timeScale: loaded.timeScale,
    policy,
    summary,
    wallS,
    decisions: result.decisions,
    ...(result.network ? { network: result.network } : {}),
    ...(args.perRequest ? { cachedFractions: result.records.map((record) => Math.round(record.cachedFraction * 1000) / 1000) } : {}),
  };
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  // Read before the run, so that a bad file stops it at once.
  const baseline = args.baseline === undefined ? undefined : readBaseline(args.baseline);
  const started = performance.now();
  const machine = machineDescription();
  const maxLoad = Math.max(...args.loads);
  // Every card first, so that an override that does not fit stops the run before any arm
  // (with --context-size fit, each workload's card is made with its first sample).
  const hardware: Record<string, WorkerSpec> = args.contextSize === "fit" ? {} : Object.fromEntries(args.gpus.map((gpu) => [gpu, specOf(gpu, args)]));
  const workloadInfo: SimReport["workloads"] = {};
  const fleets: Fleet[] = [];
  for (const name of args.workloads) {
    for (const gpu of args.gpus) {
      const network = args.hosts ? { ...args.network, kvBytesPerToken: gpuCard(gpu).kvBytesPerToken } : undefined;
      for (const workers of args.hosts ? args.hosts.map((hosts) => hosts * args.network.gpusPerHost) : args.workers) {
        const size = sizeOf(name, args);
        const sample: WorkloadSample = buildWorkload(name, { seed: args.seed, salt: args.salt, size, workers, maxLoad });
        workloadInfo[name] = { describe: sample.describe, requests: sample.requests.length, kind: sample.kind };
        let card = gpu;
        if (args.contextSize === "fit") {
          const contextSize = fitContextSize(sample.requests);
          card = fittedCardName(gpu, contextSize);
          hardware[card] ??= specOf(gpu, args, contextSize);
        }
        fleets.push({ name, gpu: card, spec: hardware[card]!, workers, size, sample, ...(network ? { network } : {}) });
      }
    }
  }
  const unit = args.capacity ? "capacities" : "arms";
  const total = fleets.length * (args.policies.length + (args.reuseCeiling ? CEILING_BALANCERS.length : 0)) * (args.capacity ? 1 : args.loads.length);
  process.stderr.write(`sim: ${machine}, Node ${process.version}, seed ${args.seed}, salt ${args.salt}; ${total} ${unit}\n`);
  // A bar on a terminal; the per-arm lines print above it (or alone into a pipe).
  const progress = terminalProgress("sim", unit);
  progress.update(0, total);
  let done = 0;
  // Capacity mode runs latency arms after a fleet's capacities: they keep the last count.
  const log = (line: string) => progress.log(`[${Math.min(done + 1, total)}/${total}] ${line}`);
  const step = () => progress.update(++done, total);
  const arms: ArmRecord[] = [];
  let capacity: CapacityReport | undefined;
  if (args.capacity) {
    capacity = await capacityAtSlo(fleets, args.policies, (fleet, load, policy, reuseCeiling) => runArm(fleet, load, policy, args, log, reuseCeiling), step, {
      reuseCeiling: args.reuseCeiling,
    });
    arms.push(...capacity.arms);
  } else {
    for (const fleet of fleets) {
      for (const load of args.loads) {
        for (const policy of args.policies) {
          arms.push(await runArm(fleet, load, policy, args, log));
          step();
        }
      }
    }
  }
  progress.stop();
  const report: SimReport = {
    benchmark: "sim",
    name: args.name,
    date: new Date().toISOString(),
    machine,
    node: process.version,
    // The cards read config defaults (spill, slots) and MIN_RESTORE_GAIN from these two files.
    commit: gitCommit(["src/scheduler", "src/common", "src/config/schema.ts", "src/engine/wire/protocol.ts", "bench/sim", "bench/workloads"]),
    command: commandLine(),
    seed: args.seed,
    salt: args.salt,
    settings: {
      workloads: args.workloads,
      gpus: args.gpus,
      workers: args.hosts ? args.hosts.map((hosts) => hosts * args.network.gpusPerHost) : args.workers,
      policies: args.policies,
      ...(args.hosts ? { hosts: args.hosts, network: args.network } : {}),
      loads: args.loads,
      sizes: Object.fromEntries(args.workloads.map((name) => [name, sizeOf(name, args)])),
    },
    hardware,
    workloads: workloadInfo,
    arms,
    headline: headlines(arms),
    ...(capacity ? { capacity: capacity.capacity, latency: capacity.latency, ...(capacity.ceiling ? { ceiling: capacity.ceiling } : {}) } : {}),
    ...(baseline ? { baseline } : {}),
    totalSeconds: (performance.now() - started) / 1000,
  };
  mkdirSync(args.out, { recursive: true });
  writeFileSync(join(args.out, `${args.name}.json`), `${JSON.stringify(report, (_key, value: unknown) => (value === Infinity ? "Infinity" : value), 2)}\n`);
  writeFileSync(join(args.out, `${args.name}.md`), markdown(report));
  const charts = new Map<string, ArmRecord[]>();
  for (const arm of arms) {
    const file = chartFile(args.name, arm.workload, arm.gpu, arm.workers);
    charts.set(file, [...(charts.get(file) ?? []), arm]);
  }
  for (const [file, fleetArms] of charts) writeFileSync(join(args.out, file), svgChart(fleetArms));
  process.stderr.write(`wrote ${join(args.out, `${args.name}.json`)}, ${args.name}.md and ${charts.size} chart(s) (${fmt(report.totalSeconds)} s)\n`);
  for (const h of report.headline) {
    const rr = h.ratios.vsRoundrobin;
    const ca = h.ratios.vsCacheAware;
    console.log(
      `${h.workload} ${h.workers}x${h.gpu} load ${h.load}: preble/roundrobin mean E2E ${rr?.meanE2e.toFixed(2) ?? "-"}, TTFT ${rr?.meanTtft.toFixed(2) ?? "-"}; ` +
        `preble/cache-aware mean E2E ${ca?.meanE2e.toFixed(2) ?? "-"}, TTFT ${ca?.meanTtft.toFixed(2) ?? "-"}; p99 E2E vs rr ${rr?.p99E2e.toFixed(2) ?? "-"}, vs ca ${ca?.p99E2e.toFixed(2) ?? "-"}`,
    );
  }
}

await main();
