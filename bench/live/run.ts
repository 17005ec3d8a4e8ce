// npm run bench:live [-- --preset bench --workers 2 --arms pinned,spread,shape,preble,cache-aware,dynamo,llm-d,affinity]
// Writes bench/results/live.{json,md}. See live-bench.ts for what is measured.
import { mkdirSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { parseArgs } from "node:util";
import { gitCommit, machineDescription } from "../git-commit.js";
import { mean, median, runLiveBench, type ArmResult, type LiveOptions } from "./live-bench.js";

const { values } = parseArgs({
  options: {
    preset: { type: "string", default: "bench" },
    workers: { type: "string", default: "2" },
    arms: { type: "string", default: "pinned,spread,shape,preble,cache-aware,dynamo,llm-d,affinity" },
    seed: { type: "string", default: "1" },
    sessions: { type: "string", default: "4" },
    turns: { type: "string", default: "5" },
    burst: { type: "string", default: "16" },
    trace: { type: "string", default: "24" },
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

const results = await runLiveBench(options);
const row = (result: ArmResult) => ({
  arm: result.arm,
  warmTurnTtftMs: median(result.agentWarmTurns.map((s) => s.ttftMs)),
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
const rows = results.map(row);
const pinned = rows.find((r) => r.arm === "pinned");
const spread = rows.find((r) => r.arm === "spread");
// "Both": warm turns within 5 % of always-pinned AND the burst within 5 % of always-spread.
const BAR = 1.05;
const verdicts = rows
  .filter((r) => r.arm !== "pinned" && r.arm !== "spread")
  .map((r) => ({
    arm: r.arm,
    warmVsPinned: pinned ? r.warmTurnTtftMs / pinned.warmTurnTtftMs : Number.NaN,
    burstVsSpread: spread ? r.burstMs / spread.burstMs : Number.NaN,
  }))
  .map((v) => ({ ...v, both: v.warmVsPinned <= BAR && v.burstVsSpread <= BAR }));

const commit = gitCommit();
const machine = `${machineDescription()}, load ${loadavg()[0]!.toFixed(2)}`;
const command = `npm run bench:live -- ${process.argv.slice(2).join(" ")}`.trim();
mkdirSync("bench/results", { recursive: true });
writeFileSync(
  "bench/results/live.json",
  `${JSON.stringify({ date: new Date().toISOString(), commit, machine, command, options: { ...options, onProgress: undefined }, rows, verdicts, raw: results }, null, 2)}\n`,
);
const fmt = (n: number, digits = 0) => (Number.isFinite(n) ? n.toFixed(digits) : "-");
const md = [
  `# Live benchmark: ${options.workers} CPU workers, preset ${options.preset}`,
  "",
  `Machine: ${machine}. Commit ${commit}. Command: \`${command}\`. Seed ${options.seed}; prompts salted per run.`,
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
  "Both at once (warm turns within 5 % of always-pinned, burst within 5 % of always-spread):",
  "",
  "| policy | warm-turn TTFT / pinned | burst / spread | both |",
  "| --- | ---: | ---: | --- |",
  ...verdicts.map((v) => `| ${v.arm} | ${fmt(v.warmVsPinned, 2)} | ${fmt(v.burstVsSpread, 2)} | ${v.both ? "yes" : "no"} |`),
  "",
].join("\n");
writeFileSync("bench/results/live.md", md);
console.log(md);
