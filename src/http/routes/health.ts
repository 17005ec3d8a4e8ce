// GET /health — the process is up and how its workers are (200 while any is alive).
// GET /ready — every configured worker is loaded and alive.
import type { FastifyInstance } from "fastify";
import type { GlobalScheduler } from "../../scheduler/global-scheduler.js";
import type { CompletionService } from "../../serving/completion-service.js";
import type { Fleet } from "../../serving/fleet.js";

export function healthRoute(
  app: FastifyInstance,
  fleet: Pick<Fleet, "status">,
  scheduler: GlobalScheduler,
  service: CompletionService,
  configError: () => string | undefined,
): void {
  app.get("/health", async (_request, reply) => {
    const views = new Map(scheduler.views().map((view) => [view.id, view]));
    const alive = [...views.values()].filter((view) => view.alive).length;
    const fleetStatus = fleet.status();
    return reply.code(alive > 0 ? 200 : 503).send({
      status: alive > 0 ? "ok" : "no_live_worker",
      policy: scheduler.policy.name,
      local: fleetStatus.local,
      config_error: configError() ?? null,
      failovers: service.failovers,
      // Requests waiting at the host for a place (every worker of their model full), per model.
      waiting: Object.fromEntries([...new Set(fleetStatus.workers.map((worker) => worker.modelId))].map((model) => [model, service.waitingFor(model)])),
      // Every configured worker; a remote engine not placed on yet (not answering since launch,
      // or being calibrated) has no scheduler view and shows as down with no slots.
      workers: fleetStatus.workers.map((worker) => {
        const view = views.get(worker.id);
        return {
          id: worker.id,
          model: worker.modelId,
          alive: view?.alive ?? false,
          in_flight: view?.inFlight ?? 0,
          slots: view?.slots ?? 0,
          cached_tokens: view?.kvTokens ?? 0,
          capacity_tokens: view?.kvCapacityTokens ?? 0,
          finished: worker.finished,
          restarts: worker.restarts,
          isolation: worker.isolation,
          engine: worker.engine,
          down_reason: view === undefined && worker.joined ? "answering; being calibrated before it is placed on" : worker.downReason,
          // closed; open: failed request after request, held out of placement for a while (why: circuit_reason); half-open: being tried again.
          circuit: service.circuit(worker.id),
          circuit_reason: service.circuitReason(worker.id) ?? null,
          // How exact the placement tree is about this worker's cache (exact, at-least, approximate).
          precision: worker.precision,
          url: worker.url ?? null,
          // The llama.cpp it computes with: backend, binary (an embedded worker's "prebuilt" from npm
          // or "localBuild" compiled on this machine), CPU thread pool, whether generation steps are
          // decoded on the worker's own thread and whether plain requests generate several steps
          // per call into native code; null until it loaded.
          llama: worker.llama && {
            backend: worker.llama.backend,
            binary: worker.llama.binary,
            compute_pool: worker.llama.computePool,
            inline_decode: worker.llama.inlineDecode,
            native_generation: worker.llama.nativeGeneration,
          },
        };
      }),
    });
  });
}

/** GET /ready — 200 once every configured worker is loaded and alive, else 503 naming those that are not. */
export function readyRoute(app: FastifyInstance, fleet: Pick<Fleet, "status">, scheduler: GlobalScheduler): void {
  app.get("/ready", async (_request, reply) => {
    // Down, or a remote engine not placed on yet (no scheduler view).
    const alive = new Set(
      scheduler
        .views()
        .filter((view) => view.alive)
        .map((view) => view.id),
    );
    const notReady = fleet
      .status()
      .workers.filter((worker) => !alive.has(worker.id))
      .map((worker) => worker.id);
    return reply.code(notReady.length === 0 ? 200 : 503).send({ ready: notReady.length === 0, not_ready: notReady });
  });
}
