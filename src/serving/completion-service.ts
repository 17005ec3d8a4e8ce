// One completion (chat messages, a raw text prompt or token ids) from validated input to
// result. The facade the HTTP routes use; each step is a module of its own: admission.ts
// (back-pressure), deadline.ts, prompt-input.ts (tokens, context checks), dispatch.ts (placement,
// the worker's run, failover) and worker-failure.ts. Errors a client can act on are
// ServingErrors; the HTTP layer only formats them.
import type { PromptPreparer } from "../engine/host/prompt-preparer.js";
import type { GlobalScheduler } from "../scheduler/global-scheduler.js";
import { Admission } from "./admission.js";
import type { ChatHooks, ChatOutcome, CompletionJob, PromptInput, ServiceLimits } from "./completion-job.js";
import { withDeadline } from "./deadline.js";
import { Dispatcher } from "./dispatch.js";
import type { CircuitBreakers, CircuitState } from "./circuit-breaker.js";
import { ServingError } from "./errors.js";
import type { Fleet } from "./fleet.js";
import { NO_TOKENS, type RequestRecord, type ServingObserver } from "./observer.js";
import { PlacementQueue } from "./placement-queue.js";
import { type PreparedPrompt, preparePrompt } from "./prompt-input.js";
import { toolSampling } from "./tool-calls.js";
import type { SharedSessions } from "./session-store.js";

export type { ChatHooks, ChatOutcome, ChatStart, CompletionJob, PromptInput, ServiceLimits } from "./completion-job.js";

/** What the request's record takes from its outcome, as the outcome has it. */
const RECORDED_OUTCOME_FIELDS = [
  "workerId",
  "placement",
  "finishReason",
  "promptTokens",
  "cachedTokens",
  "restoredTokens",
  "evictedTokens",
  "spilledTokens",
  "completionTokens",
  "queueMs",
  "prefillMs",
] as const satisfies readonly (keyof RequestRecord & keyof ChatOutcome)[];

export interface ServiceDeps {
  fleet: Fleet;
  preparer: PromptPreparer;
  scheduler: GlobalScheduler;
  limits: ServiceLimits;
  observer?: ServingObserver;
  now?: () => number;
  breakers?: CircuitBreakers;
  /** Sessions shared with other routers (scheduler.sessionStore). */
  sessions?: SharedSessions;
}

export class CompletionService {
  private readonly deps: ServiceDeps;
  private readonly observer: ServingObserver;
  private readonly now: () => number;
  private readonly admission: Admission;
  private readonly dispatcher: Dispatcher;
  private readonly queue = new PlacementQueue();
  /**
   * Prepared prompts by the request's prompt: the `n` choices of one request share their
   * PromptInput, so the prompt is rendered and tokenized once for all of them.
   */
  private readonly prepared = new WeakMap<PromptInput, Promise<PreparedPrompt>>();

  constructor(deps: ServiceDeps) {
    this.deps = deps;
    this.observer = deps.observer ?? {};
    this.now = deps.now ?? (() => performance.now());
    this.admission = new Admission(deps.limits);
    this.dispatcher = new Dispatcher({
      fleet: deps.fleet,
      scheduler: deps.scheduler,
      observer: this.observer,
      now: this.now,
      queue: this.queue,
      maxQueueWaitMs: deps.limits.maxQueueWaitMs,
      ...(deps.breakers ? { breakers: deps.breakers } : {}),
      ...(deps.sessions ? { sessions: deps.sessions } : {}),
    });
  }

  /** A worker of the model came back or went down (its places are lent to the others): waiting requests may fit now. */
  placesChanged(modelId: string): void {
    this.queue.wake(modelId);
  }

  /** Requests waiting at the host for a place, per model. */
  waitingFor(modelId: string): number {
    return this.queue.waitingFor(modelId);
  }

  /** The worker's circuit breaker: closed, open (held out of placement after failing request after request), half-open. */
  circuit(workerId: string): CircuitState {
    return this.deps.breakers?.state(workerId) ?? "closed";
  }

  /** Why its circuit opened, while it is not closed. */
  circuitReason(workerId: string): string | undefined {
    return this.deps.breakers?.reason(workerId);
  }

  /** Requests placed again after their worker died before starting them. */
  get failovers(): number {
    return this.dispatcher.failovers;
  }

  complete(job: CompletionJob, hooks: ChatHooks = {}): Promise<ChatOutcome> {
    // Back-pressure first, before any work: a full server says so at once (429), it does not time out.
    return this.admission.hold(() => this.completeObserved(job, hooks));
  }

  /** Runs the request and reports it to the observer once it ended, however it ended. */
  private async completeObserved(job: CompletionJob, hooks: ChatHooks): Promise<ChatOutcome> {
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
      onText: (text, logprobs) => {
        const at = this.now();
        if (lastTextAt === undefined) record.ttftMs = at - startedAt;
        else this.observer.interTokenGap?.(at - lastTextAt, job.modelId);
        lastTextAt = at;
        hooks.onText?.(text, logprobs);
      },
      // A caller that reads no piece gets its answer whole: the worker need not send the rest.
      pieces: hooks.onText ? "all" : "first",
    };
    try {
      const outcome = await withDeadline(this.deps.limits.requestTimeoutMs, job, observed, (bounded, boundedHooks) => this.run(bounded, boundedHooks));
      // The gaps between the pieces the worker kept (an answer asked for whole), timed where they were made.
      for (const gapMs of outcome.textGapsMs ?? []) this.observer.interTokenGap?.(gapMs, job.modelId);
      Object.assign(record, Object.fromEntries(RECORDED_OUTCOME_FIELDS.map((field) => [field, outcome[field]])));
      record.outcome = outcome.finishReason === "cancelled" ? "cancelled" : "ok";
      return outcome;
    } catch (error) {
      record.outcome = error instanceof ServingError ? error.code : "internal_error";
      throw error;
    } finally {
      record.totalMs = this.now() - startedAt;
      this.observer.requestFinished?.(record);
    }
  }

  private prepare(job: CompletionJob): Promise<PreparedPrompt> {
    let prepared = this.prepared.get(job.prompt);
    if (!prepared) {
      prepared = preparePrompt(this.deps.fleet, this.deps.preparer, job, this.deps.limits.defaultMaxTokens);
      // A refused prompt is not remembered.
      prepared.catch(() => this.prepared.delete(job.prompt));
      this.prepared.set(job.prompt, prepared);
    }
    return prepared;
  }

  private async run(job: CompletionJob, hooks: ChatHooks): Promise<ChatOutcome> {
    const prompt = await this.prepare(job);
    const { sampling, syntax } = toolSampling(job.sampling, job.prompt.kind === "chat" ? job.prompt.tools : undefined, prompt.toolCallSyntax);
    if (!syntax) return this.dispatcher.run(job, prompt, hooks);
    const outcome = await this.dispatcher.run({ ...job, sampling }, prompt, {
      ...hooks,
      onStarted: (start) => hooks.onStarted?.({ ...start, toolCallSyntax: syntax }),
    });
    return { ...outcome, toolCallSyntax: syntax };
  }
}
