// llama.cpp's own decode loop, the reference for node-llama-cpp's: `llama-batched-bench` of
// the cached llama.cpp build (the one llama-server comes from: the source node-llama-cpp
// bundles, compiled on this machine with its defaults, OpenMP included). It evaluates a prompt
// in each of B sequences, then decodes `ntg` steps of one token per sequence, without
// sampling (every step feeds the same token back), one KV stream per sequence as
// node-llama-cpp's contexts have.
import { spawnSync } from "node:child_process";

export interface BatchedBenchRow {
  promptTokens: number;
  generatedTokens: number;
  /** Sequences decoding side by side. */
  sequences: number;
  /** Seconds of the decode steps alone (the prompts' evaluation not included). */
  decodeS: number;
  /** Generated tokens per second over those steps, all sequences together. */
  decodeTokensPerS: number;
}

/**
 * The rows of llama-batched-bench's results table (`| PP | TG | B | N_KV | T_PP s | S_PP t/s |
 * T_TG s | S_TG t/s | T s | S t/s |`); the header and every other line are skipped.
 */
export function parseBatchedBench(output: string): BatchedBenchRow[] {
  const rows: BatchedBenchRow[] = [];
  for (const line of output.split("\n")) {
    if (!line.startsWith("|")) continue;
    const cells = line
      .split("|")
      .slice(1, -1)
      .map((cell) => cell.trim());
    // A step too short for the tool's clock (0.000 s) prints its speed as inf or nan.
    if (cells.length !== 10 || !cells.every((cell) => /^(\d+(\.\d+)?|inf|-?nan)$/.test(cell))) continue;
    const [pp, tg, b, , , , tTg, sTg] = cells.map((cell) => (cell === "inf" ? Number.POSITIVE_INFINITY : Number(cell))) as number[];
    rows.push({ promptTokens: pp!, generatedTokens: tg!, sequences: b!, decodeS: tTg!, decodeTokensPerS: sTg! });
  }
  return rows;
}

export interface BatchedBenchOptions {
  binary: string;
  model: string;
  threads: number;
  /** Tokens of context per sequence (the tool gets sequences x this). */
  contextPerSequence: number;
  batchSize: number;
  promptTokens: number;
  generatedTokens: number;
  /** The sequence counts to run, each a separate pass. */
  sequences: readonly number[];
}

/**
 * llama.cpp's tools write through an asynchronous logger, and on a busy machine a run now and
 * then exits before its last lines are out (2 of 40 runs of the tiny model lost a row with two
 * CPU hogs beside them): a run short of rows is run again, this many times in all.
 */
const ATTEMPTS = 3;

/** Runs llama-batched-bench; throws with its output when it fails, or prints too few rows ATTEMPTS times. */
export function runBatchedBench(options: BatchedBenchOptions): BatchedBenchRow[] {
  const most = Math.max(...options.sequences);
  const args = [
    "-m",
    options.model,
    "-c",
    String(options.contextPerSequence * most),
    "-b",
    String(options.batchSize),
    "-ub",
    String(options.batchSize),
    "-npp",
    String(options.promptTokens),
    "-ntg",
    String(options.generatedTokens),
    "-npl",
    options.sequences.join(","),
    "-t",
    String(options.threads),
    "-tb",
    String(options.threads),
  ];
  for (let attempt = 1; ; attempt++) {
    const run = spawnSync(options.binary, args, { encoding: "utf8", maxBuffer: 16 * 1024 * 1024 });
    const output = `${run.stdout ?? ""}${run.stderr ?? ""}`;
    const rows = parseBatchedBench(output);
    if (run.status === 0 && rows.length === options.sequences.length) return rows;
    if (run.status !== 0 || attempt === ATTEMPTS) {
      throw new Error(
        `${options.binary} ${args.join(" ")} exited with ${run.status} and ${rows.length} result rows (attempt ${attempt}):\n${output.slice(-2000)}`,
      );
    }
  }
}
