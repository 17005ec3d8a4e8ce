// GET /health — the process is up and how many workers are alive (200 while any is).
import type { FastifyInstance } from "fastify";
import type { Fleet } from "../../serving/fleet.js";

export function healthRoute(app: FastifyInstance, fleet: Fleet): void {
  app.get("/health", async (_request, reply) => {
    const workers = fleet.views();
    const alive = workers.filter((worker) => worker.alive).length;
    return reply.code(alive > 0 ? 200 : 503).send({
      status: alive > 0 ? "ok" : "no_live_worker",
      workers: workers.map(({ id, modelId, alive, inFlight }) => ({
        id,
        model: modelId,
        alive,
        in_flight: inFlight,
        finished: fleet.get(id)?.engine.finished,
      })),
    });
  });
}
