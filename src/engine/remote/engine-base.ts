// What every engine this host drives over HTTP keeps the same way (a llama-server, ours or a
// remote one; another Radixgate host; an OpenAI-compatible server): the run it is on (a
// restart makes a new one), what it loaded, its generations in flight and how they finished,
// and the answers it gives to what it cannot do (no state files, no prefix copies).
import type { TokenIds } from "../../common/tokens.js";
import type { FinishReason, GenerationResult } from "../../contract/generation.js";
import { LocalScheduler } from "../../scheduler/local-scheduler.js";
import type { EngineEndpoint } from "./endpoint.js";
import type { ExportResult, ImportResult, LoadResult, SlotReport, WorkerInit, WorkerStats } from "../wire/protocol.js";
import { EngineRefusalError, FirstByteTimeoutError, ModelOutputError, ResponseFormatError, WorkerDiedError, WorkerTaskError } from "../host/worker-errors.js";
import { cancelledInQueue } from "../wire/generation-results.js";

/** One run of the engine: where its requests go, and when it was lost. */
export interface EngineLife {
  server: EngineEndpoint;
  /** Resolves with why it was lost; never after close() (watchLoss sets it). */
  died: Promise<string>;
  dead: boolean;
  /** Why it was lost, once it was. */
  lostReason?: string;
  /** The connections of its running generations: closed when it is lost (a silent network never closes them). */
  running: Set<AbortController>;
}

/** A run of an engine whose slots this host schedules itself (llama-server, OpenAI servers). */
export interface SlottedLife extends EngineLife {
  slots: LocalScheduler;
  /** What each slot holds as far as this host sent it. */
  held: number[][];
}

export abstract class HttpEngineBase<Life extends EngineLife> {
  readonly finished: Record<FinishReason, number> = { stop: 0, length: 0, cancelled: 0 };
  protected life: Life | undefined;
  protected loadResult: LoadResult | undefined;
  protected closing = false;
  private inFlightCount = 0;
  private readonly idleWaiters: (() => void)[] = [];
  private generations = 0;
  /** Generations waiting for a slot now, so a loss can fail them. */
  private readonly waitingIds = new Set<string>();

  constructor(
    readonly init: WorkerInit,
    /** What it is, for messages: "llama-server engine", "a Radixgate host". */
    private readonly label: string,
    /**
     * A server elsewhere: where, the key it wants (none for a server this host starts), and how
     * long a generation may wait for the first byte of its answer (none: as long as it takes).
     */
    private readonly remote: { url?: string; apiKey?: string; firstByteTimeoutMs?: number } = {},
  ) {}

  get id(): string {
    return this.init.workerId;
  }

  /** A remote server's base URL; undefined for one this host starts. */
  get url(): string | undefined {
    return this.remote.url;
  }

  /** What every request to it carries: its key, when it wants one. */
  protected get headers(): Record<string, string> {
    return bearer(this.remote.apiKey);
  }

  get info(): LoadResult | undefined {
    return this.loadResult;
  }

  /** Generations sent to it that have not ended. */
  get inFlight(): number {
    return this.inFlightCount;
  }

  /** The current run's loss; never resolves before a start. */
  get died(): Promise<string> {
    return this.life?.died ?? new Promise(() => undefined);
  }

  /** A generation begins; `ended` when it is over, however it ended. */
  protected began(): void {
    this.inFlightCount++;
  }

  protected ended(): void {
    this.inFlightCount--;
    if (this.inFlightCount === 0) for (const resolve of this.idleWaiters.splice(0)) resolve();
  }

  whenIdle(): Promise<void> {
    if (this.inFlightCount === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  protected count(result: GenerationResult): GenerationResult {
    this.finished[result.finishReason]++;
    return result;
  }

  /**
   * The connection of one generation on `life` (openConnection), which `answered()` must be
   * told of once the first byte of the answer is in (an event, a refusal): with a first-byte
   * timeout, a generation that has none by then is closed with a FirstByteTimeoutError. An
   * engine that answers its health checks but stalls one request would otherwise hold it
   * until the request's own deadline, past the point where another engine could still take it.
   */
  protected openGeneration(life: EngineLife, signal: AbortSignal | undefined): { abort: AbortController; release(): void; answered(): void } {
    const connection = openConnection(life.running, signal);
    const limitMs = this.remote.firstByteTimeoutMs;
    if (limitMs === undefined) return { ...connection, answered: () => undefined };
    const timer = setTimeout(() => {
      connection.abort.abort(
        new FirstByteTimeoutError(
          `${this.id}: ${life.server.baseURL} sent no byte of its answer in ${limitMs} ms (firstByteTimeoutMs); the request was dropped there`,
        ),
      );
    }, limitMs);
    return {
      abort: connection.abort,
      answered: () => clearTimeout(timer),
      release: () => {
        clearTimeout(timer);
        connection.release();
      },
    };
  }

  /** Prefix copies to or from it are not made: the policy's copy then costs only its try. */
  async exportPrefix(_tokens: TokenIds): Promise<ExportResult | null> {
    return null;
  }

  async importState(_file: string): Promise<ImportResult> {
    throw new WorkerTaskError(`worker ${this.id} (${this.label}) does not take in state files`);
  }

  /**
   * A new run on `server` with `slots` slots under the local scheduler (priority groups, the
   * slot sharing the longest prefix, else LRU). When the server is lost the run is dead, its
   * running connections are closed with a WorkerDiedError and the generations waiting for a
   * slot fail with it (they are placed again); `died` resolves with why, never after close().
   */
  protected newSlottedLife(server: EngineEndpoint, slots: number): SlottedLife {
    const held: number[][] = Array.from({ length: slots }, () => []);
    const { priorityGroups, quotaPerGroup } = this.init.local;
    const life: SlottedLife = {
      server,
      held,
      slots: new LocalScheduler({ slots, priorityGroups, quotaPerGroup, now: () => performance.now() }, { tokensOfSlot: (slot) => held[slot] ?? [] }),
      dead: false,
      running: new Set(),
      died: Promise.resolve(""),
    };
    this.watchLoss(life, server.exited, () => {
      for (const waiting of this.waitingIds) life.slots.cancel(waiting);
    });
    return life;
  }

  /**
   * `life` is lost when `lost` resolves: it is dead from then on, its running connections are
   * closed with a WorkerDiedError, `alsoFail` fails what else waits on it, and `died` resolves
   * with why (never once the engine is closing: a close is not a death).
   */
  protected watchLoss(life: EngineLife, lost: Promise<string>, alsoFail: () => void = () => undefined): void {
    life.died = lost.then((reason) => {
      life.dead = true;
      life.lostReason = reason;
      for (const connection of life.running) connection.abort(new WorkerDiedError(`${this.id}: ${reason}`));
      alsoFail();
      return this.closing ? new Promise<string>(() => undefined) : reason;
    });
  }

  /**
   * What a generation whose connection failed throws: the engine's own typed errors as they
   * are; a WorkerDiedError when the run was lost under it, a FirstByteTimeoutError when its
   * first byte did not come in time, a WorkerDiedError when the server turns out gone
   * (`confirmLost`: a dropped connection is a death only then); else a WorkerTaskError saying
   * `what` failed. undefined when the client cancelled it (the caller answers "cancelled").
   */
  protected async connectionFailure(error: unknown, life: EngineLife, abort: AbortController, what: string): Promise<Error | undefined> {
    if (error instanceof WorkerTaskError || error instanceof EngineRefusalError || error instanceof ResponseFormatError || error instanceof ModelOutputError)
      return error;
    if (abort.signal.reason instanceof WorkerDiedError || abort.signal.reason instanceof FirstByteTimeoutError) return abort.signal.reason;
    if (abort.signal.aborted) return undefined;
    if ((await life.server.confirmLost()) || life.dead) return new WorkerDiedError(`${this.id}: ${life.lostReason ?? "its server stopped answering"}`);
    return new WorkerTaskError(`${what}: ${(error as Error).message}`);
  }

  /**
   * Runs one generation in a slot of `life` once its local scheduler grants one: a client that
   * leaves while it waits gets a cancelled result, a loss while it waits a WorkerDiedError.
   */
  protected async inSlot(
    life: SlottedLife,
    tokens: readonly number[],
    signal: AbortSignal | undefined,
    run: (slot: number, queuedAt: number) => Promise<GenerationResult>,
  ): Promise<GenerationResult> {
    const generationId = `${this.id}-g${++this.generations}`;
    const queuedAt = performance.now();
    this.began();
    const cancelQueued = () => life.slots.cancel(generationId);
    signal?.addEventListener("abort", cancelQueued, { once: true });
    try {
      this.waitingIds.add(generationId);
      const grant = signal?.aborted ? undefined : await life.slots.acquire(generationId, tokens);
      this.waitingIds.delete(generationId);
      if (life.dead) {
        if (grant) life.slots.release(grant.slot);
        throw new WorkerDiedError(`worker ${this.id} died while the request waited for a slot`);
      }
      if (!grant) return this.count(cancelledInQueue(tokens.length, performance.now() - queuedAt));
      return await run(grant.slot, queuedAt);
    } finally {
      this.waitingIds.delete(generationId);
      signal?.removeEventListener("abort", cancelQueued);
      this.ended();
    }
  }

  /** Fault injection: its process is killed, or a remote one is dropped as if it had stopped answering. */
  async crash(): Promise<void> {
    this.life?.server.kill();
  }
}

/**
 * The connection of one generation on a run: closed (aborted) when the client cancels or the
 * run is lost; `release()` once the generation is over, however it ended.
 */
export function openConnection(running: Set<AbortController>, signal: AbortSignal | undefined): { abort: AbortController; release(): void } {
  const abort = new AbortController();
  running.add(abort);
  const cancel = () => abort.abort();
  if (signal?.aborted) cancel();
  signal?.addEventListener("abort", cancel, { once: true });
  return {
    abort,
    release() {
      running.delete(abort);
      signal?.removeEventListener("abort", cancel);
    },
  };
}

/** `Authorization` for a server that wants a key; nothing otherwise. */
export function bearer(apiKey: string | undefined): Record<string, string> {
  return apiKey ? { authorization: `Bearer ${apiKey}` } : {};
}

/**
 * The stats of an engine whose slots this host schedules itself (what each was last given,
 * busy or idle since when, the requests waiting per group), with the counters it has.
 */
export function statsOfSlots(
  init: WorkerInit,
  held: readonly (readonly number[])[],
  slots: LocalScheduler,
  counters: Pick<WorkerStats, "steps" | "decodeTokens" | "prefillTokens">,
): WorkerStats {
  const now = performance.now();
  const reports: SlotReport[] = held.map((tokens, slot) => ({
    slot,
    tokens: tokens.length,
    preview: "",
    busy: slots.isBusy(slot),
    idleMs: Number.isFinite(slots.lastUsedMs(slot)) ? now - slots.lastUsedMs(slot) : null,
  }));
  return { ...counters, storedStates: 0, storedBytes: 0, local: { ...init.local }, slots: reports, waitingByGroup: slots.waitingByGroup() };
}
