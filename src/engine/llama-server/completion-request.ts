// One generation as llama-server's native /completion endpoint takes it and streams it back:
// the request body made from our sampling parameters (token ids in, a slot named, OpenAI's
// sampling semantics: llama-server's own extra samplers set to neutral), and the server-sent
// events read back into text pieces, logprobs and the final report.
import type { TokenLogprob } from "../../contract/generation.js";
import type { SamplingParams } from "../../contract/sampling.js";
import { ModelOutputError, UnsupportedOnEngineError } from "../host/worker-errors.js";
import { sseEvents } from "../remote/http-client.js";

/**
 * The body of one generation, but its slot (`id_slot`, set once the host has chosen one: the
 * server must not pick another). `toolCall`: the grammar of a required tool call (made by the
 * prompt threads' node-llama-cpp, the same one the embedded engine builds) and its end.
 */
export function completionBody(tokens: readonly number[], sampling: SamplingParams, toolCall?: { gbnf: string; stop: string }): Record<string, unknown> {
  if (sampling.toolCalls && !toolCall) {
    throw new UnsupportedOnEngineError(
      "`tool_choice` `required` or a named function needs a tool-call grammar, which this llama-server worker was given no way to build; use `tool_choice: auto`",
      "tool_choice",
    );
  }
  const body: Record<string, unknown> = {
    prompt: tokens,
    cache_prompt: true,
    stream: true,
    return_tokens: true,
    n_predict: sampling.maxTokens,
    temperature: sampling.temperature,
    top_p: sampling.topP ?? 1,
    // OpenAI's sampling is temperature and top_p alone: llama-server's defaults (top_k 40,
    // min_p 0.05) would cut the distribution further.
    top_k: 0,
    min_p: 0,
    typical_p: 1,
    repeat_penalty: 1,
    presence_penalty: sampling.presencePenalty ?? 0,
    frequency_penalty: sampling.frequencyPenalty ?? 0,
    seed: sampling.seed ?? -1,
    stop: toolCall ? [...sampling.stop, toolCall.stop] : sampling.stop,
  };
  if (sampling.logprobs !== undefined) {
    // The chosen token's own logprob comes with the candidates: ask for one at least.
    body.n_probs = Math.max(1, sampling.logprobs);
    body.post_sampling_probs = false;
  }
  if (toolCall) body.grammar = toolCall.gbnf;
  // A required tool call's grammar replaces the response format's, as on the embedded engine.
  else if (sampling.responseFormat?.type === "json_object") body.json_schema = { type: "object" };
  else if (sampling.responseFormat?.type === "json_schema") body.json_schema = sampling.responseFormat.schema;
  return body;
}

/** One streamed piece: its text and, when asked for, its tokens' logprobs. */
export interface CompletionPiece {
  text: string;
  /** Token ids generated in this piece. */
  tokens: number[];
  logprobs?: TokenLogprob[];
}

/** The last event: how it stopped and what the server measured. */
export interface CompletionEnd {
  stopType: "eos" | "word" | "limit" | "none" | string;
  tokensEvaluated: number;
  tokensPredicted: number;
  /** Prompt tokens the slot already held (llama-server's own count). */
  cachedTokens: number;
  promptMs: number;
  predictedPerTokenMs: number;
}

interface RawProbability {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs?: { token: string; logprob: number; bytes: number[] }[];
}

interface RawEvent {
  content?: string;
  tokens?: number[];
  stop?: boolean;
  stop_type?: string;
  tokens_evaluated?: number;
  tokens_predicted?: number;
  completion_probabilities?: RawProbability[];
  timings?: { cache_n?: number; prompt_ms?: number; predicted_per_token_ms?: number };
  error?: { message?: string } | string;
}

/**
 * llama-server's error when the text its model generated does not parse as chat text: it
 * parses every streamed piece, `/completion` included, and bytes that are not valid UTF-8
 * fail the parse ("The model produced output that does not match the expected Content-only
 * format"). The only sign of it is the message.
 */
const OWN_OUTPUT_REFUSED = /model produced output that does not match the expected/i;

/** llama-server writes 0 probability as the lowest float; OpenAI writes -9999. */
const logprobOf = (value: number) => (Number.isFinite(value) && value > -9999 ? value : -9999);

function logprobsOf(raw: RawProbability[], top: number): TokenLogprob[] {
  return raw.map((entry) => ({
    token: entry.token,
    logprob: logprobOf(entry.logprob),
    bytes: entry.bytes,
    top: (entry.top_logprobs ?? [])
      .slice(0, top)
      .map((candidate) => ({ token: candidate.token, logprob: logprobOf(candidate.logprob), bytes: candidate.bytes })),
  }));
}

/**
 * Reads the server-sent events of one streamed /completion: calls `onPiece` for each piece
 * of text, resolves with the final event. Throws on an error event or a stream that ends
 * without a final one (the server went away).
 */
export async function readCompletionStream(
  body: AsyncIterable<Uint8Array>,
  topLogprobs: number | undefined,
  onPiece: (piece: CompletionPiece) => void,
): Promise<CompletionEnd> {
  for await (const data of sseEvents(body)) {
    if (data === "[DONE]") continue;
    const event = JSON.parse(data) as RawEvent;
    if (event.error !== undefined) {
      const message = typeof event.error === "string" ? event.error : (event.error.message ?? JSON.stringify(event.error));
      if (OWN_OUTPUT_REFUSED.test(message)) throw new ModelOutputError(`llama-server: ${message}`);
      throw new Error(`llama-server: ${message}`);
    }
    const logprobs = topLogprobs !== undefined && event.completion_probabilities ? logprobsOf(event.completion_probabilities, topLogprobs) : undefined;
    if (event.content || (event.tokens && event.tokens.length > 0)) {
      onPiece({ text: event.content ?? "", tokens: event.tokens ?? [], ...(logprobs ? { logprobs } : {}) });
    }
    if (event.stop) {
      return {
        stopType: event.stop_type ?? "none",
        tokensEvaluated: event.tokens_evaluated ?? 0,
        tokensPredicted: event.tokens_predicted ?? 0,
        cachedTokens: event.timings?.cache_n ?? 0,
        promptMs: event.timings?.prompt_ms ?? 0,
        predictedPerTokenMs: event.timings?.predicted_per_token_ms ?? 0,
      };
    }
  }
  throw new Error("llama-server closed the stream before its final event");
}
