// The one place that turns any error into OpenAI's shape:
//   {error: {message, type, param, code}}
// That includes what fastify refuses before a route runs (a bad URL, an unparsable body, a
// wrong method) and what Node's HTTP parser refuses before fastify sees it. Validation errors
// name the field (as `messages[0].role`) and say what is allowed; an unexpected error becomes
// a 500 with the request id and nothing internal.
import { maxHeaderSize, STATUS_CODES } from "node:http";
import type { Duplex } from "node:stream";
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { ServingError } from "../serving/errors.js";
import { REQUEST_ID_HEADER, type HttpLimits } from "./limits.js";

export interface OpenAIErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

export function errorBody(error: ServingError): OpenAIErrorBody {
  return { error: { message: error.message, type: error.type, param: error.param, code: error.code } };
}

/** Messages too long to be useful are cut here (a URL, a Content-Type). */
function clip(text: string, max = 120): string {
  return text.length > max ? `${text.slice(0, max - 3)}...` : text;
}

const pathOf = (request: FastifyRequest) => request.url.split("?")[0]!;

/**
 * Fastify's own errors a client can cause, mapped onto the catalogue: a bad body, a bad URL,
 * a path segment over the limit. Anything else fastify raises is a server bug (500).
 */
function fastifyError(error: FastifyError, request: FastifyRequest, limits: HttpLimits): ServingError | undefined {
  const sendJson = 'Send a JSON object such as {"model": "...", "messages": [...]}.';
  switch (error.code) {
    case "FST_ERR_CTP_INVALID_JSON_BODY":
      return new ServingError("invalid_json", `The request body is not valid JSON (or has a \`__proto__\` or \`constructor.prototype\` key). ${sendJson}`);
    case "FST_ERR_CTP_EMPTY_JSON_BODY":
      return new ServingError("invalid_json", `The request body is empty. ${sendJson}`);
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
    case "FST_ERR_ROUTE_MISSING_CONTENT_TYPE": {
      const sent = request.headers["content-type"];
      const got = sent === undefined ? "no Content-Type" : `Content-Type ${JSON.stringify(clip(sent, 60))}`;
      return new ServingError("unsupported_media_type", `The request body has ${got}; send it as application/json.`);
    }
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return new ServingError(
        "body_too_large",
        `The request body is larger than the ${limits.bodyLimitBytes} bytes this server accepts (server.bodyLimitBytes).`,
      );
    case "FST_ERR_CTP_INVALID_CONTENT_LENGTH":
      return new ServingError("invalid_request", "The Content-Length header does not match the body; send the body's exact length in bytes.");
    case "FST_ERR_BAD_URL":
    case "FST_ERR_INVALID_URL":
      return new ServingError(
        "invalid_url",
        `The URL ${JSON.stringify(clip(pathOf(request)))} has a malformed percent-escape; every % must start a UTF-8 byte as %XX (hex).`,
      );
    case "FST_ERR_MAX_PARAM_LENGTH":
      return new ServingError(
        "url_too_long",
        `A path segment of ${JSON.stringify(clip(pathOf(request)))} is longer than the ${limits.maxIdLength} characters allowed (server.maxIdLength).`,
      );
    default:
      return undefined;
  }
}

/** `limits` is for fastify's own errors, which only the error handlers above a route see. */
export function toServingError(error: FastifyError, request: FastifyRequest, limits?: HttpLimits): ServingError {
  if (error instanceof ServingError) return error;
  if (error.validation && error.validation.length > 0) {
    return validationError(error.validation, error.validationContext ?? "body", request);
  }
  const known = limits ? fastifyError(error, request, limits) : undefined;
  if (known) return known;
  if (error.statusCode === 400) return new ServingError("invalid_request", clip(error.message, 200));
  return new ServingError("internal_error", `Internal server error (request ${request.id}). The server logged the details.`);
}

function logAndSend(error: FastifyError, request: FastifyRequest, reply: FastifyReply, limits: HttpLimits): FastifyReply {
  const serving = toServingError(error, request, limits);
  if (serving.status >= 500) request.log.error({ err: error }, "request failed");
  else request.log.info({ code: serving.code, message: serving.message }, "request refused");
  return sendError(reply, serving);
}

/** For fastify's `frameworkErrors` option: errors raised before routing (a bad URL, a path segment over the limit). */
export function frameworkErrorHandler(limits: HttpLimits) {
  return (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => logAndSend(error, request, reply.header(REQUEST_ID_HEADER, request.id), limits);
}

/**
 * For fastify's `clientErrorHandler` option: requests Node's HTTP parser refuses before
 * fastify sees them (headers over Node's size limit, a malformed request line, a client too
 * slow to send its headers). The answer goes straight to the socket, which is then closed.
 */
export function clientErrorHandler(this: FastifyInstance, error: NodeJS.ErrnoException, socket: Duplex): void {
  if (error.code === "ECONNRESET" || socket.destroyed) return;
  const serving =
    error.code === "HPE_HEADER_OVERFLOW"
      ? new ServingError(
          "headers_too_large",
          `The request line and headers are larger than the ${maxHeaderSize} bytes this server accepts; shorten the URL or the headers.`,
        )
      : error.code === "ERR_HTTP_REQUEST_TIMEOUT"
        ? new ServingError("request_timeout", "The request was not received in time; send the whole request without pausing.")
        : new ServingError(
            "invalid_http",
            `The request is not valid HTTP/1.1 (${clip(error.code ?? "parse error", 40)}); send a well-formed request line, headers and body.`,
          );
  this.log.debug({ code: error.code }, "malformed HTTP request refused");
  if (socket.writable) {
    const body = JSON.stringify(errorBody(serving));
    socket.write(
      `HTTP/1.1 ${serving.status} ${STATUS_CODES[serving.status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}

/** A route's URL as a pattern over concrete paths (`:id` matches one segment). */
function routePattern(url: string): RegExp {
  const escaped = url.split("/").map((part) => (part.startsWith(":") ? "[^/]+" : part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")));
  return new RegExp(`^${escaped.join("/")}$`);
}

export function installErrorHandlers(app: FastifyInstance, limits: HttpLimits): void {
  const routes: { pattern: RegExp; methods: string[] }[] = [];
  app.addHook("onRoute", (route) => {
    routes.push({ pattern: routePattern(route.url), methods: [route.method].flat() });
  });
  app.setErrorHandler((error: FastifyError, request, reply) => logAndSend(error, request, reply, limits));
  app.setNotFoundHandler((request, reply) => {
    const path = pathOf(request);
    const allowed = [...new Set(routes.filter((route) => route.pattern.test(path)).flatMap((route) => route.methods))];
    if (allowed.length > 0) {
      reply.header("allow", allowed.join(", "));
      return sendError(
        reply,
        new ServingError("method_not_allowed", `${clip(request.method, 20)} is not allowed on ${clip(path)}; allowed: ${allowed.join(", ")}.`),
      );
    }
    return sendError(
      reply,
      new ServingError(
        "route_not_found",
        `There is no route ${clip(request.method, 20)} ${clip(path)}. See GET /v1/models, POST /v1/chat/completions, POST /v1/completions.`,
      ),
    );
  });
}

export function sendError(reply: FastifyReply, error: ServingError): FastifyReply {
  if (error.retryAfterSeconds !== undefined) reply.header("retry-after", String(error.retryAfterSeconds));
  return reply.code(error.status).header("content-type", "application/json; charset=utf-8").send(errorBody(error));
}

interface AjvError {
  keyword: string;
  instancePath: string;
  message?: string;
  params: Record<string, unknown>;
}

/**
 * Ajv reports every failed branch of a union; the most useful line is the deepest path, and
 * at equal depth a wrong enum value (it lists what is allowed) beats a missing property,
 * which beats a broken limit (maxItems, minimum: only the branch whose type matched can
 * report one, so it is the real reason), which beats a wrong type, which beats "must match
 * a schema in anyOf".
 */
const RANK: Record<string, number> = { enum: 4, required: 3, type: 1, anyOf: 0 };

function validationError(errors: readonly AjvError[], context: string, request: FastifyRequest): ServingError {
  const rank = (e: AjvError) => RANK[e.keyword] ?? 2;
  const best = [...errors].sort((a, b) => depth(b) - depth(a) || rank(b) - rank(a))[0]!;
  const pointer = best.keyword === "required" ? `${best.instancePath}/${String(best.params.missingProperty)}` : best.instancePath;
  const param = fieldPath(pointer) || null;
  const where = param ? `\`${param}\`` : `The request ${context}`;
  const root = context === "body" ? request.body : undefined;
  const siblings = errors.filter((e) => e.instancePath === best.instancePath);
  let message: string;
  switch (best.keyword) {
    case "required":
      message = `${where} is required.`;
      break;
    case "enum":
      message = `${where} must be one of ${(best.params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(", ")}; got ${show(valueAt(root, best.instancePath))}.`;
      break;
    case "type": {
      // A nullable or union field fails once per branch: list every type it accepts.
      const types = [...new Set(siblings.filter((e) => e.keyword === "type").map((e) => String(e.params.type)))];
      message = `${where} must be ${types.join(" or ")}; got ${show(valueAt(root, best.instancePath))}.`;
      break;
    }
    case "maxItems":
    case "minItems": {
      const value = valueAt(root, best.instancePath);
      const count = Array.isArray(value) ? value.length : 0;
      const limit = Number(best.params.limit);
      const verb = limit === 1 ? "is" : "are";
      const bound = best.keyword === "maxItems" ? `at most ${limit} ${verb} allowed` : `at least ${limit} ${verb} required`;
      message = `${where} holds ${count} item${count === 1 ? "" : "s"}; ${bound}.`;
      break;
    }
    default:
      message = `${where} ${best.message ?? "is invalid"}; got ${show(valueAt(root, best.instancePath))}.`;
  }
  return new ServingError("invalid_request", message, param);
}

function depth(error: AjvError): number {
  const parts = error.instancePath.split("/").length;
  return error.keyword === "required" ? parts + 1 : parts;
}

/** "/messages/0/role" -> "messages[0].role" */
export function fieldPath(pointer: string): string {
  return pointer
    .split("/")
    .slice(1)
    .reduce((acc, part) => (/^\d+$/.test(part) ? `${acc}[${part}]` : acc ? `${acc}.${part}` : part), "");
}

function valueAt(root: unknown, pointer: string): unknown {
  let value = root;
  for (const part of pointer.split("/").slice(1)) {
    if (value === null || typeof value !== "object") return undefined;
    value = (value as Record<string, unknown>)[part];
  }
  return value;
}

function show(value: unknown): string {
  if (value === undefined) return "nothing";
  if (value === null) return "null";
  let text: string;
  try {
    text = JSON.stringify(value);
  } catch {
    text = "...";
  }
  const kind = value === null ? "null" : Array.isArray(value) ? "array" : typeof value;
  const shown = text.length > 60 ? `${text.slice(0, 57)}...` : text;
  return `${kind} ${shown}`;
}
