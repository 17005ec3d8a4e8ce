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

const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

/** A call in an assistant message: `arguments` is JSON text (checked by the route, which names the call). */
const ToolCallSchema = Type.Object({
  id: Type.String({ minLength: 1 }),
  type: StringEnum(["function"], "Only function tool calls are supported."),
  function: Type.Object({ name: Type.String({ minLength: 1 }), arguments: Type.String() }),
});

export const ChatMessageSchema = Type.Object({
  role: StringEnum(CHAT_ROLES),
  content: Type.Optional(Type.Union([Type.String(), Type.Array(TextPart), Type.Null()])),
  name: Type.Optional(Type.String()),
  /** Assistant messages: the calls the model made. */
  tool_calls: Type.Optional(Nullable(Type.Array(ToolCallSchema))),
  /** Tool messages: which call this is the result of. */
  tool_call_id: Type.Optional(Type.String()),
});

/** OpenAI's limit on a function's name. */
export const TOOL_NAME_PATTERN = "^[a-zA-Z0-9_-]{1,64}$";

export const ToolSchema = Type.Object({
  type: StringEnum(["function"], "Only function tools are supported."),
  function: Type.Object({
    name: Type.String({ pattern: TOOL_NAME_PATTERN, description: "Letters, digits, underscores and dashes, at most 64." }),
    description: Type.Optional(Type.String()),
    parameters: Type.Optional(Type.Unsafe<Record<string, unknown>>({ type: "object" })),
    strict: Type.Optional(Nullable(Type.Boolean())),
  }),
});

export const TOOL_CHOICE_MODES = ["none", "auto", "required"] as const;

/** A mode is a plain string here: an unknown one is refused with the modes listed, not as a union error. */
export const ToolChoiceSchema = Type.Union([
  Type.String(),
  Type.Object({ type: StringEnum(["function"]), function: Type.Object({ name: Type.String({ minLength: 1 }) }) }),
]);

/** OpenAI's range for presence_penalty and frequency_penalty. */
const Penalty = Type.Optional(Nullable(Type.Number({ minimum: -2, maximum: 2 })));

export const RESPONSE_FORMAT_TYPES = ["text", "json_object", "json_schema"] as const;

/** `type` is a plain string here: an unknown type is refused by name (unsupported_parameter), not as a schema error. */
export const ResponseFormatSchema = Type.Object({
  type: Type.String(),
  json_schema: Type.Optional(
    Type.Object({
      name: Type.String({ minLength: 1 }),
      description: Type.Optional(Type.String()),
      schema: Type.Optional(Type.Unsafe<Record<string, unknown>>({ type: "object" })),
      strict: Type.Optional(Nullable(Type.Boolean())),
    }),
  ),
});

/** The sampling and streaming fields both endpoints take. */
const GenerationFields = {
  model: Type.String({ minLength: 1 }),
  stream: Type.Optional(Nullable(Type.Boolean())),
  stream_options: Type.Optional(Nullable(Type.Object({ include_usage: Type.Optional(Type.Boolean()) }))),
  max_tokens: Type.Optional(Nullable(Type.Integer({ minimum: 1 }))),
  temperature: Type.Optional(Nullable(Type.Number({ minimum: 0, maximum: 2 }))),
  top_p: Type.Optional(Nullable(Type.Number({ minimum: 0, maximum: 1 }))),
  seed: Type.Optional(Nullable(Type.Integer())),
  stop: Type.Optional(Nullable(Type.Union([Type.String(), Type.Array(Type.String(), { maxItems: 4 })]))),
  user: Type.Optional(Type.String()),
  n: Type.Optional(Nullable(Type.Integer({ minimum: 1 }))),
  presence_penalty: Penalty,
  frequency_penalty: Penalty,
  response_format: Type.Optional(Nullable(ResponseFormatSchema)),
};

export const ChatCompletionRequestSchema = Type.Object({
  ...GenerationFields,
  messages: Type.Array(ChatMessageSchema, { minItems: 1 }),
  max_completion_tokens: Type.Optional(Nullable(Type.Integer({ minimum: 1 }))),
  logprobs: Type.Optional(Nullable(Type.Boolean())),
  top_logprobs: Type.Optional(Nullable(Type.Integer({ minimum: 0, maximum: 20 }))),
  tools: Type.Optional(Nullable(Type.Array(ToolSchema, { maxItems: 128 }))),
  tool_choice: Type.Optional(Nullable(ToolChoiceSchema)),
  parallel_tool_calls: Type.Optional(Nullable(Type.Boolean())),
});

export type ChatCompletionRequest = Static<typeof ChatCompletionRequestSchema>;
export type ChatMessage = Static<typeof ChatMessageSchema>;
export type ResponseFormatRequest = Static<typeof ResponseFormatSchema>;
export type ToolRequest = Static<typeof ToolSchema>;
export type ToolChoiceRequest = Static<typeof ToolChoiceSchema>;

/**
 * OpenAI's legacy completions. `prompt` is only checked as "string or array" here: the route
 * tells one token array from several prompts and names the exact element that is wrong.
 */
export const CompletionRequestSchema = Type.Object({
  ...GenerationFields,
  prompt: Type.Union([Type.String(), Type.Array(Type.Unknown())]),
  logprobs: Type.Optional(Nullable(Type.Integer({ minimum: 0, maximum: 5 }))),
});

export type CompletionRequest = Static<typeof CompletionRequestSchema>;

/**
 * OpenAI parameters Radixgate does not implement yet. A request that sets one to anything
 * but its neutral value is refused with a 400 naming it: never silently ignored.
 */
export const UNSUPPORTED_PARAMETERS: Record<string, (value: unknown) => boolean> = {
  functions: () => true,
  function_call: () => true,
  logit_bias: (value) => typeof value === "object" && Object.keys(value as object).length > 0,
  audio: () => true,
  modalities: (value) => !(Array.isArray(value) && value.every((modality) => modality === "text")),
  prediction: () => true,
};

/** The legacy completions parameters Radixgate does not implement (same rule: refused by name). */
export const UNSUPPORTED_COMPLETION_PARAMETERS: Record<string, (value: unknown) => boolean> = {
  best_of: (value) => value !== 1,
  echo: (value) => value !== false,
  suffix: (value) => value !== "",
  logit_bias: (value) => typeof value === "object" && Object.keys(value as object).length > 0,
};

// ---------------------------------------------------------------------------------------------
// JSON schemas for response_format: node-llama-cpp 3.21.1 turns a subset of JSON Schema into
// a grammar and silently drops the rest (an unknown keyword, format or type becomes no
// constraint, or `null`, with at most a console warning). Everything it would drop is
// refused here; two spellings it lacks are rewritten into ones it has.

/** Constraint keywords the grammar converter ignores: output could break them. */
const IGNORED_CONSTRAINTS = new Set([
  "allOf",
  "not",
  "if",
  "then",
  "else",
  "dependentSchemas",
  "dependentRequired",
  "dependencies",
  "pattern",
  "patternProperties",
  "propertyNames",
  "unevaluatedProperties",
  "unevaluatedItems",
  "contains",
  "minContains",
  "maxContains",
  "uniqueItems",
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "multipleOf",
  "contentEncoding",
  "contentMediaType",
  "contentSchema",
  "definitions",
  "$dynamicRef",
  "$recursiveRef",
]);
const TYPES = new Set(["string", "number", "integer", "boolean", "null", "object", "array"]);
const STRING_FORMATS = new Set(["date-time", "date", "time"]);

export class UnsupportedSchemaError extends Error {}

/**
 * The schema node-llama-cpp will compile, or an UnsupportedSchemaError saying where and why
 * not. Rewrites: `anyOf` -> `oneOf` (the grammar of either is the alternation of the
 * branches), and `type: [a, b]` -> `oneOf` of one schema per type (the converter keeps a type
 * list only for scalar types, and then drops their other keywords).
 */
export function toGrammarSchema(schema: Record<string, unknown>, path: string): Record<string, unknown> {
  return normalizeSchema(schema, path, new Set());
}

function normalizeSchema(node: unknown, path: string, defsInScope: ReadonlySet<string>): Record<string, unknown> {
  if (node === null || typeof node !== "object" || Array.isArray(node)) {
    throw new UnsupportedSchemaError(`${path} must be a schema object; got ${JSON.stringify(node)}.`);
  }
  const schema = { ...(node as Record<string, unknown>) };
  for (const keyword of Object.keys(schema)) {
    if (IGNORED_CONSTRAINTS.has(keyword)) {
      throw new UnsupportedSchemaError(`${path} uses \`${keyword}\`, which the JSON-schema grammar cannot enforce.`);
    }
  }
  const defs = schema.$defs;
  let scope = defsInScope;
  if (defs !== undefined) {
    if (defs === null || typeof defs !== "object" || Array.isArray(defs)) throw new UnsupportedSchemaError(`${path}.$defs must be an object of schemas.`);
    scope = new Set([...defsInScope, ...Object.keys(defs)]);
    schema.$defs = Object.fromEntries(Object.entries(defs).map(([name, def]) => [name, normalizeSchema(def, `${path}.$defs.${name}`, scope)]));
  }
  if (schema.anyOf !== undefined) {
    if (schema.oneOf !== undefined) throw new UnsupportedSchemaError(`${path} has both \`anyOf\` and \`oneOf\`; use one.`);
    schema.oneOf = schema.anyOf;
    delete schema.anyOf;
  }
  if (typeof schema.$ref === "string") {
    const name = schema.$ref.startsWith("#/$defs/") ? schema.$ref.slice("#/$defs/".length) : undefined;
    if (name === undefined || !scope.has(name)) {
      throw new UnsupportedSchemaError(`${path}.$ref "${schema.$ref}" must point to a definition of an enclosing \`$defs\` ("#/$defs/<name>").`);
    }
    return schema;
  }
  if (schema.$ref !== undefined) throw new UnsupportedSchemaError(`${path}.$ref must be a string.`);
  if (schema.oneOf !== undefined) {
    if (!Array.isArray(schema.oneOf) || schema.oneOf.length === 0) throw new UnsupportedSchemaError(`${path}.oneOf must be a non-empty array of schemas.`);
    schema.oneOf = schema.oneOf.map((branch, i) => normalizeSchema(branch, `${path}.oneOf[${i}]`, scope));
    return schema;
  }
  // const and enum are compiled as literals (node-llama-cpp refuses non-scalar ones itself).
  if (schema.const !== undefined) return schema;
  if (schema.enum !== undefined) {
    if (!Array.isArray(schema.enum) || schema.enum.length === 0) throw new UnsupportedSchemaError(`${path}.enum must be a non-empty array.`);
    return schema;
  }
  const type = schema.type;
  if (Array.isArray(type)) {
    const types = [...new Set(type)];
    if (types.length === 1) return normalizeSchema({ ...schema, type: types[0] }, path, defsInScope);
    const { $defs, type: _list, ...rest } = schema;
    const branches = types.map((one, i) => normalizeSchema({ ...rest, type: one }, `${path}.type[${i}]`, scope));
    return { ...($defs !== undefined ? { $defs } : {}), oneOf: branches };
  }
  if (typeof type !== "string" || !TYPES.has(type)) {
    throw new UnsupportedSchemaError(
      type === undefined
        ? `${path} needs a \`type\`, \`const\`, \`enum\`, \`anyOf\`/\`oneOf\` or \`$ref\`.`
        : `${path}.type must be one of ${[...TYPES].join(", ")}; got ${JSON.stringify(type)}.`,
    );
  }
  if (type === "string" && schema.format !== undefined && !STRING_FORMATS.has(String(schema.format))) {
    throw new UnsupportedSchemaError(`${path}.format "${String(schema.format)}" is not supported; supported formats: ${[...STRING_FORMATS].join(", ")}.`);
  }
  if (type === "object") {
    const properties = schema.properties ?? {};
    if (properties === null || typeof properties !== "object" || Array.isArray(properties))
      throw new UnsupportedSchemaError(`${path}.properties must be an object of schemas.`);
    schema.properties = Object.fromEntries(
      Object.entries(properties).map(([name, property]) => [name, normalizeSchema(property, `${path}.properties.${name}`, scope)]),
    );
    // Every listed property is always generated (which satisfies any \`required\`); a required
    // name that is not listed would never be.
    const missing = Array.isArray(schema.required) ? schema.required.filter((name) => !Object.hasOwn(properties, String(name))) : [];
    if (missing.length > 0) throw new UnsupportedSchemaError(`${path}.required names ${JSON.stringify(missing[0])}, which is not in its properties.`);
    const additional = schema.additionalProperties;
    if (additional !== undefined && typeof additional !== "boolean") {
      schema.additionalProperties = normalizeSchema(additional, `${path}.additionalProperties`, scope);
    }
  }
  if (type === "array") {
    if (schema.items !== undefined) schema.items = normalizeSchema(schema.items, `${path}.items`, scope);
    if (schema.prefixItems !== undefined) {
      if (!Array.isArray(schema.prefixItems)) throw new UnsupportedSchemaError(`${path}.prefixItems must be an array of schemas.`);
      schema.prefixItems = schema.prefixItems.map((item, i) => normalizeSchema(item, `${path}.prefixItems[${i}]`, scope));
    }
  }
  return schema;
}
