// One worker of the `bench` model, driven directly (no HTTP, no scheduler):
//
//   npx tsx bench/worker.bench.ts [--lengths 1000,4000,8000] [--repeats 3] [--seed 1] [--parts 1,2,3]
//
// 1. Cold vs warm TTFT on an idle worker: for each length and repeat, a salted prompt
//    (a unique first line, so nothing is cached) generated with maxTokens 1 cold, then the
//    same prompt again (warm). TTFT is the worker's prefillMs (slot taken -> first token) and
//    the host's time from generate() to the first onText.
// 2. Copy vs recompute (the crossover the global cost model prices): worker A computes a
//    prefix; A.exportPrefix + B.importState (save + copy through /dev/shm) and B's first
//    request on it (load + last prompt token + 1 token), versus B computing a prefix of the
//    same length cold.
// 3. The used-slot stall probe: a worker with STALL_SLOTS slots; while N = 0 .. slots - 1
//    other sequences decode long completions, a new ~STALL_PROMPT-token prompt is sent and
//    its host TTFT taken twice: on a clean slot (the worker's idle slots emptied first) and
//    on a used slot (every slot first filled with another prompt, so the request must erase
//    one). Used / clean at each N is the stall; node-llama-cpp's context lock once made it
//    15x at N = 3.
//
// Results go to bench/results/worker.{json,md}.
import { mkdtemp, rm } from "node:fs/promises";
import { loadavg } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { mkdirSync, writeFileSync } from "node:fs";
import { ensureModel } from "../src/presets/make-model.js";
import { gitCommit, machineDescription } from "./git-commit.js";
import { mulberry32 } from "../src/common/random.js";
import { WorkerHandle } from "../src/engine/host/worker-handle.js";
import { PromptPreparer } from "../src/engine/host/prompt-preparer.js";
import type { WorkerInit } from "../src/engine/wire/protocol.js";
import { LOCAL_SCHEDULER_DEFAULTS } from "../src/scheduler/local-scheduler-settings.js";
import type { GenerationResult } from "../src/contract/generation.js";
import type { SamplingParams } from "../src/contract/sampling.js";
import { defaultStateDir } from "../src/engine/worker/state-store.js";
import type { TokenIds } from "../src/common/tokens.js";

const { values } = parseArgs({
  options: {
    lengths: { type: "string", default: "1000,4000,8000" },
    repeats: { type: "string", default: "3" },
    seed: { type: "string", default: "1" },
    parts: { type: "string", default: "1,2,3" },
  },
});
const parts = new Set(values.parts.split(",").map(Number));
const lengths = values.lengths.split(",").map(Number);
const repeats = Number(values.repeats);
const seed = Number(values.seed);
if (
  lengths.some((n) => !Number.isInteger(n) || n < 16) ||
  !Number.isInteger(repeats) ||
  repeats < 1 ||
  !Number.isInteger(seed) ||
  parts.size === 0 ||
  [...parts].some((part) => ![1, 2, 3].includes(part))
) {
  throw new RangeError("usage: --lengths <integers >= 16, comma-separated> --repeats <integer >= 1> --seed <integer> --parts <1, 2 and/or 3, comma-separated>");
}
/** Part 3: slots of the probed worker, the probe's prompt length, and the decoding requests' length. */
const STALL_SLOTS = 4;
const STALL_PROMPT = 800;
const STALL_DECODE_TOKENS = 3000;
const MODEL = "bench";
const THREADS = 1;
const SLOTS = 2;
// Room for the longest prompt plus its chat wrapping, in whole kilotokens; 9216 for 8k prompts.
const CONTEXT_SIZE = Math.max(9216, Math.ceil((Math.max(...lengths) + 1024) / 1024) * 1024);
const SAMPLING: SamplingParams = { maxTokens: 1, temperature: 0, stop: [] };
const USER_TURN = "Which file is largest?";

const log = (line: string) => process.stderr.write(`${line}\n`);
const median = (xs: readonly number[]): number => {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};
const ms = (x: number) => (x >= 100 ? x.toFixed(0) : x.toFixed(1));

/** Plain words, `count` of them (the same word sequence as bench/cold-warm.ts). */
function document(count: number): string {
  const words = ["the", "file", "list", "shows", "each", "tool", "and", "its", "size", "in", "bytes", "for", "this", "run"];
  return Array.from({ length: count }, (_, i) => words[(i * 7 + (i >> 3)) % words.length]).join(" ");
}

/** Salts from the seed: fixed-width hex, so prompts of one length differ by a token at most. */
const nextRandom = mulberry32(seed);
const salts: string[] = [];
function salt(): string {
  const value = Array.from({ length: 4 }, () =>
    Math.floor(nextRandom() * 0x10000)
      .toString(16)
      .padStart(4, "0"),
  ).join("");
  salts.push(value);
  return value;
}

interface Timed {
  result: GenerationResult;
  /** generate() called -> first onText (or the result, when the one token decoded to no text). */
  hostTtftMs: number;
  sawText: boolean;
}

async function timed(worker: WorkerHandle, requestId: string, tokens: TokenIds): Promise<Timed> {
  const started = performance.now();
  let firstText: number | undefined;
  const result = await worker.generate(requestId, tokens, SAMPLING, {
    onText: () => {
      firstText ??= performance.now();
    },
  });
  const finished = performance.now();
  if (result.finishReason === "cancelled") throw new Error(`request ${requestId} was cancelled`);
  return { result, hostTtftMs: (firstText ?? finished) - started, sawText: firstText !== undefined };
}

let preparer: PromptPreparer | undefined;
const workers: WorkerHandle[] = [];
let stateDir: string | undefined;

const part1: {
  target: number;
  promptTokens: number[];
  coldPrefillMs: number[];
  coldHostMs: number[];
  warmPrefillMs: number[];
  warmHostMs: number[];
  warmCachedTokens: number[];
}[] = [];
const part2: {
  target: number;
  promptTokens: number[];
  sourceColdPrefillMs: number[];
  exportMs: number[];
  importMs: number[];
  stateBytes: number[];
  stateTokens: number[];
  firstRequestHostMs: number[];
  firstRequestLoadMs: number[];
  firstRequestPrefillMs: number[];
  restoredTokens: number[];
  cachedTokens: number[];
  sameTextAsSource: boolean[];
  recomputePromptTokens: number[];
  recomputeHostMs: number[];
  recomputePrefillMs: number[];
  recomputeCachedTokens: number[];
}[] = [];
const part3: {
  decoding: number;
  cleanHostMs: number[];
  usedHostMs: number[];
  usedEvictedTokens: number[];
  cleanPromptTokens: number[];
  usedPromptTokens: number[];
}[] = [];
let textFallbacks = 0;
let loadMs: number[] = [];
const started = Date.now();
// Contention check: one llama.cpp thread works at a time, so on a quiet machine the process
// uses about one core (CPU s / wall s near 1); other processes on the cores show as less.
const loadAtStart = loadavg()[0]!;
const cpuAtStart = process.cpuUsage();

try {
  const modelPath = await ensureModel(MODEL);
  const dir = await mkdtemp(join(defaultStateDir(), "radixgate-worker-bench-"));
  stateDir = dir;
  preparer = new PromptPreparer([{ id: MODEL, path: modelPath }], 1);
  const init = (workerId: string): WorkerInit => ({
    workerId,
    hostPid: process.pid,
    modelPath,
    slots: SLOTS,
    contextSize: CONTEXT_SIZE,
    batchSize: 512,
    threads: THREADS,
    gpu: false,
    local: { ...LOCAL_SCHEDULER_DEFAULTS },
    // Evicted slot content is never saved (minTokens above any prompt), so no measured request
    // pays for saving another one's state; exports, imports and loads go through the store.
    spill: { budgetBytes: 2 * 1024 ** 3, minTokens: 1_000_000, recentMs: 600_000, dir },
  });
  const a = new WorkerHandle(init("a"));
  workers.push(a);
  const b = new WorkerHandle(init("b"));
  workers.push(b);
  const loaded = await Promise.all([a.start(), b.start(), preparer.warmUp(MODEL)]);
  loadMs = [loaded[0].loadMs, loaded[1].loadMs];
  log(`workers a, b loaded (${loaded[0].backend}, context ${loaded[0].contextSize} x ${loaded[0].slots} slots, ${THREADS} thread each)`);

  const chat = async (system: string) =>
    (
      await preparer!.chat({
        modelId: MODEL,
        messages: [
          { role: "system", content: system },
          { role: "user", content: USER_TURN },
        ],
      })
    ).tokens;
  // Words per target length: one measurement of the tokenizer's rate on these words, then corrected once.
  const wordsFor = new Map<number, number>();
  for (const target of lengths) {
    let words = Math.round(target / 1.6);
    for (let pass = 0; pass < 2; pass++) {
      const tokens = (await chat(`run ${"0".repeat(16)}\n${document(words)}`)).length;
      words = Math.max(1, Math.round(words * (target / tokens)));
    }
    wordsFor.set(target, words);
  }
  const saltedPrompt = (target: number) => chat(`run ${salt()}\n${document(wordsFor.get(target)!)}`);

  // Warm-up: the first evaluation after loading pays one-off costs (buffers, page faults).
  for (const worker of [a, b]) await timed(worker, `warmup-${worker.id}`, await chat(`warm-up ${salt()}`));

  // Part 1: cold vs warm on worker a, idle.
  for (const target of parts.has(1) ? lengths : []) {
    const row = {
      target,
      promptTokens: [] as number[],
      coldPrefillMs: [] as number[],
      coldHostMs: [] as number[],
      warmPrefillMs: [] as number[],
      warmHostMs: [] as number[],
      warmCachedTokens: [] as number[],
    };
    part1.push(row);
    for (let r = 0; r < repeats; r++) {
      const tokens = await saltedPrompt(target);
      const cold = await timed(a, `p1-${target}-${r}-cold`, tokens);
      const warm = await timed(a, `p1-${target}-${r}-warm`, tokens);
      if (cold.result.cachedTokens > 16) throw new Error(`cold request found ${cold.result.cachedTokens} tokens cached: the salt did not work`);
      textFallbacks += Number(!cold.sawText) + Number(!warm.sawText);
      row.promptTokens.push(tokens.length);
      row.coldPrefillMs.push(cold.result.prefillMs);
      row.coldHostMs.push(cold.hostTtftMs);
      row.warmPrefillMs.push(warm.result.prefillMs);
      row.warmHostMs.push(warm.hostTtftMs);
      row.warmCachedTokens.push(warm.result.cachedTokens);
      log(
        `part 1 length ${tokens.length} repeat ${r + 1}/${repeats}: cold ${ms(cold.result.prefillMs)} ms (host ${ms(cold.hostTtftMs)}), ` +
          `warm ${ms(warm.result.prefillMs)} ms (host ${ms(warm.hostTtftMs)}), ${warm.result.cachedTokens} cached`,
      );
    }
  }

  // Part 2: copy a -> b vs recompute on b.
  for (const target of parts.has(2) ? lengths : []) {
    const row: (typeof part2)[number] = {
      target,
      promptTokens: [],
      sourceColdPrefillMs: [],
      exportMs: [],
      importMs: [],
      stateBytes: [],
      stateTokens: [],
      firstRequestHostMs: [],
      firstRequestLoadMs: [],
      firstRequestPrefillMs: [],
      restoredTokens: [],
      cachedTokens: [],
      sameTextAsSource: [],
      recomputePromptTokens: [],
      recomputeHostMs: [],
      recomputePrefillMs: [],
      recomputeCachedTokens: [],
    };
    part2.push(row);
    for (let r = 0; r < repeats; r++) {
      const tokens = await saltedPrompt(target);
      const source = await timed(a, `p2-${target}-${r}-source`, tokens);
      const t0 = performance.now();
      const exported = await a.exportPrefix(tokens);
      const t1 = performance.now();
      if (!exported) throw new Error(`worker a did not export the prefix it just computed (${tokens.length} tokens)`);
      const imported = await b.importState(exported.file);
      const t2 = performance.now();
      const first = await timed(b, `p2-${target}-${r}-restored`, tokens);
      if (first.result.restoredTokens === 0) throw new Error(`worker b did not load the imported state (${imported.tokens} tokens)`);
      // B computes a prompt of the same length, salted differently (B now holds `tokens` itself).
      const other = await saltedPrompt(target);
      const recompute = await timed(b, `p2-${target}-${r}-recompute`, other);
      if (recompute.result.cachedTokens > 16 || recompute.result.restoredTokens > 0) throw new Error("the recompute request found its prefix cached");
      textFallbacks += Number(!source.sawText) + Number(!first.sawText) + Number(!recompute.sawText);
      row.promptTokens.push(tokens.length);
      row.sourceColdPrefillMs.push(source.result.prefillMs);
      row.exportMs.push(t1 - t0);
      row.importMs.push(t2 - t1);
      row.stateBytes.push(exported.bytes);
      row.stateTokens.push(exported.tokens);
      row.firstRequestHostMs.push(first.hostTtftMs);
      // On an idle worker the queue time is the load of the state into the slot.
      row.firstRequestLoadMs.push(first.result.queueMs);
      row.firstRequestPrefillMs.push(first.result.prefillMs);
      row.restoredTokens.push(first.result.restoredTokens);
      row.cachedTokens.push(first.result.cachedTokens);
      row.sameTextAsSource.push(first.result.text === source.result.text);
      row.recomputePromptTokens.push(other.length);
      row.recomputeHostMs.push(recompute.hostTtftMs);
      row.recomputePrefillMs.push(recompute.result.prefillMs);
      row.recomputeCachedTokens.push(recompute.result.cachedTokens);
      const copyTotal = t2 - t0 + first.hostTtftMs;
      log(
        `part 2 length ${tokens.length} repeat ${r + 1}/${repeats}: export ${ms(t1 - t0)} ms + import ${ms(t2 - t1)} ms + first request ${ms(first.hostTtftMs)} ms ` +
          `(load ${ms(first.result.queueMs)}, ${first.result.restoredTokens} restored) = ${ms(copyTotal)} ms vs recompute ${ms(recompute.hostTtftMs)} ms, ` +
          `state ${(exported.bytes / 2 ** 20).toFixed(1)} MiB`,
      );
    }
  }

  // Part 3: the used-slot stall probe, on a worker of its own with STALL_SLOTS slots.
  if (parts.has(3)) {
    const probe = new WorkerHandle({ ...init("stall"), slots: STALL_SLOTS, contextSize: 4096 });
    workers.push(probe);
    await probe.start();
    if (!wordsFor.has(STALL_PROMPT)) {
      let words = Math.round(STALL_PROMPT / 1.6);
      for (let pass = 0; pass < 2; pass++)
        words = Math.max(1, Math.round(words * (STALL_PROMPT / (await chat(`run ${"0".repeat(16)}\n${document(words)}`)).length)));
      wordsFor.set(STALL_PROMPT, words);
    }
    await timed(probe, "warmup-stall", await chat(`warm-up ${salt()}`));
    /** N long completions started and each past its first token; abort() stops them. */
    const startDecoding = async (count: number, label: string) => {
      const abort = new AbortController();
      const firstTexts: Promise<void>[] = [];
      const running: Promise<GenerationResult>[] = [];
      for (let i = 0; i < count; i++) {
        let seen!: () => void;
        firstTexts.push(new Promise((resolve) => (seen = resolve)));
        const tokens = await chat(`decode ${salt()} ${i}`);
        running.push(probe.generate(`${label}-decode-${i}`, tokens, { ...SAMPLING, maxTokens: STALL_DECODE_TOKENS }, { onText: seen, signal: abort.signal }));
      }
      await Promise.all(firstTexts);
      return async () => {
        abort.abort();
        const results = await Promise.all(running);
        if (results.some((result) => result.finishReason !== "cancelled"))
          throw new Error(`a decoding request ended before the probe did: raise STALL_DECODE_TOKENS`);
      };
    };
    for (let decoding = 0; decoding < STALL_SLOTS; decoding++) {
      const row = {
        decoding,
        cleanHostMs: [] as number[],
        usedHostMs: [] as number[],
        usedEvictedTokens: [] as number[],
        cleanPromptTokens: [] as number[],
        usedPromptTokens: [] as number[],
      };
      part3.push(row);
      for (let r = 0; r < repeats; r++) {
        // Clean: every slot emptied, N decoders take N of them, the probe gets an empty one.
        await probe.clearIdleSlots();
        let stop = await startDecoding(decoding, `p3-${decoding}-${r}-clean`);
        const cleanTokens = await saltedPrompt(STALL_PROMPT);
        const clean = await timed(probe, `p3-${decoding}-${r}-clean`, cleanTokens);
        await stop();
        if (clean.result.evictedTokens > 0) throw new Error(`the clean probe evicted ${clean.result.evictedTokens} tokens`);
        // Used: every slot first holds another prompt of the same length; the decoders and the
        // probe each erase one.
        await probe.clearIdleSlots();
        await Promise.all(Array.from({ length: STALL_SLOTS }, async (_, i) => timed(probe, `p3-${decoding}-${r}-fill-${i}`, await saltedPrompt(STALL_PROMPT))));
        stop = await startDecoding(decoding, `p3-${decoding}-${r}-used`);
        const usedTokens = await saltedPrompt(STALL_PROMPT);
        const used = await timed(probe, `p3-${decoding}-${r}-used`, usedTokens);
        await stop();
        if (used.result.evictedTokens === 0) throw new Error("the used-slot probe found an empty slot");
        textFallbacks += Number(!clean.sawText) + Number(!used.sawText);
        row.cleanHostMs.push(clean.hostTtftMs);
        row.usedHostMs.push(used.hostTtftMs);
        row.usedEvictedTokens.push(used.result.evictedTokens);
        row.cleanPromptTokens.push(cleanTokens.length);
        row.usedPromptTokens.push(usedTokens.length);
        log(
          `part 3 with ${decoding} decoding, repeat ${r + 1}/${repeats}: clean slot ${ms(clean.hostTtftMs)} ms, used slot ${ms(used.hostTtftMs)} ms (${used.result.evictedTokens} tokens erased)`,
        );
      }
    }
  }
} finally {
  // Always close: a process that exits with llama.cpp threads alive aborts natively.
  await Promise.allSettled([...workers.map((worker) => worker.close()), preparer?.close()]);
  if (stateDir) await rm(stateDir, { recursive: true, force: true });
}

const wallSeconds = (Date.now() - started) / 1000;
const cpuUsed = process.cpuUsage(cpuAtStart);
const cpuSeconds = (cpuUsed.user + cpuUsed.system) / 1e6;
const contention = { loadAverage1mAtStart: loadAtStart, loadAverage1mAtEnd: loadavg()[0]!, cpuSeconds, wallSeconds, cpuOverWall: cpuSeconds / wallSeconds };
const commit = gitCommit(["src", "bench", "patches", "package-lock.json"]);
const machine = machineDescription();
const command = `npx tsx bench/worker.bench.ts --lengths ${lengths.join(",")} --repeats ${repeats} --seed ${seed} --parts ${[...parts].join(",")}`;

const part1Rows = part1.map((row) => ({
  ...row,
  medianPromptTokens: median(row.promptTokens),
  medianColdPrefillMs: median(row.coldPrefillMs),
  medianWarmPrefillMs: median(row.warmPrefillMs),
  medianColdHostMs: median(row.coldHostMs),
  medianWarmHostMs: median(row.warmHostMs),
  coldOverWarmPrefill: median(row.coldPrefillMs) / median(row.warmPrefillMs),
  coldOverWarmHost: median(row.coldHostMs) / median(row.warmHostMs),
  medianWarmCachedTokens: median(row.warmCachedTokens),
}));
const part2Rows = part2.map((row) => {
  const copyTotalMs = row.exportMs.map((e, i) => e + row.importMs[i]! + row.firstRequestHostMs[i]!);
  return {
    ...row,
    copyTotalMs,
    medianPromptTokens: median(row.promptTokens),
    medianExportMs: median(row.exportMs),
    medianImportMs: median(row.importMs),
    medianFirstRequestHostMs: median(row.firstRequestHostMs),
    medianFirstRequestLoadMs: median(row.firstRequestLoadMs),
    medianCopyTotalMs: median(copyTotalMs),
    medianRecomputeHostMs: median(row.recomputeHostMs),
    medianRecomputePrefillMs: median(row.recomputePrefillMs),
    medianSourceColdPrefillMs: median(row.sourceColdPrefillMs),
    recomputeOverCopy: median(row.recomputeHostMs) / median(copyTotalMs),
    medianStateBytes: median(row.stateBytes),
    bytesPerToken: median(row.stateBytes.map((bytes, i) => bytes / row.stateTokens[i]!)),
  };
});

const part3Rows = part3.map((row) => ({
  ...row,
  medianCleanHostMs: median(row.cleanHostMs),
  medianUsedHostMs: median(row.usedHostMs),
  usedOverClean: median(row.usedHostMs) / median(row.cleanHostMs),
}));
const idleClean = part3Rows[0]?.medianCleanHostMs;
const result = {
  date: new Date().toISOString(),
  commit,
  machine,
  node: process.version,
  command,
  model: "preset:bench (25.2M parameters, seed 1), CPU backend",
  worker: { isolation: "thread", slots: SLOTS, contextSize: CONTEXT_SIZE, batchSize: 512, threads: THREADS, stateDir: defaultStateDir() },
  workerLoadMs: loadMs,
  seed,
  salts,
  repeats,
  sampleSize: `${repeats} per length and part (median reported)`,
  maxTokens: SAMPLING.maxTokens,
  hostTtftFellBackToResult: textFallbacks,
  contention,
  coldWarm: part1Rows,
  copyVsRecompute: part2Rows,
  usedSlotStall: {
    slots: STALL_SLOTS,
    promptTokens: STALL_PROMPT,
    decodeTokens: STALL_DECODE_TOKENS,
    target: "used / clean <= 1.5 at every N",
    rows: part3Rows,
  },
};
mkdirSync("bench/results", { recursive: true });
writeFileSync("bench/results/worker.json", `${JSON.stringify(result, null, 2)}\n`);

const table1 = [
  "| prompt tokens | cold prefill (ms) | warm prefill (ms) | cold / warm | cold host TTFT (ms) | warm host TTFT (ms) | cold / warm (host) | warm cached tokens | n |",
  "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
  ...part1Rows.map(
    (row) =>
      `| ${row.medianPromptTokens} | ${ms(row.medianColdPrefillMs)} | ${ms(row.medianWarmPrefillMs)} | ${row.coldOverWarmPrefill.toFixed(0)}x | ` +
      `${ms(row.medianColdHostMs)} | ${ms(row.medianWarmHostMs)} | ${row.coldOverWarmHost.toFixed(0)}x | ${row.medianWarmCachedTokens} | ${repeats} |`,
  ),
];
const table2 = [
  "| prompt tokens | state (MiB) | export (ms) | import (ms) | first request on copy (ms, of which load) | copy total (ms) | recompute on B (ms) | recompute / copy | restored tokens | same text | n |",
  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
  ...part2Rows.map(
    (row) =>
      `| ${row.medianPromptTokens} | ${(row.medianStateBytes / 2 ** 20).toFixed(1)} | ${ms(row.medianExportMs)} | ${ms(row.medianImportMs)} | ` +
      `${ms(row.medianFirstRequestHostMs)} (${ms(row.medianFirstRequestLoadMs)}) | ${ms(row.medianCopyTotalMs)} | ${ms(row.medianRecomputeHostMs)} | ` +
      `${row.recomputeOverCopy.toFixed(1)}x | ${median(row.restoredTokens)} | ${row.sameTextAsSource.filter(Boolean).length}/${repeats} | ${repeats} |`,
  ),
];
const table3 = [
  "| decoding alongside (N) | clean slot TTFT (ms) | used slot TTFT (ms) | used / clean | used / idle clean | tokens erased | n |",
  "| --- | --- | --- | --- | --- | --- | --- |",
  ...part3Rows.map(
    (row) =>
      `| ${row.decoding} | ${ms(row.medianCleanHostMs)} | ${ms(row.medianUsedHostMs)} | ${row.usedOverClean.toFixed(2)}x | ` +
      `${(row.medianUsedHostMs / idleClean!).toFixed(2)}x | ${median(row.usedEvictedTokens)} | ${repeats} |`,
  ),
];
const section = (title: string, table: string[], note: string) => (table.length > 2 ? `## ${title}\n\n${table.join("\n")}\n\n${note}\n\n` : "");
writeFileSync(
  "bench/results/worker.md",
  `# One worker, driven directly: cold vs warm, copy vs recompute\n\n` +
    `Machine: ${machine}, Node ${process.version}. Commit ${commit}, ${result.date}.\n` +
    `Load average ${contention.loadAverage1mAtStart.toFixed(1)} at start, ${contention.loadAverage1mAtEnd.toFixed(1)} at end; ` +
    `the process used ${contention.cpuOverWall.toFixed(2)} CPU s per wall s (about 1 when nothing else runs), ${contention.wallSeconds.toFixed(0)} s in all.\n` +
    `Command: \`${command}\`. Model \`bench\` (25.2M parameters, CPU), ${THREADS} thread per worker, ` +
    `context ${CONTEXT_SIZE} x ${SLOTS} slots, batch 512, maxTokens 1, greedy; medians of ${repeats}; every prompt newly salted (seed ${seed}).\n\n` +
    section(
      "Cold vs warm TTFT, one idle worker",
      table1,
      `Prefill = the worker's prefillMs (slot taken -> first token); host TTFT = generate() called -> first onText. ` +
        `Warm = the same prompt again: the slot still holds it, only the last prompt token is evaluated.`,
    ) +
    section(
      "Copy vs recompute of a prefix between two workers",
      table2,
      `Copy = A.exportPrefix (save the slot's KV state to ${defaultStateDir()}, copy it out) + B.importState (copy into B's store) ` +
        `+ B's first request on the prompt (load the state into a slot, evaluate the last prompt token, 1 token; host time to first text, ` +
        `the load being the request's queueMs). Recompute = B's host TTFT for a cold prompt of the same length (salted differently, ` +
        `since B then holds the copied one). Same text = B's greedy token after the copy equals A's.`,
    ) +
    section(
      `Used-slot stall: a ~${STALL_PROMPT}-token prompt while N other sequences decode (${STALL_SLOTS} slots)`,
      table3,
      `Host TTFT (generate() -> first text, maxTokens 1) of a new salted prompt while N long completions decode in the same worker. ` +
        `Clean slot: the worker's idle slots were emptied first. Used slot: every slot first held another prompt of the same length, ` +
        `so the request erases one before its prefill. Target: used / clean <= 1.5x at every N. "Used / idle clean" compares with N = 0 on a clean slot.`,
    ),
);
console.log([table1, table2, table3].map((table) => table.join("\n")).join("\n\n"));
