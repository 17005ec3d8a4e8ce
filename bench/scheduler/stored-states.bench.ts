// How long the scheduler takes to find the longest prefix of a prompt among a worker's stored
// states (StoredStates.longestPrefix, on every candidate of every decision while the worker
// has states), against comparing the prompt with every state from its start. The states are
// an agent's stored turns: a shared 1,500-token system prompt, then 500 tokens of their own;
// the prompt shares the system prompt and goes on with tokens of its own.
//
//   npm run bench:stored-states
//
// The two take turns, round after round, on the same states; the report gives the median
// round. Writes bench/results/stored-states.md and .json. Measures; asserts nothing.
import { mkdirSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { commonPrefixLength } from "../../src/common/tokens.js";
import { StoredStates } from "../../src/scheduler/placement/stored-states.js";
import { runIdentity } from "../git-commit.js";

const STATE_COUNTS = [4, 64, 512, 4096];
const SHARED = 1500;
const OWN = 500;
const ROUNDS = 7;
/** Calls per timed batch: about as many states compared per batch whatever the count. */
const STATES_PER_BATCH = 400_000;

const sharedPrompt = Array.from({ length: SHARED }, (_, i) => (Math.imul(i + 1, 2654435761) >>> 8) % 30_000);

function statesOf(count: number): StoredStates {
  const states = new StoredStates();
  const stored = Array.from({ length: count }, (_, k) => ({
    id: `s${k}`,
    tokens: [...sharedPrompt, ...Array.from({ length: OWN }, (_, i) => 30_000 + k * OWN + i)],
  }));
  states.apply({ stored, dropped: [] });
  return states;
}

/** Each state compared with the prompt from its start: what longestPrefix did before. */
function everyStateFromTheStart(states: StoredStates, prompt: readonly number[]): number {
  let best = 0;
  for (const { tokens } of states.entries()) best = Math.max(best, commonPrefixLength(tokens, prompt));
  return best;
}

function timePerCallUs(calls: number, call: () => number): number {
  let sink = 0;
  const started = performance.now();
  for (let i = 0; i < calls; i++) sink += call();
  const elapsed = performance.now() - started;
  if (sink < 0) throw new Error("unreachable");
  return (elapsed * 1000) / calls;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

const identity = runIdentity();
const loadAtStart = loadavg()[0]!;
const prompt = [...sharedPrompt, ...Array.from({ length: 600 }, (_, i) => 1_000_000 + i)];
const rows = STATE_COUNTS.map((count) => {
  const states = statesOf(count);
  const calls = Math.max(20, Math.round(STATES_PER_BATCH / count));
  if (states.longestPrefix(prompt, 0) !== everyStateFromTheStart(states, prompt)) throw new Error("the two disagree");
  // Warm both up before timing.
  timePerCallUs(calls, () => states.longestPrefix(prompt, 0));
  timePerCallUs(calls, () => everyStateFromTheStart(states, prompt));
  const walk: number[] = [];
  const each: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    walk.push(timePerCallUs(calls, () => states.longestPrefix(prompt, 0)));
    each.push(timePerCallUs(calls, () => everyStateFromTheStart(states, prompt)));
  }
  return { states: count, calls, longestPrefixUs: median(walk), everyStateUs: median(each) };
});
const report = {
  benchmark: "stored-states",
  ...identity,
  command: "npm run bench:stored-states",
  settings: { sharedTokens: SHARED, ownTokens: OWN, promptTokens: prompt.length, rounds: ROUNDS },
  machineLoad: { loadAverage1mAtStart: loadAtStart, loadAverage1mAtEnd: loadavg()[0]! },
  rows,
};

const lines = [
  "# Stored states: the longest prefix of a prompt among a worker's stored states",
  "",
  `Machine: ${identity.machine}; Node ${identity.node}; commit ${identity.commit}; ${identity.date}; load ${loadAtStart.toFixed(1)} at the start, ${report.machineLoad.loadAverage1mAtEnd.toFixed(1)} at the end.`,
  "",
  `Command: \`${report.command}\`. States: a shared ${SHARED}-token system prompt, then ${OWN} tokens of their own; the prompt (${prompt.length} tokens) shares the system prompt. Median of ${ROUNDS} rounds, the two taking turns.`,
  "",
  "| states | calls per round | longestPrefix (us per call) | every state from its start (us per call) | longestPrefix / every state |",
  "| ---: | ---: | ---: | ---: | ---: |",
  ...rows.map(
    (row) =>
      `| ${row.states} | ${row.calls} | ${row.longestPrefixUs.toFixed(2)} | ${row.everyStateUs.toFixed(2)} | ${(row.longestPrefixUs / row.everyStateUs).toFixed(3)}x |`,
  ),
  "",
];
const results = new URL("../results/", import.meta.url);
mkdirSync(results, { recursive: true });
writeFileSync(new URL("stored-states.json", results), `${JSON.stringify(report, null, 2)}\n`);
writeFileSync(new URL("stored-states.md", results), lines.join("\n"));
process.stdout.write(lines.join("\n"));
