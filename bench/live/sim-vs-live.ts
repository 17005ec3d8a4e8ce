// npm run bench:sim-vs-live [-- --preset bench --workers 2 --arms pinned,spread,shape,preble,cache-aware,affinity
//   --requests 30 --prefixes 6 --prefix-tokens 1000 --suffix-tokens 100 --output 16-64 --rate 2 --seed 1 --salt N
//   --time-model FILE --out DIR --skip-probes --live-from FILE --repeats N]
// The simulator vs the live server on one request list (compare.ts): a ToolBench-Zipf replay
// (replay.ts) sent to a real server per arm, then simulated with that server's calibrated CPU
// time model. Writes DIR/sim-vs-live.{json,md} (DIR: bench/results). A progress line per step.
// Every live arm runs --repeats times (default 2; the arms take turns, in reverse order every
// other time), and its live figures are over all those runs' samples: on a shared 2-core
// machine one run of an arm can be a third off the next.
// --live-from FILE (a sim-vs-live.json) runs no server: it re-simulates that file's recorded
// live run (its workload, seed, salt, calibration and live samples), e.g. after a simulator change.
// Before the replay, four small probes (compare.ts), live and simulated, each isolating one
// effect, run as many times as the live arms; "two workers, two each" measures the host's
// contention and "four decode together" what a decode pass of several sequences costs served
// on this machine, both carried by the prediction's card as the mean of the runs' figures
// (--skip-probes leaves them out, and the card without contention, with its default pass
// factor; --live-from keeps the recorded ones).
import { gitCommit, machineDescription } from "../git-commit.js";
import { randomInt } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import {
  PREDICTION,
  contentionOf,
  repeatedLiveReplay,
  runProbes,
  SIM_VARIANTS,
  simulateAgainstLive,
  TARGET_RELATIVE_ERROR,
  type ProbeResult,
  type SimVsLiveOptions,
  type SimVsLiveResult,
} from "./compare.js";
import { liveConfig, type ReplaySample } from "./live-bench.js";
import { CPU_MULTI_SEQUENCE_PASS } from "../sim/hardware.js";
import { TOOLBENCH_REPLAY_DEFAULTS, toolbenchReplay, type ToolbenchReplayOptions } from "./replay.js";

/** The probes are simulated without the host's contention (they measure it). */
const PROBE_VARIANTS = SIM_VARIANTS.filter((variant) => variant !== "cpu");

const d = TOOLBENCH_REPLAY_DEFAULTS;
const { values } = parseArgs({
  options: {
    preset: { type: "string", default: "bench" },
    workers: { type: "string", default: "2" },
    arms: { type: "string", default: "pinned,spread,shape,preble,cache-aware,affinity" },
    requests: { type: "string", default: String(d.requests) },
    prefixes: { type: "string", default: String(d.prefixes) },
    "prefix-tokens": { type: "string", default: String(d.prefixTokens) },
    "suffix-tokens": { type: "string", default: String(d.suffixTokens) },
    output: { type: "string", default: `${d.outputTokens.min}-${d.outputTokens.max}` },
    rate: { type: "string", default: String(d.ratePerS) },
    seed: { type: "string", default: "1" },
    salt: { type: "string" },
    "time-model": { type: "string" },
    out: { type: "string", default: fileURLToPath(new URL("../results/", import.meta.url)) },
    "live-from": { type: "string" },
    "skip-probes": { type: "boolean", default: false },
    repeats: { type: "string", default: "2" },
  },
});

/** What --live-from reads back from an earlier sim-vs-live.json. */
interface Recorded {
  seed: number;
  salt: number;
  workload: ToolbenchReplayOptions;
  server: { preset: "tiny" | "bench"; workers: number };
  calibration: { path: string; existedBefore: boolean };
  command: string;
  date: string;
  machine: string;
  probes?: ProbeResult[];
  probeRuns?: ProbeResult[][];
  liveRepeats?: number;
  perRequest: {
    arm: string;
    requests: { index: number; live?: RecordedSample; liveRuns?: RecordedSample[] }[];
  }[];
}
type RecordedSample = Omit<ReplaySample, "index" | "totalMs" | "ttftMs"> & { ttftMs: number; latencyMs: number };
const recorded = values["live-from"] === undefined ? undefined : (JSON.parse(readFileSync(values["live-from"], "utf8")) as Recorded);

function positive(name: string, raw: string, integer = true): number {
  const value = Number(raw);
  if (!(value > 0) || (integer && !Number.isSafeInteger(value))) throw new Error(`--${name} needs a positive ${integer ? "integer" : "number"}, got ${raw}`);
  return value;
}

if (recorded) {
  values.preset = recorded.server.preset;
  values.workers = String(recorded.server.workers);
  values.arms = recorded.perRequest.map((arm) => arm.arm).join(",");
}
const [outMin, outMax] = values.output.split("-").map((raw) => positive("output", raw));
if (outMin === undefined || outMax === undefined || outMax < outMin) throw new Error(`--output needs MIN-MAX, got ${values.output}`);
const preset = values.preset as "tiny" | "bench";
if (preset !== "tiny" && preset !== "bench") throw new Error(`--preset needs tiny or bench, got ${preset}`);
const seed = recorded?.seed ?? Number(values.seed);
if (!Number.isSafeInteger(seed) || seed < 0) throw new Error(`--seed needs a non-negative integer, got ${values.seed}`);
const salt = recorded?.salt ?? (values.salt === undefined ? randomInt(2 ** 31) : Number(values.salt));
if (!Number.isSafeInteger(salt) || salt < 0) throw new Error(`--salt needs a non-negative integer, got ${values.salt}`);
const workload: ToolbenchReplayOptions = recorded
  ? { ...recorded.workload, seed, salt }
  : {
      seed,
      salt,
      requests: positive("requests", values.requests),
      prefixes: positive("prefixes", values.prefixes),
      prefixTokens: positive("prefix-tokens", values["prefix-tokens"]),
      suffixTokens: positive("suffix-tokens", values["suffix-tokens"]),
      outputTokens: { min: outMin, max: outMax },
      ratePerS: positive("rate", values.rate, false),
    };
const workers = positive("workers", values.workers);
const arms = values.arms
  .split(",")
  .map((arm) => arm.trim())
  .filter((arm) => arm !== "");

const progress = (line: string) => process.stderr.write(`[sim-vs-live] ${line}\n`);
const replay = toolbenchReplay(workload);
const started = performance.now();
const machineAtStart = `${machineDescription()}, load ${loadavg()[0]!.toFixed(2)} at the start`;
progress(
  `${replay.length} requests over ${(replay[replay.length - 1]!.arrivalMs / 1000).toFixed(1)} s, ${arms.length} arms, ${machineAtStart}, seed ${seed}, salt ${salt}`,
);
const simVsLive: SimVsLiveOptions = {
  preset,
  workers,
  threads: 1,
  arms,
  replay,
  ...(values["time-model"] ? { timeModelFile: values["time-model"] } : {}),
  onProgress: progress,
};
const liveRepeats = recorded ? (recorded.liveRepeats ?? 1) : positive("repeats", values.repeats);
// The probes first (their "two workers, two each" measures the contention the prediction carries),
// then the live arms, then the simulator.
// As often as the live arms, and the contention is the mean of the runs' factors: the probe is
// two requests, and the prediction at this load moves by more than the factor does.
const probeRuns: ProbeResult[][] = [];
if (recorded) probeRuns.push(...(recorded.probeRuns ?? (recorded.probes ? [recorded.probes] : [])));
else if (!values["skip-probes"]) for (let run = 0; run < liveRepeats; run++) probeRuns.push(await runProbes(simVsLive, salt + run));
const probeResults = probeRuns[0];
const contentionRuns = probeRuns.map((run) => contentionOf(run)).filter((factors) => factors !== undefined);
const mean = (values: readonly number[]) => values.reduce((sum, value) => sum + value, 0) / values.length;
const passRuns = contentionRuns.flatMap((f) => (f.multiSequencePass !== undefined ? [f.multiSequencePass] : []));
const contention =
  contentionRuns.length > 0
    ? {
        prefillFactor: mean(contentionRuns.map((f) => f.prefillFactor)),
        decodeFactor: mean(contentionRuns.map((f) => f.decodeFactor)),
        // Only when every run measured it: a recorded file from before has none.
        ...(passRuns.length === contentionRuns.length ? { multiSequencePass: mean(passRuns) } : {}),
      }
    : undefined;
const liveRun = recorded
  ? {
      live: recorded.perRequest.map((arm) => ({
        arm: arm.arm,
        replay: arm.requests.flatMap((r) => (r.liveRuns ?? (r.live ? [r.live] : [])).map((l) => ({ ...l, index: r.index, totalMs: l.latencyMs }))),
      })),
      calibration: recorded.calibration,
    }
  : await repeatedLiveReplay(simVsLive, liveRepeats);
const result = await simulateAgainstLive(simVsLive, liveRun.live, liveRun.calibration, contention);

const commit = gitCommit(["src", "bench/live", "bench/sim", "bench/workloads"]);
const machine = recorded
  ? `${recorded.machine} (live run of ${recorded.date})`
  : `${machineAtStart}, ${loadavg()[0]!.toFixed(2)} at the end; Node ${process.version}`;
const rerun = ["npm run bench:sim-vs-live --", ...process.argv.slice(2)].join(" ").replace(/ --$/, "");
const command = recorded ? `${recorded.command} (re-simulated: ${rerun})` : rerun;
const totalS = (performance.now() - started) / 1000;
const prompts = replay.map((r) => r.tokens.length + 1);
const report = {
  benchmark: "sim-vs-live",
  date: new Date().toISOString(),
  commit,
  machine,
  command,
  seed,
  salt,
  workload: {
    ...workload,
    shape: "toolbench-zipf (bench/workloads/toolbench-zipf.ts), Zipf a=1.1, Poisson arrivals",
    promptTokensMean: prompts.reduce((a, b) => a + b, 0) / prompts.length,
    spanMs: replay[replay.length - 1]!.arrivalMs,
  },
  server: { preset, workers, threads: 1, slots: result.spec.slots, contextSize: result.spec.maxSequenceTokens, batchSize: result.spec.batchTokens },
  calibration: result.calibration,
  timeModel: result.timeModel,
  spec: result.spec,
  targetRelativeError: TARGET_RELATIVE_ERROR,
  contention: result.contention,
  liveRepeats,
  rows: result.rows,
  probes: probeResults,
  probeRuns,
  contentionRuns,
  simWorkers: result.sim.map((arm) => ({
    arm: arm.arm,
    variants: Object.fromEntries(SIM_VARIANTS.map((variant) => [variant, arm.variants[variant].workers])),
  })),
  totalSeconds: totalS,
  perRequest: result.rows.map((row) => {
    const live = result.live.find((arm) => arm.arm === row.arm)!.replay;
    const variants = result.sim.find((arm) => arm.arm === row.arm)!.variants;
    const sim = variants[PREDICTION].records;
    return {
      arm: row.arm,
      requests: replay.map((request) => {
        const runs = live.filter((s) => s.index === request.index);
        const l = runs[0];
        const s = sim.find((r) => r.index === request.index);
        return {
          index: request.index,
          arrivalMs: round(request.arrivalMs),
          group: request.group,
          promptTokens: request.tokens.length + 1,
          maxTokens: request.maxTokens,
          live: l && recordedSample(l),
          ...(runs.length > 1 ? { liveRuns: runs.map((run) => recordedSample(run)) } : {}),
          sim: s && {
            ttftMs: round(s.ttftMs),
            latencyMs: round(s.e2eMs),
            cachedTokens: s.cachedTokens,
            worker: s.workerId,
            queuedMs: round(s.startMs - s.arrivalMs),
            reason: s.reason,
          },
          simTtftMs: Object.fromEntries(
            SIM_VARIANTS.map((variant) => [variant, round(variants[variant].records.find((r) => r.index === request.index)?.ttftMs ?? Number.NaN)]),
          ),
        };
      }),
    };
  }),
};
mkdirSync(values.out, { recursive: true });
writeFileSync(join(values.out, "sim-vs-live.json"), `${JSON.stringify(report, null, 2)}\n`);
const md = markdown(result, report);
writeFileSync(join(values.out, "sim-vs-live.md"), md);
progress(`wrote ${join(values.out, "sim-vs-live.json")} and sim-vs-live.md (${totalS.toFixed(0)} s)`);
console.log(md);

function round(value: number): number {
  return Math.round(value * 10) / 10;
}

function markdown(result: SimVsLiveResult, r: typeof report): string {
  const fmt = (n: number, digits = 0) => (Number.isFinite(n) ? n.toFixed(digits) : "-");
  const pct = (n: number) => `${(n * 100).toFixed(0)}%`;
  const placed = (p: Record<string, number>) =>
    Object.keys(p)
      .sort()
      .map((w) => `${w} ${p[w]}`)
      .join(", ");
  const t = result.timeModel;
  const met = result.rows.filter((row) => row.withinTarget).map((row) => row.arm);
  return [
    `# Simulator vs live: the same ${r.workload.requests} requests, ${r.server.workers} CPU workers, preset ${r.server.preset}`,
    "",
    `Machine: ${r.machine}. Commit ${r.commit}. Command: \`${r.command}\`. Seed ${r.seed}, salt ${r.salt}; ${fmt(r.totalSeconds)} s in all; ${r.date}.`,
    "",
    `Workload: ${r.workload.shape}: ${r.workload.requests} requests, ${r.workload.prefixes} shared prefixes of ~${r.workload.prefixTokens} tokens, unique ~${r.workload.suffixTokens}-token suffixes (prompts ${fmt(r.workload.promptTokensMean)} tokens on average with BOS), max_tokens ${r.workload.outputTokens.min}-${r.workload.outputTokens.max}, ${r.workload.ratePerS} requests/s over ${fmt(r.workload.spanMs / 1000, 1)} s. ` +
      "Live: a fresh server per arm, the requests sent as /v1/completions token prompts (streamed) at their arrival times (no warm-up request); TTFT = sent to first text chunk, latency = sent to the end of the stream, per request. " +
      (r.liveRepeats > 1
        ? `Each live arm ran ${r.liveRepeats} times (the arms taking turns, in reverse order every other time); its live figures are over all ${r.liveRepeats} runs' samples (n live = ${r.liveRepeats} x ${r.workload.requests}). `
        : "") +
      "Sim: bench/sim/simulator.ts (the real GlobalScheduler, LocalScheduler and shareBatch) on the same prompts (with the BOS the server adds), arrivals and max_tokens, TTFT and latency from arrival, on the `cpu` card (below). `pinned` = every request on w0 (x-radixgate-worker), `spread` = roundrobin.",
    "",
    `Server and simulated card: ${r.server.workers} workers x ${r.server.slots} slots x ${r.server.contextSize} tokens, batch ${r.server.batchSize}, chunk ${result.spec.chunkTokens}, ${r.server.threads} thread per worker. ` +
      `Time model: \`${result.calibration.path.replace(`${process.cwd()}/`, "")}\` (the servers' own calibration${result.calibration.existedBefore ? ", cached before the run" : ", made by the first server of this run"}): ` +
      `prefill ${fmt(t.base, 2)} + ${fmt(t.perExtend, 3)} e + ${fmt(t.perContext, 4)} c + ${t.perExtendContext.toExponential(2)} e c ms, decode ${fmt(t.decodeBase, 2)} + ${t.decodePerContext.toExponential(2)} c ms per sequence alone per step (a pass of two or more in consecutive slots: ${result.spec.multiSequencePassFactor ?? 1} x the first term), ` +
      `copy (save + load) ${fmt(t.copyBase, 2)} + ${t.copyPerToken.toExponential(2)} n ms. ` +
      (result.spec.spill
        ? `State store as the server's (config spill): ${result.spec.spill.budgetTokens.toLocaleString("en-US")} tokens (${(liveConfig({ preset, workers, threads: 1 }, "roundrobin").spill.budgetBytes / 2 ** 20).toFixed(0)} MiB / the preset's F16 KV bytes per token), evicted parts of at least ${result.spec.spill.minTokens} tokens saved, loaded back when ${result.spec.spill.minRestoreGain}+ tokens longer than what the slot shares.`
        : "No state store."),
    "",
    `| arm | n live / sim | live TTFT mean (p50) ms | sim TTFT mean (p50) ms | TTFT sim / live mean (p50) | live latency mean (p50) ms | sim latency mean (p50) ms | latency sim / live mean (p50) | cached live / sim | same worker | live placement | sim placement | within ${pct(TARGET_RELATIVE_ERROR)} |`,
    "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |",
    ...result.rows.map(
      (row) =>
        `| ${row.arm} | ${row.live.n} / ${row.sim.n} | ${fmt(row.live.ttftMs.mean)} (${fmt(row.live.ttftMs.p50)}) | ${fmt(row.sim.ttftMs.mean)} (${fmt(row.sim.ttftMs.p50)}) | ${fmt(row.ttftMeanRatio, 2)} (${fmt(row.ttftP50Ratio, 2)}) | ` +
        `${fmt(row.live.latencyMs.mean)} (${fmt(row.live.latencyMs.p50)}) | ${fmt(row.sim.latencyMs.mean)} (${fmt(row.sim.latencyMs.p50)}) | ${fmt(row.latencyMeanRatio, 2)} (${fmt(row.latencyP50Ratio, 2)}) | ` +
        `${pct(row.live.cachedFraction)} / ${pct(row.sim.cachedFraction)} | ${row.sameWorker}/${row.live.n} | ${placed(row.live.placed)} | ${placed(row.sim.placed)} | ${row.withinTarget ? "yes" : "no"} |`,
    ),
    "",
    `Target: simulated mean TTFT within ${pct(TARGET_RELATIVE_ERROR)} of the live one: met for ${met.length} of ${result.rows.length} arms${met.length > 0 ? ` (${met.join(", ")})` : ""}.` +
      ` Live outputs shorter than max_tokens: ${result.rows.reduce((sum, row) => sum + row.shortOutputs, 0)}; latest send after its arrival time: ${fmt(Math.max(...result.rows.map((row) => row.maxSendLatenessMs)), 1)} ms.`,
    ...(r.liveRepeats > 1
      ? [
          "",
          `Live TTFT mean of each run, ms, in run order (the arms took turns, in reverse order every other run): ${r.perRequest
            .map(
              (arm) =>
                `${arm.arm} ${runMeans(arm.requests)
                  .map((mean) => fmt(mean))
                  .join(", ")}`,
            )
            .join("; ")}.`,
        ]
      : []),
    "",
    "What each part of the simulated card accounts for: mean TTFT (sim / live), mean latency (sim / live) and mean cached fraction on each card (compare.ts): `gpu-style` = one decode pass per step for all sequences (full batches in one unified pass), no state store; `store` = + the worker's state store; `cpu-alone` = + one decode pass per run of consecutive busy slots (llama.cpp evaluates only consecutive sequence ids together), each worker as if alone on the machine (its calibration); " +
      `\`cpu\` = + the host's contention: a step that starts while the other worker has requests running takes its prefill x ${fmt(result.contention.prefillFactor, 2)} and its decode x ${fmt(result.contention.decodeFactor, 2)}, the factors the "two workers, two each" probe measured on this machine before the arms ran (its decode net of the measured pass of several sequences below)${
        r.contentionRuns.length > 1
          ? ` (the mean of its ${r.contentionRuns.length} runs: prefill ${r.contentionRuns.map((f) => fmt(f.prefillFactor, 2)).join(", ")}; decode ${r.contentionRuns.map((f) => fmt(f.decodeFactor, 2)).join(", ")})`
          : ""
      }${r.probes ? "" : " (no probe ran: 1 and 1)"}${
        result.contention.multiSequencePass !== undefined
          ? `; and a decode pass of two or more sequences costs ${fmt(result.contention.multiSequencePass, 2)} x one sequence's instead of the card's ${CPU_MULTI_SEQUENCE_PASS}, as the "four decode together" probe measured it served on this machine (its live decode over \`cpu-alone\`'s, times ${CPU_MULTI_SEQUENCE_PASS}${
              r.contentionRuns.length > 1 ? `; runs: ${r.contentionRuns.map((f) => fmt(f.multiSequencePass ?? Number.NaN, 2)).join(", ")}` : ""
            })`
          : ""
      }; the prediction above.`,
    "",
    `| arm | live TTFT / latency / cached | ${SIM_VARIANTS.join(" | ")} |`,
    `| --- | --- | ${SIM_VARIANTS.map(() => "---").join(" | ")} |`,
    ...result.rows.map(
      (row) =>
        `| ${row.arm} | ${fmt(row.live.ttftMs.mean)} / ${fmt(row.live.latencyMs.mean)} / ${pct(row.live.cachedFraction)} | ` +
        SIM_VARIANTS.map((variant) => {
          const v = row.variants[variant];
          return `${fmt(v.ttftMs.mean)} (${fmt(v.ttftMs.mean / row.live.ttftMs.mean, 2)}) / ${fmt(v.latencyMs.mean)} (${fmt(v.latencyMs.mean / row.live.latencyMs.mean, 2)}) / ${pct(v.cachedFraction)}`;
        }).join(" | ") +
        " |",
    ),
    "",
    ...(r.probes
      ? [
          "Probes: small cases, live (a fresh server each) and simulated, each isolating one effect. Mean TTFT / mean latency in ms; in parentheses sim / live.",
          "",
          `| probe | workers x requests | what it isolates | live | ${PROBE_VARIANTS.join(" | ")} |`,
          `| --- | --- | --- | --- | ${PROBE_VARIANTS.map(() => "---").join(" | ")} |`,
          ...r.probes.map(
            (p) =>
              `| ${p.name} | ${p.workers} x ${p.requests} | ${p.isolates} | ${fmt(p.live.ttftMs.mean)} / ${fmt(p.live.latencyMs.mean)} | ` +
              PROBE_VARIANTS.map((variant) => {
                const v = p.variants[variant];
                return `${fmt(v.ttftMs.mean)} (${fmt(v.ttftMs.mean / p.live.ttftMs.mean, 2)}) / ${fmt(v.latencyMs.mean)} (${fmt(v.latencyMs.mean / p.live.latencyMs.mean, 2)})`;
              }).join(" | ") +
              " |",
          ),
          "",
        ]
      : []),
    ...notes(result, r),
    "Per-request numbers (both sides, the simulator's queueing time and placement reason, each card's TTFT) are in sim-vs-live.json.",
    "",
  ].join("\n");
}

/** Where the prediction misses, the measured reasons (from the probes when they ran). */
function notes(result: SimVsLiveResult, r: typeof report): string[] {
  const fmt = (n: number, digits = 0) => (Number.isFinite(n) ? n.toFixed(digits) : "-");
  const missed = result.rows.filter((row) => !row.withinTarget);
  if (missed.length === 0) return [];
  const alone = result.rows.map((row) => row.variants["cpu-alone"].ttftMs.mean / row.live.ttftMs.mean);
  return [
    `Where the prediction misses (${missed.map((row) => `${row.arm} ${fmt(row.ttftMeanRatio, 2)}`).join(", ")}: sim / live mean TTFT), ${missed.every((row) => row.ttftMeanRatio < 1) ? "the simulator is faster than the live server" : missed.every((row) => row.ttftMeanRatio > 1) ? "the simulator is slower than the live server" : "the simulator and the live server differ"}. What is known:`,
    "",
    `- Contention: the calibration times one worker alone on an idle machine; live, both workers' llama.cpp threads share ${cpus().length} cores with Node's main thread (HTTP, SSE, the benchmark client itself) and the prompt thread.` +
      (r.probes
        ? ` With both workers busy (probe "two workers, two each") the live prefill took ${fmt(result.contention.prefillFactor, 2)}x and the decode ${fmt(result.contention.decodeFactor, 2)}x the calibrated time; the prediction carries these factors. Without them (\`cpu-alone\`): sim / live mean TTFT ${result.rows.map((row, i) => `${row.arm} ${fmt(alone[i]!, 2)}`).join(", ")}.`
        : " (Not measured: the probes did not run.)"),
    `- Small samples: ${r.workload.requests} requests per arm; a shift of a few tens of ms moves a request's decode into or out of a ~300 ms prefill step of another (a decoding request gets one token per step), so single requests differ by seconds between runs and between live and sim.`,
    "",
  ];
}

/** One live sample as the report records it (ms rounded). */
function recordedSample(l: ReplaySample): RecordedSample {
  return {
    sentMs: round(l.sentMs),
    ttftMs: round(l.ttftMs),
    latencyMs: round(l.totalMs),
    cachedTokens: l.cachedTokens,
    promptTokens: l.promptTokens,
    completionTokens: l.completionTokens,
    worker: l.worker,
  };
}

/** Per live run, the mean TTFT of an arm's requests in that run. */
function runMeans(requests: readonly { liveRuns?: readonly { ttftMs: number }[] }[]): number[] {
  const sums: number[] = [];
  const counts: number[] = [];
  for (const request of requests) {
    request.liveRuns?.forEach((sample, run) => {
      sums[run] = (sums[run] ?? 0) + sample.ttftMs;
      counts[run] = (counts[run] ?? 0) + 1;
    });
  }
  return sums.map((sum, run) => sum / counts[run]!);
}
