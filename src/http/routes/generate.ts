// POST /v1/radixgate/generate — one generation from token ids, for a Radixgate router in front
// of this host (engine/radixgate/). Not OpenAI's API: the router has already turned the
// client's request into tokens and sampling settings, so they travel as they are, and the
// answer says which worker and slot took the request (the router's tree follows the slot).
// This host places the request itself (its own tree, its own workers) and streams:
//   data: {"type":"started","worker":"w0","slot":1,"cachedTokens":812,"queueMs":3}
//   data: {"type":"text","text":"Hel","logprobs":[...]}        (logprobs when asked for)
//   data: {"type":"end","result":{...the generation's figures}}
//   data: {"type":"error","error":{...OpenAI's error shape}}   (a failure after "started")
// A failure before "started" is an HTTP status with OpenAI's error body, as on every route.
import { Type, type Static } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import type { CompletionService } from "../../serving/completion-service.js";
import { ServingError } from "../../serving/errors.js";
import { errorBody, toServingError } from "../error-handler.js";
import { toGrammarSchema, UnsupportedSchemaError } from "../schemas.js";
import { abortOnDisconnect } from "./chat-completions.js";

export const GENERATE_PATH = "/v1/radixgate/generate";

const Anything = Type.Unsafe<Record<string, unknown>>({ type: "object" });

/** How the model writes a tool call (the router read it from the same chat template). */
const ToolCallSyntaxSchema = Type.Object(
  {
    prefix: Type.String(),
    alternatePrefixes: Type.Array(Type.String()),
    paramsPrefix: Type.String(),
    suffix: Type.String(),
    emptyParams: Type.String(),
    parallel: Type.Optional(
      Type.Object({ sectionPrefix: Type.String(), betweenCalls: Type.String(), sectionSuffix: Type.String() }, { additionalProperties: false }),
    ),
    resultPrefix: Type.String(),
  },
  { additionalProperties: false },
);

const ToolFunctionSchema = Type.Object(
  { name: Type.String({ minLength: 1 }), description: Type.Optional(Type.String()), parameters: Anything },
  { additionalProperties: false },
);

export const GenerateRequestSchema = Type.Object(
  {
    model: Type.String({ minLength: 1 }),
    tokens: Type.Array(Type.Integer({ minimum: 0 }), { minItems: 1 }),
    sampling: Type.Object(
      {
        maxTokens: Type.Integer({ minimum: 1 }),
        temperature: Type.Number({ minimum: 0, maximum: 2 }),
        topP: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
        seed: Type.Optional(Type.Integer()),
        stop: Type.Array(Type.String(), { maxItems: 16 }),
        presencePenalty: Type.Optional(Type.Number({ minimum: -2, maximum: 2 })),
        frequencyPenalty: Type.Optional(Type.Number({ minimum: -2, maximum: 2 })),
        responseFormat: Type.Optional(
          Type.Union([Type.Object({ type: Type.Literal("json_object") }), Type.Object({ type: Type.Literal("json_schema"), schema: Anything })]),
        ),
        logprobs: Type.Optional(Type.Integer({ minimum: 0, maximum: 20 })),
        toolCalls: Type.Optional(
          Type.Object(
            { syntax: ToolCallSyntaxSchema, functions: Type.Array(ToolFunctionSchema, { minItems: 1 }), parallel: Type.Boolean() },
            { additionalProperties: false },
          ),
        ),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);

export type GenerateRequest = Static<typeof GenerateRequestSchema>;

function grammarSchemaOf(schema: Record<string, unknown>, param: string): Record<string, unknown> {
  try {
    return toGrammarSchema(schema, param);
  } catch (error) {
    if (!(error instanceof UnsupportedSchemaError)) throw error;
    throw new ServingError("invalid_request", `\`${param}\` is not supported: ${error.message}`, param);
  }
}

export function generateRoute(app: FastifyInstance, service: CompletionService): void {
  app.post(GENERATE_PATH, { schema: { body: GenerateRequestSchema } }, async (request, reply) => {
    const body = request.body as GenerateRequest;
    const { maxTokens, ...sampling } = body.sampling;
    // The schemas the worker turns into grammars are checked here as on the OpenAI routes.
    if (sampling.responseFormat?.type === "json_schema") {
      sampling.responseFormat = { type: "json_schema", schema: grammarSchemaOf(sampling.responseFormat.schema, "sampling.responseFormat.schema") };
    }
    sampling.toolCalls?.functions.forEach((tool, i) => {
      tool.parameters = grammarSchemaOf(tool.parameters, `sampling.toolCalls.functions[${i}].parameters`);
    });
    const raw = reply.raw;
    const send = (event: unknown) => {
      if (!raw.writableEnded && !raw.destroyed) raw.write(`data: ${JSON.stringify(event)}\n\n`);
    };
    let opened = false;
    try {
      const outcome = await service.complete(
        {
          requestId: request.id,
          modelId: body.model,
          prompt: { kind: "tokens", tokens: body.tokens, param: "tokens" },
          maxTokens,
          sampling: sampling as Parameters<CompletionService["complete"]>[0]["sampling"],
          // Nothing is retried here once text has gone out: the router holds it.
          streamed: true,
          signal: abortOnDisconnect(reply).signal,
        },
        {
          onStarted: (start) => {
            opened = true;
            reply.hijack();
            raw.writeHead(200, { "x-request-id": request.id, "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" });
            send({ type: "started", worker: start.workerId, slot: start.slot, cachedTokens: start.cachedTokens });
          },
          onText: (text, logprobs) => send({ type: "text", text, ...(logprobs ? { logprobs } : {}) }),
        },
      );
      const { placement: _placement, toolCallSyntax: _syntax, ...result } = outcome;
      if (!opened) {
        // Ended before any slot took it (cancelled in the queue): the figures alone.
        return reply.send({ type: "end", result });
      }
      send({ type: "end", result });
      raw.end();
    } catch (error) {
      if (!opened) throw error;
      const serving = toServingError(error as never, request);
      if (serving.code !== "cancelled") request.log.error({ err: error }, "generation failed after it started");
      send({ type: "error", ...errorBody(serving) });
      raw.end();
    }
    return reply;
  });
}
