// A request's prompt, from what the client sent to the exact tokens a worker evaluates:
// rendered and tokenized once here in the host, refused early when it cannot fit a slot.
import { promptWithBos } from "../common/tokens.js";
import type { ChatTurn } from "../contract/chat.js";
import type { ToolCallSyntax } from "../contract/tools.js";
import type { PromptPreparer } from "../engine/host/prompt-preparer.js";
import type { PlacementRequest } from "../scheduler/types.js";
import type { CompletionJob, PromptInput } from "./completion-job.js";
import { ServingError } from "./errors.js";
import type { Fleet } from "./fleet.js";

/** A prompt ready to place: its tokens and how many it may generate after them. */
export interface PreparedPrompt {
  /** Never written: the scheduler's tree may keep views of it. */
  tokens: Int32Array;
  maxTokens: number;
  request: PlacementRequest;
  /** How the model writes a tool call: present when the chat has tools. */
  toolCallSyntax?: ToolCallSyntax;
}

export async function preparePrompt(fleet: Fleet, preparer: PromptPreparer, job: CompletionJob, defaultMaxTokens: number): Promise<PreparedPrompt> {
  const model = fleet.models.get(job.modelId);
  if (!model) {
    throw new ServingError("model_not_found", `The model "${job.modelId}" is not served here. Served models: ${[...fleet.models.keys()].join(", ")}.`, "model");
  }
  const field = job.prompt.kind === "chat" ? "messages" : "prompt";
  await refuseUnfittingText(preparer, job.modelId, job.prompt, model.contextSize, field);
  const { tokens, toolCallSyntax } = await promptTokens(preparer, job.modelId, job.prompt);
  if (tokens.length === 0) throw new ServingError("invalid_request", "The prompt is empty: send at least one token.", field);
  // The generation needs room for at least one completion token in the slot.
  if (tokens.length >= model.contextSize) {
    throw new ServingError(
      "context_length_exceeded",
      `The prompt is ${tokens.length} tokens but a slot of model "${job.modelId}" holds ${model.contextSize} tokens ` +
        `(prompt plus completion). Shorten the ${field} or raise contextSize in config.yml.`,
      field,
    );
  }
  const maxTokens = Math.min(job.maxTokens ?? defaultMaxTokens, model.contextSize - tokens.length);
  const request: PlacementRequest = {
    modelId: job.modelId,
    tokens,
    // A raw prompt is one piece of text: never a continuation for the `shape` policy.
    messageCount: job.prompt.kind === "chat" ? job.prompt.messages.length : 1,
    maxTokens,
    ...(job.sessionId !== undefined ? { sessionId: job.sessionId } : {}),
  };
  return { tokens, maxTokens, request, ...(toolCallSyntax ? { toolCallSyntax } : {}) };
}

/**
 * Refuses, before any tokenizing, a text too long for any tokenization of it to fit in a
 * slot: a token spells at most the vocabulary's longest token, so N characters are at
 * least N / longestTokenBytes tokens. Tokenizing costs about a second per MB on one prompt
 * thread that every client shares; a prompt that cannot fit must not cost that.
 */
async function refuseUnfittingText(preparer: PromptPreparer, modelId: string, prompt: PromptInput, contextSize: number, field: string): Promise<void> {
  const characters =
    prompt.kind === "chat" ? prompt.messages.reduce((sum, message) => sum + chatCharacters(message), 0) : prompt.kind === "text" ? prompt.text.length : 0;
  if (characters === 0) return;
  const { longestTokenBytes } = await preparer.vocab(modelId);
  const leastTokens = Math.floor(characters / longestTokenBytes);
  if (leastTokens < contextSize) return;
  throw new ServingError(
    "context_length_exceeded",
    `The prompt is ${characters} characters, which is at least ${leastTokens} tokens of model "${modelId}" (its longest token is ${longestTokenBytes} bytes), ` +
      `but a slot holds ${contextSize} tokens (prompt plus completion). Shorten the ${field} or raise contextSize in config.yml.`,
    field,
  );
}

function chatCharacters(turn: ChatTurn): number {
  const calls = turn.role === "assistant" ? (turn.toolCalls ?? []) : [];
  return calls.reduce((sum, call) => sum + call.name.length + call.arguments.length, turn.content.length);
}

/**
 * The exact tokens a worker evaluates, BOS included when the model wants one: chat
 * messages and text are tokenized in a prompt thread; token ids are checked against the
 * model's vocabulary and get the same BOS a text prompt gets.
 */
async function promptTokens(
  preparer: PromptPreparer,
  modelId: string,
  prompt: PromptInput,
): Promise<{ tokens: Int32Array; toolCallSyntax?: ToolCallSyntax | undefined }> {
  switch (prompt.kind) {
    case "chat": {
      // Tools the model may not call are still documented: the prompt, and so its cached prefix,
      // stays the same whichever tool_choice each turn of a conversation sends.
      const tools = prompt.tools?.functions;
      return preparer.chat({ modelId, messages: prompt.messages, ...(tools && tools.length > 0 ? { tools } : {}) });
    }
    case "text":
      return preparer.text({ modelId, text: prompt.text });
    case "tokens": {
      const vocab = await preparer.vocab(modelId);
      prompt.tokens.forEach((id, i) => {
        if (!Number.isInteger(id) || id < 0 || id >= vocab.size) {
          throw new ServingError(
            "invalid_request",
            `\`${prompt.param}[${i}]\` is ${JSON.stringify(id)}, which is not a token id of model "${modelId}": ids are integers from 0 to ${vocab.size - 1}.`,
            `${prompt.param}[${i}]`,
          );
        }
      });
      return { tokens: promptWithBos(prompt.tokens, vocab.bos) };
    }
    default:
      return prompt satisfies never;
  }
}
