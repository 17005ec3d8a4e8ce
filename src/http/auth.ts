// API keys: when config.yml lists any, every request but the probes (/health, /ready,
// /metrics, and the status page at /) must carry `Authorization: Bearer <key>`. Keys are compared as SHA-256 digests
// with timingSafeEqual, against every key, so the time taken says nothing about the key.
import { createHash, timingSafeEqual } from "node:crypto";
import type { FastifyInstance } from "fastify";
import { ServingError } from "../serving/errors.js";
import { sendError } from "./error-handler.js";

// "/" is the status page: a document with no data of its own (the /status it polls takes the key).
const OPEN_ROUTES = new Set(["/", "/health", "/ready", "/metrics"]);

export interface ApiKeys {
  /** Current keys; hot reload replaces them. */
  keys: readonly string[];
}

const digest = (text: string) => createHash("sha256").update(text).digest();

export function matchesAnyKey(presented: string, keys: readonly string[]): boolean {
  const candidate = digest(presented);
  let matched = false;
  for (const key of keys) matched = timingSafeEqual(candidate, digest(key)) || matched;
  return matched;
}

export function installApiKeys(app: FastifyInstance, apiKeys: ApiKeys): void {
  app.addHook("onRequest", async (request, reply) => {
    if (apiKeys.keys.length === 0 || OPEN_ROUTES.has(request.url.split("?")[0]!)) return;
    const header = request.headers.authorization ?? "";
    const presented = header.startsWith("Bearer ") ? header.slice("Bearer ".length).trim() : "";
    if (presented && matchesAnyKey(presented, apiKeys.keys)) return;
    const message = presented
      ? "Incorrect API key provided. Send one of the keys in server.apiKeys as `Authorization: Bearer <key>`."
      : "No API key provided. Send `Authorization: Bearer <key>` with one of the keys in server.apiKeys.";
    return sendError(reply, new ServingError("invalid_api_key", message));
  });
}
