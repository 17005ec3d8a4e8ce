// Builds the fastify app without listening: the server and the tests (app.inject or a
// real port) get the same routes, validation and error handling.
import Fastify, { type FastifyInstance } from "fastify";
import type { Config } from "../config/schema.js";
import type { Metrics } from "../metrics/metrics.js";
import type { GlobalScheduler } from "../scheduler/global-scheduler.js";
import type { CompletionService } from "../serving/completion-service.js";
import type { Fleet } from "../serving/fleet.js";
import { clientErrorHandler, frameworkErrorHandler, installErrorHandlers } from "./error-handler.js";
import { installIdLimits, installJsonParser, REQUEST_ID_HEADER, requestIdGenerator, type HttpLimits } from "./limits.js";
import { chatCompletionsRoute } from "./routes/chat-completions.js";
import { completionsRoute } from "./routes/completions.js";
import { healthRoute, readyRoute } from "./routes/health.js";
import { installApiKeys, type ApiKeys } from "./auth.js";
import { loggerOptions } from "./logger.js";
import { metricsRoute } from "./routes/metrics.js";
import { modelsRoute } from "./routes/models.js";
import { statusRoutes } from "./routes/status.js";
import type { StatusReport } from "../serving/status.js";
import type { CacheFeed } from "../serving/cache-feed.js";
import { eventsRoute } from "./routes/events.js";
import { generateRoute } from "./routes/generate.js";

export interface AppServices {
  config: Config;
  fleet: Fleet;
  scheduler: GlobalScheduler;
  service: CompletionService;
  metrics: Metrics;
  apiKeys: ApiKeys;
  /** What this host publishes to routers in front of it (GET /v1/radixgate/events). */
  feed: CacheFeed;
  /** Why the last config reload was refused, if it was. */
  configError?: () => string | undefined;
  /** What the status page shows (GET /status). */
  status: () => Promise<StatusReport>;
}

export function buildApp({ config, fleet, scheduler, service, metrics, apiKeys, feed, configError = () => undefined, status }: AppServices): FastifyInstance {
  const limits: HttpLimits = {
    bodyLimitBytes: config.server.bodyLimitBytes,
    maxJsonDepth: config.server.maxJsonDepth,
    maxIdLength: config.server.maxIdLength,
  };
  const app = Fastify({
    logger: loggerOptions(config.server.logLevel, config.server.logFormat),
    bodyLimit: limits.bodyLimitBytes,
    // The client's x-request-id becomes the request id only once checked (see limits.ts).
    requestIdHeader: false,
    genReqId: requestIdGenerator(limits.maxIdLength),
    routerOptions: { maxParamLength: limits.maxIdLength },
    // Errors raised before a route runs get the same OpenAI shape as the rest.
    frameworkErrors: frameworkErrorHandler(limits),
    clientErrorHandler,
    ajv: {
      // Validate what the client sent: no type coercion ("0.5" is not a number) and no
      // silent removal of unknown fields (those are checked against the refused list).
      customOptions: { coerceTypes: false, removeAdditional: false, allErrors: true },
    },
  });
  app.addHook("onSend", async (request, reply) => {
    reply.header(REQUEST_ID_HEADER, request.id);
  });
  installErrorHandlers(app, limits);
  installJsonParser(app, limits);
  installIdLimits(app, limits);
  installApiKeys(app, apiKeys);
  metricsRoute(app, metrics);
  statusRoutes(app, status);
  chatCompletionsRoute(app, service, config.generation.maxChoices);
  completionsRoute(app, service, config.generation.maxChoices);
  generateRoute(app, service);
  eventsRoute(app, fleet, feed);
  modelsRoute(app, fleet);
  healthRoute(app, fleet, scheduler, service, configError);
  readyRoute(app, fleet, scheduler);
  return app;
}
