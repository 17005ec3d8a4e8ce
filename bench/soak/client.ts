// Sends one request of the mix and records what the client saw: its status, the first
// content token's time, whether any content arrived before an error, and how it ended.
// Every request is bounded: one with no answer after `hangMs` is given up and counted as a hang.
import { sseData } from "../sse.js";
import type { RequestKind, RequestSpec } from "./mix.js";

/**
 * How a request ended, from the client's side.
 *   completed     a 200 with its whole answer (a stream up to `data: [DONE]`)
 *   failed        anything else on a good request: an error status, an error event, a cut stream
 *   aborted       the client gave up on purpose (abort requests): never a failure
 *   hang          no answer within the bound
 *   refused       a bad request answered 4xx in OpenAI's error shape
 *   misanswered   a bad request answered any other way
 */
export type Outcome = "completed" | "failed" | "aborted" | "hang" | "refused" | "misanswered";

export interface RequestRecord {
  kind: RequestKind;
  label: string;
  /** Sent this long after the phase started. */
  sentAtMs: number;
  totalMs: number;
  outcome: Outcome;
  /** The HTTP status, when headers arrived. */
  status?: number;
  /** The OpenAI error code of an error body or error event. */
  code?: string;
  message?: string;
  /** Time to the first content token (streams only). */
  firstTokenMs?: number;
  /** Whether any content token reached the client (a non-streamed 200 counts as content). */
  gotContent: boolean;
  /** Bad requests: the status and code they should get, e.g. "400 invalid_json". */
  expected?: string;
  /** Times the client sent the request again after a 429 or 503 with Retry-After. */
  retries?: number;
  /** Abort requests: whether the client left before a content token arrived. */
  abortedBeforeFirstToken?: boolean;
  worker?: string;
  promptTokens?: number;
  cachedTokens?: number;
  completionTokens?: number;
}

interface OpenAIErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

/** OpenAI's error shape: `{"error": {"message", "type", "param", "code"}}`, param and code string or null. */
export function isOpenAIError(body: unknown): body is OpenAIErrorBody {
  if (typeof body !== "object" || body === null) return false;
  const error = (body as { error?: unknown }).error;
  if (typeof error !== "object" || error === null) return false;
  const { message, type, param, code } = error as Record<string, unknown>;
  const stringOrNull = (value: unknown) => typeof value === "string" || value === null;
  return typeof message === "string" && typeof type === "string" && "param" in error && stringOrNull(param) && "code" in error && stringOrNull(code);
}

interface Usage {
  prompt_tokens?: number;
  completion_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number };
}

/** Retries of a 429 or 503, as OpenAI's SDK makes by default. */
const MAX_RETRIES = 2;

/** Why the client's AbortController fired. */
type StopReason = "client-abort" | "hang";

export async function sendRequest(url: string, spec: RequestSpec, phaseStart: number, hangMs: number): Promise<RequestRecord> {
  const sent = performance.now();
  const record: RequestRecord = { kind: spec.kind, label: spec.label, sentAtMs: sent - phaseStart, totalMs: 0, outcome: "failed", gotContent: false };
  if (spec.expected) record.expected = `${spec.expected.status} ${spec.expected.code}`;
  const controller = new AbortController();
  let stopReason: StopReason | undefined;
  const stop = (reason: StopReason) => {
    if (stopReason !== undefined) return;
    stopReason = reason;
    controller.abort();
  };
  const hangTimer = setTimeout(() => stop("hang"), hangMs);
  let abortTimer: NodeJS.Timeout | undefined;
  if (spec.abort?.when === "early") abortTimer = setTimeout(() => stop("client-abort"), spec.abort.delayMs);
  const onFirstToken = () => {
    record.firstTokenMs = performance.now() - sent;
    record.gotContent = true;
    if (spec.abort?.when === "after-first-token") abortTimer = setTimeout(() => stop("client-abort"), spec.abort.delayMs);
  };
  try {
    let response = await fetch(url, { method: "POST", headers: spec.headers, body: spec.body, signal: controller.signal });
    // Back-pressure (429) and no live worker (503) come with Retry-After: a client retries
    // them, as OpenAI's own SDK does (twice by default). Only the last answer counts.
    while (spec.kind !== "bad" && (response.status === 429 || response.status === 503) && (record.retries ?? 0) < MAX_RETRIES) {
      record.retries = (record.retries ?? 0) + 1;
      await response.body?.cancel();
      const waitS = Math.min(Number(response.headers.get("retry-after") ?? "1") || 1, 10);
      await new Promise((resolve) => setTimeout(resolve, waitS * 1000));
      response = await fetch(url, { method: "POST", headers: spec.headers, body: spec.body, signal: controller.signal });
    }
    record.status = response.status;
    record.worker = response.headers.get("x-radixgate-worker") ?? undefined;
    if (spec.kind === "bad") await readRefusal(response, record);
    else if (response.status !== 200) await readError(response, record);
    else if (spec.stream) await readStream(response, record, onFirstToken);
    else await readBody(response, record);
  } catch (error) {
    if (stopReason === "client-abort") record.outcome = "aborted";
    else if (stopReason === "hang") record.outcome = "hang";
    else {
      record.outcome = spec.kind === "bad" ? "misanswered" : "failed";
      record.code = "client_error";
      record.message = (error as Error).message;
    }
  } finally {
    clearTimeout(hangTimer);
    clearTimeout(abortTimer);
    record.totalMs = performance.now() - sent;
    spec.onSettled?.();
  }
  // An abort request the server finished before the client left is simply completed.
  if (spec.abort && record.outcome === "aborted") record.abortedBeforeFirstToken = !record.gotContent;
  return record;
}

async function readRefusal(response: Response, record: RequestRecord): Promise<void> {
  const body = await response.json().catch(() => undefined);
  const inShape = isOpenAIError(body);
  if (inShape) {
    record.code = body.error.code ?? undefined;
    record.message = body.error.message;
  }
  record.outcome = response.status >= 400 && response.status < 500 && inShape ? "refused" : "misanswered";
}

async function readError(response: Response, record: RequestRecord): Promise<void> {
  const body = await response.json().catch(() => undefined);
  record.outcome = "failed";
  if (isOpenAIError(body)) {
    record.code = body.error.code ?? body.error.type;
    record.message = body.error.message;
  } else {
    record.code = "not_openai_shape";
  }
}

async function readBody(response: Response, record: RequestRecord): Promise<void> {
  const body = (await response.json()) as { choices?: { message?: { content?: string | null } }[]; usage?: Usage };
  if (!Array.isArray(body.choices) || body.choices[0]?.message === undefined) {
    record.outcome = "failed";
    record.code = "no_choices";
    return;
  }
  record.gotContent = true;
  record.outcome = "completed";
  takeUsage(record, body.usage);
}

/** Reads SSE events up to `data: [DONE]`; an error event or a stream cut before it is a failure. */
async function readStream(response: Response, record: RequestRecord, onFirstToken: () => void): Promise<void> {
  if (!response.body) throw new Error("a 200 stream without a body");
  let done = false;
  for await (const data of sseData(response.body as AsyncIterable<Uint8Array>)) {
    if (data === "[DONE]") {
      done = true;
      continue;
    }
    const chunk = JSON.parse(data) as { choices?: { delta?: { content?: string | null } }[]; usage?: Usage } & Partial<OpenAIErrorBody>;
    if (chunk.error) {
      record.outcome = "failed";
      record.code = chunk.error.code ?? chunk.error.type ?? "stream_error";
      record.message = chunk.error.message;
      continue;
    }
    if (chunk.choices?.[0]?.delta?.content && record.firstTokenMs === undefined) onFirstToken();
    if (chunk.usage) takeUsage(record, chunk.usage);
  }
  if (record.code !== undefined) return;
  if (done) record.outcome = "completed";
  else {
    record.outcome = "failed";
    record.code = "stream_cut";
    record.message = "the stream ended without data: [DONE]";
  }
}

function takeUsage(record: RequestRecord, usage: Usage | undefined): void {
  if (!usage) return;
  record.promptTokens = usage.prompt_tokens;
  record.completionTokens = usage.completion_tokens;
  record.cachedTokens = usage.prompt_tokens_details?.cached_tokens;
}
