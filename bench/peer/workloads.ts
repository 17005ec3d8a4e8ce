// The peer benchmark's workloads, each driven over HTTP against any OpenAI-compatible
// server (llama-server or Radixgate) with streamed chat requests. Every request is timed by
// the client: TTFT = sent -> first chunk with text; its completion tokens come from the
// usage chunk (llama-server and Radixgate both send one with stream_options.include_usage).
import { mulberry32 } from "../../src/common/random.js";
import { sseData } from "../sse.js";

export interface Message {
  role: "system" | "user" | "assistant";
  content: string;
}

export interface Sample {
  ttftMs: number;
  totalMs: number;
  completionTokens: number;
  promptTokens: number;
  /** Of the prompt, the tokens the server took from its KV cache (its usage says so). */
  cachedTokens: number;
  /** Seconds from the workload's start to when the request was sent. */
  sentS: number;
  kind: string;
  text: string;
}

export interface Target {
  baseURL: string;
  model: string;
}

/** Requests sent again because the server had closed the idle keep-alive connection they went out on. */
export const resent = { count: 0 };

/** Times a request is sent again on a connection closed under it: several idle ones may be pooled. */
const RESENDS = 4;

/**
 * fetch, sent again when the connection it went out on was closed under it: a server
 * closes a keep-alive connection idle for a few seconds (llama-server after 5 s), and the
 * arms take turns for longer than that, so the client may write into a socket just as it
 * closes. After several agents at once the client pools several such connections, and the
 * resend may go out on the next of them (a run at 1806ad5 failed so, with one resend).
 */
async function post(url: string, body: string): Promise<{ response: Response; sent: number }> {
  for (let attempt = 0; ; attempt++) {
    const sent = performance.now();
    try {
      return { response: await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body }), sent };
    } catch (error) {
      const code = ((error as Error).cause as { code?: string } | undefined)?.code;
      if (attempt >= RESENDS || code !== "UND_ERR_SOCKET") throw error;
      resent.count++;
    }
  }
}

/** What the workloads read of a completion's usage (llama-server and Radixgate both give cached tokens). */
interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  prompt_tokens_details?: { cached_tokens?: number };
}

/** One chat completion, greedy: streamed (TTFT at the first content chunk) or whole (TTFT is the whole request). */
export async function chat(target: Target, messages: Message[], maxTokens: number, kind: string, startedAt: number, stream = true): Promise<Sample> {
  const { response, sent } = await post(
    `${target.baseURL}/v1/chat/completions`,
    JSON.stringify({
      model: target.model,
      messages,
      max_tokens: maxTokens,
      temperature: 0,
      stream,
      ...(stream ? { stream_options: { include_usage: true } } : {}),
    }),
  );
  if (!response.ok || !response.body) throw new Error(`${target.baseURL}: ${response.status} ${await response.text()}`);
  if (!stream) {
    // One answer at the end: no time to first token, only the whole request's.
    const body = (await response.json()) as { choices: { message: { content: string | null } }[]; usage: Usage };
    const done = performance.now();
    const text = body.choices[0]?.message.content ?? "";
    return {
      ttftMs: done - sent,
      totalMs: done - sent,
      completionTokens: body.usage.completion_tokens,
      promptTokens: body.usage.prompt_tokens,
      cachedTokens: body.usage.prompt_tokens_details?.cached_tokens ?? 0,
      sentS: (sent - startedAt) / 1000,
      kind,
      text,
    };
  }
  let firstAt: number | undefined;
  let text = "";
  let chunks = 0;
  let usage: Partial<Usage> | undefined;
  for await (const data of sseData(response.body as AsyncIterable<Uint8Array>)) {
    if (data === "[DONE]") continue;
    const chunk = JSON.parse(data) as { choices?: { delta?: { content?: string | null } }[]; usage?: typeof usage; error?: unknown };
    if (chunk.error) throw new Error(`${target.baseURL}: ${JSON.stringify(chunk.error)}`);
    const piece = chunk.choices?.[0]?.delta?.content;
    if (piece) {
      firstAt ??= performance.now();
      text += piece;
      chunks++;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  const done = performance.now();
  return {
    ttftMs: (firstAt ?? done) - sent,
    totalMs: done - sent,
    completionTokens: usage?.completion_tokens ?? chunks,
    promptTokens: usage?.prompt_tokens ?? 0,
    cachedTokens: usage?.prompt_tokens_details?.cached_tokens ?? 0,
    sentS: (sent - startedAt) / 1000,
    kind,
    text,
  };
}

const WORDS = ["the", "file", "list", "shows", "each", "tool", "and", "its", "size", "in", "bytes", "for", "this", "run", "call", "returns", "result", "agent"];

/** Seeded filler text: `count` words. */
export function wordsOf(random: () => number, count: number): string {
  return Array.from({ length: count }, () => WORDS[Math.floor(random() * WORDS.length)]).join(" ");
}

export interface WorkloadOptions {
  /** Salts every prompt of the run (a unique first line): nothing is cached from elsewhere. */
  salt: string;
  seed: number;
  /** Words of an agent's context (~1.6 tokens a word) and of a one-shot prompt. */
  contextWords: number;
  maxTokens: number;
}

/** An agent session: a long first message, then tool results appended turn after turn. */
export class AgentSession {
  private readonly history: Message[];
  private turns = 0;

  private readonly random: () => number;

  /** `index` seeds the session's own text, so its turns read the same whatever the timing. */
  constructor(
    readonly id: string,
    index: number,
    private readonly options: WorkloadOptions,
  ) {
    this.random = mulberry32(options.seed * 7919 + index);
    this.history = [{ role: "system", content: `${options.salt} agent ${id}\n${wordsOf(this.random, options.contextWords)}` }];
  }

  async turn(target: Target, startedAt: number): Promise<Sample> {
    this.turns++;
    this.history.push({ role: "user", content: `tool result ${this.turns}: ${wordsOf(this.random, 20)}` });
    const sample = await chat(target, this.history, this.options.maxTokens, this.turns === 1 ? "agent-cold" : "agent-warm", startedAt);
    this.history.push({ role: "assistant", content: sample.text });
    return sample;
  }
}

/** A prompt no other request shares (past the salt's first line); `index` seeds its text. */
export function oneShot(options: WorkloadOptions, index: number, id: string): Message[] {
  return [{ role: "user", content: `${options.salt} question ${id}\n${wordsOf(mulberry32(options.seed * 104729 + index), options.contextWords)}` }];
}

/**
 * `count` long completions at once, short distinct prompts: output tokens per second.
 * Streamed, every token travels to the client as it comes (the server's per-token work and
 * the client's share the machine with llama.cpp); not streamed, the answer comes whole.
 */
export async function decodeThroughput(target: Target, options: WorkloadOptions, count: number, maxTokens: number, stream = true) {
  const random = mulberry32(options.seed + count);
  const startedAt = performance.now();
  const samples = await Promise.all(
    Array.from({ length: count }, (_, i) =>
      chat(target, [{ role: "user", content: `${options.salt} decode ${count}-${i} ${wordsOf(random, 8)}` }], maxTokens, `decode-${count}`, startedAt, stream),
    ),
  );
  const wallS = (performance.now() - startedAt) / 1000;
  const tokens = samples.reduce((sum, sample) => sum + sample.completionTokens, 0);
  return { samples, wallS, tokens, tokensPerS: tokens / wallS };
}

/** Agents side by side (1 = the sequential agent), each sending its turns one after another. */
export async function agents(target: Target, options: WorkloadOptions, sessions: number, turns: number, label: string) {
  const startedAt = performance.now();
  const all = Array.from({ length: sessions }, (_, i) => new AgentSession(`${label}-${i}`, 1000 * sessions + i, options));
  const samples = (
    await Promise.all(
      all.map(async (session) => {
        const own: Sample[] = [];
        for (let turn = 0; turn < turns; turn++) own.push(await session.turn(target, startedAt));
        return own;
      }),
    )
  ).flat();
  return { samples, wallS: (performance.now() - startedAt) / 1000 };
}

/** Distinct prompts all at once. */
export async function burst(target: Target, options: WorkloadOptions, count: number) {
  const startedAt = performance.now();
  const samples = await Promise.all(
    Array.from({ length: count }, (_, i) => chat(target, oneShot(options, 2000 + i, `burst-${i}`), options.maxTokens, "burst", startedAt)),
  );
  return { samples, wallS: (performance.now() - startedAt) / 1000 };
}

/**
 * A steady Poisson stream for `durationS`: each arrival is, with probability `agentShare`,
 * the next turn of an agent session (the preferred one of a pool of `sessions`, or the next
 * idle one after it; a one-shot prompt when all are busy), else a one-shot prompt. The
 * schedule is drawn from the seed up front, so every server gets the same arrivals.
 */
export async function poissonMix(target: Target, options: WorkloadOptions, ratePerS: number, durationS: number, sessions: number, agentShare: number) {
  const random = mulberry32(options.seed + 3000);
  const schedule: { atS: number; agent: boolean; preferred: number }[] = [];
  for (let at = -Math.log(1 - random()) / ratePerS; at <= durationS; at += -Math.log(1 - random()) / ratePerS) {
    schedule.push({ atS: at, agent: random() < agentShare, preferred: Math.floor(random() * sessions) });
  }
  const pool = Array.from({ length: sessions }, (_, i) => ({ session: new AgentSession(`mix-${i}`, 3000 + i, options), busy: false }));
  const startedAt = performance.now();
  const pending: Promise<Sample>[] = [];
  for (const [index, arrival] of schedule.entries()) {
    const wait = startedAt + arrival.atS * 1000 - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    const entry = arrival.agent ? [...pool.slice(arrival.preferred), ...pool.slice(0, arrival.preferred)].find((candidate) => !candidate.busy) : undefined;
    if (entry) {
      entry.busy = true;
      pending.push(entry.session.turn(target, startedAt).finally(() => (entry.busy = false)));
    } else {
      pending.push(chat(target, oneShot(options, 3000 + index, `mix-${index}`), options.maxTokens, "one-shot", startedAt));
    }
  }
  const samples = await Promise.all(pending);
  return { samples, wallS: (performance.now() - startedAt) / 1000, arrivals: schedule.length };
}
