// Reads config.yml, applies defaults and environment overrides, and validates it against the
// schema. Any problem throws a ConfigError whose message names the key path and what is
// allowed, so start-up stops with a line the operator can act on.
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { Value } from "@sinclair/typebox/value";
import type { TSchema } from "@sinclair/typebox";
import { parse as parseYaml, YAMLParseError } from "yaml";
import { isPolicyName, POLICY_NAMES } from "../scheduler/registry.js";
import { ConfigSchema, type Config } from "./schema.js";

export class ConfigError extends Error {
  override name = "ConfigError";
}

export interface LoadedConfig {
  config: Config;
  /** Absolute path of the file read; relative model paths resolve against its folder. */
  path: string;
  dir: string;
  /** The environment it was read with (its overrides); a reload reads the file with the same. */
  env?: NodeJS.ProcessEnv;
}

/** Where the config comes from: the command line's `--config` path, else RADIXGATE_CONFIG, else ./config.yml. */
export function resolveConfigPath(flag: string | undefined, env: NodeJS.ProcessEnv, cwd = process.cwd()): string {
  return resolve(cwd, flag ?? env.RADIXGATE_CONFIG ?? "config.yml");
}

export function loadConfigFile(path: string, env: NodeJS.ProcessEnv = process.env): LoadedConfig {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new ConfigError(`cannot read config file ${path}: ${(error as Error).message}`);
  }
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (error) {
    const detail = error instanceof YAMLParseError ? error.message : String(error);
    throw new ConfigError(`${path} is not valid YAML: ${detail}`);
  }
  return { config: parseConfig(raw ?? {}, env, path), path, dir: dirname(path), env };
}

/** Validates an already-parsed config object (tests build configs in code through this). */
export function parseConfig(raw: unknown, env: NodeJS.ProcessEnv = {}, source = "config"): Config {
  const withDefaults = Value.Default(ConfigSchema, structuredClone(raw));
  const problems = [...Value.Errors(ConfigSchema, withDefaults)];
  if (problems.length > 0) {
    // Report the first problem of each path: a wrong type also fails the union/format checks below it.
    const seen = new Set<string>();
    const lines: string[] = [];
    for (const problem of problems) {
      const path = formatKeyPath(problem.path);
      if (seen.has(path)) continue;
      seen.add(path);
      lines.push(`  ${path}: ${describeProblem(problem.message, problem.schema, problem.value)}`);
    }
    throw new ConfigError(`invalid ${source}:\n${lines.join("\n")}`);
  }
  const config = withDefaults as Config;
  const ids = config.models.map((model) => model.id);
  const repeated = ids.find((id, index) => ids.indexOf(id) !== index);
  if (repeated !== undefined) {
    throw new ConfigError(`invalid ${source}:\n  models: the id "${repeated}" is used twice; each model needs its own id`);
  }
  for (const model of config.models) {
    for (const [index, remote] of model.remote.entries()) {
      const misplaced = [
        ...(remote.kind === "llama-server" ? (["model", "apiKey"] as const) : []),
        ...(remote.kind !== "openai" ? (["slots", "cacheTtlS"] as const) : []),
      ].filter((key) => remote[key] !== undefined);
      if (misplaced.length > 0) {
        throw new ConfigError(
          `invalid ${source}:\n  models: "${model.id}" remote[${index}] is a ${remote.kind}: ${misplaced.map((key) => `\`${key}\``).join(" and ")} ${misplaced.length > 1 ? "are" : "is"} not for that kind (model and apiKey: radixgate and openai; slots and cacheTtlS: openai); remove ${misplaced.length > 1 ? "them" : "it"}`,
        );
      }
    }
  }
  const idle = config.models.find((model) => model.workers === 0 && model.remote.length === 0);
  if (idle !== undefined) {
    throw new ConfigError(
      `invalid ${source}:\n  models: "${idle.id}" has workers: 0 and no remote engines; give it local workers (1 or more, or auto) or a remote engine`,
    );
  }
  applyEnvOverrides(config, env);
  if (!isPolicyName(config.scheduler.policy)) {
    const from = env.RADIXGATE_POLICY ? "env RADIXGATE_POLICY" : "scheduler.policy";
    throw new ConfigError(`invalid ${source}:\n  ${from}: unknown policy "${config.scheduler.policy}"; available: ${POLICY_NAMES.join(", ")}`);
  }
  return config;
}

function applyEnvOverrides(config: Config, env: NodeJS.ProcessEnv): void {
  if (env.HOST) config.server.host = env.HOST;
  if (env.PORT !== undefined && env.PORT !== "") {
    const port = Number(env.PORT);
    if (!Number.isInteger(port) || port < 0 || port > 65535) {
      throw new ConfigError(`env PORT must be an integer from 0 to 65535, got "${env.PORT}"`);
    }
    config.server.port = port;
  }
  if (env.RADIXGATE_POLICY) config.scheduler.policy = env.RADIXGATE_POLICY;
  if (env.RADIXGATE_API_KEYS) {
    const keys = env.RADIXGATE_API_KEYS.split(",")
      .map((key) => key.trim())
      .filter((key) => key.length > 0);
    config.server.apiKeys = [...new Set([...config.server.apiKeys, ...keys])];
  }
}

/** "/models/0/slots" -> "models[0].slots" — the way a person reads a YAML key. */
export function formatKeyPath(pointer: string): string {
  if (pointer === "" || pointer === "/") return "(top level)";
  return pointer
    .split("/")
    .slice(1)
    .map((part) => part.replace(/~1/g, "/").replace(/~0/g, "~"))
    .reduce((acc, part) => (/^\d+$/.test(part) ? `${acc}[${part}]` : acc ? `${acc}.${part}` : part), "");
}

function describeProblem(message: string, schema: TSchema, value: unknown): string {
  const got = value === undefined ? "nothing" : JSON.stringify(value);
  if (message.startsWith("Unexpected property")) {
    return `unknown key (allowed here: ${allowedKeys(schema)})`;
  }
  const allowed = describeSchema(schema);
  return `${message.toLowerCase()}; got ${got}${allowed ? `, allowed: ${allowed}` : ""}`;
}

function allowedKeys(schema: TSchema): string {
  // For an unexpected property TypeBox reports the object schema itself.
  const properties = (schema as { properties?: Record<string, unknown> }).properties;
  return properties ? Object.keys(properties).join(", ") : "none";
}

function describeSchema(schema: TSchema): string {
  const s = schema as Record<string, unknown>;
  if (Array.isArray(s.anyOf)) {
    return (s.anyOf as TSchema[]).map((option) => describeSchema(option)).join(" | ");
  }
  if ("const" in s) return JSON.stringify(s.const);
  const parts: string[] = [];
  if (typeof s.type === "string") parts.push(s.type);
  if (typeof s.minimum === "number") parts.push(`>= ${s.minimum}`);
  if (typeof s.maximum === "number") parts.push(`<= ${s.maximum}`);
  if (typeof s.pattern === "string") parts.push(`matching ${s.pattern}`);
  if (typeof s.description === "string") parts.push(`(${s.description})`);
  return parts.join(" ");
}
