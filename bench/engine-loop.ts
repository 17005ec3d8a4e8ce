// node-llama-cpp's decode loop as a worker drives it, with nothing around it: one context of
// 4 sequences on the `bench` model, the worker's batch gate (every generating sequence in
// every step), its batch sharing and its compute thread pool; no host, no HTTP, no streaming.
// Greedy 150-token continuations of a short prompt in chosen slots, all at once: output
// tokens/s and wall ms per decode step. Shows what the engine itself decodes (bench:peer
// shows it served), and what slots that are not side by side cost (llama.cpp puts only
// consecutive sequence ids in one micro-batch; docs/engine.md, "Slots side by side").
//
//   npm run bench:engine-loop [-- --threads 1,2 --repeats 3]
//
// Each binary x thread count runs in a child process of its own (node-llama-cpp loads one
// binary per process): the prebuilt one, and the one `npm run build:engine-native` made when
// it is there. Beside them, at each thread count, llama.cpp's own loop on the same GGUF
// (`llama-batched-bench` of the build llama-server comes from, made when missing:
// bench/batched-bench.ts), so the report says how much of llama.cpp's decode speed the
// worker's loop keeps before any serving. Results: bench/results/engine-loop.{md,json}.
import { spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import { LlamaLogLevel, type Token } from "node-llama-cpp";
import { findOrBuildLlamaCppTool } from "../src/engine/llama-server/binary.js";
import { DEFAULT_THREAD_POLL } from "../src/engine/wire/protocol.js";
import { createBatchedContext } from "../src/engine/worker/batched-context.js";
import { loadLlama } from "../src/engine/worker/llama-binary.js";
import { LOCAL_SCHEDULER_DEFAULTS } from "../src/scheduler/local-scheduler-settings.js";
import { ensureModel } from "../src/presets/make-model.js";
import { type BatchedBenchRow, runBatchedBench } from "./batched-bench.js";
import { runIdentity } from "./git-commit.js";
import { NATIVE_BUILD_ENV, nativeBuildPresent } from "../src/engine/host/native-build.js";
import { percentile } from "./soak/stats.js";
import { presetInWeights, weightTypeArgument } from "./weights.js";

const { values } = parseArgs({
  options: {
    threads: { type: "string", default: "1,2" },
    repeats: { type: "string", default: "3" },
    child: { type: "string" },
    weights: { type: "string", default: "F32" },
  },
});
const WEIGHTS = weightTypeArgument(values.weights);
const SLOTS = 4;
const TOKENS = 150;
const CONTEXT_PER_SLOT = 4096;
const BATCH = 512;
/** About the length of the children's prompts in the `bench` model's tokens; the reference's prompts are this long. */
const REFERENCE_PROMPT_TOKENS = 20;
/** The placements of side-by-side slots, by sequence count: what the reference's B sequences compare with. */
const SIDE_BY_SIDE = Array.from({ length: SLOTS }, (_, count) => Array.from({ length: count + 1 }, (_, slot) => slot).join("+"));
/** The slots generating at once: side by side, and with a gap (two micro-batches a step). */
const PLACEMENTS = [[0], [0, 1], [0, 2], [1, 3], [0, 1, 2], [0, 1, 2, 3]];
const REPEATS = Number(values.repeats);

interface Measured {
  binary: string;
  threads: number;
  computePool: string;
  /** Whether generation steps were decoded on the worker's thread (worker/inline-decode.ts). */
  inlineDecode: boolean;
  /** Per placement ("0+2"): tokens/s and wall ms per decode step of each repeat. */
  placements: Record<string, { tokensPerS: number[]; msPerStep: number[] }>;
}

async function child(threads: number): Promise<Measured> {
  // loadLlama: a child asked for the build made here never falls back to the prebuilt binary.
  const llama = await loadLlama({ gpu: false, build: "never", maxThreads: threads, logLevel: LlamaLogLevel.warn });
  // The parent converted the weights before it started the children.
  const model = await llama.loadModel({ modelPath: await presetInWeights(await ensureModel("bench"), WEIGHTS, () => {}) });
  const {
    context,
    sequences,
    gate,
    batches: stats,
    computePool: pool,
    inlineDecode,
  } = await createBatchedContext(model, {
    slots: SLOTS,
    contextSize: CONTEXT_PER_SLOT,
    batchSize: BATCH,
    threads,
    threadPoll: DEFAULT_THREAD_POLL,
    flashAttention: "auto",
    chunkTokens: () => LOCAL_SCHEDULER_DEFAULTS.chunkTokens,
  });
  const result: Measured = { binary: llama.buildType, threads, computePool: pool.kind, inlineDecode: inlineDecode.on, placements: {} };
  for (let repeat = 0; repeat < REPEATS; repeat++) {
    for (const slots of PLACEMENTS) {
      const prompt = model.tokenize(`Once upon a time, in run ${repeat} of ${slots.join(" ")}, a small robot`) as Token[];
      for (const sequence of sequences) await sequence.clearHistory();
      // The prompt's own step is timed too: one step of ~20 tokens among 150.
      const before = { ...stats };
      const started = performance.now();
      await Promise.all(
        slots.map(async (slot) => {
          gate.begin(slot);
          let generated = 0;
          for await (const _token of sequences[slot]!.evaluate(prompt, { temperature: 0 })) if (++generated >= TOKENS) break;
          gate.end(slot);
        }),
      );
      const ms = performance.now() - started;
      const entry = (result.placements[slots.join("+")] ??= { tokensPerS: [], msPerStep: [] });
      entry.tokensPerS.push((slots.length * TOKENS) / (ms / 1000));
      entry.msPerStep.push(ms / (stats.steps - before.steps));
    }
  }
  await context.dispose();
  pool.release();
  await model.dispose();
  await llama.dispose();
  return result;
}

if (values.child !== undefined) {
  process.stdout.write(`${JSON.stringify(await child(Number(values.child)))}\n`);
  process.exit(0);
}

const median = (xs: readonly number[]) => percentile(xs, 50);
const started = Date.now();
const loadAtStart = loadavg()[0]!;
const builds: { name: string; env: Record<string, string> }[] = [
  { name: "prebuilt", env: {} },
  // Every batch through node-llama-cpp's async decode: what decoding on the worker's thread gains.
  { name: "prebuilt, no inline decode", env: { RADIXGATE_NO_INLINE_DECODE: "1" } },
  // Decoded inline, each token sampled through node-llama-cpp's async call: what sampling on the worker's thread gains.
  { name: "prebuilt, no inline sampling", env: { RADIXGATE_NO_INLINE_SAMPLE: "1" } },
  ...(nativeBuildPresent() ? [{ name: "built here (npm run build:engine-native)", env: { ...NATIVE_BUILD_ENV } }] : []),
];
const referenceBinary = await findOrBuildLlamaCppTool("llama-batched-bench", (line) => process.stderr.write(`${line}\n`));
const modelPath = await presetInWeights(await ensureModel("bench"), WEIGHTS, (line) => process.stderr.write(`${line}\n`));
const runs: (Measured & { build: string })[] = [];
/** llama.cpp's own loop at each thread count: every repeat's rows. */
const references: { threads: number; repeats: BatchedBenchRow[][] }[] = [];
for (const threads of values.threads.split(",").map(Number)) {
  const reference = { threads, repeats: [] as BatchedBenchRow[][] };
  const runReference = () =>
    reference.repeats.push(
      runBatchedBench({
        binary: referenceBinary,
        model: modelPath,
        threads,
        contextPerSequence: CONTEXT_PER_SLOT,
        batchSize: BATCH,
        promptTokens: REFERENCE_PROMPT_TOKENS,
        generatedTokens: TOKENS,
        sequences: SIDE_BY_SIDE.map((_, i) => i + 1),
      }),
    );
  // Half of the reference's repeats before the node-llama-cpp children and half after, so a
  // machine that slows down meanwhile weighs on both sides.
  const before = Math.ceil(REPEATS / 2);
  for (let repeat = 0; repeat < before; repeat++) runReference();
  for (const build of builds) {
    const out = spawnSync(
      process.execPath,
      ["--import", "tsx", fileURLToPath(import.meta.url), "--child", String(threads), "--repeats", String(REPEATS), "--weights", WEIGHTS],
      {
        env: { ...process.env, ...build.env },
        encoding: "utf8",
        stdio: ["ignore", "pipe", "inherit"],
      },
    );
    if (out.status !== 0) throw new Error(`${build.name}, ${threads} threads: the child exited with ${out.status}`);
    const measured = JSON.parse(out.stdout.trim().split("\n").at(-1)!) as Measured;
    runs.push({ ...measured, build: build.name });
    process.stderr.write(`${build.name}, ${threads} threads: done\n`);
  }
  for (let repeat = before; repeat < REPEATS; repeat++) runReference();
  references.push(reference);
  process.stderr.write(`llama.cpp's own loop, ${threads} threads: done\n`);
}

/** The reference's median decode tokens/s at `sequences` side by side. */
function referenceTokensPerS(threads: number, sequences: number): number {
  const reference = references.find((entry) => entry.threads === threads)!;
  return median(reference.repeats.map((rows) => rows.find((row) => row.sequences === sequences)!.decodeTokensPerS));
}

const report = {
  ...runIdentity(["src", "bench", "patches", "package.json", "package-lock.json"]),
  command: `npm run bench:engine-loop -- --threads ${values.threads} --repeats ${REPEATS}${WEIGHTS === "F32" ? "" : ` --weights ${WEIGHTS}`}`,
  settings: {
    slots: SLOTS,
    tokens: TOKENS,
    placements: PLACEMENTS,
    repeats: REPEATS,
    model: "preset:bench",
    weights: WEIGHTS,
    flashAttention: "auto",
    threadPoll: DEFAULT_THREAD_POLL,
  },
  machineLoad: { loadAverage1mAtStart: loadAtStart, loadAverage1mAtEnd: loadavg()[0]!, wallS: (Date.now() - started) / 1000 },
  runs,
  reference: { tool: "llama-batched-bench", binary: referenceBinary, promptTokens: REFERENCE_PROMPT_TOKENS, byThreads: references },
};
const lines = [
  "# node-llama-cpp's decode loop as a worker drives it, nothing around it",
  "",
  `Commit ${report.commit}, ${report.date}. Machine: ${report.machine}, Node ${report.node}. Command: \`${report.command}\`. ` +
    `One context of ${SLOTS} sequences on the \`bench\` model (${WEIGHTS === "F32" ? "F32 weights, as written" : `${WEIGHTS} weights, converted by llama-quantize`}) with the worker's batch gate, batch sharing and compute thread pool; no host, HTTP or streaming. ` +
    `${TOKENS} greedy tokens in each listed slot at once; medians of ${REPEATS} repeats (wall ms per step includes the prompt's step and sampling). ` +
    `Load average (1 min) ${loadAtStart.toFixed(1)} at start, ${report.machineLoad.loadAverage1mAtEnd.toFixed(1)} at end; ${report.machineLoad.wallS.toFixed(0)} s in all.`,
  "",
  `| binary | threads | compute pool | inline decode | ${PLACEMENTS.map((p) => `slots ${p.join("+")}`).join(" | ")} |`,
  `| --- | ---: | --- | --- | ${PLACEMENTS.map(() => "---:").join(" | ")} |`,
  ...runs.map(
    (run) =>
      `| ${run.build} (${run.binary}) | ${run.threads} | ${run.computePool} | ${run.inlineDecode ? "yes" : "no"} | ${PLACEMENTS.map((p) => {
        const entry = run.placements[p.join("+")]!;
        return `${median(entry.tokensPerS).toFixed(0)} tok/s, ${median(entry.msPerStep).toFixed(2)} ms`;
      }).join(" | ")} |`,
  ),
  ...references.map(
    (reference) =>
      `| llama.cpp's own loop (llama-batched-bench, built here) | ${reference.threads} | OpenMP | - | ${PLACEMENTS.map((p) => {
        const index = SIDE_BY_SIDE.indexOf(p.join("+"));
        if (index < 0) return "-";
        const tokensPerS = referenceTokensPerS(reference.threads, index + 1);
        return `${tokensPerS.toFixed(0)} tok/s, ${((1000 * (index + 1)) / tokensPerS).toFixed(2)} ms`;
      }).join(" | ")} |`,
  ),
  "",
  "Slots 0+2 and 1+3 are two micro-batches per step (their sequence ids are not consecutive); 0+1 and 0+1+2 one. " +
    `llama.cpp's own loop: \`llama-batched-bench\` of the build llama-server comes from (the bundled source, compiled here with llama.cpp's defaults), the same GGUF, ${TOKENS} decode steps after a ${REFERENCE_PROMPT_TOKENS}-token prompt in each of 1-4 sequences (one KV stream per sequence, as node-llama-cpp's), the decode steps alone timed and nothing sampled; medians of ${REPEATS} runs, half before the node-llama-cpp children and half after.`,
  "",
  "## node-llama-cpp's loop against llama.cpp's own (tokens/s, same thread count)",
  "",
  `| binary | threads | ${SIDE_BY_SIDE.map((_, i) => `${i + 1} at once`).join(" | ")} |`,
  `| --- | ---: | ${SIDE_BY_SIDE.map(() => "---:").join(" | ")} |`,
  ...runs.map(
    (run) =>
      `| ${run.build} (${run.binary}) | ${run.threads} | ${SIDE_BY_SIDE.map((placement, i) => `${(median(run.placements[placement]!.tokensPerS) / referenceTokensPerS(run.threads, i + 1)).toFixed(2)}x`).join(" | ")} |`,
  ),
  "",
  "Ours include what the reference leaves out: sampling each token, the prompt's step, and the hand-offs between Node's threads and llama.cpp's at every step.",
  "",
];
mkdirSync(fileURLToPath(new URL("results", import.meta.url)), { recursive: true });
const stem = WEIGHTS === "F32" ? "engine-loop" : `engine-loop-${WEIGHTS.toLowerCase()}`;
writeFileSync(fileURLToPath(new URL(`results/${stem}.json`, import.meta.url)), `${JSON.stringify(report, null, 2)}\n`);
writeFileSync(fileURLToPath(new URL(`results/${stem}.md`, import.meta.url)), lines.join("\n"));
console.log(lines.join("\n"));
