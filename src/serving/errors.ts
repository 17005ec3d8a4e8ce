// One catalogue of the errors a client can get, each with its HTTP status and OpenAI error
// type. The HTTP layer turns any ServingError into `{error: {message, type, param, code}}`.

export const ERROR_CATALOGUE = {
  invalid_request: { status: 400, type: "invalid_request_error" },
  invalid_json: { status: 400, type: "invalid_request_error" },
  unsupported_parameter: { status: 400, type: "invalid_request_error" },
  json_too_deep: { status: 400, type: "invalid_request_error" },
  invalid_url: { status: 400, type: "invalid_request_error" },
  invalid_http: { status: 400, type: "invalid_request_error" },
  invalid_api_key: { status: 401, type: "invalid_request_error" },
  model_not_found: { status: 404, type: "invalid_request_error" },
  route_not_found: { status: 404, type: "invalid_request_error" },
  worker_not_found: { status: 400, type: "invalid_request_error" },
  method_not_allowed: { status: 405, type: "invalid_request_error" },
  request_timeout: { status: 408, type: "invalid_request_error" },
  body_too_large: { status: 413, type: "invalid_request_error" },
  context_length_exceeded: { status: 413, type: "invalid_request_error" },
  url_too_long: { status: 414, type: "invalid_request_error" },
  unsupported_media_type: { status: 415, type: "invalid_request_error" },
  headers_too_large: { status: 431, type: "invalid_request_error" },
  queue_full: { status: 429, type: "rate_limit_error" },
  no_live_worker: { status: 503, type: "service_unavailable_error" },
  deadline_exceeded: { status: 504, type: "timeout_error" },
  /** An engine elsewhere sent nothing in its first-byte timeout and no other worker could take the request. */
  engine_timeout: { status: 504, type: "timeout_error" },
  /** The client went away before an answer: logged and counted, never sent (nobody reads it). */
  cancelled: { status: 499, type: "invalid_request_error" },
  worker_failed: { status: 500, type: "server_error" },
  /** The engine refused the text its model generated (llama-server: not valid UTF-8); the worker is healthy. */
  model_output_rejected: { status: 500, type: "server_error" },
  internal_error: { status: 500, type: "server_error" },
} as const satisfies Record<string, { status: number; type: string }>;

export type ErrorCode = keyof typeof ERROR_CATALOGUE;

export class ServingError extends Error {
  override name = "ServingError";
  readonly status: number;
  readonly type: string;

  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly param: string | null = null,
    /** Seconds a client should wait before retrying (Retry-After), for 429 and 503. */
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
    this.status = ERROR_CATALOGUE[code].status;
    this.type = ERROR_CATALOGUE[code].type;
  }
}
