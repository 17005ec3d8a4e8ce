// `bench:sim --capacity`: for each fleet and policy, the capacity at the workload's SLO
// (capacity.ts), then every policy's latency at 0.5x, 0.8x and 1.0x of roundrobin's capacity.
// The SLO of a fleet is fixed from its workload and card before any arm runs.
import type { ArmRecord } from "./report.js";
import type { Fleet } from "./run.js";
import { CAPACITY_DEFAULTS, findCapacity, sloTtftP99Ms } from "./capacity.js";
import { CEILING_BALANCERS } from "./reuse-ceiling.js";
import { coldPrefillRatePerS } from "./workloads.js";

/** Sessions a closed-loop workload needs for its capacity to be a rate (see capacityAtSlo). */
export const MIN_CAPACITY_SESSIONS = 400;
/** Sample sizes of --capacity where they differ from the load grid's (run.ts): agent sessions, see MIN_CAPACITY_SESSIONS. */
export const CAPACITY_SIZES: Partial<Record<string, number>> = { "agent-loops": 600 };

/** Loads, as fractions of roundrobin's capacity, at which every policy's latency is reported. */
export const LATENCY_LOADS = [0.5, 0.8, 1.0] as const;

export interface CapacityEntry {
  workload: string;
  card: string;
  workers: number;
  policy: string;
  sloTtftP99Ms: number;
  ratePerS: number;
  /** The same capacity in units of r0 (workers / mean cold prefill). */
  load: number;
  /** Arms simulated to find it. */
  probes: number;
  /** Requests too long for any slot, refused at every load (not counted against the SLO). */
  refused: number;
  /** The arm at the capacity: its routers, the decisions each made per simulated second, the wall time of one decision here, its copies. */
  atCapacity?: {
    routers: number;
    decisionsPerRouterPerS: number;
    decisionWallUs: number;
    copiesWithin: number;
    copiesAcross: number;
    linkQueuedMs: number;
  };
}

export interface LatencyEntry {
  workload: string;
  card: string;
  workers: number;
  policy: string;
  loadOfRoundrobinCapacity: number;
  ttftMeanMs: number;
  ttftP99Ms: number;
  e2eMeanMs: number;
  e2eP99Ms: number;
}

/** An earlier run's capacities (its sim.json), to show beside a new run's. */
export interface CapacityBaseline {
  file: string;
  commit: string;
  capacity: readonly CapacityEntry[];
}

/** A fleet's capacity with the ceiling of reuse (reuse-ceiling.ts) under one balancer: not a real fleet. */
export interface CeilingEntry {
  workload: string;
  card: string;
  workers: number;
  /** The policy that places (a balancer: reuse is the same on every card). */
  balancer: string;
  sloTtftP99Ms: number;
  ratePerS: number;
  load: number;
  probes: number;
}

export interface CapacityReport {
  capacity: CapacityEntry[];
  latency: LatencyEntry[];
  /** With the ceiling of reuse asked for: each fleet's capacity under it, per balancer. */
  ceiling?: CeilingEntry[];
  /** The latency arms, for the report's usual tables and charts. */
  arms: ArmRecord[];
}

/** Runs one arm: a policy on a fleet at a load, on the real fleet or, with `reuseCeiling`, under the ceiling of reuse. */
export type ArmRunner = (fleet: Fleet, load: number, policy: string, reuseCeiling?: boolean) => Promise<ArmRecord>;

export async function capacityAtSlo(
  fleets: readonly Fleet[],
  policies: readonly string[],
  runArm: ArmRunner,
  onCapacity: () => void,
  options: { reuseCeiling?: boolean } = {},
): Promise<CapacityReport> {
  if (!policies.includes("roundrobin")) throw new Error("--capacity reports latency at fractions of roundrobin's capacity: include roundrobin in --policies");
  const report: CapacityReport = { capacity: [], latency: [], arms: [], ...(options.reuseCeiling ? { ceiling: [] } : {}) };
  for (const fleet of fleets) {
    if (fleet.sample.kind === "burst") throw new Error(`--capacity: ${fleet.name} is one burst with no arrival rate; leave it out`);
    // Agent sessions start at Poisson arrivals and send each next turn after their last answer:
    // the start rate is the open rate raised (capacity counts their requests per second). A
    // sample of few sessions is in flight all at once above some rate, and p99 TTFT then stops
    // growing with it (60 sessions gave 810 requests/s): the search needs many more.
    if (fleet.sample.kind === "sessions" && fleet.size < MIN_CAPACITY_SESSIONS) {
      throw new Error(
        `--capacity: ${fleet.name} has ${fleet.size} sessions; capacity needs at least ${MIN_CAPACITY_SESSIONS} (--requests), or the whole sample is in flight at once and p99 TTFT stops growing with the rate`,
      );
    }
    const r0PerS = coldPrefillRatePerS(fleet.sample.requests, fleet.spec, fleet.workers);
    const slo = sloTtftP99Ms(r0PerS, fleet.workers);
    const loads = new Map<string, number>();
    for (const policy of policies) {
      const probeArms = new Map<number, ArmRecord>();
      const found = await findCapacity(
        async (load) => {
          const arm = await runArm(fleet, load, policy);
          probeArms.set(load, arm);
          return { ttftP99Ms: arm.summary.ttftMs.p99, refused: arm.summary.refused };
        },
        { ...CAPACITY_DEFAULTS, sloTtftP99Ms: slo },
      );
      const atCapacity = probeArms.get(found.load);
      loads.set(policy, found.load);
      report.capacity.push({
        workload: fleet.name,
        card: fleet.gpu,
        workers: fleet.workers,
        policy,
        sloTtftP99Ms: slo,
        ratePerS: found.load * r0PerS,
        load: found.load,
        probes: found.probes.length,
        refused: found.probes[0]?.refused ?? 0,
        ...(atCapacity?.decisions && atCapacity.network ? { atCapacity: atCapacityOf(atCapacity) } : {}),
      });
      onCapacity();
    }
    for (const balancer of report.ceiling ? CEILING_BALANCERS : []) {
      const found = await findCapacity(
        async (load) => {
          const arm = await runArm(fleet, load, balancer, true);
          return { ttftP99Ms: arm.summary.ttftMs.p99, refused: arm.summary.refused };
        },
        { ...CAPACITY_DEFAULTS, sloTtftP99Ms: slo },
      );
      report.ceiling!.push({
        workload: fleet.name,
        card: fleet.gpu,
        workers: fleet.workers,
        balancer,
        sloTtftP99Ms: slo,
        ratePerS: found.load * r0PerS,
        load: found.load,
        probes: found.probes.length,
      });
      onCapacity();
    }
    const roundrobin = loads.get("roundrobin")!;
    if (roundrobin === 0) continue;
    for (const fraction of LATENCY_LOADS) {
      for (const policy of policies) {
        // Rounded so the report's load column reads as a number, not a float's tail.
        const arm = await runArm(fleet, Number((fraction * roundrobin).toFixed(4)), policy);
        report.arms.push({ ...arm, loadOfRoundrobinCapacity: fraction });
        const { ttftMs, e2eMs } = arm.summary;
        report.latency.push({
          workload: fleet.name,
          card: fleet.gpu,
          workers: fleet.workers,
          policy,
          loadOfRoundrobinCapacity: fraction,
          ttftMeanMs: ttftMs.mean,
          ttftP99Ms: ttftMs.p99,
          e2eMeanMs: e2eMs.mean,
          e2eP99Ms: e2eMs.p99,
        });
      }
    }
  }
  return report;
}

/** What the arm at a fleet's capacity says of its routers and copies (multi-machine fleets). */
function atCapacityOf(arm: ArmRecord): NonNullable<CapacityEntry["atCapacity"]> {
  const decisions = arm.decisions!;
  const network = arm.network!;
  return {
    routers: network.routers,
    decisionsPerRouterPerS: decisions.count / network.routers / Math.max(1e-9, arm.summary.makespanS),
    decisionWallUs: (decisions.wallMs * 1000) / Math.max(1, decisions.count),
    copiesWithin: network.copiesWithin,
    copiesAcross: network.copiesAcross,
    linkQueuedMs: network.queuedMs,
  };
}

const fmt = (value: number, digits = 0) => value.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
const ratio = (value: number, other: number) => (other > 0 && Number.isFinite(value) ? `${fmt(value / other, 2)}x` : "-");

/**
 * The decision trace behind each fleet's tail: at roundrobin's capacity, for every policy, the
 * slowest 1 % of its requests, by the reason they were placed for and where their time went.
 */
export function tailSection(arms: readonly ArmRecord[]): string[] {
  const atCapacity = arms.filter((arm) => arm.loadOfRoundrobinCapacity === 1);
  if (atCapacity.length === 0) return [];
  const lines = [
    "### Why the tail is slow: the slowest 1 % of each policy's requests at roundrobin's capacity",
    "",
    "For every fleet and policy, at the load of roundrobin's capacity: the requests at or above the arm's p99 TTFT, by the reason the policy placed them for (share of the tail), their mean wait on the worker before a slot took them, their mean prefill (slot to first token), their mean cached fraction, and the share of them one worker served. Long slot waits on one worker are a holder kept busy by its prefix; long prefills with little cached are misses.",
    "",
    "| workload | card x workers | policy | p99 TTFT | tail by reason | slot wait | prefill | cached | on one worker |",
    "| --- | --- | --- | ---: | --- | ---: | ---: | ---: | ---: |",
  ];
  for (const arm of atCapacity) {
    const tail = arm.summary.tail;
    const reasons = Object.entries(tail.reasons)
      .sort((a, b) => b[1] - a[1])
      .map(([reason, count]) => `${reason} ${Math.round((100 * count) / Math.max(1, tail.n))}%`)
      .join(", ");
    lines.push(
      `| ${arm.workload} | ${arm.gpu} x ${arm.workers} | ${arm.policy} | ${fmt(tail.fromTtftMs)} ms | ${reasons} | ${fmt(tail.slotWaitMs)} ms | ${fmt(tail.prefillMs)} ms | ${Math.round(100 * tail.cachedFraction)}% | ${Math.round(100 * tail.topWorkerShare)}% (${tail.topWorker}) |`,
    );
  }
  lines.push("");
  return lines;
}

/** Workloads whose target is preble >= 2x roundrobin and >= 1.25x the best published rule. */
const AGENT_WORKLOADS = new Set(["preble-toolbench", "preble-alfworld", "agent-loops"]);
const PUBLISHED_RULES = ["cache-aware", "dynamo", "llm-d"];

/**
 * The ceiling of reuse beside the real policies: per fleet, the best balancer's capacity when
 * every card holds every prompt seen (reuse-ceiling.ts), and what it leaves within reach.
 */
export function ceilingSection(capacity: readonly CapacityEntry[], ceiling: readonly CeilingEntry[]): string[] {
  const fleets = [...new Map(ceiling.map((entry) => [`${entry.workload}|${entry.card}|${entry.workers}`, entry])).values()];
  const lines = [
    "### The ceiling of reuse: what no placement rule can pass",
    "",
    "The same fleets with every card holding every prompt seen so far, free (bench/sim/reuse-ceiling.ts; not a card that exists): each request reuses the longest prefix it shares with any earlier prompt, wherever it lands, with no load time and no cells spent keeping it. Reuse is then the same on every card and what is left to placement is balance, so the better of roundrobin and least-load under it is the most reuse can give any policy on that fleet at the same SLO, give or take what a finer balance adds. A capacity target well above the ceiling is out of reach of placement: it needs a card that does more with what it reuses.",
    "",
    `| workload | card x workers | ceiling req/s (${CEILING_BALANCERS.join(" / ")}) | ceiling / roundrobin | ceiling / best published rule | preble / ceiling | 2x roundrobin | 1.25x best published rule |`,
    "| --- | --- | ---: | ---: | ---: | ---: | --- | --- |",
  ];
  for (const fleet of fleets) {
    const same = (entry: { workload: string; card: string; workers: number }) =>
      entry.workload === fleet.workload && entry.card === fleet.card && entry.workers === fleet.workers;
    const rates = CEILING_BALANCERS.map((balancer) => ceiling.find((entry) => same(entry) && entry.balancer === balancer)?.ratePerS ?? Number.NaN);
    const best = Math.max(...rates.filter(Number.isFinite));
    const rate = (policy: string) => capacity.find((entry) => same(entry) && entry.policy === policy)?.ratePerS ?? Number.NaN;
    const published = PUBLISHED_RULES.map(rate).filter(Number.isFinite);
    const bestPublished = published.length > 0 ? Math.max(...published) : Number.NaN;
    // Only where the fleet has those targets (the agent workloads on 4 cards or more).
    const reach = (target: number) =>
      !AGENT_WORKLOADS.has(fleet.workload) || fleet.workers < 4 || !Number.isFinite(target)
        ? "-"
        : best >= target
          ? "within the ceiling"
          : `out of reach: the ceiling is ${ratio(best, target)} of it`;
    lines.push(
      `| ${fleet.workload} | ${fleet.card} x ${fleet.workers} | ${rates.map((value) => fmt(value, 2)).join(" / ")} | ${ratio(best, rate("roundrobin"))} | ${ratio(best, bestPublished)} | ${ratio(rate("preble"), best)} | ${reach(2 * rate("roundrobin"))} | ${reach(1.25 * bestPublished)} |`,
    );
  }
  lines.push("");
  return lines;
}

/** The report's capacity section: the SLOs, capacity per policy with the targets, latency at fractions of roundrobin's capacity. */
export function capacitySection(capacity: readonly CapacityEntry[], latency: readonly LatencyEntry[], baseline?: CapacityBaseline): string[] {
  const fleets = [...new Map(capacity.map((entry) => [`${entry.workload}|${entry.card}|${entry.workers}`, entry])).values()];
  const policies = [...new Set(capacity.map((entry) => entry.policy))];
  const of = (fleet: CapacityEntry, policy: string) =>
    capacity.find((entry) => entry.workload === fleet.workload && entry.card === fleet.card && entry.workers === fleet.workers && entry.policy === policy);
  const lines = [
    "## Capacity at the SLO",
    "",
    "Capacity = the highest Poisson arrival rate (requests/s) at which p99 TTFT of the served requests stays within the workload's SLO (requests too long for any slot are refused at every load alike; the table counts them). " +
      "SLO = 10x the mean cold prefill of the workload's prompts on the card, fixed before any arm runs. Found by doubling the load from 0.25 x r0 until one load passes and twice it fails, then 8 bisection steps (capacity within 1/256 of that bracket); the column says how many arms each took.",
    ...(baseline
      ? [
          "",
          `Before: the same fleet's capacities in ${baseline.file} (commit ${baseline.commit}), preble's and the best other policy's, where that run had the fleet (same workload, card, workers and SLO; its seed and salt may differ).`,
        ]
      : []),
    "",
    `| workload | card x workers | SLO p99 TTFT | too long | ${policies.map((policy) => `${policy} req/s`).join(" | ")} | preble / roundrobin | preble / best other |${baseline ? " before: preble / best other |" : ""} targets |`,
    `| --- | --- | ---: | ---: | ${policies.map(() => "---:").join(" | ")} | ---: | ---: |${baseline ? " --- |" : ""} --- |`,
  ];
  const before = (fleet: CapacityEntry) => {
    const entries = (baseline?.capacity ?? []).filter(
      (entry) =>
        entry.workload === fleet.workload &&
        entry.card === fleet.card &&
        entry.workers === fleet.workers &&
        Math.abs(entry.sloTtftP99Ms - fleet.sloTtftP99Ms) < 1,
    );
    const preble = entries.find((entry) => entry.policy === "preble")?.ratePerS;
    const others = entries.filter((entry) => entry.policy !== "preble").map((entry) => entry.ratePerS);
    if (preble === undefined || others.length === 0) return " - |";
    const best = Math.max(...others);
    return ` ${fmt(preble, 2)} / ${fmt(best, 2)} (${ratio(preble, best)}) |`;
  };
  for (const fleet of fleets) {
    const rate = (policy: string) => of(fleet, policy)?.ratePerS ?? Number.NaN;
    const preble = rate("preble");
    const others = policies.filter((policy) => policy !== "preble");
    const bestOther = Math.max(...others.map(rate));
    const bestPublished = Math.max(...PUBLISHED_RULES.filter((policy) => policies.includes(policy)).map(rate));
    const targets: string[] = [];
    if (Number.isFinite(preble)) {
      targets.push(`>= 0.95x best other: ${preble >= 0.95 * bestOther ? "met" : "missed"}`);
      if (AGENT_WORKLOADS.has(fleet.workload) && fleet.workers >= 4) {
        targets.push(`>= 2x roundrobin: ${preble >= 2 * rate("roundrobin") ? "met" : "missed"}`);
        if (Number.isFinite(bestPublished)) targets.push(`>= 1.25x best published rule: ${preble >= 1.25 * bestPublished ? "met" : "missed"}`);
      }
    }
    lines.push(
      `| ${fleet.workload} | ${fleet.card} x ${fleet.workers} | ${fmt(fleet.sloTtftP99Ms)} ms | ${fleet.refused} | ${policies
        .map((policy) => `${fmt(rate(policy), 2)} (${of(fleet, policy)?.probes ?? 0})`)
        .join(" | ")} | ${ratio(preble, rate("roundrobin"))} | ${ratio(preble, bestOther)} |${baseline ? before(fleet) : ""} ${targets.join("; ")} |`,
    );
  }
  lines.push(
    "",
    "### Latency at fractions of roundrobin's capacity",
    "",
    "Mean / p99 TTFT in ms per policy at 0.5x, 0.8x and 1.0x of roundrobin's capacity on the same fleet (target at 0.8x: preble's mean and p99 no worse than 1.05x the best other policy's).",
    "",
    `| workload | card x workers | load (x rr capacity) | ${policies.join(" | ")} |`,
    `| --- | --- | ---: | ${policies.map(() => "---:").join(" | ")} |`,
  );
  for (const fleet of fleets) {
    for (const fraction of LATENCY_LOADS) {
      const cells = policies.map((policy) => {
        const entry = latency.find(
          (item) =>
            item.workload === fleet.workload &&
            item.card === fleet.card &&
            item.workers === fleet.workers &&
            item.policy === policy &&
            item.loadOfRoundrobinCapacity === fraction,
        );
        return entry ? `${fmt(entry.ttftMeanMs)} / ${fmt(entry.ttftP99Ms)}` : "-";
      });
      lines.push(`| ${fleet.workload} | ${fleet.card} x ${fleet.workers} | ${fraction} | ${cells.join(" | ")} |`);
    }
  }
  const routed = capacity.filter((entry) => entry.atCapacity);
  if (routed.length > 0) {
    lines.push(
      "",
      "### The routers at capacity (more than one machine)",
      "",
      "At each policy's capacity: the placement decisions each router made per second of simulated time (the clients' requests split evenly between the routers, 429 retries included), the wall time of one decision on this machine (the real GlobalScheduler's place() with the policy, timed inside the simulation: the scheduler alone, without HTTP), the decisions per second one core makes at that speed, and the headroom (what one core makes / what one router needs). Copies are those the arm made, within one machine and between two; link waits are the time transfers waited for a busy link.",
      "",
      "| workload | GPUs | policy | capacity req/s | routers | decisions/s per router needed | us per decision | decisions/s one core | headroom | copies within / across | link waits |",
      "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    );
    for (const entry of routed) {
      const at = entry.atCapacity!;
      const perCore = 1e6 / at.decisionWallUs;
      lines.push(
        `| ${entry.workload} | ${entry.workers} | ${entry.policy} | ${fmt(entry.ratePerS, 1)} | ${at.routers} | ${fmt(at.decisionsPerRouterPerS, 1)} | ${fmt(at.decisionWallUs, 1)} | ${fmt(perCore)} | ${fmt(perCore / at.decisionsPerRouterPerS)}x | ${fmt(at.copiesWithin)} / ${fmt(at.copiesAcross)} | ${fmt(at.linkQueuedMs)} ms |`,
      );
    }
  }
  lines.push("");
  return lines;
}
