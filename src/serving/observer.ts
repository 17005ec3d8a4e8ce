// What the serving layer reports as requests run: the metrics and the request log listen.
// Every method has a no-op default, so a caller may implement only what it needs.
import type { FinishReason, GenerationResult } from "../contract/generation.js";
import type { CopyAction, Placement } from "../scheduler/types.js";

/** The token counts of a generation (see GenerationResult), zero until it ran. */
export type TokenCounts = Pick<GenerationResult, "promptTokens" | "cachedTokens" | "restoredTokens" | "evictedTokens" | "spilledTokens" | "completionTokens">;

export const NO_TOKENS: TokenCounts = { promptTokens: 0, cachedTokens: 0, restoredTokens: 0, evictedTokens: 0, spilledTokens: 0, completionTokens: 0 };

/** One finished request, successful or not: the request log line and the per-request metrics. */
export interface RequestRecord extends TokenCounts {
  requestId: string;
  modelId: string;
  workerId?: string;
  placement?: Placement;
  /** "ok", or the error code it ended with. */
  outcome: string;
  finishReason?: FinishReason;
  /** Placement to first text, ms (undefined when no text came). */
  ttftMs?: number;
  queueMs?: number;
  /** From the worker's slot to its first generated token, by the worker's clock: the prefill of the uncached part. */
  prefillMs?: number;
  totalMs: number;
}

export interface ServingObserver {
  placed?(placement: Placement, policy: string): void;
  /** Time between two text pieces of one request, ms (timed at the host, or by the worker for an answer returned whole). */
  interTokenGap?(ms: number, modelId: string): void;
  requestFinished?(record: RequestRecord): void;
  failover?(fromWorkerId: string): void;
  /** A hot-prefix copy ran; `error` says why it failed (a failed copy only costs the recompute). */
  copied?(copy: CopyAction, ok: boolean, error?: string): void;
  /** A worker could not load a stored KV state for a request, which then computed its prompt. */
  restoreFailed?(workerId: string, requestId: string, reason: string): void;
}

/** One observer that tells several. */
export function observeAll(...observers: ServingObserver[]): ServingObserver {
  return {
    placed: (placement, policy) =>
      observers.forEach((o) => {
        o.placed?.(placement, policy);
      }),
    interTokenGap: (ms, modelId) =>
      observers.forEach((o) => {
        o.interTokenGap?.(ms, modelId);
      }),
    requestFinished: (record) =>
      observers.forEach((o) => {
        o.requestFinished?.(record);
      }),
    failover: (workerId) =>
      observers.forEach((o) => {
        o.failover?.(workerId);
      }),
    copied: (copy, ok, error) =>
      observers.forEach((o) => {
        o.copied?.(copy, ok, error);
      }),
    restoreFailed: (workerId, requestId, reason) =>
      observers.forEach((o) => {
        o.restoreFailed?.(workerId, requestId, reason);
      }),
  };
}

/** One structured log line per finished request (and one per failed prefix copy or state load). */
export function requestLog(log: () => { info(object: object, message: string): void; warn(object: object, message: string): void }): ServingObserver {
  return {
    copied: (copy, ok, error) => {
      if (!ok) log().warn({ from: copy.fromWorkerId, to: copy.toWorkerId, tokens: copy.tokens.length, error }, "prefix copy failed; the target recomputes it");
    },
    restoreFailed: (workerId, requestId, reason) =>
      log().warn({ worker: workerId, requestId, error: reason }, "KV state load failed; the request computed its prompt instead"),
    requestFinished: (record) =>
      log().info(
        {
          requestId: record.requestId,
          model: record.modelId,
          worker: record.workerId,
          placement: record.placement && `${record.placement.reason};matched=${record.placement.matchedTokens}`,
          outcome: record.outcome,
          finishReason: record.finishReason,
          promptTokens: record.promptTokens,
          cachedTokens: record.cachedTokens,
          restoredTokens: record.restoredTokens,
          completionTokens: record.completionTokens,
          ttftMs: record.ttftMs === undefined ? undefined : Math.round(record.ttftMs),
          queueMs: record.queueMs === undefined ? undefined : Math.round(record.queueMs),
          prefillMs: record.prefillMs === undefined ? undefined : Math.round(record.prefillMs),
          totalMs: Math.round(record.totalMs),
        },
        "completion",
      ),
  };
}
