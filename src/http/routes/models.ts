// GET /v1/models and GET /v1/models/{id} — every model the box serves, in OpenAI's shapes.
import type { FastifyInstance } from "fastify";
import { ServingError } from "../../serving/errors.js";
import type { Fleet, ServedModel } from "../../serving/fleet.js";

export function modelsRoute(app: FastifyInstance, fleet: Fleet): void {
  const describe = (model: ServedModel) => ({
    id: model.config.id,
    object: "model",
    created: model.createdAt,
    owned_by: "radixgate",
    context_length: model.contextSize,
    workers: fleet.workerIds(model.config.id),
  });
  app.get("/v1/models", async () => ({ object: "list", data: [...fleet.models.values()].map(describe) }));
  app.get<{ Params: { id: string } }>("/v1/models/:id", async (request) => {
    const model = fleet.models.get(request.params.id);
    if (!model) {
      throw new ServingError(
        "model_not_found",
        `The model "${request.params.id}" is not served here. Served models: ${[...fleet.models.keys()].join(", ")}.`,
        "model",
      );
    }
    return describe(model);
  });
}
