// What tools change in a chat request's generation: a call the request requires is
// constrained by a grammar the worker builds from the template's call syntax and the
// functions' parameter schemas, and generation stops where the model would start writing a
// call's result (that is the client's to run and send back in a `tool` message).
import type { SamplingParams } from "../contract/sampling.js";
import type { ChatTools, ToolCallSyntax } from "../contract/tools.js";

type JobSampling = Omit<SamplingParams, "maxTokens">;

/**
 * The sampling for a chat with tools, and the call syntax the answer is read with; no
 * syntax when the model may not call (no tools, or `tool_choice: "none"`).
 */
export function toolSampling(
  sampling: JobSampling,
  tools: ChatTools | undefined,
  syntax: ToolCallSyntax | undefined,
): { sampling: JobSampling; syntax?: ToolCallSyntax } {
  if (!tools || !syntax || tools.choice === "none") return { sampling };
  const stop = syntax.resultPrefix.length > 0 ? [...sampling.stop, syntax.resultPrefix] : sampling.stop;
  const { choice } = tools;
  if (choice === "auto") return { sampling: { ...sampling, stop }, syntax };
  const functions = choice === "required" ? tools.functions : tools.functions.filter((tool) => tool.name === choice.name);
  return { sampling: { ...sampling, stop, toolCalls: { syntax, functions, parallel: tools.parallel } }, syntax };
}
