// node-llama-cpp's generic function-call syntax, which the ChatML test models get: the
// engine test checks the chat wrapper gives exactly this, the parser tests read with it.
import type { ToolCallSyntax } from "../../src/contract/tools.js";

export const GENERIC_TOOL_SYNTAX: ToolCallSyntax = {
  prefix: "||call: ",
  alternatePrefixes: ["||call:"],
  paramsPrefix: "(",
  suffix: ")",
  emptyParams: "",
  resultPrefix: "\n||result:",
};
