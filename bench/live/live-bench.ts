// The live benchmark: a real Radixgate per policy (CPU workers on the generated model),
// driven over HTTP the way agent users are served (sequential turns, bursts, a trace):
//   (a) agent loop: sequential turns re-sending a growing history; verdict = the TTFT of
//       each warm turn (turn >= 2), per request, from its own stream;
//   (b) cold burst: N distinct prompts at once; verdict = the time until the last is done;
//   (c) trace replay: a ToolBench-like Zipf mix of shared prefixes, requests sent with their
//       (scaled) arrival gaps; verdict = TTFT and latency per request and cached fraction;
//   (d) optional, `replay`: a request list from a bench/workloads generator (replay.ts), sent
//       as /v1/completions token prompts at its own arrival times, so that the simulator can
//       run exactly the same list (sim-vs-live.ts); per-request TTFT, latency, cached tokens.
// Two reference arms bracket the policies: `pinned` (every request on worker w0, through
// the x-radixgate-worker header) and `spread` (roundrobin). A third, `split`, places by hand
// what a placement can do best on several workers: every agent session, burst prompt and
// trace prefix keeps to one worker (its index modulo the workers, through the header), so
// each worker holds its own sessions' caches and the load is shared. Warm turns against
// `split` tell placement from the cost of computing on several workers at once. Every run salts its prompts with
// a unique first line, so nothing is cached from an earlier run.
import { randomUUID } from "node:crypto";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import OpenAI from "openai";
import { parseConfig } from "../../src/config/load-config.js";
import type { Config } from "../../src/config/schema.js";
import { calibrationCachePath, calibrationIdentity, DEFAULT_CALIBRATION_DIR } from "../../src/engine/host/calibration.js";
import { createRadixgate, type Radixgate } from "../../src/radixgate.js";
import { mulberry32 } from "../../src/common/random.js";
import type { ReplayRequest } from "./replay.js";

/** The parts of a live run: (a) agent loop, (b) cold burst, (c) trace, (d) replay of a given list. */
export type LivePart = "agent" | "burst" | "trace" | "replay";

export interface LiveOptions {
  preset: "tiny" | "bench";
  workers: number;
  threads: number;
  /** Policies to run; "pinned", "spread" and "split" are the reference arms. */
  arms: string[];
  agentSessions: number;
  agentTurns: number;
  /** Words in an agent session's shared context (about 1.6 tokens each). */
  agentContextWords: number;
  burstRequests: number;
  burstPromptWords: number;
  traceRequests: number;
  tracePrefixes: number;
  tracePrefixWords: number;
  /** Mean gap between trace arrivals, ms. */
  traceGapMs: number;
  maxTokens: number;
  seed: number;
  /** Parts to run, in this order; default agent, burst, trace (and replay when `replay` is given). */
  parts?: LivePart[];
  /** Part (d): the requests to replay (replay.ts); every arm replays the same list. */
  replay?: readonly ReplayRequest[];
  onProgress?: (line: string) => void;
}

export interface RequestSample {
  ttftMs: number;
  totalMs: number;
  promptTokens: number;
  cachedTokens: number;
  worker: string;
}

/** One replayed request: its own verdict, and when it was really sent. */
export interface ReplaySample extends RequestSample {
  index: number;
  /** When the client sent it, ms from the replay's start (its arrivalMs plus the timer's lateness). */
  sentMs: number;
  completionTokens: number;
}

export interface ArmResult {
  arm: string;
  agentWarmTurns: RequestSample[];
  agentColdTurns: RequestSample[];
  burstMs: number;
  burst: RequestSample[];
  trace: RequestSample[];
  replay: ReplaySample[];
  /** The calibration cache file the server's time models came from (worker w0's identity), and whether it existed before this server started. */
  calibration: { path: string; existedBefore: boolean };
}

export type Message = { role: "system" | "user" | "assistant"; content: string };

const WORDS = ["the", "file", "list", "shows", "each", "tool", "and", "its", "size", "in", "bytes", "for", "this", "run", "call", "returns", "result", "agent"];

function words(count: number, random: () => number): string {
  return Array.from({ length: count }, () => WORDS[Math.floor(random() * WORDS.length)]).join(" ");
}

/** The reference arms: always w0, roundrobin, and each session to a worker of its own. */
export const REFERENCE_ARMS = ["pinned", "spread", "split"] as const;

/** The server of one arm: the reference arms run roundrobin (pinned and split choose their
 *  workers with x-radixgate-worker). */
export function liveConfig(options: Pick<LiveOptions, "preset" | "workers" | "threads">, arm: string): Config {
  const policy = (REFERENCE_ARMS as readonly string[]).includes(arm) ? "roundrobin" : arm;
  return parseConfig({
    server: { port: 0, logLevel: "warn" },
    models: [
      { id: "bench", source: `preset:${options.preset}`, workers: options.workers, slots: 4, contextSize: 8192, threads: options.threads, isolation: "thread" },
    ],
    scheduler: { policy },
  });
}

export async function runLiveBench(options: LiveOptions): Promise<ArmResult[]> {
  const parts = options.parts ?? (options.replay ? ["agent", "burst", "trace", "replay"] : ["agent", "burst", "trace"]);
  if (parts.includes("replay") && !options.replay) throw new Error('runLiveBench: part "replay" needs options.replay');
  if (parts.includes("replay") && options.arms.includes("split"))
    throw new Error('runLiveBench: the "split" arm pins sessions, which a replayed list does not have');
  const results: ArmResult[] = [];
  for (const arm of options.arms) {
    const config = liveConfig(options, arm);
    const calibrationBefore = existingCalibrations();
    const radixgate = await createRadixgate({ config, path: "bench", dir: process.cwd() });
    try {
      const client = new OpenAI({ baseURL: `${await radixgate.listen()}/v1`, apiKey: "unused", maxRetries: 0 });
      const headers: Record<string, string> = arm === "pinned" ? { "x-radixgate-worker": "w0" } : {};
      const salt = `run ${randomUUID()}`;
      const random = mulberry32(options.seed);
      // `key`: the agent session, burst prompt or trace prefix the request belongs to.
      const send = (messages: Message[], key: number) =>
        timedRequest(client, messages, options.maxTokens, arm === "split" ? { "x-radixgate-worker": `w${key % options.workers}` } : headers);
      const result: ArmResult = {
        arm,
        agentWarmTurns: [],
        agentColdTurns: [],
        burstMs: Number.NaN,
        burst: [],
        trace: [],
        replay: [],
        calibration: await calibrationOf(radixgate, calibrationBefore),
      };
      for (const part of parts) {
        switch (part) {
          case "agent": {
            options.onProgress?.(`${arm}: agent loop`);
            const agent = await agentLoop(send, salt, random, options);
            result.agentWarmTurns = agent.warm;
            result.agentColdTurns = agent.cold;
            break;
          }
          case "burst": {
            options.onProgress?.(`${arm}: cold burst of ${options.burstRequests}`);
            const burstStarted = performance.now();
            result.burst = await Promise.all(
              Array.from({ length: options.burstRequests }, (_, i) =>
                send([{ role: "user", content: `${salt} burst ${i}\n${words(options.burstPromptWords, random)}` }], i),
              ),
            );
            result.burstMs = performance.now() - burstStarted;
            break;
          }
          case "trace":
            options.onProgress?.(`${arm}: trace replay of ${options.traceRequests}`);
            result.trace = await traceReplay(send, salt, random, options);
            break;
          case "replay":
            // No warm-up request first: it would leave a used slot behind, which the simulated
            // workers (starting empty) do not have; the first evaluation's one-off cost
            // (tens of ms once per worker) stays in the live numbers.
            options.onProgress?.(`${arm}: replay of ${options.replay!.length} requests`);
            result.replay = await replayRequests(client, options.replay!, headers);
            break;
          default:
            part satisfies never;
        }
      }
      results.push(result);
    } finally {
      await radixgate.close();
    }
  }
  return results;
}

/** The arms' order in run `run` (from 0) of a repeated benchmark: as given, then reversed
 *  every other run, so that no arm always runs first, on the freshest machine, or always
 *  right after the same other arm. */
export function armsOfRun(arms: readonly string[], run: number): string[] {
  return run % 2 === 0 ? [...arms] : [...arms].reverse();
}

/** runLiveBench `runs` times, the arms taking turns (armsOfRun), each run's prompts salted
 *  anew; per run, its results in `options.arms` order. */
export async function runLiveBenchRuns(options: LiveOptions, runs: number): Promise<ArmResult[][]> {
  const out: ArmResult[][] = [];
  for (let run = 0; run < runs; run++) {
    const arms = armsOfRun(options.arms, run);
    options.onProgress?.(`run ${run + 1} of ${runs}: ${arms.join(", ")}`);
    const results = await runLiveBench({ ...options, arms });
    out.push(options.arms.map((arm) => results.find((result) => result.arm === arm)!));
  }
  return out;
}

/** One arm's samples from every run (its burst time: the median of the runs'). */
export function pooledArm(runs: readonly (readonly ArmResult[])[], arm: string): ArmResult {
  const ofArm = runs.map((run) => run.find((result) => result.arm === arm)).filter((result) => result !== undefined);
  if (ofArm.length === 0) throw new Error(`bench:live: no run has arm ${arm}`);
  return {
    ...ofArm[0]!,
    agentWarmTurns: ofArm.flatMap((result) => result.agentWarmTurns),
    agentColdTurns: ofArm.flatMap((result) => result.agentColdTurns),
    burstMs: median(ofArm.map((result) => result.burstMs)),
    burst: ofArm.flatMap((result) => result.burst),
    trace: ofArm.flatMap((result) => result.trace),
    replay: ofArm.flatMap((result) => result.replay),
  };
}

/** Median TTFT of an arm's warm agent turns. */
export function warmTurnTtftMs(result: ArmResult): number {
  return median(result.agentWarmTurns.map((sample) => sample.ttftMs));
}

/** Within this factor of a reference arm counts as level with it. */
export const BOTH_BAR = 1.05;

export interface BothVerdict {
  arm: string;
  /** Median over the runs of (warm-turn TTFT p50 / always-pinned's in the same run). */
  warmVsPinned: number;
  /** Median over the runs of (burst time / always-spread's in the same run). */
  burstVsSpread: number;
  warmVsPinnedRuns: number[];
  burstVsSpreadRuns: number[];
  /** Median over the runs of (warm-turn TTFT p50 / split's in the same run); NaN without the split arm. Not part of `both`. */
  warmVsSplit: number;
  warmVsSplitRuns: number[];
  /** Both medians within BOTH_BAR: as warm as always-pinned and as fast a burst as always-spread. */
  both: boolean;
}

/**
 * Each policy against the reference arms of the same run (warm turns against `pinned`, the
 * burst against `spread`; a run without the reference gives NaN and is left out), the median
 * over the runs (of an even count, the upper of the middle two: the worse ratio).
 * A run's arms share its load, so the ratio cancels what the machine did meanwhile, where
 * comparing pooled figures would not.
 */
export function bothVerdicts(runs: readonly (readonly ArmResult[])[], arms: readonly string[]): BothVerdict[] {
  const perRun = (arm: string, reference: string, measure: (result: ArmResult) => number): number[] =>
    runs.map((run) => {
      const a = run.find((result) => result.arm === arm);
      const b = run.find((result) => result.arm === reference);
      return a && b ? measure(a) / measure(b) : Number.NaN;
    });
  const overRuns = (ratios: number[]) => median(ratios.filter(Number.isFinite));
  return arms
    .filter((arm) => !(REFERENCE_ARMS as readonly string[]).includes(arm))
    .map((arm) => {
      const warmVsPinnedRuns = perRun(arm, "pinned", warmTurnTtftMs);
      const burstVsSpreadRuns = perRun(arm, "spread", (result) => result.burstMs);
      const warmVsSplitRuns = perRun(arm, "split", warmTurnTtftMs);
      const warmVsPinned = overRuns(warmVsPinnedRuns);
      const burstVsSpread = overRuns(burstVsSpreadRuns);
      return {
        arm,
        warmVsPinned,
        burstVsSpread,
        warmVsPinnedRuns,
        burstVsSpreadRuns,
        warmVsSplit: overRuns(warmVsSplitRuns),
        warmVsSplitRuns,
        both: warmVsPinned <= BOTH_BAR && burstVsSpread <= BOTH_BAR,
      };
    });
}

function existingCalibrations(): Set<string> {
  const dir = DEFAULT_CALIBRATION_DIR;
  return new Set(existsSync(dir) ? readdirSync(dir).map((name) => join(dir, name)) : []);
}

/** The calibration cache file the server's first worker maps to (the other workers are identical and hit the same file). */
async function calibrationOf(radixgate: Radixgate, before: ReadonlySet<string>): Promise<ArmResult["calibration"]> {
  const engine = radixgate.fleet.workers[0]!.engine;
  const path = calibrationCachePath(await calibrationIdentity(engine.init, engine.info!));
  return { path, existedBefore: before.has(path) };
}

/** Sends every request at its own arrivalMs (from one start, so timer lateness does not add up) and waits for all. */
export async function replayRequests(
  client: OpenAI,
  requests: readonly ReplayRequest[],
  headers: Record<string, string> = {},
  model = "bench",
): Promise<ReplaySample[]> {
  const started = performance.now();
  const pending: Promise<ReplaySample>[] = [];
  for (const request of requests) {
    const wait = started + request.arrivalMs - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    const sentMs = performance.now() - started;
    pending.push(timedCompletion(client, request.tokens, request.maxTokens, headers, model).then((sample) => ({ index: request.index, sentMs, ...sample })));
  }
  return Promise.all(pending);
}

interface StreamUsage {
  prompt_tokens: number;
  completion_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number } | null;
}

/**
 * Reads a stream to its end, timed by the client from `started`: TTFT = first chunk with
 * text; usage from the last chunk (stream_options.include_usage).
 */
async function measureStream<Chunk extends { usage?: StreamUsage | null }>(
  started: number,
  stream: AsyncIterable<Chunk>,
  textOf: (chunk: Chunk) => string | null | undefined,
  response: Response,
): Promise<RequestSample & { text: string; completionTokens: number }> {
  let firstAt: number | undefined;
  let text = "";
  let usage: StreamUsage | undefined;
  for await (const chunk of stream) {
    const piece = textOf(chunk);
    if (piece) {
      firstAt ??= performance.now();
      text += piece;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  const done = performance.now();
  return {
    ttftMs: (firstAt ?? done) - started,
    totalMs: done - started,
    promptTokens: usage?.prompt_tokens ?? 0,
    cachedTokens: usage?.prompt_tokens_details?.cached_tokens ?? 0,
    completionTokens: usage?.completion_tokens ?? 0,
    worker: response.headers.get("x-radixgate-worker") ?? "?",
    text,
  };
}

/** One streamed /v1/completions request with a token prompt, timed by the client: TTFT = sent -> first text chunk. */
export async function timedCompletion(
  client: OpenAI,
  prompt: number[],
  maxTokens: number,
  headers: Record<string, string> = {},
  model = "bench",
): Promise<RequestSample & { completionTokens: number }> {
  const started = performance.now();
  const { data: stream, response } = await client.completions
    .create({ model, prompt, max_tokens: maxTokens, temperature: 0, stream: true, stream_options: { include_usage: true } }, { headers })
    .withResponse();
  return measureStream(started, stream, (chunk) => chunk.choices[0]?.text, response);
}

/** One streamed chat request, timed by the client: TTFT = sent -> first content chunk. */
export async function timedRequest(
  client: OpenAI,
  messages: Message[],
  maxTokens: number,
  headers: Record<string, string> = {},
  model = "bench",
): Promise<RequestSample & { text: string }> {
  const started = performance.now();
  const { data: stream, response } = await client.chat.completions
    .create({ model, messages, max_tokens: maxTokens, temperature: 0, stream: true, stream_options: { include_usage: true } }, { headers })
    .withResponse();
  return measureStream(started, stream, (chunk) => chunk.choices[0]?.delta.content, response);
}

/** Sessions run side by side; inside a session every turn waits for the previous answer. */
/** Sends one request of an agent session, burst prompt or trace prefix (`key`) and times it. */
type Send = (messages: Message[], key: number) => Promise<RequestSample & { text: string }>;

async function agentLoop(send: Send, salt: string, random: () => number, options: LiveOptions): Promise<{ warm: RequestSample[]; cold: RequestSample[] }> {
  const warm: RequestSample[] = [];
  const cold: RequestSample[] = [];
  await Promise.all(
    Array.from({ length: options.agentSessions }, async (_, session) => {
      const history: Message[] = [{ role: "system", content: `${salt} agent ${session}\n${words(options.agentContextWords, random)}` }];
      for (let turn = 1; turn <= options.agentTurns; turn++) {
        history.push({ role: "user", content: `tool result ${turn}: ${words(20, random)}` });
        const sample = await send(history, session);
        (turn === 1 ? cold : warm).push(sample);
        history.push({ role: "assistant", content: sample.text });
      }
    }),
  );
  return { warm, cold };
}

/** ToolBench-like: Zipf(1.1) over shared prefixes, a unique question each, exponential gaps. */
async function traceReplay(send: Send, salt: string, random: () => number, options: LiveOptions): Promise<RequestSample[]> {
  const prefixes = Array.from({ length: options.tracePrefixes }, (_, i) => `${salt} tools ${i}\n${words(options.tracePrefixWords, random)}`);
  const weights = prefixes.map((_, rank) => 1 / (rank + 1) ** 1.1);
  const total = weights.reduce((a, b) => a + b, 0);
  const pick = () => {
    let target = random() * total;
    for (let i = 0; i < weights.length; i++) {
      target -= weights[i]!;
      if (target <= 0) return i;
    }
    return weights.length - 1;
  };
  const pending: Promise<RequestSample>[] = [];
  for (let i = 0; i < options.traceRequests; i++) {
    const prefixIndex = pick();
    pending.push(
      send(
        [
          { role: "system", content: prefixes[prefixIndex]! },
          { role: "user", content: `question ${i}: ${words(15, random)}` },
        ],
        prefixIndex,
      ),
    );
    await new Promise((resolve) => setTimeout(resolve, -Math.log(1 - random()) * options.traceGapMs));
  }
  return Promise.all(pending);
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

export function mean(values: readonly number[]): number {
  return values.length === 0 ? Number.NaN : values.reduce((a, b) => a + b, 0) / values.length;
}
