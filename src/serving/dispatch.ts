// Runs a prepared request on a worker: placed through the scheduler, its life reported on
// the PlacementTicket (started in a slot, finished, or lost with its worker), placed once
// more when its worker dies, or an engine elsewhere sends nothing in its first-byte timeout,
// before any of the answer reached the client.
import type { GenerationResult } from "../contract/generation.js";
import { FirstByteTimeoutError, ModelOutputError, WorkerDiedError } from "../engine/host/worker-errors.js";
import type { GlobalScheduler } from "../scheduler/global-scheduler.js";
import type { PlacementTicket } from "../scheduler/ticket.js";
import type { CopyAction } from "../scheduler/types.js";
import { placeOrRefuse, placeUnlessFull, queueFull } from "./admission.js";
import type { ChatHooks, ChatOutcome, CompletionJob } from "./completion-job.js";
import type { ServingError } from "./errors.js";
import type { Fleet } from "./fleet.js";
import type { ServingObserver } from "./observer.js";
import type { PlacementQueue } from "./placement-queue.js";
import type { PreparedPrompt } from "./prompt-input.js";
import type { CircuitBreakers } from "./circuit-breaker.js";
import { clientErrorOf } from "./worker-failure.js";
import type { SharedSessions } from "./session-store.js";

/** Placements again of one request after its worker died. */
const MAX_FAILOVERS = 1;

export interface DispatchDeps {
  fleet: Fleet;
  scheduler: GlobalScheduler;
  observer: ServingObserver;
  now: () => number;
  /** Where requests wait for a place when every worker is full. */
  queue: PlacementQueue;
  /** How long they may wait (scheduler.maxQueueWaitMs; 0 = refused at once). */
  maxQueueWaitMs: number;
  /** Told of each request's outcome on its worker: the worker's own failures open its circuit. */
  breakers?: CircuitBreakers;
  /** Sessions shared with other routers: asked before a session's request is placed, told where it went. */
  sessions?: SharedSessions;
}

export class Dispatcher {
  /** Requests placed again after their worker died before starting them. */
  failovers = 0;

  constructor(private readonly deps: DispatchDeps) {}

  /**
   * A worker that dies before any of the answer reached the client (queued, in prefill, or
   * generating a non-streamed answer) costs the client nothing: the request is placed again
   * on a live worker, streams included (they had sent headers at most). So does an engine
   * elsewhere that sent no byte of its answer in its first-byte timeout: it stays up (its
   * circuit breaker counts the failure) but the request is placed again elsewhere. A stream
   * that had sent a token is never retried: the client holds part of the answer.
   */
  async run(job: CompletionJob, prompt: PreparedPrompt, hooks: ChatHooks): Promise<ChatOutcome> {
    const avoid: string[] = [];
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.runOnce(job, avoid.length > 0 ? { ...prompt, request: { ...prompt.request, avoidWorkerIds: avoid } } : prompt, hooks);
      } catch (error) {
        // Once only: a request that itself brings its worker down (a native crash on some
        // input) takes at most two workers with it, never every one in turn.
        const canRetry = error instanceof NotStartedError && job.pinnedWorkerId === undefined && attempt < MAX_FAILOVERS && this.hasOtherWorker(prompt, error);
        if (!canRetry) throw error instanceof NotStartedError ? error.cause : error;
        if (error.stalled) avoid.push(error.workerId);
        this.failovers++;
        this.deps.observer.failover?.(error.workerId);
      }
    }
  }

  /** Whether a live worker other than the failed one serves the model (a dead one is out already; a stalled one is avoided). */
  private hasOtherWorker(prompt: PreparedPrompt, error: NotStartedError): boolean {
    if (!error.stalled) return true;
    return this.deps.scheduler.views().some((view) => view.alive && view.modelId === prompt.request.modelId && view.id !== error.workerId);
  }

  /**
   * A ticket for the request: at once, or after waiting its turn for a place. A request
   * pinned to one worker does not wait: it would hold up the line for places elsewhere.
   */
  private async place(job: CompletionJob, request: PreparedPrompt["request"]): Promise<PlacementTicket> {
    const { fleet, scheduler, queue, maxQueueWaitMs, sessions } = this.deps;
    if (job.pinnedWorkerId !== undefined) return placeOrRefuse(scheduler, fleet, request, job.pinnedWorkerId);
    const sessionId = sessions ? request.sessionId : undefined;
    if (sessions && sessionId !== undefined) {
      // Another router may have served this session since: where it went last decides.
      const url = await sessions.lookup(sessionId);
      const workerId = url === undefined ? undefined : fleet.workerAt(request.modelId, url);
      if (workerId !== undefined) scheduler.rememberSession(sessionId, workerId);
    }
    const ticket = await queue.place(request.modelId, () => placeUnlessFull(scheduler, fleet, request, undefined), {
      maxWaitMs: maxQueueWaitMs,
      ...(job.signal ? { signal: job.signal } : {}),
      refuse: () => queueFull(fleet, request.modelId, undefined, maxQueueWaitMs),
    });
    const url = fleet.get(ticket.workerId)?.engine.url;
    if (sessions && sessionId !== undefined && url !== undefined) sessions.record(sessionId, url);
    return ticket;
  }

  private async runOnce(job: CompletionJob, { tokens, maxTokens, request }: PreparedPrompt, hooks: ChatHooks): Promise<ChatOutcome> {
    const { fleet, scheduler, observer, now } = this.deps;
    const ticket = await this.place(job, request);
    observer.placed?.(ticket.placement, scheduler.policy.name);
    const worker = fleet.get(ticket.workerId)!;
    const placedAt = now();
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
          ...(hooks.pieces ? { pieces: hooks.pieces } : {}),
          onStarted: (event) => {
            cachedTokens = event.cachedTokens;
            // The worker's report: this slot now holds the prompt. The tree follows it exactly,
            // and the scheduler learns what the worker's state store kept and dropped meanwhile.
            if (event.states) scheduler.applyCacheEvent({ type: "store-changed", workerId: ticket.workerId, changes: event.states });
            ticket.started(event.slot);
            hooks.onStarted?.({ workerId: ticket.workerId, slot: event.slot, promptTokens: tokens.length, cachedTokens, placement: ticket.placement });
          },
          onText: (text, logprobs) => {
            if (ttftMs === undefined) {
              ttftMs = now() - placedAt;
              // Its prefill is over: the worker no longer has it ahead of new requests.
              ticket.firstToken();
            }
            if (job.streamed) delivered = true;
            hooks.onText?.(text, logprobs);
          },
        },
      );
      if (result.restoreFailed !== undefined) observer.restoreFailed?.(ticket.workerId, job.requestId, result.restoreFailed);
      if (result.finishReason !== "cancelled") this.deps.breakers?.succeeded(ticket.workerId);
      return { ...result, workerId: ticket.workerId, placement: ticket.placement };
    } catch (error) {
      const failed = clientErrorOf(error, ticket.workerId, job);
      if (error instanceof FirstByteTimeoutError) {
        // Up (it answers its health checks) but silent on this request: its fault, not a death.
        this.deps.breakers?.failed(ticket.workerId, failed.message);
        throw new NotStartedError(failed, ticket.workerId, true);
      }
      if (!(error instanceof WorkerDiedError)) {
        // The worker's fault (a 5xx: not the client's, and not a death, which the fleet handles),
        // unless its engine refused what the model generated: that says nothing of the worker.
        if (failed.status >= 500 && !(error instanceof ModelOutputError)) this.deps.breakers?.failed(ticket.workerId, failed.message);
        throw failed;
      }
      // Demote at once, not at the next report: the fleet restarts it and says when it is back.
      ticket.workerDied();
      throw delivered ? failed : new NotStartedError(failed, ticket.workerId);
    } finally {
      ticket.finished({
        ok: result !== undefined && result.finishReason !== "cancelled",
        promptTokens: tokens.length,
        cachedTokens,
        completionTokens: result?.completionTokens ?? 0,
        ttftMs: ttftMs ?? now() - placedAt,
        // A request that failed in its prefill holds what it had cached at most.
        heldPromptTokens: result?.heldPromptTokens ?? cachedTokens,
        ...(result?.heldAnswerTokens ? { heldAnswerTokens: result.heldAnswerTokens } : {}),
        ...(result ? { prefillMs: result.prefillMs, decodeMsPerToken: decodeMsPerToken(result) } : {}),
      });
      // Its place is free: a request waiting for one takes it.
      this.deps.queue.wake(request.modelId);
    }
  }

  /** Executes a copy action; a failed copy only costs the recompute it meant to save. */
  private async copyPrefix(copy: CopyAction): Promise<void> {
    const from = this.deps.fleet.get(copy.fromWorkerId);
    const to = this.deps.fleet.get(copy.toWorkerId);
    if (!from || !to) return;
    try {
      const exported = await from.engine.exportPrefix(copy.tokens);
      if (exported) await to.engine.importState(exported.file);
      this.deps.observer.copied?.(copy, exported !== null);
    } catch (error) {
      this.deps.observer.copied?.(copy, false, (error as Error).message);
    }
  }
}

/** A request whose worker died, or stalled, before any of its answer reached the client: safe to place again. */
class NotStartedError extends Error {
  constructor(
    override readonly cause: ServingError,
    readonly workerId: string,
    /** The engine is up but sent nothing in its first-byte timeout: the next placement avoids it. */
    readonly stalled = false,
  ) {
    super(cause.message);
  }
}

/** Decode speed of a finished generation: the time after the first token over the tokens after it. */
function decodeMsPerToken(result: GenerationResult): number | undefined {
  if (result.completionTokens < 2) return undefined;
  return (result.totalMs - result.queueMs - result.prefillMs) / (result.completionTokens - 1);
}
