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
    const workers = scheduler.views();
    const alive = workers.filter((worker) => worker.alive).length;
    const fleetStatus = fleet.status();
    const statusOf = new Map(fleetStatus.workers.map((worker) => [worker.id, worker]));
    return reply.code(alive > 0 ? 200 : 503).send({
      status: alive > 0 ? "ok" : "no_live_worker",
      policy: scheduler.policy.name,
      local: fleetStatus.local,
      config_error: configError() ?? null,
      failovers: service.failovers,
      // Requests waiting at the host for a place (every worker of their model full), per model.
      waiting: Object.fromEntries([...new Set(workers.map((worker) => worker.modelId))].map((model) => [model, service.waitingFor(model)])),
      workers: workers
        .map((worker) => ({
          id: worker.id,
          model: worker.modelId,
          alive: worker.alive,
          in_flight: worker.inFlight,
          slots: worker.slots,
          cached_tokens: worker.kvTokens,
          capacity_tokens: worker.kvCapacityTokens,
          finished: statusOf.get(worker.id)?.finished,
          restarts: statusOf.get(worker.id)?.restarts ?? 0,
          isolation: statusOf.get(worker.id)?.isolation,
          engine: statusOf.get(worker.id)?.engine,
          down_reason: statusOf.get(worker.id)?.downReason ?? null,
          // How exact the placement tree is about this worker's cache (exact, at-least, approximate).
          precision: statusOf.get(worker.id)?.precision,
          url: statusOf.get(worker.id)?.url ?? null,
        }))
        .concat(
          // Remote engines not placed on yet: not answering since launch, or being calibrated.
          fleetStatus.workers
            .filter((worker) => !scheduler.hasWorker(worker.id))
            .map((worker) => ({
              id: worker.id,
              model: worker.modelId,
              alive: false,
              in_flight: 0,
              slots: 0,
              cached_tokens: 0,
              capacity_tokens: 0,
              finished: worker.finished,
              restarts: worker.restarts,
              isolation: worker.isolation,
              engine: worker.engine,
              down_reason: worker.joined ? "answering; being calibrated before it is placed on" : worker.downReason,
              precision: worker.precision,
              url: worker.url ?? null,
            })),
        ),
    });
  });
}

/** GET /ready — 200 once every configured worker is loaded and alive, else 503 naming those that are not. */
export function readyRoute(app: FastifyInstance, fleet: Pick<Fleet, "status">, scheduler: GlobalScheduler): void {
  app.get("/ready", async (_request, reply) => {
    const notReady = [
      ...scheduler
        .views()
        .filter((worker) => !worker.alive)
        .map((worker) => worker.id),
      ...fleet
        .status()
        .workers.filter((worker) => !scheduler.hasWorker(worker.id))
        .map((worker) => worker.id),
    ];
    return reply.code(notReady.length === 0 ? 200 : 503).send({ ready: notReady.length === 0, not_ready: notReady });
  });
}
