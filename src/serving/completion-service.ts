// One completion (chat messages, a raw text prompt or token ids) from validated input to
// result: render + tokenize once in the host, place on a worker with the configured policy,
// run it there. Errors a client can act on are ServingErrors; the HTTP layer only formats them.
import type { PromptPreparer } from "../engine/host/prompt-preparer.js";
import type { ChatTurn } from "../contract/chat.js";
import type { GenerationResult } from "../contract/generation.js";
import { RESPONSE_FORMAT_ERROR, type SamplingParams } from "../contract/sampling.js";
import { WorkerDiedError } from "../engine/host/runners.js";
import type { GlobalScheduler } from "../scheduler/global-scheduler.js";
import type { PlacementTicket } from "../scheduler/ticket.js";
import type { CopyAction, Placement, PlacementRequest } from "../scheduler/types.js";
import { ServingError } from "./errors.js";
import type { Fleet } from "./fleet.js";
import { NO_TOKENS, type RequestRecord, type ServingObserver } from "./observer.js";

/** What to complete. */
export type PromptInput =
  /** Chat messages, rendered with the model's chat template. */
  | { kind: "chat"; messages: ChatTurn[] }
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

export interface ChatJob extends Omit<CompletionJob, "prompt"> {
  messages: ChatTurn[];
}

export interface ChatStart {
  workerId: string;
  promptTokens: number;
  cachedTokens: number;
  placement: Placement;
}

export interface ChatHooks {
  /** The worker has the request in a slot: headers can be written from here on. */
  onStarted?: (start: ChatStart) => void;
  onText?: (text: string) => void;
}

export interface ChatOutcome extends GenerationResult {
  workerId: string;
  placement: Placement;
}

export interface ServiceLimits {
  defaultMaxTokens: number;
  /** 0 = no deadline. */
  requestTimeoutMs: number;
  maxConcurrentRequests: number;
}

export interface ServiceDeps {
  fleet: Fleet;
  preparer: PromptPreparer;
  scheduler: GlobalScheduler;
  limits: ServiceLimits;
  observer?: ServingObserver;
  now?: () => number;
}

export class CompletionService {
  /** Requests placed again after their worker died before starting them. */
  failovers = 0;

  private readonly fleet: Fleet;
  private readonly preparer: PromptPreparer;
  private readonly scheduler: GlobalScheduler;
  private readonly observer: ServingObserver;
  private readonly limits: ServiceLimits;
  private readonly now: () => number;
  /** Requests in this service right now, from validation to the last byte. */
  private held = 0;

  constructor(deps: ServiceDeps) {
    this.fleet = deps.fleet;
    this.preparer = deps.preparer;
    this.scheduler = deps.scheduler;
    this.observer = deps.observer ?? {};
    this.limits = deps.limits;
    this.now = deps.now ?? (() => performance.now());
  }

  /** A chat completion: complete() with the messages as the prompt. */
  chat({ messages, ...job }: ChatJob, hooks: ChatHooks = {}): Promise<ChatOutcome> {
    return this.complete({ ...job, prompt: { kind: "chat", messages } }, hooks);
  }

  async complete(job: CompletionJob, hooks: ChatHooks = {}): Promise<ChatOutcome> {
    // Back-pressure first, before any work: a full server says so at once (429), it does not time out.
    if (this.held >= this.limits.maxConcurrentRequests) {
      throw new ServingError(
        "queue_full",
        `The server is holding its maximum of ${this.limits.maxConcurrentRequests} requests (server.maxConcurrentRequests); retry after a moment.`,
        null,
        1,
      );
    }
    this.held++;
    try {
      return await this.completeHeld(job, hooks);
    } finally {
      this.held--;
    }
  }

  private async completeHeld(job: CompletionJob, hooks: ChatHooks): Promise<ChatOutcome> {
    const startedAt = this.now();
    const record: RequestRecord = { requestId: job.requestId, modelId: job.modelId, outcome: "ok", ...NO_TOKENS, totalMs: 0 };
    let lastTextAt: number | undefined;
    let started = false;
    const observed: ChatHooks = {
      // Once per request: one placed again after its worker died starts twice, and the
      // client's response (a stream's headers) opened at the first start.
      onStarted: (start) => {
        if (started) return;
        started = true;
        record.workerId = start.workerId;
        record.placement = start.placement;
        record.promptTokens = start.promptTokens;
        record.cachedTokens = start.cachedTokens;
        hooks.onStarted?.(start);
      },
      onText: (text) => {
        const at = this.now();
        if (lastTextAt === undefined) record.ttftMs = at - startedAt;
        else this.observer.interTokenGap?.(at - lastTextAt, job.modelId);
        lastTextAt = at;
        hooks.onText?.(text);
      },
    };
    try {
      const outcome = await this.completeWithDeadline(job, observed);
      const { workerId, placement, finishReason, promptTokens, cachedTokens, restoredTokens, evictedTokens, spilledTokens, completionTokens, queueMs } = outcome;
      Object.assign(record, { workerId, placement, finishReason, promptTokens, cachedTokens, restoredTokens, evictedTokens, spilledTokens, completionTokens, queueMs });
      record.outcome = finishReason === "cancelled" ? "cancelled" : "ok";
      return outcome;
    } catch (error) {
      record.outcome = error instanceof ServingError ? error.code : "internal_error";
      throw error;
    } finally {
      record.totalMs = this.now() - startedAt;
      this.observer.requestFinished?.(record);
    }
  }

  /**
   * The deadline is kept here, on the host, not left to the worker: when it passes, the
   * worker is told to drop the request (like a client disconnect) and the client gets its
   * 504 at once, even from a worker that is stuck and never answers. Whatever the worker
   * still sends for the request after that is dropped; its bookkeeping (the scheduler's
   * in-flight count, the slot report) settles when the worker does finish.
   */
  private async completeWithDeadline(job: CompletionJob, hooks: ChatHooks): Promise<ChatOutcome> {
    if (this.limits.requestTimeoutMs <= 0) return this.completeUntil(job, hooks);
    const deadline = AbortSignal.timeout(this.limits.requestTimeoutMs);
    const signal = job.signal ? AbortSignal.any([job.signal, deadline]) : deadline;
    const exceeded = () =>
      new ServingError(
        "deadline_exceeded",
        `The request ran past its deadline of ${this.limits.requestTimeoutMs} ms (generation.requestTimeoutMs) and was cancelled; ask for fewer tokens or raise the deadline.`,
      );
    const live = (): boolean => !deadline.aborted;
    const work = this.completeUntil(
      { ...job, signal },
      {
        onStarted: (start) => live() && hooks.onStarted?.(start),
        onText: (text) => live() && hooks.onText?.(text),
      },
    );
    let onDeadline!: () => void;
    const passed = new Promise<"deadline">((resolve) => (onDeadline = () => resolve("deadline")));
    deadline.addEventListener("abort", onDeadline, { once: true });
    try {
      const outcome = await Promise.race([work, passed]);
      if (outcome === "deadline") {
        // The worker's own answer (cancelled, or an error) arrives later and is not the client's.
        work.catch(() => undefined);
        throw exceeded();
      }
      if (deadline.aborted && outcome.finishReason === "cancelled") throw exceeded();
      return outcome;
    } finally {
      deadline.removeEventListener("abort", onDeadline);
    }
  }

  private async completeUntil(job: CompletionJob, hooks: ChatHooks): Promise<ChatOutcome> {
    const model = this.fleet.models.get(job.modelId);
    if (!model) {
      throw new ServingError(
        "model_not_found",
        `The model "${job.modelId}" is not served here. Served models: ${[...this.fleet.models.keys()].join(", ")}.`,
        "model",
      );
    }
    const field = job.prompt.kind === "chat" ? "messages" : "prompt";
    await this.refuseUnfittingText(job.modelId, job.prompt, model.contextSize, field);
    const tokens = await this.promptTokens(job.modelId, job.prompt);
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
    const maxTokens = Math.min(job.maxTokens ?? this.limits.defaultMaxTokens, model.contextSize - tokens.length);
    const request: PlacementRequest = {
      modelId: job.modelId,
      tokens,
      // A raw prompt is one piece of text: never a continuation for the `shape` policy.
      messageCount: job.prompt.kind === "chat" ? job.prompt.messages.length : 1,
      maxTokens,
      ...(job.sessionId !== undefined ? { sessionId: job.sessionId } : {}),
    };
    // A worker that dies before any of the answer reached the client (queued, in prefill, or
    // generating a non-streamed answer) costs the client nothing: the request is placed again
    // on a live worker, streams included (they had sent headers at most). A stream that had
    // sent a token is never retried: the client holds part of the answer.
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.runOnce(job, request, tokens, maxTokens, hooks);
      } catch (error) {
        // Once only: a request that itself brings its worker down (a native crash on some
        // input) takes at most two workers with it, never every one in turn.
        const canRetry = error instanceof NotStartedError && job.pinnedWorkerId === undefined && attempt < MAX_FAILOVERS;
        if (!canRetry) throw error instanceof NotStartedError ? error.cause : error;
        this.failovers++;
        this.observer.failover?.(error.workerId);
      }
    }
  }

  /**
   * Refuses, before any tokenizing, a text too long for any tokenization of it to fit in a
   * slot: a token spells at most the vocabulary's longest token, so N characters are at
   * least N / longestTokenBytes tokens. Tokenizing costs about a second per MB on one prompt
   * thread that every client shares; a prompt that cannot fit must not cost that.
   */
  private async refuseUnfittingText(modelId: string, prompt: PromptInput, contextSize: number, field: string): Promise<void> {
    const characters = prompt.kind === "chat" ? prompt.messages.reduce((sum, message) => sum + message.content.length, 0) : prompt.kind === "text" ? prompt.text.length : 0;
    if (characters === 0) return;
    const { longestTokenBytes } = await this.preparer.vocab(modelId);
    const leastTokens = Math.floor(characters / longestTokenBytes);
    if (leastTokens < contextSize) return;
    throw new ServingError(
      "context_length_exceeded",
      `The prompt is ${characters} characters, which is at least ${leastTokens} tokens of model "${modelId}" (its longest token is ${longestTokenBytes} bytes), ` +
        `but a slot holds ${contextSize} tokens (prompt plus completion). Shorten the ${field} or raise contextSize in config.yml.`,
      field,
    );
  }

  /**
   * The exact tokens a worker evaluates, BOS included when the model wants one: chat
   * messages and text are tokenized in a prompt thread; token ids are checked against the
   * model's vocabulary and get the same BOS a text prompt gets.
   */
  private async promptTokens(modelId: string, prompt: PromptInput): Promise<number[]> {
    switch (prompt.kind) {
      case "chat":
        return (await this.preparer.chat({ modelId, messages: prompt.messages })).tokens;
      case "text":
        return (await this.preparer.text({ modelId, text: prompt.text })).tokens;
      case "tokens": {
        const vocab = await this.preparer.vocab(modelId);
        prompt.tokens.forEach((id, i) => {
          if (!Number.isInteger(id) || id < 0 || id >= vocab.size) {
            throw new ServingError(
              "invalid_request",
              `\`${prompt.param}[${i}]\` is ${JSON.stringify(id)}, which is not a token id of model "${modelId}": ids are integers from 0 to ${vocab.size - 1}.`,
              `${prompt.param}[${i}]`,
            );
          }
        });
        return vocab.bos !== null && prompt.tokens[0] !== vocab.bos ? [vocab.bos, ...prompt.tokens] : [...prompt.tokens];
      }
      default:
        return prompt satisfies never;
    }
  }

  private async runOnce(job: CompletionJob, request: PlacementRequest, tokens: number[], maxTokens: number, hooks: ChatHooks): Promise<ChatOutcome> {
    const ticket = this.place(request, job.pinnedWorkerId);
    this.observer.placed?.(ticket.placement, this.scheduler.policy.name);
    const worker = this.fleet.get(ticket.workerId)!;
    const placedAt = this.now();
    // Hot-prefix replication: the policy judged copying the prefix's KV cheaper than
    // recomputing it on the new worker, so the copy runs first and the request then finds it.
    for (const copy of ticket.placement.copies ?? []) await this.copyPrefix(copy);
    let ttftMs: number | undefined;
    let delivered = false;
    let cachedTokens = 0;
    let result: GenerationResult | undefined;
    try {
      result = await worker.engine.generate(
        job.requestId,
        tokens,
        { ...job.sampling, maxTokens },
        {
          signal: job.signal,
          onStarted: (event) => {
            cachedTokens = event.cachedTokens;
            // The worker's report: this slot now holds the prompt. The tree follows it exactly.
            ticket.started(event.slot);
            hooks.onStarted?.({ workerId: ticket.workerId, promptTokens: tokens.length, cachedTokens, placement: ticket.placement });
          },
          onText: (text) => {
            ttftMs ??= this.now() - placedAt;
            if (job.streamed) delivered = true;
            hooks.onText?.(text);
          },
        },
      );
      if (result.restoreFailed !== undefined) this.observer.restoreFailed?.(ticket.workerId, job.requestId, result.restoreFailed);
      return { ...result, workerId: ticket.workerId, placement: ticket.placement };
    } catch (error) {
      if (error instanceof WorkerDiedError) {
        // Demote at once, not at the next report: the fleet restarts it and says when it is back.
        ticket.workerDied();
        const failed = new ServingError(
          "worker_failed",
          `Worker ${ticket.workerId} stopped while generating this request (request ${job.requestId}: ${error.message}); it is being restarted. Retry the request.`,
        );
        throw delivered ? failed : new NotStartedError(failed, ticket.workerId);
      }
      const message = (error as Error).message ?? "";
      if (message.startsWith(RESPONSE_FORMAT_ERROR)) {
        // The worker could not build the grammar (node-llama-cpp's reason follows the marker).
        const param = job.sampling.responseFormat?.type === "json_schema" ? "response_format.json_schema.schema" : "response_format";
        throw new ServingError("invalid_request", `\`${param}\` cannot be turned into a grammar: ${message.slice(RESPONSE_FORMAT_ERROR.length)}`, param);
      }
      throw new ServingError("worker_failed", `Worker ${ticket.workerId} failed while generating (request ${job.requestId}): ${(error as Error).message}`);
    } finally {
      ticket.finished({
        ok: result !== undefined && result.finishReason !== "cancelled",
        promptTokens: tokens.length,
        cachedTokens,
        completionTokens: result?.completionTokens ?? 0,
        ttftMs: ttftMs ?? this.now() - placedAt,
        // A request that failed in its prefill holds what it had cached at most.
        heldPromptTokens: result?.heldPromptTokens ?? cachedTokens,
        ...(result ? { prefillMs: result.prefillMs, decodeMsPerToken: decodeMsPerToken(result) } : {}),
      });
    }
  }

  /** Executes a copy action; a failed copy only costs the recompute it meant to save. */
  private async copyPrefix(copy: CopyAction): Promise<void> {
    const from = this.fleet.get(copy.fromWorkerId);
    const to = this.fleet.get(copy.toWorkerId);
    if (!from || !to) return;
    try {
      const exported = await from.engine.exportPrefix(copy.tokens);
      if (exported) await to.engine.importState(exported.file);
      this.observer.copied?.(copy, exported !== null);
    } catch (error) {
      this.observer.copied?.(copy, false, (error as Error).message);
    }
  }

  private place(request: PlacementRequest, pinnedWorkerId: string | undefined): PlacementTicket {
    if (pinnedWorkerId !== undefined) {
      const worker = this.fleet.get(pinnedWorkerId);
      if (!worker || worker.modelId !== request.modelId) {
        throw new ServingError(
          "worker_not_found",
          `x-radixgate-worker names "${pinnedWorkerId}", which is not a worker of model "${request.modelId}". Its workers: ${this.fleet.workerIds(request.modelId).join(", ")}.`,
          "x-radixgate-worker",
        );
      }
    }
    const ticket = this.scheduler.place(request, pinnedWorkerId);
    if (!ticket && this.scheduler.allQueuesFull(request.modelId, pinnedWorkerId)) {
      const who = pinnedWorkerId !== undefined ? `Worker ${pinnedWorkerId} (named by x-radixgate-worker)` : `Every worker of model "${request.modelId}"`;
      // While a worker restarts, capacity comes back when it does: say when (a client retrying
      // after 1 s would meet the same full queues again).
      const backInS = pinnedWorkerId === undefined ? Math.ceil(this.fleet.expectedBackInMs(request.modelId) / 1000) : 0;
      const retryAfter = Math.min(MAX_RETRY_AFTER_S, Math.max(1, backInS));
      const when = backInS > 0 ? `a worker of the model is restarting, expected back in about ${backInS} s; retry then` : "retry after a moment";
      throw new ServingError("queue_full", `${who} has a full queue (scheduler.maxQueuePerWorker); ${when}.`, null, retryAfter);
    }
    if (!ticket) {
      const reason = pinnedWorkerId !== undefined ? `Worker ${pinnedWorkerId} is down; retry without x-radixgate-worker.` : `No live worker serves model "${request.modelId}" right now; retry shortly.`;
      throw new ServingError("no_live_worker", reason, null, 1);
    }
    return ticket;
  }
}

/** The longest Retry-After the server gives (a worker whose restart takes longer is waited for again). */
const MAX_RETRY_AFTER_S = 30;

/** Placements again of one request after its worker died. */
const MAX_FAILOVERS = 1;

/** A request whose worker died before any of its answer reached the client: safe to place again. */
class NotStartedError extends Error {
  constructor(
    override readonly cause: ServingError,
    readonly workerId: string,
  ) {
    super(cause.message);
  }
}

/** Decode speed of a finished generation: the time after the first token over the tokens after it. */
function decodeMsPerToken(result: GenerationResult): number | undefined {
  if (result.completionTokens < 2) return undefined;
  return (result.totalMs - result.queueMs - result.prefillMs) / (result.completionTokens - 1);
}

