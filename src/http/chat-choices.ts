// A chat choice in OpenAI's shapes, whole or streamed: plain text, or, when the model may call
// tools, its text read for calls in the chat template's syntax (tool-call-parser.ts).
import type { FinishReason, TokenLogprob } from "../contract/generation.js";
import type { ToolCallSyntax } from "../contract/tools.js";
import type { ChatOutcome } from "../serving/completion-service.js";
import { chatChunk, chatFinishReason, type ChatChoice, type ChatCompletionHeader, type ToolCallDelta } from "./openai-format.js";
import { ToolCallScanner, parseToolCalls, type ToolCallEvent } from "./tool-call-parser.js";

/** The chunks of one choice's stream: for each piece of text as it comes, then at its end. */
export interface ChoiceStream {
  /** `logprobs`: the entries of this text's tokens, when the request asked for them. */
  text(text: string, logprobs?: TokenLogprob[]): unknown[];
  finish(reason: FinishReason): unknown[];
}

export function chatChoiceOf(outcome: ChatOutcome, toolNames: ReadonlySet<string>): ChatChoice {
  const logprobs = outcome.logprobs ? { logprobs: outcome.logprobs } : {};
  if (!outcome.toolCallSyntax) return { content: outcome.text, toolCalls: [], finishReason: outcome.finishReason, ...logprobs };
  const { content, calls } = parseToolCalls(outcome.text, outcome.toolCallSyntax, toolNames);
  return { content, toolCalls: calls, finishReason: outcome.finishReason, ...logprobs };
}

export function chatChoiceStream(
  header: ChatCompletionHeader,
  index: number,
  syntax: ToolCallSyntax | undefined,
  toolNames: ReadonlySet<string>,
): ChoiceStream {
  if (!syntax) {
    return {
      text: (text, logprobs) => [chatChunk(header, { content: text }, null, index, logprobs)],
      finish: (reason) => [chatChunk(header, {}, chatFinishReason(reason, 0), index)],
    };
  }
  const scanner = new ToolCallScanner(syntax, toolNames);
  // Text held back by the scanner sends no chunk yet: its logprobs go with the next chunk sent.
  let pending: TokenLogprob[] | undefined;
  const chunks = (events: readonly ToolCallEvent[]) =>
    events.map((event, i) => {
      const logprobs = i === 0 ? pending : undefined;
      if (i === 0) pending = undefined;
      return chatChunk(header, deltaOf(event), null, index, logprobs);
    });
  return {
    text: (text, logprobs) => {
      if (logprobs) pending = [...(pending ?? []), ...logprobs];
      return chunks(scanner.push(text));
    },
    finish: (reason) => {
      const calls = scanner.callCount;
      const rest = chunks(scanner.finish());
      return [...rest, chatChunk(header, {}, chatFinishReason(reason, calls), index, pending)];
    },
  };
}

function deltaOf(event: ToolCallEvent): { content: string } | { tool_calls: ToolCallDelta[] } {
  switch (event.type) {
    case "text":
      return { content: event.text };
    case "call":
      return { tool_calls: [{ index: event.index, id: event.id, type: "function", function: { name: event.name, arguments: "" } }] };
    case "arguments":
      return { tool_calls: [{ index: event.index, function: { arguments: event.text } }] };
  }
}
