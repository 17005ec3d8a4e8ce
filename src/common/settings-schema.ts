// Settings are TypeBox schemas: each part of Radixgate declares its own (type, limits,
// default, description in one place) and config/schema.ts assembles config.yml from them.
import { CloneType, type Static, type TObject, type TSchema } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";

/** A misspelt key stops start-up instead of being ignored. */
export const CLOSED = { additionalProperties: false } as const;

/** A section of config.yml that may be left out: every key then takes its default. */
export const SETTINGS_OBJECT = { ...CLOSED, default: {} } as const;

/** The keyword that marks a node a config reload applies at once; the rest waits for a restart. */
const LIVE_KEYWORD = "live";

/** `schema` marked live (a copy). */
export function live<T extends TSchema>(schema: T): T {
  return CloneType(schema, { [LIVE_KEYWORD]: true });
}

/** The schema's defaults (frozen: shared by every caller); throws at start-up when a key has none. */
export function defaultsOf<T extends TObject>(schema: T): Static<T> {
  const value: unknown = Value.Default(schema, {});
  if (!Value.Check(schema, value)) {
    const missing = [...Value.Errors(schema, value)].map((error) => error.path).join(", ");
    throw new Error(`settings schema without a default for ${missing}`);
  }
  return Object.freeze(value);
}

/** Dotted paths of the nodes marked live; the keys inside a live object are live with it. */
export function liveKeys(schema: TSchema, prefix = ""): string[] {
  if (prefix !== "" && (schema as Record<string, unknown>)[LIVE_KEYWORD] === true) return [prefix];
  const properties = (schema as { properties?: Record<string, TSchema> }).properties ?? {};
  return Object.entries(properties).flatMap(([key, child]) => liveKeys(child, prefix === "" ? key : `${prefix}.${key}`));
}
