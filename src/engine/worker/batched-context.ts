// A worker's llama.cpp context as the worker drives it: one sequence per slot, every decode
// step gated until each generating sequence has queued its token (batch-gate.ts), each batch
// shared out by the local scheduler's rule (decode tokens first, then the prefill budget,
// started prefills first, then by priority group: batch-priority.ts and started-prefills.ts),
// a compute thread pool for as long as the context lives (compute-pool.ts), its generation
// steps decoded on the worker's own thread (inline-decode.ts), and several steps per call for
// plain requests (native-generation.ts).
// The worker and `npm run bench:engine-loop` both build it here.
import type { LlamaContext, LlamaContextSequence, LlamaModel } from "node-llama-cpp";
import { type BatchStats, countBatch, shareBatch } from "../../scheduler/batch-priority.js";
import { BatchGate } from "./batch-gate.js";
import { attachComputePool, type ComputePool } from "./compute-pool.js";
import { decodeStepsInline, type InlineDecode } from "./inline-decode.js";
import { NativeGeneration, type WorkerAttention } from "./native-generation.js";
import { StartedPrefills } from "./started-prefills.js";

export interface BatchedContextOptions {
  slots: number;
  contextSize: number;
  batchSize: number;
  threads: number;
  /** How hard the compute pool's helper threads spin for the next graph (0-100, llama.cpp's `--poll`). */
  threadPoll: number;
  flashAttention: boolean | "auto";
  /** The prefill chunk per step, read at every batch (a live config change applies at once). */
  chunkTokens: () => number;
  /** How the generation loop learns that a message from the host waits. */
  attention?: WorkerAttention;
}

export interface BatchedContext {
  context: LlamaContext;
  /** Sequence i is slot i (and llama.cpp's sequence id i). */
  sequences: LlamaContextSequence[];
  gate: BatchGate;
  /** Steps and tokens the context has evaluated, counted batch by batch. */
  batches: BatchStats;
  computePool: ComputePool;
  /** Whether its generation steps are decoded on the worker's thread, and how many were. */
  inlineDecode: InlineDecode;
  /** Several generation steps per call for the requests that can take them, or why none. */
  nativeGeneration: NativeGeneration | { problem: string };
}

export async function createBatchedContext(model: LlamaModel, options: BatchedContextOptions): Promise<BatchedContext> {
  const gate = new BatchGate();
  // Told when each of node-llama-cpp's batches starts (set once the context exists).
  let nativeGeneration: NativeGeneration | { problem: string } | undefined;
  const batches: BatchStats = { steps: 0, decodeTokens: 0, prefillTokens: 0 };
  const started = new StartedPrefills();
  const context = await model.createContext({
    sequences: options.slots,
    contextSize: options.contextSize,
    batchSize: options.batchSize,
    threads: options.threads,
    flashAttention: options.flashAttention,
    batching: {
      dispatchSchedule: gate.schedule,
      itemPrioritizationStrategy: ({ items, size }) => {
        const sequences = gate.batchStarted();
        if (nativeGeneration !== undefined && !("problem" in nativeGeneration)) nativeGeneration.batchStarted(sequences);
        const shares = shareBatch(items, size, options.chunkTokens(), (item) => started.has(item));
        started.batchShared(items, shares);
        countBatch(batches, shares);
        return shares;
      },
    },
  });
  // Before the context computes anything: its threads for as long as it lives.
  const computePool = attachComputePool(context, options.threads, options.threadPoll);
  // Generation steps on the worker's own thread (prompt batches keep node-llama-cpp's path).
  const inlineDecode = decodeStepsInline(context, options.slots);
  // Created once, in order: node-llama-cpp numbers sequences from 0 as they are created.
  const sequences = Array.from({ length: options.slots }, () => context.getSequence());
  // Only with steps decoded on this thread: the loop must never decode beside node-llama-cpp's own.
  const loop = inlineDecode.on
    ? NativeGeneration.create(context, model, batches, options.attention)
    : { problem: `steps are not decoded on the worker's thread (${inlineDecode.reason})` };
  nativeGeneration = loop;
  return { context, sequences, gate, batches, computePool, inlineDecode, nativeGeneration: loop };
}
