// Throughput of the global radix tree on a tree of over 1M tokens: insert, match, and a
// placement-like step (match + per-worker simulateEviction + in-flight add/remove).
// Prints ops/s; asserts nothing. Run: npx tsx bench/scheduler/radix-tree.bench.ts
// (with `node --expose-gc --import tsx bench/scheduler/radix-tree.bench.ts` it also prints
// the tree's heap size).
import { mulberry32 } from "../../src/common/random.js";
import { RadixTree } from "../../src/scheduler/radix/tree.js";

const WORKERS = ["w0", "w1", "w2", "w3"];
const GROUPS = 200; // shared system prompts
const SYSTEM_TOKENS = 2000;
const PER_GROUP = 50; // conversations per group
const SUFFIX_TOKENS = 100;
const VOCAB = 32_000;

const rnd = mulberry32(1);
const randomTokens = (n: number): number[] => Array.from({ length: n }, () => Math.floor(rnd() * VOCAB));
const systems = Array.from({ length: GROUPS }, () => randomTokens(SYSTEM_TOKENS));
const prompt = (g: number): number[] => [...systems[g]!, ...randomTokens(SUFFIX_TOKENS)];

function time(label: string, ops: number, body: () => void): void {
  const start = process.hrtime.bigint();
  body();
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  console.log(
    `${label.padEnd(44)} ${ops.toString().padStart(7)} ops  ${((ops / ms) * 1000).toFixed(0).padStart(9)} ops/s  (${((ms * 1000) / ops).toFixed(2)} us/op)`,
  );
}

let now = 0;
const tree = new RadixTree({ now: () => now });

(globalThis as { gc?: () => void }).gc?.();
const heapBefore = process.memoryUsage().heapUsed;
const build: number[][] = [];
for (let g = 0; g < GROUPS; g++) for (let i = 0; i < PER_GROUP; i++) build.push(prompt(g));
time("insert (building the tree)", build.length, () => {
  build.forEach((p, i) => {
    now++;
    tree.insert(WORKERS[i % WORKERS.length]!, p);
  });
});
build.length = 0;
(globalThis as { gc?: () => void }).gc?.();
const treeMiB = (process.memoryUsage().heapUsed - heapBefore) / 2 ** 20;
console.log(`tree: ${tree.tokenCount} tokens, ${tree.nodeCount} nodes; cached per worker: ${WORKERS.map((w) => tree.cachedTokens(w)).join(", ")}`);
if ((globalThis as { gc?: () => void }).gc) console.log(`tree heap: ~${treeMiB.toFixed(1)} MiB (node --expose-gc)`);

const queries = Array.from({ length: 20_000 }, () => prompt(Math.floor(rnd() * GROUPS)));
let sink = 0;
time("match (2100-token prompts)", queries.length, () => {
  for (const q of queries) sink += tree.match(q).longest;
});
time("heldLength x 4 workers", queries.length, () => {
  for (const q of queries) for (const w of WORKERS) sink += tree.heldLength(w, q);
});

// Bound every worker just above what it holds: eviction is now part of each decision.
for (const w of WORKERS) tree.setCapacity(w, tree.cachedTokens(w) + 1000);
time("placement: match + simulateEviction x 4 + in-flight", queries.length, () => {
  for (const q of queries) {
    now++;
    const m = tree.match(q);
    let best = WORKERS[0]!;
    let bestCost = Number.POSITIVE_INFINITY;
    for (const w of WORKERS) {
      const need = q.length - (m.perWorker.get(w) ?? 0);
      let cost = need;
      for (const e of tree.simulateEviction(w, need, m)) cost += e.tokens;
      if (cost < bestCost) {
        bestCost = cost;
        best = w;
      }
    }
    tree.removeInFlight(tree.addInFlight(best, q));
  }
});

const inserts = Array.from({ length: 5_000 }, () => prompt(Math.floor(rnd() * GROUPS)));
time("insert with capacity eviction", inserts.length, () => {
  inserts.forEach((p, i) => {
    now++;
    sink += tree.insert(WORKERS[i % WORKERS.length]!, p).evicted.length;
  });
});
console.log(
  `tree: ${tree.tokenCount} tokens, ${tree.nodeCount} nodes; heap used ${(process.memoryUsage().heapUsed / 2 ** 20).toFixed(0)} MiB (sink ${sink % 7})`,
);
