// The composition root: resolves models, starts workers and the prompt threads, wires the
// placement policy and the HTTP app. Used by main.ts and by the tests, which start real
// servers through it.
import type { FastifyInstance } from "fastify";
import type { LoadedConfig } from "./config/load-config.js";
import type { Config } from "./config/schema.js";
import { calibrate, calibrationIdentity, timeModelFromCalibration } from "./engine/host/calibration.js";
import { resolveModelSource } from "./engine/host/model-source.js";
import { PromptPreparer } from "./engine/host/prompt-preparer.js";
import { buildApp } from "./http/app.js";
import { GlobalScheduler } from "./scheduler/global-scheduler.js";
import { createPolicy, POLICY_CONFIG_KEYS } from "./scheduler/registry.js";
import { CompletionService } from "./serving/completion-service.js";
import { Fleet, type FleetWorker, hasStarted } from "./serving/fleet.js";
import { observeAll, requestLog } from "./serving/observer.js";
import { RecentActivity } from "./serving/recent-activity.js";
import { statusReport } from "./serving/status.js";
import { changedPaths, ConfigReloader } from "./serving/hot-reload.js";
import { CacheFeed } from "./serving/cache-feed.js";
import { CircuitBreakers } from "./serving/circuit-breaker.js";
import { type ResolveHost, RemoteDiscovery, resolveHostAddresses } from "./serving/discovery.js";
import { probeGpus } from "./engine/host/gpu-probe.js";
import { cpuBinaryAdvice, nativeBuildPresent } from "./engine/host/native-build.js";
import { Metrics } from "./metrics/metrics.js";
import { redisSessions } from "./serving/session-store.js";
import { spillBudgetNotice } from "./serving/spill-budget.js";

export interface Radixgate {
  /** Re-reads config.yml and applies what can change live (SIGHUP, file change). */
  reloader: ConfigReloader;
  /** Remote engines found by name (discover: dns): resolved again on their period, or now with refresh(). */
  discovery: RemoteDiscovery;
  app: FastifyInstance;
  metrics: Metrics;
  fleet: Fleet;
  scheduler: GlobalScheduler;
  /** Listens on config.server host/port; resolves with the address, e.g. http://127.0.0.1:8080. */
  listen(): Promise<string>;
  close(): Promise<void>;
  /**
   * SIGTERM: stop accepting connections, let in-flight requests (streams too) finish for up
   * to `timeoutMs`, then cut what is left (their generations are cancelled), dispose workers.
   */
  shutdown(timeoutMs: number): Promise<void>;
}

export interface RadixgateOptions {
  /** How host names of remote engines with discover: dns are resolved (DNS by default). */
  resolveHost?: ResolveHost;
}

export async function createRadixgate({ config, dir, path, env }: LoadedConfig, options: RadixgateOptions = {}): Promise<Radixgate> {
  const resolveHost = options.resolveHost ?? resolveHostAddresses;
  // Fail on a bad policy name before spending time loading models.
  createPolicy(config.scheduler.policy, config.scheduler);
  const modelPaths = new Map<string, string>();
  for (const model of config.models) {
    modelPaths.set(model.id, await resolveModelSource(model.source, { configDir: dir, seed: model.seed }));
  }
  const preparer = new PromptPreparer(
    config.models.map((model) => ({ id: model.id, path: modelPaths.get(model.id)! })),
    config.prompt.threads,
  );
  let fleet: Fleet;
  try {
    [fleet] = await Promise.all([
      Fleet.start(config, modelPaths, { toolCallGrammar: (constraint) => preparer.toolCallGrammar(constraint) }, probeGpus, resolveHost),
      ...config.models.map((model) => preparer.warmUp(model.id)),
    ]);
  } catch (error) {
    await preparer.close();
    throw error;
  }
  // What this host publishes to routers in front of it: every worker the scheduler places on,
  // every change the scheduler books to their caches, and the fleet's deaths and returns.
  const feed = new CacheFeed({
    inFlight: () => new Map(scheduler.views().map((view) => [view.id, view.inFlight])),
    contextSize: (modelId) => fleet.models.get(modelId)?.contextSize,
    fingerprint: (modelId) => fleet.workers.find((worker) => worker.modelId === modelId && worker.engine.info)?.engine.info?.modelFingerprint,
  });
  let scheduler: GlobalScheduler;
  try {
    scheduler = await createScheduler(config, fleet, feed);
  } catch (error) {
    // Threads holding llama.cpp objects must be disposed before the process may exit.
    await fleet.close();
    await preparer.close();
    throw error;
  }
  const breakers = new CircuitBreakers(
    { failures: config.scheduler.breakerFailures, openMs: config.scheduler.breakerOpenMs },
    {
      setPlaceable: (workerId, placeable) => {
        scheduler.setHeld(workerId, !placeable);
        service.placesChanged(fleet.get(workerId)!.modelId);
      },
      opened: (workerId, forMs, reason) => app.log.warn({ worker: workerId, forMs, reason }, "worker failed request after request; held out of placement"),
    },
  );
  fleet.setHooks({
    // Either way the places of the model's workers changed (a dead worker's are lent to the
    // live ones): requests waiting at the host for a place may fit now.
    onWorkerDown: (workerId, reason) => {
      breakers.reset(workerId);
      scheduler.setHeld(workerId, false);
      scheduler.setAlive(workerId, false);
      feed.setAlive(workerId, false);
      app.log.error({ worker: workerId, reason }, "worker died; restarting it");
      service.placesChanged(fleet.get(workerId)!.modelId);
    },
    onWorkerUp: (workerId) => {
      if (!scheduler.hasWorker(workerId)) return void join(workerId);
      scheduler.setAlive(workerId, true);
      feed.setAlive(workerId, true);
      app.log.info({ worker: workerId }, "worker restarted");
      service.placesChanged(fleet.get(workerId)!.modelId);
    },
    onWorkerRetired: (workerId, modelId) => {
      breakers.reset(workerId);
      scheduler.removeWorker(workerId);
      feed.removeWorker(workerId);
      service.placesChanged(modelId);
    },
  });
  // A remote engine that did not answer at launch joins the scheduler once it does: calibrated
  // like the others, then placed on.
  const join = async (workerId: string) => {
    const worker = fleet.get(workerId)!;
    try {
      await addToScheduler(scheduler, worker, feed);
      // Retired (its address left the name) while it was calibrated: forget it again.
      if (!fleet.get(workerId)) {
        scheduler.removeWorker(workerId);
        feed.removeWorker(workerId);
        return;
      }
      app.log.info({ worker: workerId, url: worker.engine.url }, "remote engine joined");
      service.placesChanged(worker.modelId);
    } catch (error) {
      app.log.error({ worker: workerId, err: error }, "remote engine answered but could not be calibrated; it is left out");
    }
  };
  const metrics = new Metrics(fleet, scheduler);
  const activity = new RecentActivity();
  const observer = observeAll(
    metrics,
    activity,
    requestLog(() => app.log),
  );
  const sessions =
    config.scheduler.sessionStore === ""
      ? undefined
      : redisSessions(config.scheduler.sessionStore, config.scheduler.sessionTtlMs, {
          info: (data, message) => app.log.info(data, message),
          warn: (data, message) => app.log.warn(data, message),
        });
  if (sessions) metrics.followSessionStore(sessions);
  const service = new CompletionService({
    fleet,
    preparer,
    scheduler,
    observer,
    breakers,
    ...(sessions ? { sessions } : {}),
    limits: { ...config.generation, maxConcurrentRequests: config.server.maxConcurrentRequests, maxQueueWaitMs: config.scheduler.maxQueueWaitMs },
  });
  const apiKeys = { keys: config.server.apiKeys };
  const app = buildApp({
    config,
    fleet,
    scheduler,
    service,
    metrics,
    apiKeys,
    feed,
    configError: () => reloader.lastError,
    status: () => statusReport(fleet, scheduler, activity),
  });
  const spillNotice = spillBudgetNotice(fleet.spill);
  if (spillNotice) app.log[spillNotice.level](spillNotice.fields, spillNotice.message);
  for (const worker of fleet.workers) {
    const info = worker.engine.info;
    if (info?.computePool === "per-step") {
      app.log.warn(
        { worker: worker.engine.id, reason: info.computePoolProblem },
        "llama.cpp makes its helper threads again for every step of this worker (no thread pool): decoding with threads > 1 is about half as fast",
      );
    }
    if (info?.inlineDecode === false) {
      app.log.warn(
        { worker: worker.engine.id, reason: info.inlineDecodeProblem },
        "this worker's generation steps go through node-llama-cpp's thread hand-offs (no inline decode): served on a 2-core CPU that decoded 0.61x-0.97x as fast (npm run bench:peer, docs/engine.md)",
      );
    } else if (info?.inlineSampleProblem !== undefined) {
      app.log.warn(
        { worker: worker.engine.id, reason: info.inlineSampleProblem },
        "this worker samples each generated token through node-llama-cpp's thread hand-off (no inline sampling): 4-12 % fewer tokens/s on Q8_0 weights (npm run bench:engine-loop -- --weights Q8_0)",
      );
    }
    if (info?.inlineDecode === true && info.nativeGeneration === false) {
      app.log.warn(
        { worker: worker.engine.id, reason: info.nativeGenerationProblem },
        'this worker generates every token through node-llama-cpp\'s per-token JavaScript (no generation loop): fewer tokens/s where decode steps are short, as on quantized weights (docs/engine.md, "Several steps per call")',
      );
    }
  }
  const loaded = fleet.workers.flatMap((worker) => (worker.engine.kind === "node-llama-cpp" && worker.engine.info ? [worker.engine.info] : []));
  const binaryAdvice = cpuBinaryAdvice(loaded, nativeBuildPresent());
  if (binaryAdvice) app.log[binaryAdvice.level](binaryAdvice.message);
  const reloader = new ConfigReloader(
    path,
    config,
    {
      log: app.log,
      // Only the keys marked live in the config schema differ between `previous` and `next`.
      async apply(next, previous) {
        const changed = changedPaths(previous.scheduler, next.scheduler);
        if (changed.some((path) => POLICY_CONFIG_KEYS.some((key) => path === key || path.startsWith(`${key}.`)))) {
          scheduler.setPolicy(createPolicy(next.scheduler.policy, next.scheduler));
        }
        if (changedPaths(previous.scheduler.local, next.scheduler.local).length > 0) {
          // Every worker keeps the new settings; one that is down or restarting gets them when
          // it starts again, so its failure to take them now is not the reload's.
          const told = await Promise.allSettled(fleet.workers.map((worker) => worker.engine.configure(next.scheduler.local)));
          told.forEach((result, i) => {
            if (result.status === "rejected") {
              app.log.warn(
                { worker: fleet.workers[i]!.engine.id, reason: (result.reason as Error).message },
                "worker not running: it takes the new scheduler.local settings when it restarts",
              );
            }
          });
        }
        apiKeys.keys = next.server.apiKeys;
      },
    },
    env,
  );
  const discovery = new RemoteDiscovery(config, fleet, resolveHost, {
    info: (data, message) => app.log.info(data, message),
    warn: (data, message) => app.log.warn(data, message),
  });
  discovery.start();
  return {
    app,
    metrics,
    reloader,
    discovery,
    fleet,
    scheduler,
    listen: () => app.listen({ host: config.server.host, port: config.server.port }),
    async close() {
      discovery.stop();
      reloader.close();
      feed.close();
      breakers.close();
      await app.close();
      await sessions?.close();
      await fleet.close();
      await preparer.close();
    },
    async shutdown(timeoutMs) {
      discovery.stop();
      reloader.close();
      feed.close();
      breakers.close();
      const deadline = setTimeout(() => {
        app.log.warn(`shutdown: requests still running after ${timeoutMs} ms are cut`);
        app.server.closeAllConnections();
      }, timeoutMs);
      try {
        await app.close();
      } finally {
        clearTimeout(deadline);
      }
      await sessions?.close();
      await fleet.close();
      await preparer.close();
    },
  };
}

async function createScheduler(config: Config, fleet: Fleet, feed: CacheFeed): Promise<GlobalScheduler> {
  const scheduler = new GlobalScheduler(createPolicy(config.scheduler.policy, config.scheduler), { ...config.scheduler, now: () => performance.now() });
  scheduler.onCacheEvent = (event) => feed.cacheEvent(event);
  // One worker at a time: the first of identical workers profiles, the rest hit its cache
  // (keyed by model file, hardware and context settings), so start-up stays short.
  for (const worker of fleet.workers) if (hasStarted(worker)) await addToScheduler(scheduler, worker, feed);
  return scheduler;
}

/** A started worker becomes a place for requests: calibrated, known to the scheduler and to the feed, its own cache reports (if it makes any) going to the tree. */
async function addToScheduler(scheduler: GlobalScheduler, worker: FleetWorker, feed: CacheFeed): Promise<void> {
  const info = worker.engine.info!;
  const calibration = await calibrate(worker.engine, await calibrationIdentity(worker.engine.init, info));
  const workerId = worker.engine.id;
  if (scheduler.hasWorker(workerId)) return;
  feed.addWorker(workerId, worker.modelId, info.slots, {
    prefill: calibration.samples.prefill,
    decode: calibration.samples.decode,
    copy: calibration.samples.copy,
  });
  scheduler.addWorker({
    id: workerId,
    modelId: worker.modelId,
    slots: info.slots,
    capacityTokens: info.slots * info.contextSize,
    timeModel: timeModelFromCalibration(calibration),
  });
  worker.engine.reportCacheTo?.({
    slotHolds: (slot, tokens) => scheduler.applyCacheEvent({ type: "slot-holds", workerId, slot, tokens }),
    load: (inFlight) => scheduler.reportLoad(workerId, inFlight),
    storeChanged: (changes) => scheduler.applyCacheEvent({ type: "store-changed", workerId, changes }),
  });
}
