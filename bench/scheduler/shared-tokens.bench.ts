// How long the shared prefix of two Int32Array token runs takes to count: sharedTokenCount
// (memcmp from 256 tokens on) against its own loop alone, on equal runs of several lengths
// and on runs that differ half way. src/common/tokens.ts's thresholds come from here.
//
//   npm run bench:shared-tokens
//
// The two take turns, round after round, on the same arrays (inside larger buffers, as the
// tree's store and the server's prompts are); the report gives the median round. Writes
// bench/results/shared-tokens.md and .json. Measures; asserts nothing.
import { mkdirSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { sharedTokenCount, sharedTokensLoop } from "../../src/common/tokens.js";
import { runIdentity } from "../git-commit.js";

const LENGTHS = [32, 64, 128, 200, 256, 512, 1400, 2048, 8192, 23000];
const ROUNDS = 7;
/** Tokens compared per timed batch of calls, so that every length is timed for about as long. */
const TOKENS_PER_BATCH = 40_000_000;

type Count = (a: Int32Array, aFrom: number, b: Int32Array, bFrom: number, limit: number) => number;

/** Two runs of `length` equal tokens at offsets 3 and 5 of larger buffers; `b` differs at `mismatch` when it is inside. */
function pair(length: number, mismatch: number): { a: Int32Array; b: Int32Array } {
  const a = new Int32Array(length + 16);
  const b = new Int32Array(length + 16);
  for (let i = 0; i < length; i++) a[3 + i] = b[5 + i] = Math.imul(i + 1, 2654435761) >> 3;
  if (mismatch < length) b[5 + mismatch]! ^= 1;
  return { a, b };
}

/** Nanoseconds per call of `count` on the pair. */
function time(count: Count, a: Int32Array, b: Int32Array, length: number, expected: number): number {
  const calls = Math.max(1000, Math.round(TOKENS_PER_BATCH / length));
  let check = 0;
  const started = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) check += count(a, 3, b, 5, length);
  const ns = Number(process.hrtime.bigint() - started) / calls;
  if (check !== expected * calls) throw new Error(`shared-tokens bench: counted ${check / calls}, expected ${expected}`);
  return ns;
}

const median = (values: number[]) => [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)]!;

const loadBefore = loadavg()[0]!;
const rows: { length: number; case: string; loopNs: number; sharedTokenCountNs: number; ratio: number }[] = [];
for (const length of LENGTHS) {
  for (const [name, mismatch] of [
    ["equal", length],
    ["differ half way", Math.floor(length / 2)],
  ] as const) {
    const { a, b } = pair(length, mismatch);
    const loop: number[] = [];
    const shared: number[] = [];
    // A warm-up round, then the timed ones, the two taking turns.
    time(sharedTokensLoop, a, b, length, mismatch);
    time(sharedTokenCount, a, b, length, mismatch);
    for (let round = 0; round < ROUNDS; round++) {
      loop.push(time(sharedTokensLoop, a, b, length, mismatch));
      shared.push(time(sharedTokenCount, a, b, length, mismatch));
    }
    const loopNs = median(loop);
    const sharedTokenCountNs = median(shared);
    rows.push({ length, case: name, loopNs, sharedTokenCountNs, ratio: sharedTokenCountNs / loopNs });
  }
}

const identity = runIdentity(["src/common", "bench/scheduler"]);
const load = `load ${loadBefore.toFixed(2)} at the start, ${loadavg()[0]!.toFixed(2)} at the end`;
mkdirSync("bench/results", { recursive: true });
writeFileSync("bench/results/shared-tokens.json", `${JSON.stringify({ ...identity, load, rounds: ROUNDS, rows }, null, 2)}\n`);
const md = [
  "# Shared prefix of two token runs: sharedTokenCount against its loop",
  "",
  `Machine: ${identity.machine}, ${load}; Node ${identity.node}; commit ${identity.commit}; ${identity.date}.`,
  "",
  "Command: `npm run bench:shared-tokens`. Both on the same Int32Arrays (inside larger buffers), taking turns; the median of " +
    `${ROUNDS} rounds, each ~${TOKENS_PER_BATCH / 1e6}M tokens compared. From 256 tokens on, sharedTokenCount compares by memcmp in chunks that double from 512 to 4096, halving a chunk that differs down to 256 tokens for the loop.`,
  "",
  "| tokens | case | loop ns/call | sharedTokenCount ns/call | sharedTokenCount / loop |",
  "| ---: | --- | ---: | ---: | ---: |",
  ...rows.map((r) => `| ${r.length} | ${r.case} | ${r.loopNs.toFixed(0)} | ${r.sharedTokenCountNs.toFixed(0)} | ${r.ratio.toFixed(2)} |`),
  "",
].join("\n");
writeFileSync("bench/results/shared-tokens.md", md);
console.log(md);
