// The global scheduler's settings (scheduler.* in config.yml, next to the policy's): the load
// window, sessions and queues. They need a restart to change.
import { Type, type Static } from "@sinclair/typebox";
import { defaultsOf, SETTINGS_OBJECT } from "../common/settings-schema.js";

export const GlobalSchedulerSettingsSchema = Type.Object(
  {
    windowMs: Type.Integer({ minimum: 1000, default: 180_000, description: "Load and statistics window H, ms (Preble: 3 minutes)." }),
    sessionPinning: Type.Boolean({ default: true, description: "Stick requests with x-session-id (or `user`) to the worker that served the session." }),
    sessionTtlMs: Type.Integer({ minimum: 1000, default: 1_800_000, description: "A session is forgotten after this long idle." }),
    maxSessions: Type.Integer({
      minimum: 1,
      default: 100_000,
      description: "Sessions remembered at most; a new one beyond it evicts the least recently seen.",
    }),
    sessionOverloadPerSlot: Type.Number({
      exclusiveMinimum: 0,
      default: 2,
      description: "A session leaves its worker when it has this many requests in flight per slot.",
    }),
    maxQueuePerWorker: Type.Integer({
      minimum: 0,
      default: 64,
      description:
        "Requests a worker may hold waiting beyond its slots; while a worker is down, the live workers of its model share its places. When every worker of a model is full, new requests wait at the host (scheduler.maxQueueWaitMs).",
    }),
    breakerFailures: Type.Integer({
      minimum: 0,
      default: 5,
      description:
        "Failed requests in a row (the worker's fault, not the client's) that take a worker out of placement for breakerOpenMs; then requests try it again and the first outcome decides (a failure: out for twice as long, at most 60 s). 0 = never.",
    }),
    breakerOpenMs: Type.Integer({ minimum: 100, default: 5000, description: "How long a worker's circuit breaker first stays open, ms." }),
    maxQueueWaitMs: Type.Integer({
      minimum: 0,
      default: 30_000,
      description:
        "How long a request may wait at the host for a place when every worker of its model is full, placed first come first served as places free; then 429. 0 = 429 at once.",
    }),
  },
  SETTINGS_OBJECT,
);

export type GlobalSchedulerSettings = Static<typeof GlobalSchedulerSettingsSchema>;

export const GLOBAL_SCHEDULER_DEFAULTS: GlobalSchedulerSettings = defaultsOf(GlobalSchedulerSettingsSchema);
