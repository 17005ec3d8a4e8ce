// Settings of a generation (generation.* in config.yml): what a request that does not say
// gets. Here, not in serving, because the scheduler prices a request's output by them too.
import { Type, type Static } from "@sinclair/typebox";
import { defaultsOf, SETTINGS_OBJECT } from "./settings-schema.js";

export const GenerationSettingsSchema = Type.Object(
  {
    defaultMaxTokens: Type.Integer({ minimum: 1, default: 256, description: "Completion tokens when a request sets no max_tokens." }),
    maxChoices: Type.Integer({
      minimum: 1,
      maximum: 64,
      default: 8,
      description: "Largest `n` (choices per request) served; each choice runs after the previous one on the same worker.",
    }),
    requestTimeoutMs: Type.Integer({
      minimum: 0,
      default: 600_000,
      description: "A request still running after this long is cancelled and answered 504 (0 = no deadline).",
    }),
  },
  SETTINGS_OBJECT,
);

export type GenerationSettings = Static<typeof GenerationSettingsSchema>;

export const GENERATION_DEFAULTS: GenerationSettings = defaultsOf(GenerationSettingsSchema);
