// The simulator's report: sim.json (everything), sim.md (tables, the headline ratios, the
// charts) and one hand-written SVG per workload and fleet (mean TTFT and mean end-to-end
// latency vs load, one line per policy, log scale).
import {
  type CapacityBaseline,
  type CapacityEntry,
  type CeilingEntry,
  capacitySection,
  ceilingSection,
  type LatencyEntry,
  tailSection,
} from "./capacity-run.js";
import { baseCardName, gpuCard, GPU_NAMES, kvTokensOf } from "./hardware.js";
import type { NetworkSpec } from "./network.js";
import type { SimResult, WorkerSpec } from "./simulator.js";
import type { ArmSummary } from "./metrics.js";

export interface ArmRecord {
  workload: string;
  gpu: string;
  workers: number;
  load: number;
  /** Mean arrival rate at this load (Infinity for a burst). */
  ratePerS: number;
  r0PerS: number;
  timeScale: number;
  policy: string;
  summary: ArmSummary;
  wallS: number;
  /** Placement decisions (every router's) and their wall time on this machine. */
  decisions?: SimResult["decisions"];
  /** More than one machine (--hosts): copies within and across machines, bytes over the links. */
  network?: SimResult["network"];
  /** Per-request cached fractions, in request order (only with --per-request). */
  cachedFractions?: number[];
  /** A latency arm of --capacity: its load as a fraction of roundrobin's capacity. */
  loadOfRoundrobinCapacity?: number;
}

export interface SimReport {
  benchmark: "sim";
  /** The results' file stem (--name); its charts are named after it. Default sim. */
  name?: string;
  date: string;
  machine: string;
  node: string;
  commit: string;
  command: string;
  seed: number;
  salt: number;
  settings: {
    workloads: string[];
    gpus: string[];
    workers: number[];
    policies: string[];
    loads: number[];
    sizes: Record<string, number>;
    /** More than one machine: machines per fleet and the network (without the card's KV bytes per token). */
    hosts?: number[];
    network?: Omit<NetworkSpec, "kvBytesPerToken">;
  };
  hardware: Record<string, WorkerSpec>;
  workloads: Record<string, { describe: string; requests: number; kind: string }>;
  arms: ArmRecord[];
  headline: Headline[];
  /** With --capacity: each policy's capacity at the SLO, and latency at fractions of roundrobin's. */
  capacity?: CapacityEntry[];
  latency?: LatencyEntry[];
  /** --reuse-ceiling: each fleet's capacity under the ceiling of reuse, per balancer (not a real fleet). */
  ceiling?: CeilingEntry[];
  /** --baseline: the capacities of an earlier run (its commit and file), shown beside these. */
  baseline?: CapacityBaseline;
  totalSeconds: number;
}

export interface Headline {
  workload: string;
  gpu: string;
  workers: number;
  load: number;
  /** preble / roundrobin and preble / cache-aware, for mean and p99 TTFT and end-to-end latency. */
  ratios: Record<"vsRoundrobin" | "vsCacheAware", { meanTtft: number; meanE2e: number; p99Ttft: number; p99E2e: number } | undefined>;
  /** The headline targets at this load: mean <= roundrobin / 2.4 and below cache-aware; p99 below both. */
  targets: { name: string; met: boolean; detail: string }[];
}

const PREBLE_GAIN = 2.4;

const fmt = (value: number, digits = 0) =>
  Number.isFinite(value) ? value.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits }) : String(value);
const ms = (value: number) => (value >= 10_000 ? `${fmt(value / 1000, 1)} s` : `${fmt(value)} ms`);
const pct = (value: number) => `${(value * 100).toFixed(0)}%`;
const ratio = (value: number | undefined) => (value === undefined || !Number.isFinite(value) ? "-" : `${value.toFixed(2)}x`);

function fleetKey(arm: { workload: string; gpu: string; workers: number }): string {
  return `${arm.workload}|${arm.gpu}|${arm.workers}`;
}

/** A fleet's chart beside the report of stem `name` (run.ts's --name, default sim). */
export function chartFile(name: string, workload: string, gpu: string, workers: number): string {
  return `${name}.${workload}-${gpu}-${workers}w.svg`;
}

/** Headline ratios (preble vs roundrobin and cache-aware) for every workload, fleet and load where all three ran. */
export function headlines(arms: readonly ArmRecord[]): Headline[] {
  const out: Headline[] = [];
  const groups = new Map<string, ArmRecord[]>();
  for (const arm of arms) {
    const key = `${fleetKey(arm)}|${arm.load}`;
    groups.set(key, [...(groups.get(key) ?? []), arm]);
  }
  for (const group of groups.values()) {
    const find = (policy: string) => group.find((arm) => arm.policy === policy)?.summary;
    const preble = find("preble");
    if (!preble) continue;
    const against = (other: ArmSummary | undefined) =>
      other && {
        meanTtft: preble.ttftMs.mean / other.ttftMs.mean,
        meanE2e: preble.e2eMs.mean / other.e2eMs.mean,
        p99Ttft: preble.ttftMs.p99 / other.ttftMs.p99,
        p99E2e: preble.e2eMs.p99 / other.e2eMs.p99,
      };
    const vsRoundrobin = against(find("roundrobin"));
    const vsCacheAware = against(find("cache-aware"));
    const targets: Headline["targets"] = [];
    if (vsRoundrobin) {
      for (const [label, value] of [
        ["E2E", vsRoundrobin.meanE2e],
        ["TTFT", vsRoundrobin.meanTtft],
      ] as const) {
        targets.push({
          name: `mean ${label} <= roundrobin / ${PREBLE_GAIN}`,
          met: value <= 1 / PREBLE_GAIN,
          detail: `preble / roundrobin = ${value.toFixed(2)} (target <= ${(1 / PREBLE_GAIN).toFixed(3)}; ${value <= 1 / PREBLE_GAIN ? "met" : `missed by ${(value * PREBLE_GAIN).toFixed(2)}x`})`,
        });
      }
    }
    if (vsCacheAware) {
      for (const [label, value] of [
        ["E2E", vsCacheAware.meanE2e],
        ["TTFT", vsCacheAware.meanTtft],
      ] as const) {
        targets.push({ name: `mean ${label} below cache-aware`, met: value < 1, detail: `preble / cache-aware = ${value.toFixed(2)}` });
      }
    }
    if (vsRoundrobin && vsCacheAware) {
      for (const [label, rr, ca] of [
        ["E2E", vsRoundrobin.p99E2e, vsCacheAware.p99E2e],
        ["TTFT", vsRoundrobin.p99Ttft, vsCacheAware.p99Ttft],
      ] as const) {
        targets.push({
          name: `p99 ${label} below both`,
          met: rr < 1 && ca < 1,
          detail: `preble / roundrobin = ${rr.toFixed(2)}, preble / cache-aware = ${ca.toFixed(2)}`,
        });
      }
    }
    const first = group[0]!;
    out.push({ workload: first.workload, gpu: first.gpu, workers: first.workers, load: first.load, ratios: { vsRoundrobin, vsCacheAware }, targets });
  }
  return out;
}

/** A shared-pool card (no per-slot limit, or slots competing for fewer cells than slots x limit): not Radixgate's worker. */
export function isIdealisedSpec(spec: WorkerSpec): boolean {
  return spec.maxSequenceTokens === undefined || spec.capacityTokens < spec.slots * spec.maxSequenceTokens;
}

/** How a card's worker holds its KV, for the Cards table. */
function kvLayout(spec: WorkerSpec): string {
  if (isIdealisedSpec(spec)) return "**idealised**: one pool shared by all slots";
  return `per slot${spec.contextLock ? ", context lock (the old worker)" : ""}`;
}

export function markdown(report: SimReport): string {
  const lines: string[] = [
    "# Simulated fleet: every policy side by side",
    "",
    `Machine: ${report.machine}; Node ${report.node}; commit ${report.commit}; seed ${report.seed}, salt ${report.salt}; ${fmt(report.totalSeconds)} s of wall time in all; ${report.date}.`,
    "",
    `Command: \`${report.command}\``,
    "",
    "The simulator (bench/sim/simulator.ts) drives the real GlobalScheduler with each policy of the registry and, per simulated worker, the real LocalScheduler and shareBatch; the card is a time model with continuous batching and chunked prefill, and the worker Radixgate runs on it: KV cells per slot (node-llama-cpp gives each slot its own contextSize cells) and the state store of evicted slot contents, where the card has one (the file's header says exactly how; bench/sim/hardware.ts and docs/simulator.md size the cards). " +
      "Every arm of a workload replays the same requests (same seed and salt); load L scales arrivals to L x r0, where r0 = workers / mean cold-prefill time of the workload's prompts (at L = 1 a fleet that reused nothing would do nothing but prefill). " +
      "Latencies are per request, from arrival: TTFT to the first token, E2E to the last; cached = the part of THIS request's prompt its worker reused (the request's own verdict), shown as the mean of the per-request fractions (p50 in parentheses).",
    "",
    "## Cards",
    "",
    "| gpu | KV | slots | tokens per slot | KV tokens (card holds) | state store tokens | decode cost | batch | chunk | P / k | prefill ms (base + extend + ctx + extend x ctx) | decode ms/token (base + ctx) | copy ms (base + tokens) |",
    "| --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- | --- | --- |",
  ];
  for (const [gpu, spec] of Object.entries(report.hardware)) {
    const t = spec.timeModel;
    const held = GPU_NAMES.includes(baseCardName(gpu)) ? ` (${fmt(kvTokensOf(gpuCard(baseCardName(gpu))))})` : "";
    lines.push(
      `| ${gpu} | ${kvLayout(spec)} | ${spec.slots} | ${spec.maxSequenceTokens === undefined ? "whole pool" : fmt(spec.maxSequenceTokens)} | ${fmt(spec.capacityTokens)}${held} | ${spec.spill ? fmt(spec.spill.budgetTokens) : "none"} | ` +
        `${spec.decodeBatching === "micro-batch" ? `per run of slots (${spec.multiSequencePassFactor ?? 1}x for 2+)` : "per step"} | ${spec.batchTokens} | ${spec.chunkTokens} | ${spec.priorityGroups} / ${spec.quotaPerGroup} | ` +
        `${t.base.toPrecision(3)} + ${t.perExtend.toPrecision(3)} e + ${t.perContext.toPrecision(3)} c + ${t.perExtendContext.toPrecision(3)} e c | ${t.decodeBase.toPrecision(3)} + ${t.decodePerContext.toPrecision(3)} c | ${t.copyBase.toPrecision(3)} + ${t.copyPerToken.toPrecision(3)} n |`,
    );
  }
  const specs = Object.values(report.hardware);
  if (specs.some((spec) => !isIdealisedSpec(spec))) {
    lines.push(
      "",
      "KV per slot: Radixgate's worker (node-llama-cpp) gives every slot its own cells, so the KV is slots x tokens per slot (on a GPU card, as many slots as fit the card's memory next to the weights; in parentheses, the KV the card holds) and a request longer than a slot is refused; the state store keeps evicted slot contents in host memory (config spill.budgetBytes / KV bytes per token).",
    );
  }
  if (specs.some(isIdealisedSpec)) {
    lines.push(
      "",
      "**Idealised** cards are NOT the worker Radixgate runs: every slot draws on one shared KV pool (as in SGLang or vLLM; idle slots' contents evicted LRU when cells run short), with no per-slot limit and no state store. Their arms show what the same placements would do on such a worker.",
    );
  }
  const network = report.settings.network;
  if (network && report.settings.hosts) {
    lines.push(
      "",
      "## More than one machine",
      "",
      `Each fleet is ${report.settings.hosts.map((hosts) => `${hosts}`).join(", ")} machines x ${network.gpusPerHost} GPUs, one engine per GPU (a Radixgate host with one worker), behind ${network.routers} routers on machines of their own; the clients' requests go to the routers in turn. ` +
        `Network: ${network.latencyMs} ms one-way between any two machines, ${network.bandwidthGbps} Gb/s per machine's link (one transfer at a time per link), the engines' slot events and every ${network.loadEveryMs} ms their request counts reach every router a hop later. ` +
        `A request crosses to its engine (its token ids, 7 bytes a token), its answers come back a hop later, and its latencies are measured at the router. ` +
        (network.hostCopies
          ? "Prefix copies a policy asks for cost the card's save + load, and between machines also a hop and the KV bytes over the link; the routers price every copy as one between machines. The real routers do not copy between remote engines yet: these copies are on paper (bench/sim/network.ts)."
          : "Routers copy no prefix between engines (as the real routers do with remote engines)."),
    );
  }
  lines.push("", "## Workloads", "");
  for (const [name, w] of Object.entries(report.workloads))
    lines.push(`- **${name}** (${w.requests} requests built${w.kind === "burst" ? ", cut per load" : ""}): ${w.describe}.`);
  // With --capacity, capacity at the SLO is the headline; the tables below are of its latency arms.
  if (report.capacity && report.latency)
    lines.push(
      "",
      ...capacitySection(report.capacity, report.latency, report.baseline),
      ...(report.ceiling ? ceilingSection(report.capacity, report.ceiling) : []),
      ...tailSection(report.arms),
    );

  const heads = report.headline.filter((h) => h.workload === "toolbench-zipf" || h.workload === "mooncake");
  if (heads.length > 0) {
    lines.push(
      "",
      "## Headline: preble vs roundrobin and cache-aware",
      "",
      `The headline targets, at every load (the highest load counts as high load): preble's mean latency <= 1/${PREBLE_GAIN} of roundrobin's (Preble's Azure-trace TTFT gain) and below cache-aware's; its p99 below both. Ratios are preble / other: below 1 is better.`,
      "",
      "| workload | gpu x workers | load | mean E2E vs rr | mean TTFT vs rr | mean E2E vs cache-aware | mean TTFT vs cache-aware | p99 E2E vs rr / ca | p99 TTFT vs rr / ca | targets met |",
      "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    );
    for (const h of heads) {
      const rr = h.ratios.vsRoundrobin;
      const ca = h.ratios.vsCacheAware;
      const met = h.targets.filter((t) => t.met).length;
      lines.push(
        `| ${h.workload} | ${h.gpu} x ${h.workers} | ${h.load} | ${ratio(rr?.meanE2e)} | ${ratio(rr?.meanTtft)} | ${ratio(ca?.meanE2e)} | ${ratio(ca?.meanTtft)} | ${ratio(rr?.p99E2e)} / ${ratio(ca?.p99E2e)} | ${ratio(rr?.p99Ttft)} / ${ratio(ca?.p99Ttft)} | ${met} of ${h.targets.length} |`,
      );
    }
    const missed = heads.flatMap((h) =>
      h.targets.filter((t) => !t.met).map((t) => `${h.workload} ${h.gpu} x ${h.workers} at load ${h.load}: ${t.name}: ${t.detail}`),
    );
    if (missed.length > 0) lines.push("", "Missed:", "", ...missed.map((m) => `- ${m}`));
  }

  const fleets = new Map<string, ArmRecord[]>();
  for (const arm of report.arms) fleets.set(fleetKey(arm), [...(fleets.get(fleetKey(arm)) ?? []), arm]);
  for (const arms of fleets.values()) {
    const first = arms[0]!;
    lines.push(
      "",
      `## ${first.workload} on ${first.workers} x ${first.gpu}`,
      "",
      `r0 = ${fmt(first.r0PerS, 2)} requests/s. ![mean latency vs load](${chartFile(report.name ?? "sim", first.workload, first.gpu, first.workers)})`,
      "",
      "| load | rate /s | policy | n | TTFT mean / p50 / p99 | E2E mean / p50 / p99 | req/s | out tok/s | cached mean (p50) | >= half cached | util mean | decode share / passes per step / sequences per pass | busy / placed / prefill max:mean | decisions |",
      "| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    );
    for (const arm of arms) {
      const s = arm.summary;
      const util = s.workers.reduce((sum, w) => sum + w.utilisation, 0) / Math.max(1, s.workers.length);
      const steps = s.steps === null ? "-" : `${pct(s.steps.decodeShare)} / ${s.steps.passesPerDecodeStep.toFixed(2)} / ${s.steps.sequencesPerPass.toFixed(2)}`;
      const reasons = Object.entries(s.reasons)
        .sort((a, b) => b[1] - a[1])
        .map(([reason, count]) => `${reason} ${pct(count / Math.max(1, s.n + s.refused))}`)
        .join(", ");
      lines.push(
        `| ${arm.load} | ${Number.isFinite(arm.ratePerS) ? fmt(arm.ratePerS, 2) : "burst"} | ${arm.policy} | ${s.n}${s.refused > 0 ? ` (+${s.refused} refused)` : ""} | ` +
          `${ms(s.ttftMs.mean)} / ${ms(s.ttftMs.p50)} / ${ms(s.ttftMs.p99)} | ${ms(s.e2eMs.mean)} / ${ms(s.e2eMs.p50)} / ${ms(s.e2eMs.p99)} | ` +
          `${fmt(s.throughput.requestsPerS, 2)} | ${fmt(s.throughput.outputTokensPerS)} | ${pct(s.cached.meanFraction)} (${pct(s.cached.p50)}) | ${pct(s.cached.atLeastHalf)} | ${pct(util)} | ${steps} | ` +
          `${s.imbalance.busyMaxOverMean.toFixed(2)} / ${s.imbalance.placedMaxOverMean.toFixed(2)} / ${s.imbalance.prefillMaxOverMean.toFixed(2)} | ${reasons}${s.copies.attempted > 0 ? `; copies ${s.copies.done}/${s.copies.attempted}` : ""}${s.rejections > 0 ? `; 429s retried ${s.rejections}` : ""} |`,
      );
    }
  }
  lines.push(
    "",
    "Notes",
    "",
    "- util = the share of the run (first arrival to last completion) a worker spent running steps; a worker with any request decoding runs steps back to back, so util is high whenever requests are in flight. decode share = the part of all workers' step time spent decoding (the rest: prefill); passes per step = passes over the weights per step that decoded (one per run of consecutive busy slots on the cards of the worker Radixgate has, one on an idealised card); sequences per pass = decoded tokens per pass: how much of each pass over the weights the batch used. busy / placed / prefill max:mean = the busiest worker over the mean, in step time, placements and prefill tokens computed (1.00 = even).",
    "- Sample sizes: n per arm (completed requests); refused = prompt + output larger than a slot (tokens per slot; on an idealised card, the whole pool). The arms of one workload and load place exactly the same requests. A placement the scheduler refuses because every worker's queue is full (the server's 429, scheduler.maxQueuePerWorker) is resent by the client 1 s later and its latency counts from the first attempt (\"429s retried\" in the decisions column).",
    "- Simulated, not measured: the cards are time models (Preble's published fits and our assumptions, see src/scheduler/time-model.ts) and KV sized from memory (bench/sim/hardware.ts, docs/simulator.md); compare policies as ratios within one table.",
    "",
  );
  return lines.join("\n");
}

const COLORS: Record<string, string> = {
  preble: "#d62728",
  "cache-aware": "#1f77b4",
  roundrobin: "#7f7f7f",
  shape: "#2ca02c",
  affinity: "#9467bd",
  "least-load": "#ff7f0e",
};

/** Two panels (mean TTFT, mean E2E) of latency vs load, one line per policy, log y. */
export function svgChart(arms: readonly ArmRecord[]): string {
  const first = arms[0]!;
  const policies = [...new Set(arms.map((arm) => arm.policy))];
  const loads = [...new Set(arms.map((arm) => arm.load))].sort((a, b) => a - b);
  const width = 860;
  const height = 340;
  const panel = { w: 340, h: 220, top: 50, left: [70, 490] };
  const escapeXml = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;");
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="white"/>`,
    `<text x="${width / 2}" y="20" text-anchor="middle" font-size="14">${escapeXml(`${first.workload}: ${first.workers} x ${first.gpu} (simulated), mean latency vs load`)}</text>`,
  ];
  (["ttftMs", "e2eMs"] as const).forEach((metric, p) => {
    const x0 = panel.left[p]!;
    const values = arms.map((arm) => arm.summary[metric].mean).filter((v) => v > 0 && Number.isFinite(v));
    const lo = Math.floor(Math.log10(Math.min(...values)));
    const hi = Math.max(lo + 1, Math.ceil(Math.log10(Math.max(...values))));
    const x = (load: number) => (loads.length === 1 ? x0 + panel.w / 2 : x0 + (loads.indexOf(load) / (loads.length - 1)) * panel.w);
    const y = (v: number) => panel.top + panel.h - ((Math.log10(v) - lo) / (hi - lo)) * panel.h;
    out.push(
      `<text x="${x0 + panel.w / 2}" y="${panel.top - 10}" text-anchor="middle">${metric === "ttftMs" ? "mean TTFT" : "mean end-to-end latency"}</text>`,
      `<rect x="${x0}" y="${panel.top}" width="${panel.w}" height="${panel.h}" fill="none" stroke="#333"/>`,
    );
    for (let e = lo; e <= hi; e++) {
      const yy = y(10 ** e).toFixed(1);
      const label = 10 ** e >= 1000 ? `${10 ** (e - 3)} s` : `${10 ** e} ms`;
      out.push(
        `<line x1="${x0}" y1="${yy}" x2="${x0 + panel.w}" y2="${yy}" stroke="#ddd"/>`,
        `<text x="${x0 - 6}" y="${yy}" text-anchor="end" dominant-baseline="middle">${label}</text>`,
      );
    }
    for (const load of loads) {
      out.push(`<text x="${x(load).toFixed(1)}" y="${panel.top + panel.h + 16}" text-anchor="middle">${load}</text>`);
    }
    out.push(`<text x="${x0 + panel.w / 2}" y="${panel.top + panel.h + 34}" text-anchor="middle">load (x r0)</text>`);
    for (const policy of policies) {
      const points = loads
        .map((load) => arms.find((arm) => arm.policy === policy && arm.load === load))
        .filter((arm): arm is ArmRecord => arm !== undefined && arm.summary[metric].mean > 0)
        .map((arm) => `${x(arm.load).toFixed(1)},${y(arm.summary[metric].mean).toFixed(1)}`);
      const color = COLORS[policy] ?? "#000";
      out.push(`<polyline points="${points.join(" ")}" fill="none" stroke="${color}" stroke-width="2"/>`);
      for (const point of points) {
        const [px, py] = point.split(",");
        out.push(`<circle cx="${px}" cy="${py}" r="3" fill="${color}"/>`);
      }
    }
  });
  policies.forEach((policy, i) => {
    const lx = 70 + i * 130;
    out.push(
      `<rect x="${lx}" y="${height - 22}" width="14" height="4" fill="${COLORS[policy] ?? "#000"}"/>`,
      `<text x="${lx + 20}" y="${height - 16}">${escapeXml(policy)}</text>`,
    );
  });
  out.push("</svg>", "");
  return out.join("\n");
}
