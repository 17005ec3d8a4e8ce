// npm run bench:live [-- --preset bench --workers 2 --arms pinned,spread,split,shape,preble,cache-aware,dynamo,llm-d,affinity --repeats 3]
// Writes bench/results/live.{json,md}. See live-bench.ts for what is measured.
//
// Every arm runs --repeats times, the arms taking turns (armsOfRun). A policy is judged
// against the reference arms of the same run (warm turns against always-pinned, the burst
// against always-spread), and the verdict takes the median of those per-run ratios: on the
// 2-core development box one policy's warm turns were 1.45x always-pinned's in one run and
// 1.09x in the next, on the same code, with every arm finding the same share of its prompts
// cached, so one run cannot rank policies 5 % apart.
import { mkdirSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { parseArgs } from "node:util";
import { gitCommit, machineDescription } from "../git-commit.js";
import { BOTH_BAR, bothVerdicts, mean, median, pooledArm, runLiveBenchRuns, warmTurnTtftMs, type ArmResult, type LiveOptions } from "./live-bench.js";

const { values } = parseArgs({
  options: {
    preset: { type: "string", default: "bench" },
    workers: { type: "string", default: "2" },
    arms: { type: "string", default: "pinned,spread,split,shape,preble,cache-aware,dynamo,llm-d,affinity" },
    seed: { type: "string", default: "1" },
    sessions: { type: "string", default: "4" },
    turns: { type: "string", default: "5" },
    burst: { type: "string", default: "16" },
    trace: { type: "string", default: "24" },
    repeats: { type: "string", default: "3" },
  },
});

const options: LiveOptions = {
  preset: values.preset as "tiny" | "bench",
  workers: Number(values.workers),
  threads: 1,
  arms: values.arms.split(","),
  agentSessions: Number(values.sessions),
  agentTurns: Number(values.turns),
  agentContextWords: 1200,
  burstRequests: Number(values.burst),
  burstPromptWords: 400,
  traceRequests: Number(values.trace),
  tracePrefixes: 6,
  tracePrefixWords: 800,
  traceGapMs: 150,
  maxTokens: 16,
  seed: Number(values.seed),
  onProgress: (line) => process.stderr.write(`[bench:live] ${line}\n`),
};

const repeats = Number(values.repeats);
if (!Number.isInteger(repeats) || repeats < 1) throw new Error(`--repeats must be a positive integer, got ${values.repeats}`);
const loadAtStart = loadavg()[0]!;
const started = performance.now();
const runs = await runLiveBenchRuns(options, repeats);
const seconds = (performance.now() - started) / 1000;

const row = (result: ArmResult) => ({
  arm: result.arm,
  warmTurnTtftMs: warmTurnTtftMs(result),
  warmTurnCachedFraction: mean(result.agentWarmTurns.map((s) => s.cachedTokens / Math.max(1, s.promptTokens))),
  coldTurnTtftMs: median(result.agentColdTurns.map((s) => s.ttftMs)),
  burstMs: result.burstMs,
  burstWorkers: [...new Set(result.burst.map((s) => s.worker))].sort().join("+"),
  traceTtftMeanMs: mean(result.trace.map((s) => s.ttftMs)),
  traceTtftP50Ms: median(result.trace.map((s) => s.ttftMs)),
  traceLatencyMeanMs: mean(result.trace.map((s) => s.totalMs)),
  traceCachedFraction: mean(result.trace.map((s) => s.cachedTokens / Math.max(1, s.promptTokens))),
  samples: { warmTurns: result.agentWarmTurns.length, coldTurns: result.agentColdTurns.length, burst: result.burst.length, trace: result.trace.length },
});
const rows = options.arms.map((arm) => row(pooledArm(runs, arm)));
const verdicts = bothVerdicts(runs, options.arms);

const commit = gitCommit();
const machine = `${machineDescription()}, load ${loadAtStart.toFixed(2)} at the start, ${loadavg()[0]!.toFixed(2)} at the end`;
const command = `npm run bench:live -- ${process.argv.slice(2).join(" ")}`.trim();
mkdirSync("bench/results", { recursive: true });
writeFileSync(
  "bench/results/live.json",
  `${JSON.stringify({ date: new Date().toISOString(), commit, machine, command, options: { ...options, onProgress: undefined }, repeats, seconds, rows, verdicts, raw: runs }, null, 2)}\n`,
);
const pct = `${Math.round((BOTH_BAR - 1) * 100)} %`;
const fmt = (n: number, digits = 0) => (Number.isFinite(n) ? n.toFixed(digits) : "-");
const runsOf = (ratios: readonly number[]) => `(${ratios.map((x) => fmt(x, 2)).join(", ")})`;
const md = [
  `# Live benchmark: ${options.workers} CPU workers, preset ${options.preset}`,
  "",
  `Machine: ${machine}. Commit ${commit}. Command: \`${command}\`. Seed ${options.seed}; prompts salted per run; ${Math.round(seconds)} s in all.`,
  "",
  `Each arm ran ${repeats} times, a fresh server each time, the arms taking turns (in reverse order every other run). The table pools every run's samples (the burst: the median of the runs' times); the verdict below compares each run with the reference arms of the same run.`,
  "",
  "| arm | warm-turn TTFT p50 (ms) | warm-turn cached | cold-turn TTFT p50 (ms) | burst of " +
    options.burstRequests +
    " (ms) | burst workers | trace TTFT mean / p50 (ms) | trace latency mean (ms) | trace cached | n (warm/cold/burst/trace) |",
  "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- |",
  ...rows.map(
    (r) =>
      `| ${r.arm} | ${fmt(r.warmTurnTtftMs)} | ${fmt(r.warmTurnCachedFraction * 100, 1)}% | ${fmt(r.coldTurnTtftMs)} | ${fmt(r.burstMs)} | ${r.burstWorkers} | ${fmt(r.traceTtftMeanMs)} / ${fmt(r.traceTtftP50Ms)} | ${fmt(r.traceLatencyMeanMs)} | ${fmt(r.traceCachedFraction * 100, 1)}% | ${r.samples.warmTurns}/${r.samples.coldTurns}/${r.samples.burst}/${r.samples.trace} |`,
  ),
  "",
  `Both at once (warm turns within ${pct} of always-pinned, burst within ${pct} of always-spread; the median over the runs of each run's ratio, every run's in parentheses, in run order):`,
  "",
  "| policy | warm-turn TTFT p50 / pinned | burst / spread | both | warm-turn TTFT p50 / split |",
  "| --- | ---: | ---: | --- | ---: |",
  ...verdicts.map(
    (v) =>
      `| ${v.arm} | ${fmt(v.warmVsPinned, 2)} ${runsOf(v.warmVsPinnedRuns)} | ${fmt(v.burstVsSpread, 2)} ${runsOf(v.burstVsSpreadRuns)} | ${v.both ? "yes" : "no"} | ${fmt(v.warmVsSplit, 2)} ${runsOf(v.warmVsSplitRuns)} |`,
  ),
  "",
  "`split` (a reference arm, not a policy) keeps every agent session, burst prompt and trace prefix on one worker of its own (its index modulo the workers), as good a placement on several workers as there is: a policy level with it on warm turns places them as well as can be, and what it loses to always-pinned is the cost of computing on several workers at once.",
  "",
].join("\n");
writeFileSync("bench/results/live.md", md);
console.log(md);
