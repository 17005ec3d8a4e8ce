// Limits on what a client sends, checked before the body is parsed or a string is used as a
// key: how deeply a JSON body nests (server.maxJsonDepth) and how long an id may be
// (server.maxIdLength). Both come from config.yml and need a restart to change.
import type { IncomingMessage } from "node:http";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { ServingError } from "../serving/errors.js";

export interface HttpLimits {
  bodyLimitBytes: number;
  maxJsonDepth: number;
  maxIdLength: number;
}

export const REQUEST_ID_HEADER = "x-request-id";
/** Headers whose values become keys (sessions, worker pinning, the request id in logs). */
const ID_HEADERS = [REQUEST_ID_HEADER, "x-session-id", "x-radixgate-worker"] as const;
/** Body fields used as keys: the session (`user`) and the model lookup (`model`). */
const ID_FIELDS = ["user", "model"] as const;

/**
 * The first nesting depth above `limit` in a JSON text, in one linear pass that skips
 * strings; undefined when the text stays within it. JSON.parse and the validators recurse
 * once per level, so this runs before either sees the text.
 */
export function jsonDepthBeyond(text: string, limit: number): number | undefined {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // a backslash escapes the next character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x5b || c === 0x7b) {
      // [ or {
      if (++depth > limit) return depth;
    } else if ((c === 0x5d || c === 0x7d) && depth > 0) {
      // ] or }; a stray one (invalid JSON anyway) must not lower the count for what follows
      depth--;
    }
  }
  return undefined;
}

/**
 * application/json bodies: the depth check, then fastify's own parser (which refuses
 * `__proto__` and `constructor.prototype` keys). No other content type is parsed, so
 * anything else gets 415.
 */
export function installJsonParser(app: FastifyInstance, limits: HttpLimits): void {
  const parse = app.getDefaultJsonParser("error", "error");
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("application/json", { parseAs: "string" }, (request, body, done) => {
    const text = body as string;
    if (jsonDepthBeyond(text, limits.maxJsonDepth) !== undefined) {
      done(
        new ServingError(
          "json_too_deep",
          `The request body nests arrays and objects more than ${limits.maxJsonDepth} levels deep; at most ${limits.maxJsonDepth} are allowed (server.maxJsonDepth).`,
        ),
        undefined,
      );
      return;
    }
    parse(request, text, done);
  });
}

/** A client's x-request-id is used as the request id only when it is printable ASCII and short enough. */
export function isAcceptableRequestId(value: string, maxLength: number): boolean {
  return value.length > 0 && value.length <= maxLength && /^[\x21-\x7e]+$/.test(value);
}

/**
 * Request ids: the client's x-request-id when acceptable, else `req-<n>`. Runs before routing
 * (even for a bad URL), so it never throws: an unacceptable header is refused by the
 * onRequest check and never becomes the id that is logged and echoed.
 */
export function requestIdGenerator(maxLength: number): (request: IncomingMessage) => string {
  let next = 0;
  return (request) => {
    const sent = request.headers[REQUEST_ID_HEADER];
    if (typeof sent === "string" && isAcceptableRequestId(sent, maxLength)) return sent;
    next = (next + 1) & 0x7fffffff;
    return `req-${next.toString(36)}`;
  };
}

/** Refuses over-long ids in headers (every route) and in the body (after schema validation). */
export function installIdLimits(app: FastifyInstance, limits: HttpLimits): void {
  app.addHook("onRequest", async (request) => {
    for (const name of ID_HEADERS) {
      const raw = request.headers[name];
      const value = Array.isArray(raw) ? raw.join(", ") : raw;
      if (value === undefined) continue;
      checkLength(value, `The header \`${name}\``, name, limits.maxIdLength);
      if (name === REQUEST_ID_HEADER && !isAcceptableRequestId(value, limits.maxIdLength)) {
        throw new ServingError(
          "invalid_request",
          `The header \`${name}\` must be printable ASCII without spaces (characters ! to ~); got ${JSON.stringify(value.slice(0, 40))}.`,
          name,
        );
      }
    }
  });
  app.addHook("preHandler", async (request: FastifyRequest) => {
    const body = request.body;
    if (body === null || typeof body !== "object" || Array.isArray(body)) return;
    for (const name of ID_FIELDS) {
      const value = (body as Record<string, unknown>)[name];
      if (typeof value === "string") checkLength(value, `\`${name}\``, name, limits.maxIdLength);
    }
  });
}

function checkLength(value: string, subject: string, param: string, maxLength: number): void {
  if (value.length <= maxLength) return;
  throw new ServingError("invalid_request", `${subject} is ${value.length} characters long; at most ${maxLength} are allowed (server.maxIdLength).`, param);
}
