// Host side of one worker: its runner (a piscina thread, or a child process per GPU) that
// holds the model, and the generations streaming back from it. A worker that dies can be
// restarted: a fresh runner loads the model again.
import type {
  ClearedSlots,
  ExportResult,
  ImportResult,
  GenerationControl,
  GenerationEvent,
  LoadResult,
  ProfileResult,
  ProfileTask,
  WorkerInit,
  WorkerStats,
  WorkerTask,
  GenerateTask,
} from "../wire/protocol.js";
import type { FinishReason, GenerationResult } from "../../contract/generation.js";
import type { SamplingParams } from "../../contract/sampling.js";
import { ProcessRunner, ThreadRunner, type WorkerRunner } from "./runners.js";
import { rememberBindingTests } from "./tested-bindings.js";
import type { GenerateHooks, Isolation, WorkerEngine } from "./worker-engine.js";
import type { TokenIds } from "../../common/tokens.js";

export type { GenerateHooks, Isolation };

export interface WorkerHandleOptions {
  isolation: Isolation;
  /** Extra environment of a process worker, e.g. CUDA_VISIBLE_DEVICES=1 to pin its GPU. */
  env?: Record<string, string>;
}

export class WorkerHandle implements WorkerEngine {
  readonly kind = "node-llama-cpp";
  /** Every slot report comes from the worker itself. */
  readonly precision = "exact";
  readonly url = undefined;
  private runner: WorkerRunner;
  private inFlightCount = 0;
  /** Generations sent to this worker so far, across restarts: the source of generation ids. */
  private generations = 0;
  private readonly idleWaiters: (() => void)[] = [];
  /** Finished generations by finish reason, for /health and the metrics. */
  readonly finished: Record<FinishReason, number> = { stop: 0, length: 0, cancelled: 0 };
  private loadResult: LoadResult | undefined;

  constructor(
    readonly init: WorkerInit,
    readonly options: WorkerHandleOptions = { isolation: "thread" },
  ) {
    this.runner = this.createRunner();
  }

  /** Resolves with the reason when the worker dies on its own (crash, kill); never on close(). */
  get died(): Promise<string> {
    return this.runner.died;
  }

  /** The worker's OS process id in process isolation. */
  get pid(): number | undefined {
    return this.runner.pid;
  }

  get id(): string {
    return this.init.workerId;
  }

  get isolation(): Isolation {
    return this.options.isolation;
  }

  get inFlight(): number {
    return this.inFlightCount;
  }

  get info(): LoadResult | undefined {
    return this.loadResult;
  }

  async start(): Promise<LoadResult> {
    this.loadResult = (await this.run({ kind: "load" })) as LoadResult;
    rememberBindingTests(this.loadResult.bindingTests);
    return this.loadResult;
  }

  /** After a death: a fresh runner loads the model again. */
  async restart(): Promise<LoadResult> {
    await this.runner.close().catch(() => undefined);
    this.runner = this.createRunner();
    return this.start();
  }

  /**
   * Runs one generation. `requestId` is the client's id, for logs; the worker queues and
   * cancels it by an id of the host's own, unique across this worker's restarts.
   */
  async generate(requestId: string, tokens: TokenIds, sampling: SamplingParams, hooks: GenerateHooks = {}): Promise<GenerationResult> {
    // The task's result can overtake the port's events (in a thread they travel on other
    // channels): it is returned only once the worker's final "done" event has arrived.
    let markDone!: () => void;
    const drained = new Promise<void>((resolve) => (markDone = resolve));
    const generationId = `${this.id}-g${++this.generations}`;
    const task: Omit<GenerateTask, "port"> = {
      kind: "generate",
      generationId,
      requestId,
      tokens,
      sampling,
      ...(hooks.pieces === "first" ? { pieces: "first" } : {}),
    };
    const channel = this.runner.generate(task, (event: GenerationEvent) => {
      if (event.type === "started") hooks.onStarted?.(event);
      else if (event.type === "text") hooks.onText?.(event.text, event.logprobs);
      else markDone();
    });
    const cancel = () => channel.control({ type: "cancel" } satisfies GenerationControl);
    if (hooks.signal?.aborted) cancel();
    hooks.signal?.addEventListener("abort", cancel, { once: true });
    this.inFlightCount++;
    try {
      const result = (await channel.result) as GenerationResult;
      await drained;
      this.finished[result.finishReason]++;
      return result;
    } finally {
      this.inFlightCount--;
      hooks.signal?.removeEventListener("abort", cancel);
      channel.close();
      if (this.inFlightCount === 0) for (const resolve of this.idleWaiters.splice(0)) resolve();
    }
  }

  /** Resolves once no generation is running on this worker (cancelled ones included). */
  whenIdle(): Promise<void> {
    if (this.inFlightCount === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Times the worker in one idle slot, which is left empty (worker/profile.ts). */
  profile(options: Omit<ProfileTask, "kind"> = {}): Promise<ProfileResult> {
    return this.run({ ...options, kind: "profile" }) as Promise<ProfileResult>;
  }

  /** Saves a prefix this worker holds for another worker; null when it holds it nowhere idle. */
  async exportPrefix(tokens: TokenIds): Promise<ExportResult | null> {
    return (await this.run({ kind: "export-prefix", tokens })) as ExportResult | null;
  }

  /** Takes in another worker's exported state; rejects when it was made for another model or context. */
  async importState(file: string): Promise<ImportResult> {
    return (await this.run({ kind: "import-state", file })) as ImportResult;
  }

  /** Empties every idle slot; the slots emptied (tell the global tree). */
  async clearIdleSlots(): Promise<number[]> {
    return ((await this.run({ kind: "clear-idle-slots" })) as ClearedSlots).slots;
  }

  /** Counters of the worker's batches and state store. */
  async stats(): Promise<WorkerStats> {
    return (await this.run({ kind: "stats" })) as WorkerStats;
  }

  /**
   * Hot reload of the local scheduler's settings. They are kept first, so a worker that is
   * down now starts again with them; the running one is told at once.
   */
  async configure(local: WorkerInit["local"]): Promise<void> {
    this.init.local = local;
    await this.run({ kind: "configure", local });
  }

  /** Fault injection (tests, bench:soak): the worker takes its fatal-error path, as on a crash. */
  async crash(): Promise<void> {
    await this.run({ kind: "crash" });
  }

  /**
   * Frees the model and stops the worker, once its generations have ended: cancel them
   * first. A thread must never be stopped while it generates (that aborts the process).
   */
  async close(): Promise<void> {
    await this.whenIdle();
    try {
      await this.run({ kind: "dispose" });
    } finally {
      await this.runner.close();
    }
  }

  private run(task: Exclude<WorkerTask, GenerateTask>): Promise<unknown> {
    return this.runner.run(task);
  }

  private createRunner(): WorkerRunner {
    return this.options.isolation === "process" ? new ProcessRunner(this.init, this.options.env ?? {}) : new ThreadRunner(this.init);
  }
}
