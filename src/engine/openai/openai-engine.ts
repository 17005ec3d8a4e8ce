// A worker that is any OpenAI-compatible server (`models[].remote: [{kind: openai, url}]`:
// vLLM, SGLang, llama-server, another Radixgate, a hosted API that takes token ids): the
// router renders and tokenizes the prompt with the model's own file and sends the token ids to
// the server's POST /v1/completions, streamed. Such a server says nothing about its cache, so
// the tree about it is approximate, as in llm-d's and Dynamo's approximate modes: it follows
// the router's own placements, kept per virtual slot (as many as the server runs at once as
// far as the router counts, `slots`), and a slot's prompt is taken as gone once it has been
// idle for `cacheTtlS` (the server's own cache evicts what nobody asks for). Two routers in
// front of one such server each see only their own placements.
import { commonPrefixLength, tokenArray, type TokenIds } from "../../common/tokens.js";
import type { FinishReason, GenerationResult } from "../../contract/generation.js";
import type { SamplingParams } from "../../contract/sampling.js";
import { modelFingerprint } from "../worker/model-fingerprint.js";
import type { LoadResult, ProfileResult, WorkerInit, WorkerStats } from "../wire/protocol.js";
import { UnsupportedOnEngineError, WorkerDiedError, WorkerTaskError } from "../host/worker-errors.js";
import type { CachePrecision, CacheReports, GenerateHooks, Isolation, WorkerEngine } from "../host/worker-engine.js";
import { send, sseEvents, textOf } from "../remote/http-client.js";
import { RemoteHost, type RemoteWatch } from "../remote/remote-host.js";
import { HttpEngineBase, type SlottedLife, statsOfSlots } from "../remote/engine-base.js";
import { refusalOf } from "../remote/refusal.js";

export interface OpenAIEngineOptions {
  /** The server's base URL: its API is under `<url>/v1`. */
  url: string;
  /** The model's name there. */
  model: string;
  apiKey?: string;
  /** Requests it runs at once as far as this router counts (its virtual slots). */
  slots: number;
  /** A virtual slot idle this long is taken as evicted by the server. */
  cacheTtlMs: number;
  watch?: RemoteWatch;
  /** How long a generation waits for the first byte of its answer (default: as long as it takes). */
  firstByteTimeoutMs?: number;
}

type Life = SlottedLife;

interface CompletionChunk {
  choices?: { text?: string; finish_reason?: string | null }[];
  usage?: { prompt_tokens?: number; completion_tokens?: number; prompt_tokens_details?: { cached_tokens?: number } | null };
  error?: { message?: string };
}

/** How often idle virtual slots are checked against the TTL. */
const TTL_SWEEP_MS = 1000;

export class OpenAIEngine extends HttpEngineBase<Life> implements WorkerEngine {
  readonly kind = "openai";
  readonly isolation: Isolation = "remote";
  readonly precision: CachePrecision = "approximate";
  readonly pid = undefined;
  private reports: CacheReports | undefined;
  private decodedTokens = 0;
  private sweep: NodeJS.Timeout | undefined;

  constructor(
    init: WorkerInit,
    private readonly options: OpenAIEngineOptions,
  ) {
    super(init, "an OpenAI-compatible server", options);
  }

  async start(): Promise<LoadResult> {
    const started = performance.now();
    // Every OpenAI server answers GET /v1/models (not every one has /health).
    const server = await RemoteHost.connect(
      this.options.url,
      { ...this.options.watch, probe: { path: "/v1/models", headers: this.headers } },
      "OpenAI-compatible server",
    );
    const life = this.newSlottedLife(server, this.options.slots);
    this.life = life;
    if (this.reports) this.replay(this.reports);
    this.sweep ??= setInterval(() => this.forgetIdle(), TTL_SWEEP_MS);
    this.sweep.unref();
    this.loadResult = {
      workerId: this.id,
      backend: `openai ${server.baseURL}`,
      binary: "openai",
      contextSize: this.init.contextSize,
      slots: this.options.slots,
      trainContextSize: 0,
      loadMs: performance.now() - started,
      modelFingerprint: await modelFingerprint(this.init.modelPath),
      bindingTests: { passed: [], ran: 0 },
    };
    return this.loadResult;
  }

  reportCacheTo(reports: CacheReports): void {
    this.reports = reports;
    if (this.life) this.replay(reports);
  }

  private replay(reports: CacheReports): void {
    for (const [slot, tokens] of this.life!.held.entries()) reports.slotHolds(slot, tokens);
  }

  /** Virtual slots idle past the TTL: the server has most likely evicted their prompt. */
  private forgetIdle(): void {
    const life = this.life;
    if (!life || life.dead) return;
    const now = performance.now();
    for (const [slot, tokens] of life.held.entries()) {
      if (tokens.length === 0 || life.slots.isBusy(slot) || now - life.slots.lastUsedMs(slot) < this.options.cacheTtlMs) continue;
      life.held[slot] = [];
      this.reports?.slotHolds(slot, []);
    }
  }

  async restart(): Promise<LoadResult> {
    await this.life?.server.close();
    return this.start();
  }

  async generate(requestId: string, prompt: TokenIds, sampling: SamplingParams, hooks: GenerateHooks = {}): Promise<GenerationResult> {
    const tokens = tokenArray(prompt);
    const life = this.life;
    if (!life || life.dead) throw new WorkerDiedError(`worker ${this.id} is down`);
    if (sampling.logprobs !== undefined) {
      throw new UnsupportedOnEngineError(
        `worker ${this.id} is an OpenAI-compatible server, whose logprobs this router does not read yet; ask without logprobs`,
        "logprobs",
      );
    }
    if (sampling.toolCalls) {
      throw new UnsupportedOnEngineError(
        `worker ${this.id} is an OpenAI-compatible server, which takes no tool-call grammar: a required tool call (tool_choice) cannot be enforced there`,
        "tool_choice",
      );
    }
    return this.inSlot(life, tokens, hooks.signal, (slot, queuedAt) => this.run(life, slot, requestId, tokens, sampling, hooks, queuedAt));
  }

  private async run(
    life: Life,
    slot: number,
    requestId: string,
    tokens: readonly number[],
    sampling: SamplingParams,
    hooks: GenerateHooks,
    queuedAt: number,
  ): Promise<GenerationResult> {
    const startedAt = performance.now();
    const predictedCached = commonPrefixLength(life.held[slot]!, tokens);
    hooks.onStarted?.({ type: "started", slot, cachedTokens: predictedCached, queueMs: startedAt - queuedAt, restoredTokens: 0 });
    const { abort, release, answered } = this.openGeneration(life, hooks.signal);
    const texts: string[] = [];
    let pieces = 0;
    let firstPieceAt: number | undefined;
    let finish: string | undefined;
    let usage: CompletionChunk["usage"];
    try {
      const response = await send(
        `${life.server.baseURL}/v1/completions`,
        "POST",
        completionsBody(this.options.model, tokens, sampling),
        abort.signal,
        undefined,
        {
          ...this.headers,
          "x-request-id": requestId,
        },
      );
      if (response.status !== 200) {
        answered();
        throw refusalOf(response.status, await textOf(response), `the OpenAI-compatible server at ${life.server.baseURL}`);
      }
      for await (const data of sseEvents(response.body)) {
        answered();
        if (data === "[DONE]") break;
        const chunk = JSON.parse(data) as CompletionChunk;
        if (chunk.error)
          throw new WorkerTaskError(`the OpenAI-compatible server at ${life.server.baseURL}: ${chunk.error.message ?? JSON.stringify(chunk.error)}`);
        if (chunk.usage) usage = chunk.usage;
        const choice = chunk.choices?.[0];
        if (choice?.text) {
          firstPieceAt ??= performance.now();
          pieces++;
          this.decodedTokens++;
          texts.push(choice.text);
          hooks.onText?.(choice.text);
        }
        if (choice?.finish_reason) finish = choice.finish_reason;
      }
      if (finish === undefined) throw new Error("the stream ended without a finish reason");
    } catch (error) {
      const failure = await this.connectionFailure(error, life, abort, `request to the OpenAI-compatible server at ${life.server.baseURL} failed`);
      if (failure) throw failure;
    } finally {
      release();
      // What the server most likely holds for this slot now: the prompt it read (unknown after a
      // cancel in the prefill: nothing). A dead server holds nothing, and its cache has already
      // left the tree: nothing more is reported.
      life.held[slot] = !life.dead && (finish !== undefined || firstPieceAt !== undefined) ? [...tokens] : [];
      if (!life.dead) this.reports?.slotHolds(slot, life.held[slot]!);
      life.slots.release(slot);
    }
    const now = performance.now();
    const finishReason: FinishReason = finish === undefined ? "cancelled" : finish === "length" ? "length" : "stop";
    const cachedTokens = usage?.prompt_tokens_details?.cached_tokens ?? predictedCached;
    return this.count({
      text: texts.join(""),
      finishReason,
      promptTokens: tokens.length,
      cachedTokens,
      restoredTokens: 0,
      evictedTokens: 0,
      spilledTokens: 0,
      completionTokens: usage?.completion_tokens ?? pieces,
      slot,
      heldPromptTokens: life.held[slot]!.length,
      queueMs: startedAt - queuedAt,
      prefillMs: (firstPieceAt ?? now) - startedAt,
      totalMs: now - queuedAt,
    });
  }

  /** Times a few prompts of growing length (token ids drawn from the model's own vocabulary range) and a short decode, over the API. */
  async profile(): Promise<ProfileResult> {
    const life = this.life;
    if (!life || life.dead) throw new WorkerDiedError(`worker ${this.id} is down`);
    const started = performance.now();
    const prefill: ProfileResult["prefill"] = [];
    const decode: ProfileResult["decode"] = [];
    const sizes = [32, 128, 512].filter((n) => n * 2 < this.init.contextSize);
    let seed = 1;
    // Ids below 256 exist in every vocabulary (byte tokens at least).
    const prompt = (n: number) => Array.from({ length: n }, (_, i) => 3 + ((seed * 7919 + i * 104729) % 250));
    for (const n of sizes) {
      seed++;
      const t0 = performance.now();
      await this.timed(life, prompt(n), 1);
      prefill.push({ extend: n, context: n, ms: performance.now() - t0 });
    }
    seed++;
    const t0 = performance.now();
    const generated = await this.timed(life, prompt(sizes[0] ?? 16), 16);
    const firstMs = prefill[0]?.ms ?? 0;
    if (generated > 1) decode.push({ context: (sizes[0] ?? 16) + 8, msPerToken: Math.max(0.01, (performance.now() - t0 - firstMs) / (generated - 1)) });
    return { workerId: this.id, slot: 0, prefill, decode, copy: [], stateDir: "", otherBusySlots: this.inFlight, totalMs: performance.now() - started };
  }

  /** One whole completion; the tokens generated. */
  private async timed(life: Life, tokens: number[], maxTokens: number): Promise<number> {
    const body = { ...completionsBody(this.options.model, tokens, { maxTokens, temperature: 0, stop: [] }), stream: false };
    delete (body as { stream_options?: unknown }).stream_options;
    const response = await send(`${life.server.baseURL}/v1/completions`, "POST", body, undefined, 60_000, this.headers);
    const text = await textOf(response);
    if (response.status !== 200) throw new WorkerTaskError(`calibration request to ${life.server.baseURL} answered ${response.status}: ${text.slice(0, 300)}`);
    const answer = JSON.parse(text) as CompletionChunk;
    return answer.usage?.completion_tokens ?? maxTokens;
  }

  async stats(): Promise<WorkerStats> {
    const life = this.life;
    if (!life || life.dead) throw new WorkerDiedError(`worker ${this.id} is down`);
    return statsOfSlots(this.init, life.held, life.slots, { steps: 0, decodeTokens: this.decodedTokens, prefillTokens: 0 });
  }

  async configure(local: WorkerInit["local"]): Promise<void> {
    this.init.local = local;
    this.life?.slots.configure(local);
  }

  async close(): Promise<void> {
    this.closing = true;
    await this.whenIdle();
    if (this.sweep) clearInterval(this.sweep);
    await this.life?.server.close();
  }
}

/** OpenAI's legacy completions body: the prompt as token ids, streamed with its usage. */
function completionsBody(
  model: string,
  tokens: readonly number[],
  sampling: Pick<SamplingParams, "maxTokens" | "temperature" | "stop"> & Partial<SamplingParams>,
) {
  return {
    model,
    prompt: tokens,
    max_tokens: sampling.maxTokens,
    temperature: sampling.temperature,
    ...(sampling.topP !== undefined ? { top_p: sampling.topP } : {}),
    ...(sampling.seed !== undefined ? { seed: sampling.seed } : {}),
    ...(sampling.stop.length > 0 ? { stop: sampling.stop } : {}),
    ...(sampling.presencePenalty !== undefined ? { presence_penalty: sampling.presencePenalty } : {}),
    ...(sampling.frequencyPenalty !== undefined ? { frequency_penalty: sampling.frequencyPenalty } : {}),
    ...(sampling.responseFormat !== undefined
      ? {
          response_format:
            sampling.responseFormat.type === "json_object"
              ? { type: "json_object" }
              : { type: "json_schema", json_schema: { name: "response", schema: sampling.responseFormat.schema } },
        }
      : {}),
    stream: true,
    stream_options: { include_usage: true },
  };
}
