// POST /v1/completions — OpenAI's legacy text completions: one raw prompt (a string or token
// ids), streaming (SSE) and not. Same placement, headers and errors as chat.
import type { FastifyInstance } from "fastify";
import type { CompletionService, PromptInput } from "../../serving/completion-service.js";
import { ServingError } from "../../serving/errors.js";
import { choiceCachedTokensHeader, choiceCount, choicesUsage, completeChoices } from "../choices.js";
import { completionId, textCompletion, textCompletionChunk, textUsageChunk, type ChatCompletionHeader } from "../openai-format.js";
import { CompletionRequestSchema, UNSUPPORTED_COMPLETION_PARAMETERS, type CompletionRequest } from "../schemas.js";
import { jobBasics, logPlacement, refuseUnsupported, servedHeaders, streamCompletion } from "./chat-completions.js";

export function completionsRoute(app: FastifyInstance, service: CompletionService, maxChoices: number): void {
  app.post("/v1/completions", { schema: { body: CompletionRequestSchema } }, async (request, reply) => {
    const body = request.body as CompletionRequest;
    refuseUnsupported(request.body as Record<string, unknown>, UNSUPPORTED_COMPLETION_PARAMETERS);
    const n = choiceCount(body.n, maxChoices);
    const prompt = promptOf(body.prompt);
    const header: ChatCompletionHeader = { id: completionId("cmpl"), created: Math.floor(Date.now() / 1000), model: body.model };
    const job = { ...jobBasics(request, reply, body, body.logprobs ?? undefined), prompt, maxTokens: body.max_tokens ?? undefined };
    if (!body.stream) {
      const outcomes = await completeChoices(service, job, n);
      logPlacement(request, outcomes[0]!);
      return reply
        .headers({ ...servedHeaders(outcomes[0]!), ...choiceCachedTokensHeader(outcomes) })
        .send(textCompletion(header, outcomes, choicesUsage(outcomes)));
    }
    await streamCompletion(service, job, n, reply, body.stream_options?.include_usage === true, {
      choice: (index) => {
        let offset = 0;
        return {
          text: (text, logprobs) => {
            const chunk = textCompletionChunk(header, text, null, index, logprobs && { entries: logprobs, offset });
            offset += text.length;
            return [chunk];
          },
          finish: (reason) => [textCompletionChunk(header, "", reason, index)],
        };
      },
      usage: (tokens) => textUsageChunk(header, tokens),
    });
    return reply;
  });
}

/**
 * OpenAI's four spellings of `prompt`: a string, token ids, and a list of either. A list
 * holding one prompt is that prompt; a list of several is refused (one completion per
 * request), never cut down to its first. Token ids are checked against the vocabulary later,
 * where the model's tokenizer is known.
 */
function promptOf(prompt: CompletionRequest["prompt"]): PromptInput {
  if (typeof prompt === "string") return { kind: "text", text: prompt };
  if (prompt.every((item) => typeof item === "number")) return tokenPrompt(prompt, "prompt");
  if (prompt.every((item) => typeof item === "string" || Array.isArray(item))) {
    if (prompt.length > 1) {
      throw new ServingError(
        "unsupported_parameter",
        `\`prompt\` holds ${prompt.length} prompts, but only one prompt per request is supported: send one request per prompt.`,
        "prompt",
      );
    }
    const only = prompt[0];
    return typeof only === "string" ? { kind: "text", text: only } : tokenPrompt(only as unknown[], "prompt[0]");
  }
  const index = prompt.findIndex((item) => typeof item !== typeof prompt[0] || (typeof item !== "string" && typeof item !== "number" && !Array.isArray(item)));
  throw new ServingError(
    "invalid_request",
    "`prompt` must be a string, an array of token ids, or an array holding one string or one array of token ids; " +
      `\`prompt[${index}]\` is ${JSON.stringify(prompt[index])}.`,
    `prompt[${index}]`,
  );
}

function tokenPrompt(tokens: readonly unknown[], param: string): PromptInput {
  const index = tokens.findIndex((token) => typeof token !== "number" || !Number.isInteger(token));
  if (index >= 0) {
    throw new ServingError(
      "invalid_request",
      `\`${param}[${index}]\` must be an integer token id; got ${JSON.stringify(tokens[index])}.`,
      `${param}[${index}]`,
    );
  }
  return { kind: "tokens", tokens: tokens as number[], param };
}
