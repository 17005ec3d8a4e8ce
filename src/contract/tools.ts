// Tool calling as the HTTP side asks for it, the prompt thread renders it and the worker
// constrains it. Types only, shared by http/, serving/ and engine/.

/** A function the model may call: OpenAI's `tools[i].function`, parameters already checked. */
export interface ToolFunction {
  name: string;
  description?: string;
  /** A JSON schema in the subset the grammar converter enforces. */
  parameters: Record<string, unknown>;
}

/** OpenAI's `tool_choice`; a named function is `{ name }`. */
export type ToolChoice = "auto" | "none" | "required" | { name: string };

/** The tools of one chat request. */
export interface ChatTools {
  functions: ToolFunction[];
  choice: ToolChoice;
  /** More than one call in one answer (OpenAI's `parallel_tool_calls`, default true). */
  parallel: boolean;
}

/** A call the assistant made: `arguments` is the JSON text of the parameters, as OpenAI sends it. */
export interface ToolCall {
  id: string;
  name: string;
  arguments: string;
}

/**
 * How the model's chat template writes a function call, as plain text: `prefix` name
 * `paramsPrefix` JSON `suffix`, and for templates that group calls, the text around and
 * between them. Taken from the chat template by the prompt thread; the grammar and the
 * parser of the model's output both follow it, so what the model writes is what the next
 * turn's prompt renders.
 */
export interface ToolCallSyntax {
  prefix: string;
  /** Other spellings of the prefix the parser accepts (e.g. without its trailing space). */
  alternatePrefixes: string[];
  paramsPrefix: string;
  /** May hold `{{functionName}}`, replaced by the called function's name. */
  suffix: string;
  /** What a call with no parameters writes between paramsPrefix and suffix. */
  emptyParams: string;
  /** Present when the template writes several calls as one section. */
  parallel?: { sectionPrefix: string; betweenCalls: string; sectionSuffix: string };
  /**
   * Where the template puts a call's result: generation stops there (the result is the
   * client's to give, in a `tool` message).
   */
  resultPrefix: string;
}

/** A call the request requires (`required` or a named choice): the worker builds its grammar. */
export interface ToolCallConstraint {
  syntax: ToolCallSyntax;
  /** The functions it may call: one for a named choice. */
  functions: ToolFunction[];
  parallel: boolean;
}
