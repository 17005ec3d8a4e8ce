// Request bodies as JSON Schema (TypeBox): fastify's Ajv validates them, TypeScript reads
// the same definitions as types. Roles and part types use `enum` so a wrong value gets one
// clear error listing what is allowed.
import { Type, type Static, type TSchema } from "@sinclair/typebox";

function StringEnum<const T extends readonly string[]>(values: T, description?: string) {
  return Type.Unsafe<T[number]>({ type: "string", enum: values, ...(description ? { description } : {}) });
}

export const CHAT_ROLES = ["system", "developer", "user", "assistant", "tool"] as const;

const TextPart = Type.Object({
  type: StringEnum(["text"], "Only text parts are supported (no images or audio)."),
  text: Type.String(),
});

export const ChatMessageSchema = Type.Object({
  role: StringEnum(CHAT_ROLES),
  content: Type.Union([Type.String(), Type.Array(TextPart), Type.Null()]),
  name: Type.Optional(Type.String()),
});

const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

export const ChatCompletionRequestSchema = Type.Object({
  model: Type.String({ minLength: 1 }),
  messages: Type.Array(ChatMessageSchema, { minItems: 1 }),
  stream: Type.Optional(Nullable(Type.Boolean())),
  stream_options: Type.Optional(Nullable(Type.Object({ include_usage: Type.Optional(Type.Boolean()) }))),
  max_tokens: Type.Optional(Nullable(Type.Integer({ minimum: 1 }))),
  max_completion_tokens: Type.Optional(Nullable(Type.Integer({ minimum: 1 }))),
  temperature: Type.Optional(Nullable(Type.Number({ minimum: 0, maximum: 2 }))),
  top_p: Type.Optional(Nullable(Type.Number({ minimum: 0, maximum: 1 }))),
  seed: Type.Optional(Nullable(Type.Integer())),
  stop: Type.Optional(Nullable(Type.Union([Type.String(), Type.Array(Type.String(), { maxItems: 4 })]))),
  user: Type.Optional(Type.String()),
  n: Type.Optional(Nullable(Type.Integer({ minimum: 1 }))),
});

export type ChatCompletionRequest = Static<typeof ChatCompletionRequestSchema>;
export type ChatMessage = Static<typeof ChatMessageSchema>;

/**
 * OpenAI parameters Radixgate does not implement yet. A request that sets one to anything
 * but its neutral value is refused with a 400 naming it: never silently ignored.
 */
export const UNSUPPORTED_PARAMETERS: Record<string, (value: unknown) => boolean> = {
  n: (value) => value !== 1,
  logprobs: (value) => value === true,
  top_logprobs: () => true,
  tools: (value) => Array.isArray(value) && value.length > 0,
  tool_choice: (value) => value !== "none",
  functions: () => true,
  function_call: () => true,
  response_format: (value) => (value as { type?: unknown } | null)?.type !== "text",
  presence_penalty: (value) => value !== 0,
  frequency_penalty: (value) => value !== 0,
  logit_bias: (value) => typeof value === "object" && Object.keys(value as object).length > 0,
  audio: () => true,
  modalities: (value) => !(Array.isArray(value) && value.every((modality) => modality === "text")),
  prediction: () => true,
};
