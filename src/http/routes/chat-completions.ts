// POST /v1/chat/completions — OpenAI's chat API, streaming (SSE) and not. The helpers shared
// with POST /v1/completions (headers, sampling, streaming, refused parameters) live here too.
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { ResponseFormat, SamplingParams } from "../../contract/sampling.js";
import type { ChatStart, CompletionJob, CompletionService } from "../../serving/completion-service.js";
import { ServingError } from "../../serving/errors.js";
import { errorBody, toServingError } from "../error-handler.js";
import { chatChoiceOf, chatChoiceStream, type ChoiceStream } from "../chat-choices.js";
import { choiceCachedTokensHeader, choiceCount, choicesUsage, completeChoices } from "../choices.js";
import { chatChunk, chatCompletion, completionId, usageChunk, type ChatCompletionHeader, type Usage } from "../openai-format.js";
import {
  ChatCompletionRequestSchema,
  RESPONSE_FORMAT_TYPES,
  toGrammarSchema,
  UNSUPPORTED_PARAMETERS,
  UnsupportedSchemaError,
  type ChatCompletionRequest,
  type CompletionRequest,
  type ResponseFormatRequest,
} from "../schemas.js";
import { chatLogprobsOf } from "../logprobs.js";
import { SseStream } from "../sse.js";
import { chatToolsOf, chatTurnsOf } from "../tools.js";

export const WORKER_HEADER = "x-radixgate-worker";
export const CACHED_TOKENS_HEADER = "x-radixgate-cached-tokens";
export const PLACEMENT_HEADER = "x-radixgate-placement";
export const SESSION_HEADER = "x-session-id";

export function chatCompletionsRoute(app: FastifyInstance, service: CompletionService, maxChoices: number): void {
  app.post("/v1/chat/completions", { schema: { body: ChatCompletionRequestSchema } }, async (request, reply) => {
    const body = request.body as ChatCompletionRequest;
    refuseUnsupported(request.body as Record<string, unknown>, UNSUPPORTED_PARAMETERS);
    const n = choiceCount(body.n, maxChoices);
    const header: ChatCompletionHeader = { id: completionId("chatcmpl"), created: Math.floor(Date.now() / 1000), model: body.model };
    const tools = chatToolsOf(body);
    const toolNames = new Set(tools?.functions.map((tool) => tool.name));
    const job: CompletionJob = {
      ...jobBasics(request, reply, body, chatLogprobsOf(body.logprobs, body.top_logprobs)),
      prompt: { kind: "chat", messages: chatTurnsOf(body.messages), ...(tools ? { tools } : {}) },
      maxTokens: body.max_completion_tokens ?? body.max_tokens ?? undefined,
    };
    if (!body.stream) {
      const outcomes = await completeChoices(service, job, n);
      logPlacement(request, outcomes[0]!);
      const choices = outcomes.map((outcome) => chatChoiceOf(outcome, toolNames));
      return reply
        .headers({ ...servedHeaders(outcomes[0]!), ...choiceCachedTokensHeader(outcomes) })
        .send(chatCompletion(header, choices, choicesUsage(outcomes)));
    }
    await streamCompletion(service, job, n, reply, body.stream_options?.include_usage === true, {
      first: (index) => chatChunk(header, { role: "assistant", content: "" }, null, index),
      choice: (index, start) => chatChoiceStream(header, index, start.toolCallSyntax, toolNames),
      usage: (tokens) => usageChunk(header, tokens),
    });
    return reply;
  });
}

/** The request fields both completion routes read the same way. */
type SharedRequest = Pick<
  ChatCompletionRequest & CompletionRequest,
  "model" | "temperature" | "top_p" | "seed" | "stop" | "presence_penalty" | "frequency_penalty" | "response_format" | "user" | "stream"
>;

/** Everything of a job but the prompt and the token limit: sampling, pinning, session, cancellation. */
export function jobBasics(
  request: FastifyRequest,
  reply: FastifyReply,
  body: SharedRequest,
  /** Candidates per token to report with its log probability; undefined: no logprobs. */
  logprobs: number | undefined,
): Omit<CompletionJob, "prompt" | "maxTokens"> {
  const responseFormat = responseFormatOf(body.response_format ?? undefined);
  const sampling: Omit<SamplingParams, "maxTokens"> = {
    temperature: body.temperature ?? 1,
    topP: body.top_p ?? undefined,
    seed: body.seed ?? undefined,
    stop: body.stop == null ? [] : typeof body.stop === "string" ? [body.stop] : body.stop,
    presencePenalty: body.presence_penalty ?? undefined,
    frequencyPenalty: body.frequency_penalty ?? undefined,
    ...(responseFormat ? { responseFormat } : {}),
    ...(logprobs !== undefined ? { logprobs } : {}),
  };
  return {
    requestId: request.id,
    modelId: body.model,
    sampling,
    pinnedWorkerId: headerValue(request, WORKER_HEADER),
    streamed: body.stream === true,
    sessionId: headerValue(request, SESSION_HEADER) ?? body.user,
    signal: abortOnDisconnect(reply).signal,
  };
}

/** response_format as the worker takes it: undefined for text; a json_schema's schema checked and normalized. */
function responseFormatOf(format: ResponseFormatRequest | undefined): ResponseFormat | undefined {
  if (format === undefined) return undefined;
  const type = format.type as (typeof RESPONSE_FORMAT_TYPES)[number];
  switch (type) {
    case "text":
      return undefined;
    case "json_object":
      return { type: "json_object" };
    case "json_schema": {
      const param = "response_format.json_schema.schema";
      if (format.json_schema?.schema === undefined) {
        throw new ServingError("invalid_request", `\`${param}\` is required when \`response_format.type\` is "json_schema".`, param);
      }
      try {
        return { type: "json_schema", schema: toGrammarSchema(format.json_schema.schema, param) };
      } catch (error) {
        if (!(error instanceof UnsupportedSchemaError)) throw error;
        throw new ServingError("invalid_request", `\`${param}\` is not supported: ${error.message}`, param);
      }
    }
    default:
      throw new ServingError(
        "unsupported_parameter",
        `\`response_format.type\` ${JSON.stringify(format.type)} is not supported; use one of ${RESPONSE_FORMAT_TYPES.map((t) => `"${t}"`).join(", ")}.`,
        "response_format.type",
      );
  }
}

/** The events of one stream, in OpenAI's chunk shapes for its endpoint; `index` is the choice's. */
export interface StreamFormat {
  /** Sent once the worker holds the choice (chat: the assistant role). */
  first?: (index: number) => unknown;
  /** The chunks of choice `index`, made when its worker starts it (or when it ends unstarted). */
  choice: (index: number, start: Pick<ChatStart, "toolCallSyntax">) => ChoiceStream;
  usage: (tokens: Usage) => unknown;
}

export async function streamCompletion(
  service: CompletionService,
  job: CompletionJob,
  n: number,
  reply: FastifyReply,
  includeUsage: boolean,
  format: StreamFormat,
): Promise<void> {
  const sse = new SseStream(reply);
  try {
    // Choices stream one after another, each ending with its finish chunk.
    const streams: ChoiceStream[] = [];
    const sendAll = (chunks: readonly unknown[]) => {
      for (const chunk of chunks) sse.send(chunk);
    };
    const outcomes = await completeChoices(
      service,
      job,
      n,
      (index) => ({
        // Headers go out only once a worker holds the request: errors before that (unknown
        // model, prompt too long, no worker, a refused schema) still get their proper HTTP status.
        onStarted: (start) => {
          if (!sse.isOpen) {
            logPlacement(reply.request, start);
            sse.open(servedHeaders(start));
          }
          streams[index] = format.choice(index, start);
          if (format.first) sse.send(format.first(index));
        },
        onText: (text, logprobs) => sendAll(streams[index]!.text(text, logprobs)),
      }),
      (outcome, index) => sendAll((streams[index] ??= format.choice(index, outcome)).finish(outcome.finishReason)),
    );
    if (includeUsage) sse.send(format.usage(choicesUsage(outcomes)));
    sse.close();
  } catch (error) {
    if (!sse.isOpen) throw error;
    // After the first byte a status can no longer change: the stream ends with an error event.
    const serving = toServingError(error as never, reply.request);
    reply.request.log.error({ err: error }, "stream failed after it started");
    sse.send(errorBody(serving));
    sse.close();
  }
}

export function servedHeaders(start: Pick<ChatStart, "workerId" | "cachedTokens" | "placement">): Record<string, string> {
  return {
    [WORKER_HEADER]: start.workerId,
    [CACHED_TOKENS_HEADER]: String(start.cachedTokens),
    // Short form of the decision, e.g. "exploit;matched=1843".
    [PLACEMENT_HEADER]: `${start.placement.reason};matched=${start.placement.matchedTokens}`,
  };
}

/** The whole decision (policy, reason, matched tokens, worker, cost of each candidate), at debug level. */
export function logPlacement(request: FastifyRequest, start: Pick<ChatStart, "workerId" | "placement">): void {
  // A copy's tokens are the prompt's own ids: its length says enough.
  const copies = start.placement.copies?.map(({ tokens, ...copy }) => ({ ...copy, tokens: tokens.length }));
  request.log.debug({ worker: start.workerId, placement: { ...start.placement, ...(copies ? { copies } : {}) } }, "placed");
}

export function refuseUnsupported(body: Record<string, unknown>, refused: Record<string, (value: unknown) => boolean>): void {
  for (const [name, isSet] of Object.entries(refused)) {
    if (body[name] !== undefined && body[name] !== null && isSet(body[name])) {
      throw new ServingError("unsupported_parameter", `The parameter \`${name}\` is not supported by this server yet; remove it or use its default.`, name);
    }
  }
}

/** Aborts when the client goes away before the response is complete: the worker stops generating. */
export function abortOnDisconnect(reply: FastifyReply): AbortController {
  const abort = new AbortController();
  reply.raw.on("close", () => {
    if (!reply.raw.writableFinished) abort.abort();
  });
  return abort;
}

function headerValue(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}
