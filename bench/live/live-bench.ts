// The live benchmark: a real Radixgate per policy (CPU workers on the generated model),
// driven over HTTP the way the field note measured (seed 000):
//   (a) agent loop: sequential turns re-sending a growing history; verdict = the TTFT of
//       each warm turn (turn >= 2), per request, from its own stream;
//   (b) cold burst: N distinct prompts at once; verdict = the time until the last is done;
//   (c) trace replay: a ToolBench-like Zipf mix of shared prefixes, requests sent with their
//       (scaled) arrival gaps; verdict = TTFT and latency per request and cached fraction.
// Two reference arms bracket the policies: `pinned` (every request on worker w0, through
// the x-radixgate-worker header) and `spread` (roundrobin). Every run salts its prompts with
// a unique first line, so nothing is cached from an earlier run.
import { randomUUID } from "node:crypto";
import OpenAI from "openai";
import { parseConfig } from "../../src/config/load-config.js";
import { createRadixgate } from "../../src/radixgate.js";
import { mulberry32 } from "../../src/common/random.js";

export interface LiveOptions {
  preset: "tiny" | "bench";
  workers: number;
  threads: number;
  /** Policies to run; "pinned" and "spread" are the reference arms. */
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
  onProgress?: (line: string) => void;
}

export interface RequestSample {
  ttftMs: number;
  totalMs: number;
  promptTokens: number;
  cachedTokens: number;
  worker: string;
}

export interface ArmResult {
  arm: string;
  agentWarmTurns: RequestSample[];
  agentColdTurns: RequestSample[];
  burstMs: number;
  burst: RequestSample[];
  trace: RequestSample[];
}

export type Message = { role: "system" | "user" | "assistant"; content: string };

const WORDS = ["the", "file", "list", "shows", "each", "tool", "and", "its", "size", "in", "bytes", "for", "this", "run", "call", "returns", "result", "agent"];

function words(count: number, random: () => number): string {
  return Array.from({ length: count }, () => WORDS[Math.floor(random() * WORDS.length)]).join(" ");
}

export async function runLiveBench(options: LiveOptions): Promise<ArmResult[]> {
  const results: ArmResult[] = [];
  for (const arm of options.arms) {
    const policy = arm === "pinned" ? "roundrobin" : arm === "spread" ? "roundrobin" : arm;
    const config = parseConfig({
      server: { port: 0, logLevel: "warn" },
      models: [{ id: "bench", source: `preset:${options.preset}`, workers: options.workers, slots: 4, contextSize: 8192, threads: options.threads, isolation: "thread" }],
      scheduler: { policy },
    });
    const radixgate = await createRadixgate({ config, path: "bench", dir: process.cwd() });
    try {
      const client = new OpenAI({ baseURL: `${await radixgate.listen()}/v1`, apiKey: "unused", maxRetries: 0 });
      const headers: Record<string, string> = arm === "pinned" ? { "x-radixgate-worker": "w0" } : {};
      const salt = `run ${randomUUID()}`;
      const random = mulberry32(options.seed);
      const send = (messages: Message[]) => timedRequest(client, messages, options.maxTokens, headers);
      options.onProgress?.(`${arm}: agent loop`);
      const agent = await agentLoop(send, salt, random, options);
      options.onProgress?.(`${arm}: cold burst of ${options.burstRequests}`);
      const burstStarted = performance.now();
      const burst = await Promise.all(
        Array.from({ length: options.burstRequests }, (_, i) => send([{ role: "user", content: `${salt} burst ${i}\n${words(options.burstPromptWords, random)}` }])),
      );
      const burstMs = performance.now() - burstStarted;
      options.onProgress?.(`${arm}: trace replay of ${options.traceRequests}`);
      const trace = await traceReplay(send, salt, random, options);
      results.push({ arm, agentWarmTurns: agent.warm, agentColdTurns: agent.cold, burstMs, burst, trace });
    } finally {
      await radixgate.close();
    }
  }
  return results;
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
  let firstAt: number | undefined;
  let text = "";
  let usage: { prompt_tokens: number; prompt_tokens_details?: { cached_tokens?: number } } | undefined;
  const { data: stream, response } = await client.chat.completions
    .create({ model, messages, max_tokens: maxTokens, temperature: 0, stream: true, stream_options: { include_usage: true } }, { headers })
    .withResponse();
  for await (const chunk of stream) {
    const content = chunk.choices[0]?.delta.content;
    if (content) {
      firstAt ??= performance.now();
      text += content;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  const done = performance.now();
  return {
    ttftMs: (firstAt ?? done) - started,
    totalMs: done - started,
    promptTokens: usage?.prompt_tokens ?? 0,
    cachedTokens: usage?.prompt_tokens_details?.cached_tokens ?? 0,
    worker: response.headers.get("x-radixgate-worker") ?? "?",
    text,
  };
}

/** Sessions run side by side; inside a session every turn waits for the previous answer. */
async function agentLoop(
  send: (messages: Message[]) => Promise<RequestSample & { text: string }>,
  salt: string,
  random: () => number,
  options: LiveOptions,
): Promise<{ warm: RequestSample[]; cold: RequestSample[] }> {
  const warm: RequestSample[] = [];
  const cold: RequestSample[] = [];
  await Promise.all(
    Array.from({ length: options.agentSessions }, async (_, session) => {
      const history: Message[] = [{ role: "system", content: `${salt} agent ${session}\n${words(options.agentContextWords, random)}` }];
      for (let turn = 1; turn <= options.agentTurns; turn++) {
        history.push({ role: "user", content: `tool result ${turn}: ${words(20, random)}` });
        const sample = await send(history);
        (turn === 1 ? cold : warm).push(sample);
        history.push({ role: "assistant", content: sample.text });
      }
    }),
  );
  return { warm, cold };
}

/** ToolBench-like: Zipf(1.1) over shared prefixes, a unique question each, exponential gaps. */
async function traceReplay(
  send: (messages: Message[]) => Promise<RequestSample & { text: string }>,
  salt: string,
  random: () => number,
  options: LiveOptions,
): Promise<RequestSample[]> {
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
    const prefix = prefixes[pick()]!;
    pending.push(send([{ role: "system", content: prefix }, { role: "user", content: `question ${i}: ${words(15, random)}` }]));
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
