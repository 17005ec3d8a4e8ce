// Builds the fastify app without listening: the server and the tests (app.inject or a
// real port) get the same routes, validation and error handling.
import Fastify, { type FastifyInstance } from "fastify";
import type { Config } from "../config/schema.js";
import type { Metrics } from "../metrics/metrics.js";
import type { GlobalScheduler } from "../scheduler/global-scheduler.js";
import type { CompletionService } from "../serving/completion-service.js";
import type { Fleet } from "../serving/fleet.js";
import { installErrorHandlers } from "./error-handler.js";
import { chatCompletionsRoute } from "./routes/chat-completions.js";
import { completionsRoute } from "./routes/completions.js";
import { healthRoute, readyRoute } from "./routes/health.js";
import { installApiKeys, type ApiKeys } from "./auth.js";
import { metricsRoute } from "./routes/metrics.js";
import { modelsRoute } from "./routes/models.js";

export interface AppServices {
  config: Config;
  fleet: Fleet;
  scheduler: GlobalScheduler;
  service: CompletionService;
  metrics: Metrics;
  apiKeys: ApiKeys;
  /** Why the last config reload was refused, if it was. */
  configError?: () => string | undefined;
}

export function buildApp({ config, fleet, scheduler, service, metrics, apiKeys, configError = () => undefined }: AppServices): FastifyInstance {
  const app = Fastify({
    logger: { level: config.server.logLevel },
    bodyLimit: config.server.bodyLimitBytes,
    requestIdHeader: "x-request-id",
    ajv: {
      // Validate what the client sent: no type coercion ("0.5" is not a number) and no
      // silent removal of unknown fields (those are checked against the refused list).
      customOptions: { coerceTypes: false, removeAdditional: false, allErrors: true },
    },
  });
  app.addHook("onSend", async (request, reply) => {
    reply.header("x-request-id", request.id);
  });
  installErrorHandlers(app);
  installApiKeys(app, apiKeys);
  metricsRoute(app, metrics);
  chatCompletionsRoute(app, service);
  completionsRoute(app, service);
  modelsRoute(app, fleet);
  healthRoute(app, fleet, scheduler, service, configError);
  readyRoute(app, scheduler);
  return app;
}
