// Host side of one worker: a piscina pool of exactly one thread that holds the model.
// Generations are tasks; their text streams back over a transferred MessagePort.
import { MessageChannel } from "node:worker_threads";
import { Piscina } from "piscina";
import type {
  ExportResult,
  ImportResult,
  FinishReason,
  GenerationControl,
  GenerationEvent,
  GenerationResult,
  LoadResult,
  ProfileResult,
  ProfileTask,
  SamplingParams,
  WorkerInit,
  WorkerTask,
} from "./protocol.js";
import { threadEntry } from "./thread-entry.js";

export interface GenerateHooks {
  /** The worker took a slot for the request; cachedTokens is known from here on. */
  onStarted?: (event: Extract<GenerationEvent, { type: "started" }>) => void;
  onText?: (text: string) => void;
  /** Aborting cancels the generation by message; the promise then resolves with finishReason "cancelled". */
  signal?: AbortSignal;
}

export class EngineWorker {
  private readonly pool: Piscina;
  private inFlightCount = 0;
  /** Finished generations by finish reason, for /health and the metrics. */
  readonly finished: Record<FinishReason, number> = { stop: 0, length: 0, cancelled: 0 };
  private loadResult: LoadResult | undefined;

  constructor(readonly init: WorkerInit) {
    const entry = threadEntry(import.meta.url, "worker-thread");
    this.pool = new Piscina({
      filename: entry.filename,
      argv: entry.argv,
      workerData: init,
      name: "default",
      minThreads: 1,
      maxThreads: 1,
      // The thread holds the loaded model: it must never be reaped for idleness.
      idleTimeout: Number.POSITIVE_INFINITY,
      // Every request reaches the thread at once; the thread's own slot table queues them.
      concurrentTasksPerWorker: 1024,
    });
  }

  get id(): string {
    return this.init.workerId;
  }

  get inFlight(): number {
    return this.inFlightCount;
  }

  get info(): LoadResult | undefined {
    return this.loadResult;
  }

  async start(): Promise<LoadResult> {
    this.loadResult = (await this.run({ kind: "load" })) as LoadResult;
    return this.loadResult;
  }

  async generate(requestId: string, tokens: readonly number[], sampling: SamplingParams, hooks: GenerateHooks = {}): Promise<GenerationResult> {
    const { port1: hostPort, port2: workerPort } = new MessageChannel();
    // The task's result travels on piscina's channel and can overtake the port's events:
    // the result is returned only once the worker's final "done" event has arrived.
    let markDone!: () => void;
    const drained = new Promise<void>((resolve) => (markDone = resolve));
    hostPort.on("message", (event: GenerationEvent) => {
      if (event.type === "started") hooks.onStarted?.(event);
      else if (event.type === "text") hooks.onText?.(event.text);
      else markDone();
    });
    const cancel = () => hostPort.postMessage({ type: "cancel" } satisfies GenerationControl);
    if (hooks.signal?.aborted) cancel();
    hooks.signal?.addEventListener("abort", cancel, { once: true });
    this.inFlightCount++;
    try {
      const result = (await this.pool.run(
        { kind: "generate", requestId, tokens: [...tokens], sampling, port: workerPort } satisfies WorkerTask,
        { transferList: [workerPort] },
      )) as GenerationResult;
      await drained;
      this.finished[result.finishReason]++;
      return result;
    } finally {
      this.inFlightCount--;
      hooks.signal?.removeEventListener("abort", cancel);
      hostPort.close();
    }
  }

  /** Times the worker in one idle slot, which is left empty (src/engine/calibration.ts). */
  profile(options: Omit<ProfileTask, "kind"> = {}): Promise<ProfileResult> {
    return this.run({ ...options, kind: "profile" }) as Promise<ProfileResult>;
  }

  /** Saves a prefix this worker holds for another worker; null when it holds it nowhere idle. */
  async exportPrefix(tokens: readonly number[]): Promise<ExportResult | null> {
    return (await this.run({ kind: "export-prefix", tokens: [...tokens] })) as ExportResult | null;
  }

  /** Takes in another worker's exported state; rejects when it was made for another model or context. */
  async importState(file: string): Promise<ImportResult> {
    return (await this.run({ kind: "import-state", file })) as ImportResult;
  }

  /** Frees the model and stops the thread. Call only once no generation is running. */
  async close(): Promise<void> {
    try {
      await this.run({ kind: "dispose" });
    } finally {
      await this.pool.destroy();
    }
  }

  private run(task: WorkerTask): Promise<unknown> {
    return this.pool.run(task);
  }
}
