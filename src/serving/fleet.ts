// Every worker of the box, for every configured model: starts them, finds them by id, and
// keeps them alive: a worker that dies (process killed, thread crashed, native abort in a
// process worker) is reported down at once and restarted with back-off, then reported up.
// Whether a worker is alive, and what it holds, is the global scheduler's to know: the
// fleet tells it through the hooks.
import type { Config, ModelConfig } from "../config/schema.js";
import type { FinishReason } from "../contract/generation.js";
import type { LoadResult, LocalSchedulerSettings, SpillSettings } from "../engine/wire/protocol.js";
import { WorkerHandle } from "../engine/host/worker-handle.js";
import type { CachePrecision, EngineKind, Isolation, WorkerEngine } from "../engine/host/worker-engine.js";
import type { WorkerInit } from "../engine/wire/protocol.js";
import { findLlamaServer } from "../engine/llama-server/binary.js";
import { LlamaServerEngine, type LlamaServerEngineOptions } from "../engine/llama-server/llama-server-engine.js";
import { RadixgateEngine } from "../engine/radixgate/radixgate-engine.js";
import { OpenAIEngine } from "../engine/openai/openai-engine.js";
import { visibleDevicesEnv, type GpuDetection } from "../engine/host/gpu-detect.js";
import { probeGpus } from "../engine/host/gpu-probe.js";
import { type ResolveHost, resolveHostAddresses, urlAt } from "./discovery.js";
import { type FittedSpill, fitSpill } from "./spill-budget.js";

export interface ServedModel {
  config: ModelConfig;
  path: string;
  /** Tokens per slot, as the workers created it. */
  contextSize: number;
  createdAt: number;
}

export interface FleetWorker {
  engine: WorkerEngine;
  modelId: string;
  /** Restarts after deaths, for /health and the metrics. */
  restarts: number;
  alive: boolean;
  /** When it died (performance.now()), while it is down. */
  downSince?: number;
  /** How long its last start took, from death (or launch) to serving: the next restart's estimate. */
  startMs: number;
  /** Why it is down, while it is. */
  downReason?: string;
  /** Found by resolving the host name of `remote[entry]` of its model (discover: dns): its address's URL. */
  discoveredAs?: { entry: number; url: string };
  /** Left the fleet (its address vanished from the name): never restarted. */
  retired?: boolean;
}

/** One worker as /health shows it: a copy, taken when asked. */
export interface WorkerStatus {
  id: string;
  modelId: string;
  alive: boolean;
  /** Restarts after deaths. */
  restarts: number;
  isolation: Isolation;
  engine: EngineKind;
  /** False for a remote engine that has not answered since launch (it joins when it does). */
  joined: boolean;
  /** Why it is down; null while it is up. */
  downReason: string | null;
  precision: CachePrecision;
  url: string | undefined;
  /** Finished generations by finish reason, across restarts. */
  finished: Record<FinishReason, number>;
  /** The llama.cpp it computes with, once loaded: backend, binary, CPU thread pool and inline decode (the last two embedded workers only). */
  llama: { backend: string; binary: string; computePool: string | null; inlineDecode: boolean | null; nativeGeneration: boolean | null } | null;
}

export interface FleetStatus {
  /** The local scheduler's settings the workers run with now (hot reloads included); absent without workers. */
  local: LocalSchedulerSettings | undefined;
  workers: WorkerStatus[];
}

/** What /health says about the llama.cpp a worker computes with; null before it loaded. */
function llamaOf(info: LoadResult | undefined): WorkerStatus["llama"] {
  if (info === undefined) return null;
  return {
    backend: info.backend,
    binary: info.binary,
    computePool: info.computePool ?? null,
    inlineDecode: info.inlineDecode ?? null,
    nativeGeneration: info.nativeGeneration ?? null,
  };
}

export type EngineServices = Pick<LlamaServerEngineOptions, "toolCallGrammar">;

export interface FleetHooks {
  onWorkerDown(workerId: string, reason: string): void;
  onWorkerUp(workerId: string): void;
  /** The worker left for good (discovery): forget it. */
  onWorkerRetired?(workerId: string, modelId: string): void;
}

/**
 * Restart back-off: a worker that died is started again at once (its requests wait for it);
 * a start that fails is tried again after 0.5 s, doubling, at most 30 s between tries.
 */
const FIRST_RESTART_DELAY_MS = 500;
const MAX_RESTART_DELAY_MS = 30_000;

export class Fleet {
  private readonly byId: Map<string, FleetWorker>;
  private hooks: FleetHooks | undefined;
  private closed = false;
  private readonly timers = new Set<NodeJS.Timeout>();

  /** The next worker id's number: ids are never reused. */
  private nextId: number;

  private constructor(
    readonly models: Map<string, ServedModel>,
    readonly workers: FleetWorker[],
    private readonly config: Config,
    private readonly modelPaths: Map<string, string>,
    private readonly services: EngineServices,
    /** The state store budget each local worker started with (spill-budget.ts). */
    readonly spill: FittedSpill,
  ) {
    this.byId = new Map(workers.map((worker) => [worker.engine.id, worker]));
    this.nextId = workers.length;
    for (const worker of workers) this.watch(worker);
  }

  /** Starts every worker of every model; resolves once all have loaded (fails if any fails). */
  /**
   * `services`: what an engine needs of the host beyond its model, e.g. tool-call grammars
   * built by the prompt threads for the llama-server engine.
   */
  static async start(
    config: Config,
    modelPaths: Map<string, string>,
    services: EngineServices = {},
    detect = probeGpus,
    resolve: ResolveHost = resolveHostAddresses,
  ): Promise<Fleet> {
    const workers: FleetWorker[] = [];
    const planned = await planFleet(config, detect, resolve);
    // Every local worker writes its states to the same folder.
    const spill = fitSpill(config.spill, planned.filter((plan) => plan.isolation !== "remote").length);
    for (const { workerId, model, isolation, env, remote, discoveredAs } of planned) {
      const init = initOf(workerId, model, modelPaths, spill.spill, config.scheduler.local);
      const engine = await engineFor(init, model, { isolation, env, ...(remote !== undefined ? { remote } : {}) }, services);
      workers.push({ engine, modelId: model.id, restarts: 0, alive: false, startMs: 0, ...(discoveredAs ? { discoveredAs } : {}) });
    }
    const launchedAt = performance.now();
    const loads = await Promise.allSettled(
      workers.map(async (worker) => {
        await worker.engine.start();
        worker.startMs = performance.now() - launchedAt;
      }),
    );
    loads.forEach((load, i) => {
      if (load.status === "rejected") workers[i]!.downReason = (load.reason as Error).message;
    });
    // A remote engine that does not answer yet joins when it does, as long as its model has a
    // worker serving now; a local worker that fails to load stops the start.
    const fatal = workers.find(
      (worker) =>
        !hasStarted(worker) && (worker.engine.isolation !== "remote" || !workers.some((other) => hasStarted(other) && other.modelId === worker.modelId)),
    );
    if (fatal) {
      await Promise.allSettled(workers.map((worker) => worker.engine.close()));
      throw new Error(`worker ${fatal.engine.id} of model "${fatal.modelId}" failed to start: ${fatal.downReason}`);
    }
    const createdAt = Math.floor(Date.now() / 1000);
    const models = new Map<string, ServedModel>();
    for (const model of config.models) {
      // A remote engine reports its own context per slot: a prompt must fit the shortest.
      const contextSize = Math.min(
        ...workers.filter((worker) => hasStarted(worker) && worker.modelId === model.id).map((worker) => worker.engine.info!.contextSize),
      );
      models.set(model.id, { config: model, path: modelPaths.get(model.id)!, contextSize, createdAt });
    }
    const now = performance.now();
    for (const worker of workers) {
      worker.alive = hasStarted(worker);
      if (!worker.alive) worker.downSince = now;
    }
    return new Fleet(models, workers, config, modelPaths, services, spill);
  }

  /**
   * A remote engine found at `url` by resolving `remote[entry]`'s host name: one more worker,
   * started like one that joins late (the scheduler takes it once it answers), with the local
   * scheduler settings the others run with now.
   */
  async addDiscovered(modelId: string, entry: number, url: string): Promise<FleetWorker> {
    const model = this.config.models.find((m) => m.id === modelId)!;
    const workerId = `w${this.nextId++}`;
    const local = this.workers[0]?.engine.init.local ?? this.config.scheduler.local;
    const init = initOf(workerId, model, this.modelPaths, this.spill.spill, local);
    const engine = await engineFor(init, model, { isolation: "remote", env: {}, remote: { ...model.remote[entry]!, url } }, this.services);
    const worker: FleetWorker = { engine, modelId, restarts: 0, alive: false, startMs: 0, downSince: performance.now(), discoveredAs: { entry, url } };
    this.workers.push(worker);
    this.byId.set(workerId, worker);
    this.restart(worker, 0);
    return worker;
  }

  /** A discovered worker whose address vanished: it leaves (its requests end first), never to be restarted. */
  async retire(workerId: string): Promise<void> {
    const worker = this.byId.get(workerId);
    if (!worker) return;
    worker.retired = true;
    worker.alive = false;
    this.byId.delete(workerId);
    this.workers.splice(this.workers.indexOf(worker), 1);
    this.hooks?.onWorkerRetired?.(workerId, worker.modelId);
    await worker.engine.close().catch(() => undefined);
  }

  /**
   * Who to tell when a worker goes down or comes back (the global scheduler). Remote engines
   * that did not answer at launch are tried from here on, so the one that answers is told.
   */
  setHooks(hooks: FleetHooks): void {
    this.hooks = hooks;
    for (const worker of this.workers) if (!hasStarted(worker)) this.restart(worker, 1);
  }

  get(workerId: string): FleetWorker | undefined {
    return this.byId.get(workerId);
  }

  /** The worker of the model whose engine is at `url` (a remote engine), if any. */
  workerAt(modelId: string, url: string): string | undefined {
    const wanted = url.replace(/\/+$/, "");
    return this.workers.find((worker) => worker.modelId === modelId && !worker.retired && worker.engine.url?.replace(/\/+$/, "") === wanted)?.engine.id;
  }

  workerIds(modelId: string): string[] {
    return this.workers.filter((worker) => worker.modelId === modelId).map((worker) => worker.engine.id);
  }

  /** Every worker's state now, as plain data: what /health reports. */
  status(): FleetStatus {
    const first = this.workers[0];
    return {
      local: first && { ...first.engine.init.local },
      workers: this.workers.map((worker) => ({
        id: worker.engine.id,
        modelId: worker.modelId,
        alive: worker.alive,
        restarts: worker.restarts,
        isolation: worker.engine.isolation,
        engine: worker.engine.kind,
        joined: hasStarted(worker),
        downReason: worker.alive ? null : (worker.downReason ?? null),
        precision: worker.engine.precision,
        url: worker.engine.url,
        finished: { ...worker.engine.finished },
        llama: llamaOf(worker.engine.info),
      })),
    };
  }

  /**
   * Milliseconds until a worker of the model that is down now is expected back (its last
   * start took that long); 0 when none is down. A client refused while a worker restarts is
   * told to come back then, not at once.
   */
  expectedBackInMs(modelId: string, now = performance.now()): number {
    let soonest = Number.POSITIVE_INFINITY;
    for (const worker of this.workers) {
      if (worker.modelId !== modelId || worker.alive || worker.downSince === undefined) continue;
      soonest = Math.min(soonest, Math.max(0, worker.startMs - (now - worker.downSince)));
    }
    return Number.isFinite(soonest) ? soonest : 0;
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const timer of this.timers) clearTimeout(timer);
    await Promise.allSettled(this.workers.filter((worker) => worker.alive).map((worker) => worker.engine.close()));
  }

  private watch(worker: FleetWorker): void {
    void worker.engine.died.then((reason) => {
      if (this.closed || worker.retired) return;
      worker.alive = false;
      worker.downSince = performance.now();
      worker.downReason = reason;
      this.hooks?.onWorkerDown(worker.engine.id, reason);
      this.restart(worker, 0);
    });
  }

  private restart(worker: FleetWorker, attempt: number): void {
    const delay = attempt === 0 ? 0 : Math.min(MAX_RESTART_DELAY_MS, FIRST_RESTART_DELAY_MS * 2 ** (attempt - 1));
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      if (this.closed || worker.retired) return;
      // A first start (a remote engine joining late) is not a restart.
      const firstStart = !hasStarted(worker);
      worker.engine.restart().then(
        () => {
          // Closed (or retired) while it restarted: dispose the fresh one too (a thread left
          // holding llama.cpp objects would abort the process on exit).
          if (this.closed || worker.retired) return void worker.engine.close().catch(() => undefined);
          if (!firstStart) worker.restarts++;
          // A prompt must fit every worker of its model, this one too (a remote one may be shorter).
          const served = this.models.get(worker.modelId);
          if (served && worker.engine.info && worker.engine.info.contextSize < served.contextSize) served.contextSize = worker.engine.info.contextSize;
          worker.alive = true;
          if (worker.downSince !== undefined) worker.startMs = performance.now() - worker.downSince;
          worker.downSince = undefined;
          this.watch(worker);
          this.hooks?.onWorkerUp(worker.engine.id);
        },
        (error: unknown) => {
          worker.downReason = (error as Error).message;
          this.restart(worker, attempt + 1);
        },
      );
    }, delay);
    this.timers.add(timer);
  }
}

/** Whether the worker ever started: what it loaded stays known across its deaths. */
export function hasStarted(worker: FleetWorker): boolean {
  return worker.engine.info !== undefined;
}

/** How long a remote engine's generation waits for its first byte when its entry sets no firstByteTimeoutS. */
const DEFAULT_FIRST_BYTE_TIMEOUT_S = 60;

/** The engine of one planned worker: a remote llama-server or Radixgate host, a llama-server process, or node-llama-cpp. */
async function engineFor(init: WorkerInit, model: ModelConfig, plan: WorkerPlan, services: EngineServices): Promise<WorkerEngine> {
  const remote = plan.remote;
  const firstByteS = remote?.firstByteTimeoutS ?? DEFAULT_FIRST_BYTE_TIMEOUT_S;
  const firstByte = firstByteS > 0 ? { firstByteTimeoutMs: firstByteS * 1000 } : {};
  if (remote?.kind === "radixgate") {
    return new RadixgateEngine(init, {
      url: remote.url,
      model: remote.model ?? model.id,
      ...(remote.apiKey !== undefined ? { apiKey: remote.apiKey } : {}),
      ...firstByte,
    });
  }
  if (remote?.kind === "openai") {
    return new OpenAIEngine(init, {
      url: remote.url.replace(/\/+$/, ""),
      model: remote.model ?? model.id,
      slots: remote.slots ?? model.slots,
      cacheTtlMs: (remote.cacheTtlS ?? 300) * 1000,
      ...(remote.apiKey !== undefined ? { apiKey: remote.apiKey } : {}),
      ...firstByte,
    });
  }
  if (remote !== undefined) return new LlamaServerEngine(init, { binary: "", url: remote.url, ...firstByte, ...services });
  if (model.engine === "llama-server") {
    return new LlamaServerEngine(init, {
      binary: await findLlamaServer(model.llamaServer.binary || undefined),
      env: plan.env,
      extraArgs: model.llamaServer.args,
      cacheRamMiB: model.llamaServer.cacheRamMiB,
      ...services,
    });
  }
  return new WorkerHandle(init, { isolation: plan.isolation, env: plan.env });
}

/** CPU workers when `workers: auto` finds no GPU (placement is real from day one). */
const CPU_AUTO_WORKERS = 2;

export interface WorkerPlan {
  isolation: Isolation;
  /** A remote engine: what runs there and where. */
  remote?: ModelConfig["remote"][number];
  /** Found by resolving that entry's host name (discover: dns). */
  discoveredAs?: { entry: number; url: string };
  /** CUDA_VISIBLE_DEVICES / GGML_VK_VISIBLE_DEVICES of a process worker pinned to one GPU. */
  env: Record<string, string>;
}

/** One worker of the box as planned from the config and the GPUs found, before it starts. */
export interface PlannedWorker extends WorkerPlan {
  workerId: string;
  model: ModelConfig;
  /** What the GPU detection answered for this model's `gpu` setting. */
  gpus: GpuDetection;
}

/**
 * Every worker of every model, numbered w0, w1, ... in config order: a model's local workers,
 * then its remote engines (an entry with discover: dns, one per address its host name
 * resolves to now; none when it resolves to nothing yet: discovery adds them later).
 */
export async function planFleet(
  config: Config,
  detect: (gpu: ModelConfig["gpu"]) => Promise<GpuDetection> = probeGpus,
  resolve: ResolveHost = resolveHostAddresses,
): Promise<PlannedWorker[]> {
  const planned: PlannedWorker[] = [];
  for (const model of config.models) {
    const gpus = await detect(model.gpu);
    for (const plan of planWorkers(model, gpus)) planned.push({ workerId: `w${planned.length}`, model, gpus, ...plan });
    for (const [entry, remote] of model.remote.entries()) {
      const at = (url: string) => ({ workerId: `w${planned.length}`, model, gpus, isolation: "remote" as const, env: {}, remote: { ...remote, url } });
      if (remote.discover !== "dns") {
        planned.push(at(remote.url));
        continue;
      }
      const addresses = await resolve(new URL(remote.url).hostname).catch(() => []);
      for (const address of addresses) {
        const url = urlAt(remote.url, address);
        planned.push({ ...at(url), discoveredAs: { entry, url } });
      }
    }
  }
  return planned;
}

/** What a worker is started with. */
function initOf(workerId: string, model: ModelConfig, modelPaths: Map<string, string>, spill: SpillSettings, local: Config["scheduler"]["local"]): WorkerInit {
  return {
    workerId,
    hostPid: process.pid,
    modelPath: modelPaths.get(model.id)!,
    slots: model.slots,
    contextSize: model.contextSize,
    batchSize: model.batchSize,
    threads: model.threads,
    threadPoll: model.threadPoll,
    flashAttention: model.flashAttention,
    gpu: model.gpu,
    // A copy per worker: a hot reload replaces it on each.
    local: { ...local },
    spill,
  };
}

/**
 * How many workers a model gets and how each runs. `workers: auto` = one per GPU found (or 2
 * on CPU). `isolation: auto` = a process per worker when several GPUs are found, each pinned
 * to its card (node-llama-cpp 3.21.1 splits a model over every GPU a process can see), else
 * a thread. Worker i takes GPU i modulo the GPUs found.
 */
export function planWorkers(model: ModelConfig, gpus: GpuDetection): WorkerPlan[] {
  const found = gpus.devices.length;
  const workers = model.workers !== "auto" ? model.workers : found > 0 ? found : CPU_AUTO_WORKERS;
  // A llama-server worker is a process of its own whatever `isolation` says.
  const isolation: Isolation = model.engine === "llama-server" ? "process" : model.isolation !== "auto" ? model.isolation : found >= 2 ? "process" : "thread";
  return Array.from({ length: workers }, (_, i) => {
    const device = gpus.devices[i % Math.max(1, found)];
    // Pinning needs a process of its own; a thread sees what the host sees.
    const env = isolation === "process" && device !== undefined && found >= 2 ? visibleDevicesEnv(gpus.backend, device.index) : {};
    return { isolation, env };
  });
}
