// OpenAI chat turns as node-llama-cpp's chat history, which its chat wrappers render with the
// model's template; and the template's function-call syntax as plain text.
//
// node-llama-cpp keeps a tool call and its result together inside the model's turn, and the
// answer written after the results continues that same turn. So an assistant message with
// `tool_calls`, the `tool` messages answering them and the assistant message after them make
// one model turn; when the conversation ends on tool results, the model continues that turn.
import {
  jsonDumps,
  LlamaText,
  type ChatHistoryItem,
  type ChatModelFunctionCall,
  type ChatModelFunctions,
  type ChatModelResponse,
  type ChatWrapper,
} from "node-llama-cpp";
import type { ChatTurn } from "../../contract/chat.js";
import type { ToolCall, ToolCallSyntax, ToolFunction } from "../../contract/tools.js";

export function chatHistoryOf(turns: readonly ChatTurn[], wrapper: ChatWrapper): ChatHistoryItem[] {
  const results = new Map<string, string>();
  for (const turn of turns) if (turn.role === "tool") results.set(turn.toolCallId, turn.content);
  const history: ChatHistoryItem[] = [];
  /** The model turn that made calls and got their results: the next assistant text continues it. */
  let open: ChatModelResponse | undefined;
  for (const turn of turns) {
    switch (turn.role) {
      case "system":
      case "user":
        open = undefined;
        history.push({ type: turn.role, text: turn.content });
        break;
      case "assistant": {
        const model: ChatModelResponse = open ?? { type: "model", response: [] };
        if (!open) history.push(model);
        if (turn.content.length > 0) model.response.push(turn.content);
        (turn.toolCalls ?? []).forEach((call, i) => {
          const functionCall: ChatModelFunctionCall = {
            type: "functionCall",
            name: call.name,
            params: call.arguments.trim() === "" ? undefined : JSON.parse(call.arguments),
            result: resultValue(results.get(call.id)),
            rawCall: rawCallOf(wrapper, call).toJSON(),
            // The calls of one message are one group for templates that write calls in sections.
            ...(i === 0 ? { startsNewChunk: true } : {}),
          };
          model.response.push(functionCall);
        });
        open = turn.toolCalls && turn.toolCalls.length > 0 ? model : undefined;
        break;
      }
      case "tool":
        // Rendered with the call it answers.
        break;
      default:
        turn satisfies never;
    }
  }
  // The model answers in a turn of its own, unless it continues the turn its results came back to.
  if (!open) history.push({ type: "model", response: [] });
  return history;
}

/**
 * The call as the model wrote it: the template's syntax around the arguments' own JSON text,
 * not a re-serialisation of them (whose spacing could differ), so the next turn's prompt
 * repeats the tokens the model generated and finds them in the KV cache.
 */
function rawCallOf(wrapper: ChatWrapper, call: ToolCall): LlamaText {
  const syntax = wrapper.settings.functions.call;
  const empty = syntax.emptyCallParamsPlaceholder;
  const args = call.arguments.trim() !== "" ? call.arguments : empty === undefined || empty === "" ? "" : jsonDumps(empty);
  return LlamaText([
    syntax.prefix,
    call.name,
    syntax.paramsPrefix,
    args,
    LlamaText(syntax.suffix).mapValues((value) => (typeof value === "string" ? value.replaceAll("{{functionName}}", call.name) : value)),
  ]);
}

/** A tool's result as the template shows it: JSON when it is JSON, else the text itself. */
function resultValue(content: string | undefined): unknown {
  if (content === undefined) return undefined;
  try {
    return JSON.parse(content);
  } catch {
    return content;
  }
}

export function availableFunctionsOf(tools: readonly ToolFunction[]): ChatModelFunctions {
  return Object.fromEntries(
    tools.map((tool) => [tool.name, { ...(tool.description !== undefined ? { description: tool.description } : {}), params: tool.parameters as never }]),
  );
}

export function toolCallSyntaxOf(wrapper: ChatWrapper): ToolCallSyntax {
  const { call, result, parallelism } = wrapper.settings.functions;
  const text = (value: string | LlamaText | undefined) => (value === undefined ? "" : LlamaText(value).toString());
  const empty = call.emptyCallParamsPlaceholder;
  const resultPrefix = text(result.prefix);
  return {
    prefix: text(call.prefix),
    alternatePrefixes: (call.prefixAlternateMatches ?? []).map((prefix) => text(prefix)),
    paramsPrefix: text(call.paramsPrefix),
    suffix: text(call.suffix),
    emptyParams: empty === undefined || empty === "" ? "" : jsonDumps(empty),
    ...(parallelism
      ? {
          parallel: {
            sectionPrefix: text(parallelism.call.sectionPrefix),
            betweenCalls: text(parallelism.call.betweenCalls),
            sectionSuffix: text(parallelism.call.sectionSuffix),
          },
        }
      : {}),
    // Up to its first placeholder (a function name the model has not written yet).
    resultPrefix: resultPrefix.split("{{")[0]!.trimEnd(),
  };
}
