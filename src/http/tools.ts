// The tool-calling fields of a chat request, checked and turned into what serving takes:
// the functions (their parameter schemas in the subset the grammar enforces), the choice,
// and the conversation's calls and results, each error naming the field at fault.
import type { ChatTurn } from "../contract/chat.js";
import type { ChatTools, ToolCall, ToolChoice, ToolFunction } from "../contract/tools.js";
import { ServingError } from "../serving/errors.js";
import { TOOL_CHOICE_MODES, toGrammarSchema, UnsupportedSchemaError, type ChatCompletionRequest, type ChatMessage, type ToolChoiceRequest } from "./schemas.js";

/** A function with no `parameters` takes none: OpenAI's reading. */
const NO_PARAMETERS = { type: "object", properties: {} };

export function chatToolsOf(body: Pick<ChatCompletionRequest, "tools" | "tool_choice" | "parallel_tool_calls">): ChatTools | undefined {
  const requests = body.tools ?? [];
  const choice = toolChoiceOf(body.tool_choice ?? undefined);
  if (requests.length === 0) {
    if (choice !== "none" && choice !== "auto") {
      throw new ServingError(
        "invalid_request",
        "`tool_choice` asks for a tool call, but the request has no `tools`: send the functions the model may call.",
        "tool_choice",
      );
    }
    return undefined;
  }
  const seen = new Set<string>();
  const functions = requests.map((tool, i): ToolFunction => {
    const { name, description } = tool.function;
    if (seen.has(name))
      throw new ServingError(
        "invalid_request",
        `\`tools[${i}].function.name\` "${name}" is given twice; function names must be unique.`,
        `tools[${i}].function.name`,
      );
    seen.add(name);
    const param = `tools[${i}].function.parameters`;
    try {
      const parameters = toGrammarSchema(tool.function.parameters ?? NO_PARAMETERS, param);
      return { name, ...(description !== undefined ? { description } : {}), parameters };
    } catch (error) {
      if (!(error instanceof UnsupportedSchemaError)) throw error;
      throw new ServingError("invalid_request", `\`${param}\` is not supported: ${error.message}`, param);
    }
  });
  if (typeof choice === "object" && !seen.has(choice.name)) {
    throw new ServingError(
      "invalid_request",
      `\`tool_choice.function.name\` "${choice.name}" is not one of the request's tools: ${[...seen].join(", ")}.`,
      "tool_choice.function.name",
    );
  }
  return { functions, choice, parallel: body.parallel_tool_calls ?? true };
}

function toolChoiceOf(choice: ToolChoiceRequest | undefined): ToolChoice {
  if (choice === undefined) return "auto";
  if (typeof choice === "object") return { name: choice.function.name };
  if ((TOOL_CHOICE_MODES as readonly string[]).includes(choice)) return choice as ToolChoice;
  throw new ServingError(
    "invalid_request",
    `\`tool_choice\` ${JSON.stringify(choice)} is not a choice; use ${TOOL_CHOICE_MODES.map((mode) => `"${mode}"`).join(", ")} or {"type": "function", "function": {"name": ...}}.`,
    "tool_choice",
  );
}

/**
 * The conversation as chat turns. Tool calls must be answered the way OpenAI requires: each
 * call of an assistant message by one `tool` message with its id, right after it.
 */
export function chatTurnsOf(messages: readonly ChatMessage[]): ChatTurn[] {
  /** Calls of the last assistant message that no tool message has answered yet. */
  let unanswered = new Map<string, number>();
  let callsAt = -1;
  const turns = messages.map((message, index): ChatTurn => {
    if (message.role !== "tool") refuseUnanswered(unanswered, callsAt, `before messages[${index}]`);
    // Only an assistant message that makes calls may leave its content out.
    if (message.content === undefined && !(message.role === "assistant" && (message.tool_calls ?? []).length > 0)) {
      throw new ServingError(
        "invalid_request",
        `\`messages[${index}].content\` is required (null or text) unless the assistant message has \`tool_calls\`.`,
        `messages[${index}].content`,
      );
    }
    const content = textOf(message);
    switch (message.role) {
      case "system":
      case "developer":
        // Chat templates know "system"; OpenAI's "developer" is the same instruction role.
        return { role: "system", content };
      case "user":
        return { role: "user", content };
      case "assistant": {
        const toolCalls = (message.tool_calls ?? []).map((call, j): ToolCall => {
          const param = `messages[${index}].tool_calls[${j}].function.arguments`;
          if (call.function.arguments.trim() !== "") {
            try {
              JSON.parse(call.function.arguments);
            } catch {
              throw new ServingError(
                "invalid_request",
                `\`${param}\` must be JSON text (the call's arguments); got ${JSON.stringify(call.function.arguments.slice(0, 80))}.`,
                param,
              );
            }
          }
          return { id: call.id, name: call.function.name, arguments: call.function.arguments };
        });
        unanswered = new Map(toolCalls.map((call, j) => [call.id, j]));
        callsAt = index;
        return { role: "assistant", content, ...(toolCalls.length > 0 ? { toolCalls } : {}) };
      }
      case "tool": {
        const param = `messages[${index}].tool_call_id`;
        const id = message.tool_call_id;
        if (id === undefined) throw new ServingError("invalid_request", `\`${param}\` is required: the id of the call this message answers.`, param);
        if (!unanswered.delete(id)) {
          throw new ServingError(
            "invalid_request",
            `\`${param}\` "${id}" answers no call: a tool message must follow the assistant message whose \`tool_calls\` has that id, once per call.`,
            param,
          );
        }
        return { role: "tool", content, toolCallId: id };
      }
      default:
        return message.role satisfies never;
    }
  });
  refuseUnanswered(unanswered, callsAt, "by the end of the messages");
  return turns;
}

function refuseUnanswered(unanswered: ReadonlyMap<string, number>, callsAt: number, where: string): void {
  const [id, j] = unanswered.entries().next().value ?? [];
  if (id === undefined) return;
  const param = `messages[${callsAt}].tool_calls[${j}]`;
  throw new ServingError(
    "invalid_request",
    `\`${param}\` (id "${id}") has no answer: each call must be followed by a tool message with its \`tool_call_id\` ${where}.`,
    param,
  );
}

function textOf(message: ChatMessage): string {
  const { content } = message;
  return content == null ? "" : typeof content === "string" ? content : content.map((part) => part.text).join("\n");
}
