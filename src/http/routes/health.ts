// GET /health — the process is up and how its workers are (200 while any is alive).
import type { FastifyInstance } from "fastify";
import type { GlobalScheduler } from "../../scheduler/global-scheduler.js";
import type { CompletionService } from "../../serving/completion-service.js";
import type { Fleet } from "../../serving/fleet.js";

export function healthRoute(app: FastifyInstance, fleet: Fleet, scheduler: GlobalScheduler, service: CompletionService): void {
  app.get("/health", async (_request, reply) => {
    const workers = scheduler.views();
    const alive = workers.filter((worker) => worker.alive).length;
    return reply.code(alive > 0 ? 200 : 503).send({
      status: alive > 0 ? "ok" : "no_live_worker",
      policy: scheduler.policy.name,
      failovers: service.failovers,
      workers: workers.map((worker) => ({
        id: worker.id,
        model: worker.modelId,
        alive: worker.alive,
        in_flight: worker.inFlight,
        slots: worker.slots,
        cached_tokens: worker.cachedTokens,
        capacity_tokens: worker.capacityTokens,
        finished: fleet.get(worker.id)?.engine.finished,
        restarts: fleet.get(worker.id)?.restarts ?? 0,
        isolation: fleet.get(worker.id)?.engine.options.isolation,
      })),
    });
  });
}
