// POST /v1/chat/completions — OpenAI's chat API, streaming (SSE) and not.
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { ChatTurn } from "../../engine/prompt-protocol.js";
import type { ChatStart, CompletionService } from "../../serving/completion-service.js";
import { ServingError } from "../../serving/errors.js";
import { errorBody, toServingError } from "../error-handler.js";
import { chatChunk, chatCompletion, completionId, usage, usageChunk, type ChatCompletionHeader } from "../openai-format.js";
import { ChatCompletionRequestSchema, UNSUPPORTED_PARAMETERS, type ChatCompletionRequest, type ChatMessage } from "../schemas.js";
import { SseStream } from "../sse.js";

export const WORKER_HEADER = "x-radixgate-worker";
export const CACHED_TOKENS_HEADER = "x-radixgate-cached-tokens";
export const PLACEMENT_HEADER = "x-radixgate-placement";
export const SESSION_HEADER = "x-session-id";

export function chatCompletionsRoute(app: FastifyInstance, service: CompletionService): void {
  app.post("/v1/chat/completions", { schema: { body: ChatCompletionRequestSchema } }, async (request, reply) => {
    const body = request.body as ChatCompletionRequest;
    refuseUnsupported(request.body as Record<string, unknown>);
    const header: ChatCompletionHeader = { id: completionId("chatcmpl"), created: Math.floor(Date.now() / 1000), model: body.model };
    const abort = abortOnDisconnect(reply);
    const job = {
      requestId: request.id,
      modelId: body.model,
      messages: body.messages.map(toChatTurn),
      maxTokens: body.max_completion_tokens ?? body.max_tokens ?? undefined,
      sampling: {
        temperature: body.temperature ?? 1,
        topP: body.top_p ?? undefined,
        seed: body.seed ?? undefined,
        stop: body.stop == null ? [] : typeof body.stop === "string" ? [body.stop] : body.stop,
      },
      pinnedWorkerId: headerValue(request, WORKER_HEADER),
      sessionId: headerValue(request, SESSION_HEADER) ?? body.user,
      signal: abort.signal,
    };
    if (!body.stream) {
      const outcome = await service.chat(job);
      logPlacement(request, outcome);
      return reply
        .headers(servedHeaders(outcome))
        .send(chatCompletion(header, outcome.text, outcome.finishReason, usage(outcome.promptTokens, outcome.cachedTokens, outcome.completionTokens)));
    }
    await streamChat(service, job, header, body.stream_options?.include_usage === true, reply);
    return reply;
  });
}

async function streamChat(
  service: CompletionService,
  job: Parameters<CompletionService["chat"]>[0],
  header: ChatCompletionHeader,
  includeUsage: boolean,
  reply: FastifyReply,
): Promise<void> {
  const sse = new SseStream(reply);
  try {
    const outcome = await service.chat(job, {
      // Headers go out only once a worker holds the request: errors before that (unknown
      // model, prompt too long, no worker) still get their proper HTTP status.
      onStarted: (start) => {
        logPlacement(reply.request, start);
        sse.open(servedHeaders(start));
        sse.send(chatChunk(header, { role: "assistant", content: "" }, null));
      },
      onText: (text) => sse.send(chatChunk(header, { content: text }, null)),
    });
    sse.send(chatChunk(header, {}, outcome.finishReason));
    if (includeUsage) sse.send(usageChunk(header, usage(outcome.promptTokens, outcome.cachedTokens, outcome.completionTokens)));
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

function servedHeaders(start: Pick<ChatStart, "workerId" | "cachedTokens" | "placement">): Record<string, string> {
  return {
    [WORKER_HEADER]: start.workerId,
    [CACHED_TOKENS_HEADER]: String(start.cachedTokens),
    // Short form of the decision, e.g. "exploit;matched=1843".
    [PLACEMENT_HEADER]: `${start.placement.reason};matched=${start.placement.matchedTokens}`,
  };
}

/** The whole decision (policy, reason, matched tokens, worker, cost of each candidate), at debug level. */
function logPlacement(request: FastifyRequest, start: Pick<ChatStart, "workerId" | "placement">): void {
  request.log.debug({ worker: start.workerId, placement: start.placement }, "placed");
}

function toChatTurn(message: ChatMessage, index: number): ChatTurn {
  const content = message.content == null ? "" : typeof message.content === "string" ? message.content : message.content.map((part) => part.text).join("\n");
  switch (message.role) {
    case "system":
    case "developer":
      // Chat templates know "system"; OpenAI's "developer" is the same instruction role.
      return { role: "system", content };
    case "user":
    case "assistant":
      return { role: message.role, content };
    case "tool":
      throw new ServingError(
        "unsupported_parameter",
        `messages[${index}] has role "tool", but tool calling is not supported yet. Allowed roles: system, developer, user, assistant.`,
        `messages[${index}].role`,
      );
    default:
      return message.role satisfies never;
  }
}

function refuseUnsupported(body: Record<string, unknown>): void {
  for (const [name, isSet] of Object.entries(UNSUPPORTED_PARAMETERS)) {
    if (body[name] !== undefined && body[name] !== null && isSet(body[name])) {
      throw new ServingError("unsupported_parameter", `The parameter \`${name}\` is not supported by this server yet; remove it or use its default.`, name);
    }
  }
}

/** Aborts when the client goes away before the response is complete: the worker stops generating. */
function abortOnDisconnect(reply: FastifyReply): AbortController {
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
