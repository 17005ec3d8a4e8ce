// GET /metrics — Prometheus text format (see src/metrics/metrics.ts and the README).
import type { FastifyInstance } from "fastify";
import type { Metrics } from "../../metrics/metrics.js";

export function metricsRoute(app: FastifyInstance, metrics: Metrics): void {
  app.addHook("onResponse", async (request, reply) => {
    metrics.httpResponse(request.routeOptions.url ?? "unknown", request.method, reply.statusCode, reply.elapsedTime / 1000);
  });
  app.get("/metrics", async (_request, reply) => {
    reply.header("content-type", metrics.contentType);
    return metrics.exposition();
  });
}
