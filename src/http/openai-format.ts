// OpenAI's response shapes for chat and legacy (text) completions, built from a worker's outcome.
import { randomBytes } from "node:crypto";
import type { FinishReason, TokenLogprob } from "../contract/generation.js";
import type { ToolCall } from "../contract/tools.js";
import { chatLogprobs, completionLogprobs } from "./logprobs.js";

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
}

export function completionId(prefix: "chatcmpl" | "cmpl"): string {
  return `${prefix}-${randomBytes(12).toString("base64url")}`;
}

export function usage(promptTokens: number, cachedTokens: number, completionTokens: number): Usage {
  return {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
    prompt_tokens_details: { cached_tokens: cachedTokens },
  };
}

/** "cancelled" only happens when the client went away: nobody reads it, "stop" keeps the type OpenAI's. */
export function openAIFinishReason(reason: FinishReason): "stop" | "length" {
  return reason === "length" ? "length" : "stop";
}

export interface ChatCompletionHeader {
  id: string;
  created: number;
  model: string;
}

/** What each choice of a text completion generated. */
export interface ChoiceText {
  text: string;
  finishReason: FinishReason;
  logprobs?: TokenLogprob[];
}

/** What each choice of a chat response generated: its text split into content and tool calls. */
export interface ChatChoice {
  content: string | null;
  toolCalls: ToolCall[];
  finishReason: FinishReason;
  logprobs?: TokenLogprob[];
}

/** A generation that stopped after making calls ends with "tool_calls"; one cut by its token limit stays "length". */
export function chatFinishReason(reason: FinishReason, toolCalls: number): "stop" | "length" | "tool_calls" {
  return toolCalls > 0 && reason !== "length" ? "tool_calls" : openAIFinishReason(reason);
}

function toolCallsField(calls: readonly ToolCall[]) {
  return calls.length === 0
    ? {}
    : { tool_calls: calls.map((call) => ({ id: call.id, type: "function" as const, function: { name: call.name, arguments: call.arguments } })) };
}

export function chatCompletion(header: ChatCompletionHeader, choices: readonly ChatChoice[], tokens: Usage) {
  return {
    ...header,
    object: "chat.completion" as const,
    system_fingerprint: null,
    choices: choices.map((choice, index) => ({
      index,
      message: { role: "assistant" as const, content: choice.content, refusal: null, ...toolCallsField(choice.toolCalls) },
      logprobs: chatLogprobs(choice.logprobs),
      finish_reason: chatFinishReason(choice.finishReason, choice.toolCalls.length),
    })),
    usage: tokens,
  };
}

/** A streamed tool call's piece: its start (id, name) or more of its arguments, as OpenAI streams them. */
export type ToolCallDelta =
  | { index: number; id: string; type: "function"; function: { name: string; arguments: string } }
  | { index: number; function: { arguments: string } };

export interface ChatDelta {
  role?: "assistant";
  content?: string;
  tool_calls?: ToolCallDelta[];
}

export function chatChunk(
  header: ChatCompletionHeader,
  delta: ChatDelta,
  finishReason: "stop" | "length" | "tool_calls" | null,
  index = 0,
  logprobs?: readonly TokenLogprob[],
) {
  return {
    ...header,
    object: "chat.completion.chunk" as const,
    system_fingerprint: null,
    choices: [{ index, delta, logprobs: chatLogprobs(logprobs), finish_reason: finishReason }],
  };
}

/** The last chunk when stream_options.include_usage is set: no choices, only usage. */
export function usageChunk(header: ChatCompletionHeader, tokens: Usage) {
  return { ...header, object: "chat.completion.chunk" as const, system_fingerprint: null, choices: [], usage: tokens };
}

export function textCompletion(header: ChatCompletionHeader, choices: readonly ChoiceText[], tokens: Usage) {
  return {
    ...header,
    object: "text_completion" as const,
    system_fingerprint: null,
    choices: choices.map((choice, index) => ({
      index,
      text: choice.text,
      logprobs: completionLogprobs(choice.logprobs),
      finish_reason: openAIFinishReason(choice.finishReason),
    })),
    usage: tokens,
  };
}

/** `logprobs`: this chunk's entries in the legacy shape, its text starting `offset` characters into the completion. */
export function textCompletionChunk(
  header: ChatCompletionHeader,
  text: string,
  finishReason: FinishReason | null,
  index = 0,
  logprobs?: { entries: readonly TokenLogprob[]; offset: number },
) {
  return {
    ...header,
    object: "text_completion" as const,
    system_fingerprint: null,
    choices: [
      {
        index,
        text,
        logprobs: logprobs ? completionLogprobs(logprobs.entries, logprobs.offset) : null,
        finish_reason: finishReason === null ? null : openAIFinishReason(finishReason),
      },
    ],
  };
}

/** The last text-completion chunk when stream_options.include_usage is set. */
export function textUsageChunk(header: ChatCompletionHeader, tokens: Usage) {
  return { ...header, object: "text_completion" as const, system_fingerprint: null, choices: [], usage: tokens };
}
