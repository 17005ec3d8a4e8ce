// The settings of a worker's local scheduler (scheduler.local in config.yml): what the worker
// is started with and what a config reload sends it.
import { Type, type Static } from "@sinclair/typebox";
import { defaultsOf, live, SETTINGS_OBJECT } from "../common/settings-schema.js";

// Live: a worker takes new settings at its next admission and batch.
export const LocalSchedulerSettingsSchema = live(
  Type.Object(
    {
      priorityGroups: Type.Integer({
        minimum: 1,
        maximum: 100,
        default: 10,
        description: "P: a worker's waiting requests split into this many groups by hit ratio (Preble: 10).",
      }),
      quotaPerGroup: Type.Integer({
        minimum: 1,
        maximum: 10_000,
        default: 10,
        description: "k: one pass admits up to (group + 1) x k requests of a group (Preble: 10).",
      }),
      chunkTokens: Type.Integer({
        minimum: 1,
        maximum: 1_048_576,
        default: 1024,
        description: "Prefill tokens per batch, shared by prefilling requests after every decoding one got its token (Preble: 1024).",
      }),
      hitRatioWindowMs: Type.Integer({
        minimum: 0,
        default: 180_000,
        description: "A spilled state counts toward a waiting request's hit ratio only if used within this window (slots always count).",
      }),
    },
    SETTINGS_OBJECT,
  ),
);

export type LocalSchedulerSettings = Static<typeof LocalSchedulerSettingsSchema>;

export const LOCAL_SCHEDULER_DEFAULTS: LocalSchedulerSettings = defaultsOf(LocalSchedulerSettingsSchema);
