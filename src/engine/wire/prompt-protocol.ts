// Messages between the host and the prompt-preparation thread. Types only.
import type { ChatTurn } from "../../contract/chat.js";
import type { ToolCallConstraint, ToolCallSyntax, ToolFunction } from "../../contract/tools.js";

export interface PromptModel {
  id: string;
  path: string;
}

export interface ChatPromptTask {
  kind: "chat";
  modelId: string;
  messages: ChatTurn[];
  /** Functions the model may call: documented in the prompt the way its template does it. */
  tools?: ToolFunction[];
}

/**
 * A raw prompt (legacy completions): tokenized as one text, special-token text such as
 * `<|im_start|>` parsed as the control token (the client writes the whole prompt, as with
 * llama.cpp's server), BOS first exactly like a chat prompt.
 */
export interface TextPromptTask {
  kind: "text";
  modelId: string;
  text: string;
}

/** What a model's tokenizer knows that the host needs to check token-array prompts. */
export interface VocabTask {
  kind: "vocab";
  modelId: string;
}

export interface VocabInfo {
  /** Token ids run from 0 to size - 1. */
  size: number;
  /** The BOS token the worker evaluates first, or null when the model prepends none. */
  bos: number | null;
  /**
   * UTF-8 bytes of the vocabulary's longest token, as the GGUF spells it (never fewer than
   * the bytes it stands for). A text of N characters is at least N / this many tokens.
   */
  longestTokenBytes: number;
}

/**
 * The GBNF text of a required tool call (the grammar a node-llama-cpp worker builds itself),
 * for an engine that takes a grammar as text: llama-server.
 */
export interface ToolCallGrammarTask {
  kind: "tool-call-grammar";
  constraint: ToolCallConstraint;
}

export interface ToolCallGrammar {
  gbnf: string;
  /** Where the generation ends (the grammar's closing): a stop string, trimmed from the text. */
  stop: string;
}

/** Frees the tokenizers: a thread must never be terminated while llama.cpp objects live in it. */
export interface DisposePromptTask {
  kind: "dispose";
}

export type PromptTask = ChatPromptTask | TextPromptTask | VocabTask | ToolCallGrammarTask | DisposePromptTask;

export interface PreparedPrompt {
  /** Exactly what a worker evaluates (BOS included when the model wants one). */
  tokens: Int32Array;
  /** Which chat template rendered it (node-llama-cpp's wrapper name), for logs. */
  chatTemplate: string;
  /** How the template writes a function call: present when the task had tools. */
  toolCallSyntax?: ToolCallSyntax;
}

export interface TokenizedText {
  /** Exactly what a worker evaluates (BOS included when the model wants one). */
  tokens: Int32Array;
}
