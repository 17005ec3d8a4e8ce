// GET /v1/models — every model the box serves, in OpenAI's list shape.
import type { FastifyInstance } from "fastify";
import type { Fleet } from "../../serving/fleet.js";

export function modelsRoute(app: FastifyInstance, fleet: Fleet): void {
  app.get("/v1/models", async () => ({
    object: "list",
    data: [...fleet.models.values()].map((model) => ({
      id: model.config.id,
      object: "model",
      created: model.createdAt,
      owned_by: "radixgate",
      context_length: model.contextSize,
      workers: fleet.workerIds(model.config.id),
    })),
  }));
}
