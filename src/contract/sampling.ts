// How a generation samples its tokens: what the HTTP side asks for and the engine carries
// out. Types and constants only, shared by http/, serving/ and engine/.
import type { ToolCallConstraint } from "./tools.js";

export interface SamplingParams {
  maxTokens: number;
  /** 0 = greedy. */
  temperature: number;
  topP?: number;
  seed?: number;
  stop: string[];
  /**
   * OpenAI's penalties (-2..2) on the logits of tokens already generated in this completion:
   * `presence` once per token seen, `frequency` times its count. Absent or 0: no penalty at all.
   */
  presencePenalty?: number;
  frequencyPenalty?: number;
  /** Constrains the output with a grammar the worker builds (and caches); absent: free text. */
  responseFormat?: ResponseFormat;
  /**
   * Report each generated token's log probability with this many most likely candidates
   * (0 to 20); absent: no logprobs at all (they cost a pass over the candidates per token).
   */
  logprobs?: number;
  /** A tool call the request requires: its grammar replaces any responseFormat's. */
  toolCalls?: ToolCallConstraint;
}

/** `json_object`: any JSON object. `json_schema`: JSON matching the schema (node-llama-cpp's subset). */
export type ResponseFormat = { type: "json_object" } | { type: "json_schema"; schema: Record<string, unknown> };
