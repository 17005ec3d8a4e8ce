// The one place that turns any error into OpenAI's shape:
//   {error: {message, type, param, code}}
// Validation errors name the field (as `messages[0].role`) and say what is allowed; an
// unexpected error becomes a 500 with the request id and nothing internal.
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { ServingError, type ErrorCode } from "../serving/errors.js";

export interface OpenAIErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

export function errorBody(error: ServingError): OpenAIErrorBody {
  return { error: { message: error.message, type: error.type, param: error.param, code: error.code } };
}

/** Fastify's own error codes, mapped onto the catalogue. */
const FASTIFY_CODES: Record<string, { code: ErrorCode; message: string }> = {
  FST_ERR_CTP_INVALID_JSON_BODY: {
    code: "invalid_json",
    message: "The request body is not valid JSON. Send a JSON object such as {\"model\": \"...\", \"messages\": [...]}.",
  },
  FST_ERR_CTP_EMPTY_JSON_BODY: {
    code: "invalid_json",
    message: "The request body is empty. Send a JSON object such as {\"model\": \"...\", \"messages\": [...]}.",
  },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: {
    code: "unsupported_media_type",
    message: "Unsupported Content-Type: send the body as application/json.",
  },
  FST_ERR_CTP_BODY_TOO_LARGE: {
    code: "body_too_large",
    message: "The request body is larger than this server accepts (server.bodyLimitBytes in config.yml).",
  },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: {
    code: "invalid_request",
    message: "The Content-Length header does not match the body.",
  },
};

export function toServingError(error: FastifyError, request: FastifyRequest): ServingError {
  if (error instanceof ServingError) return error;
  if (error.validation && error.validation.length > 0) {
    return validationError(error.validation, error.validationContext ?? "body", request);
  }
  const known = error.code ? FASTIFY_CODES[error.code] : undefined;
  if (known) return new ServingError(known.code, known.message);
  if (error.statusCode === 400) return new ServingError("invalid_request", error.message);
  return new ServingError("internal_error", `Internal server error (request ${request.id}). The server logged the details.`);
}

export function installErrorHandlers(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const serving = toServingError(error, request);
    if (serving.status >= 500) request.log.error({ err: error }, "request failed");
    else request.log.info({ code: serving.code, message: serving.message }, "request refused");
    sendError(reply, serving);
  });
  app.setNotFoundHandler((request, reply) => {
    sendError(reply, new ServingError("route_not_found", `There is no route ${request.method} ${request.url.split("?")[0]}. See GET /v1/models, POST /v1/chat/completions, POST /v1/completions.`));
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
 * which beats "must match a schema in anyOf".
 */
function validationError(errors: readonly AjvError[], context: string, request: FastifyRequest): ServingError {
  const rank = (e: AjvError) => (e.keyword === "enum" ? 3 : e.keyword === "required" ? 2 : e.keyword === "anyOf" ? 0 : 1);
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
  const text = JSON.stringify(value);
  const kind = value === null ? "null" : Array.isArray(value) ? "array" : typeof value;
  const shown = text.length > 60 ? `${text.slice(0, 57)}...` : text;
  return `${kind} ${shown}`;
}

