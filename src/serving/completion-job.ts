// What a completion request asks for and what it gets back: the types shared by the serving
// modules and the HTTP routes (re-exported by completion-service.ts).
import type { ChatTurn } from "../contract/chat.js";
import type { GenerationResult, TextPieces, TokenLogprob } from "../contract/generation.js";
import type { SamplingParams } from "../contract/sampling.js";
import type { ChatTools, ToolCallSyntax } from "../contract/tools.js";
import type { Placement } from "../scheduler/types.js";

/** What to complete. */
export type PromptInput =
  /** Chat messages, rendered with the model's chat template. */
  | { kind: "chat"; messages: ChatTurn[]; tools?: ChatTools }
  /** A raw prompt (legacy completions), tokenized as one text. */
  | { kind: "text"; text: string }
  /** Token ids as sent (legacy completions); `param` names the field in errors, e.g. "prompt". */
  | { kind: "tokens"; tokens: number[]; param: string };

export interface CompletionJob {
  requestId: string;
  modelId: string;
  prompt: PromptInput;
  /** max_tokens from the request, if any; capped to what fits in the slot. */
  maxTokens?: number;
  sampling: Omit<SamplingParams, "maxTokens">;
  /** Operator override: run on this worker id (header x-radixgate-worker), bypassing the policy. */
  pinnedWorkerId?: string;
  /** x-session-id header or `user`: session pinning. */
  sessionId?: string;
  /**
   * The client receives the text as it is generated (SSE). A request whose worker dies is
   * placed again unless part of its answer already reached the client: a streamed one only
   * before its first token, a non-streamed one always (it has received nothing).
   */
  streamed?: boolean;
  signal?: AbortSignal;
}

export interface ChatStart {
  workerId: string;
  /** The worker's slot that holds the request. */
  slot: number;
  promptTokens: number;
  cachedTokens: number;
  placement: Placement;
  /** How the model writes a tool call: present when the request has tools the model may call. */
  toolCallSyntax?: ToolCallSyntax;
}

export interface ChatHooks {
  /** The worker has the request in a slot: headers can be written from here on. */
  onStarted?: (start: ChatStart) => void;
  /** `logprobs`: the entries of this text's tokens, when the request asked for them. */
  onText?: (text: string, logprobs?: TokenLogprob[]) => void;
  /** Set by the service, not by callers: which text pieces reach `onText` (callers without `onText` get only the first). */
  pieces?: TextPieces;
}

export interface ChatOutcome extends GenerationResult {
  workerId: string;
  placement: Placement;
  toolCallSyntax?: ToolCallSyntax;
}

export interface ServiceLimits {
  defaultMaxTokens: number;
  /** 0 = no deadline. */
  requestTimeoutMs: number;
  maxConcurrentRequests: number;
  /** How long a request may wait at the host for a place when every worker is full (0 = 429 at once). */
  maxQueueWaitMs: number;
}
