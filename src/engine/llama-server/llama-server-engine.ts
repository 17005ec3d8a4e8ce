// A worker whose engine is llama.cpp's own server: one llama-server process per worker,
// started and restarted by this host and driven over HTTP on loopback, or a llama-server
// someone else runs at a URL (remote: watched by health checks, never started from here; its
// slots and context size are what it reports). The slot loop, batching
// and sampling are llama-server's C++; what stays here is what makes the global tree exact:
// the host runs the worker's local scheduler (priority groups, the slot sharing the longest
// prefix, else LRU) and sends each request to the slot it chose (`id_slot`), so it knows what
// every slot holds, token for token, without asking. Beyond its slots, llama-server keeps
// prompts in a cache in RAM (`--cache-ram`) and loads one into the chosen slot when it matches
// better than what the slot holds: a request can then find more cached than the host
// predicted, never less. `cacheRamMiB: 0` turns that cache off and the prediction is exact.
// A remote server is exact only while this host is its one client: another client's request
// in a slot changes what it holds behind the host's back (the usage reported stays true).
import { copyFile, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { basename, join } from "node:path";
import { commonPrefixLength, tokenArray, type TokenIds } from "../../common/tokens.js";
import type { FinishReason, GenerationResult, TokenLogprob } from "../../contract/generation.js";
import type { SamplingParams } from "../../contract/sampling.js";
import type { ToolCallConstraint } from "../../contract/tools.js";
import { defaultStateDir } from "../worker/state-store.js";
import { modelFingerprint } from "../worker/model-fingerprint.js";
import type { ExportResult, ImportResult, LoadResult, ProfileOptions, ProfileResult, WorkerInit, WorkerStats } from "../wire/protocol.js";
import { ResponseFormatError, WorkerDiedError, WorkerTaskError } from "../host/worker-errors.js";
import type { CachePrecision, GenerateHooks, Isolation, WorkerEngine } from "../host/worker-engine.js";
import { completionBody, readCompletionStream, type CompletionEnd } from "./completion-request.js";
import { jsonOf, send, textOf } from "../remote/http-client.js";
import { profileOverHttp } from "./profile.js";
import { HttpEngineBase, type SlottedLife, statsOfSlots } from "../remote/engine-base.js";
import { checkSameModel, type ServedModelShape } from "./model-check.js";
import { RemoteHost, type RemoteWatch } from "../remote/remote-host.js";
import { LlamaServerProcess, llamaServerArgs } from "./server-process.js";

/** The start's questions to the server (/props, /v1/models) fail after this long without an answer. */
const START_REQUEST_TIMEOUT_MS = 10_000;

/** llama-server's own default for `--cache-ram`. */
export const LLAMA_SERVER_CACHE_RAM_MIB = 8192;

export interface LlamaServerEngineOptions {
  /** The llama-server binary (binary.ts finds it); unused with `url`. */
  binary: string;
  /** A llama-server already running there: use it instead of starting one. */
  url?: string;
  /** With `url`: how long a generation waits for the first byte of its answer (default: as long as it takes). */
  firstByteTimeoutMs?: number;
  /** How a remote server is health-checked. */
  watch?: RemoteWatch;
  /** Extra environment, e.g. CUDA_VISIBLE_DEVICES=1 to pin it to one GPU. */
  env?: Record<string, string>;
  /** More command-line arguments, after Radixgate's own. */
  extraArgs?: string[];
  /** llama-server's prompt cache in RAM, MiB (`--cache-ram`; 0 = off, -1 = no limit). Default: llama-server's 8192. */
  cacheRamMiB?: number;
  /** Builds the grammar of a required tool call (the prompt threads do: they hold node-llama-cpp). */
  toolCallGrammar?: (constraint: ToolCallConstraint) => Promise<{ gbnf: string; stop: string }>;
}

/** One run of the process: a restart makes a new one. */
type Life = SlottedLife;

export class LlamaServerEngine extends HttpEngineBase<Life> implements WorkerEngine {
  readonly kind = "llama-server";
  readonly isolation: Isolation;
  /** Tokens streamed back by the server, counted as they arrive (its own counters move only when a request ends). */
  private decodedTokens = 0;
  /** Prefix copies exported, naming their files. */
  private copies = 0;

  constructor(
    init: WorkerInit,
    private readonly options: LlamaServerEngineOptions,
  ) {
    super(
      init,
      "llama-server engine",
      options.url !== undefined
        ? { url: options.url, ...(options.firstByteTimeoutMs !== undefined ? { firstByteTimeoutMs: options.firstByteTimeoutMs } : {}) }
        : {},
    );
    this.isolation = options.url !== undefined ? "remote" : "process";
  }

  get pid(): number | undefined {
    return this.life?.server.pid;
  }

  get precision(): CachePrecision {
    if (this.options.url !== undefined) return "approximate";
    return this.options.cacheRamMiB === 0 ? "exact" : "at-least";
  }

  /** Slot files (erase, save, restore) live here: llama-server takes slot actions only with one. */
  private get slotDir(): string {
    return join(this.init.spill.dir || defaultStateDir(), `radixgate-${this.init.hostPid}-${this.init.workerId}-slots`);
  }

  async start(): Promise<LoadResult> {
    const started = performance.now();
    const server = this.options.url !== undefined ? await RemoteHost.connect(this.options.url, this.options.watch) : await this.spawn();
    try {
      // A remote server says how many slots it has and how long each is; ours has what we asked.
      const props = (await jsonOf(`${server.baseURL}/props`, "GET", undefined, START_REQUEST_TIMEOUT_MS)) as {
        total_slots?: number;
        default_generation_settings?: { n_ctx?: number };
      };
      const models = (await jsonOf(`${server.baseURL}/v1/models`, "GET", undefined, START_REQUEST_TIMEOUT_MS)) as { data?: { meta?: ServedModelShape }[] };
      const meta = models.data?.[0]?.meta ?? {};
      if (this.options.url !== undefined) await checkSameModel(server.baseURL, meta, this.init.modelPath);
      const slots = this.options.url !== undefined ? (props.total_slots ?? this.init.slots) : this.init.slots;
      this.life = this.newSlottedLife(server, slots);
      const loaded: LoadResult = {
        workerId: this.id,
        // A remote server's speed is its own: its calibration is cached per URL.
        backend: this.options.url !== undefined ? `remote ${this.options.url}` : this.init.gpu === false ? "cpu" : String(this.init.gpu),
        binary: "llama-server",
        contextSize: props.default_generation_settings?.n_ctx ?? this.init.contextSize,
        slots,
        trainContextSize: meta.n_ctx_train ?? 0,
        loadMs: performance.now() - started,
        modelFingerprint: await modelFingerprint(this.init.modelPath),
        // node-llama-cpp's binary tests do not concern a llama-server.
        bindingTests: { passed: [], ran: 0 },
      };
      this.loadResult = loaded;
      return loaded;
    } catch (error) {
      await server.close(1000).catch(() => undefined);
      throw error;
    }
  }

  private async spawn(): Promise<LlamaServerProcess> {
    await mkdir(this.slotDir, { recursive: true });
    const args = [
      ...llamaServerArgs({
        modelPath: this.init.modelPath,
        slots: this.init.slots,
        contextPerSlot: this.init.contextSize,
        batchSize: this.init.batchSize,
        threads: this.init.threads,
        threadPoll: this.init.threadPoll,
        flashAttention: this.init.flashAttention,
        gpu: this.init.gpu !== false,
      }),
      ["--cache-ram", String(this.options.cacheRamMiB ?? LLAMA_SERVER_CACHE_RAM_MIB)],
      ["--slots", "--metrics"],
      ["--slot-save-path", this.slotDir],
      ...(this.options.extraArgs ?? []),
    ].flat();
    return LlamaServerProcess.start({ binary: this.options.binary, args, env: this.options.env ?? {} });
  }

  async restart(): Promise<LoadResult> {
    await this.life?.server.close(1000).catch(() => undefined);
    return this.start();
  }

  async generate(_requestId: string, prompt: TokenIds, sampling: SamplingParams, hooks: GenerateHooks = {}): Promise<GenerationResult> {
    const tokens = tokenArray(prompt);
    const life = this.life;
    if (!life || life.dead) throw new WorkerDiedError(`worker ${this.id} is down`);
    const toolCall = sampling.toolCalls && this.options.toolCallGrammar ? await this.options.toolCallGrammar(sampling.toolCalls) : undefined;
    const body = completionBody(tokens, sampling, toolCall);
    return this.inSlot(life, tokens, hooks.signal, (slot, queuedAt) =>
      this.runInSlot(life, slot, tokens, { ...body, id_slot: slot }, sampling, hooks, queuedAt),
    );
  }

  private async runInSlot(
    life: Life,
    slot: number,
    tokens: readonly number[],
    body: Record<string, unknown>,
    sampling: SamplingParams,
    hooks: GenerateHooks,
    queuedAt: number,
  ): Promise<GenerationResult> {
    const startedAt = performance.now();
    // llama-server evaluates at least the last prompt token again, whatever it holds.
    const predictedCached = Math.min(commonPrefixLength(life.held[slot]!, tokens), Math.max(0, tokens.length - 1));
    hooks.onStarted?.({ type: "started", slot, cachedTokens: predictedCached, queueMs: startedAt - queuedAt, restoredTokens: 0 });
    const { abort, release, answered } = this.openGeneration(life, hooks.signal);
    const generated: number[] = [];
    const texts: string[] = [];
    const logprobs: TokenLogprob[] = [];
    let firstPieceAt: number | undefined;
    let end: CompletionEnd | undefined;
    try {
      const response = await send(`${life.server.baseURL}/completion`, "POST", body, abort.signal);
      if (response.status !== 200) {
        answered();
        throw refusalOf(response.status, await textOf(response), sampling);
      }
      end = await readCompletionStream(response.body, sampling.logprobs, (piece) => {
        answered();
        firstPieceAt ??= performance.now();
        generated.push(...piece.tokens);
        this.decodedTokens += piece.tokens.length;
        if (piece.logprobs) logprobs.push(...piece.logprobs);
        if (piece.text) {
          texts.push(piece.text);
          hooks.onText?.(piece.text, piece.logprobs);
        }
      });
    } catch (error) {
      const failure = await this.connectionFailure(error, life, abort, "llama-server request failed");
      if (failure) throw failure;
    } finally {
      release();
      // What the slot holds now: the prompt and what was generated but the last token (sampled,
      // never evaluated); after a cancel in the prefill, an unknown part of the prompt: nothing.
      life.held[slot] = end || firstPieceAt !== undefined ? [...tokens, ...generated.slice(0, -1)] : [];
      life.slots.release(slot);
    }
    const now = performance.now();
    const finishReason: FinishReason = !end ? "cancelled" : end.stopType === "limit" ? "length" : "stop";
    return this.count({
      text: texts.join(""),
      ...(sampling.logprobs !== undefined ? { logprobs } : {}),
      finishReason,
      promptTokens: tokens.length,
      cachedTokens: end ? end.cachedTokens : predictedCached,
      restoredTokens: 0,
      evictedTokens: 0,
      spilledTokens: 0,
      completionTokens: end ? end.tokensPredicted : generated.length,
      slot,
      heldPromptTokens: end || firstPieceAt !== undefined ? tokens.length : 0,
      ...(end || firstPieceAt !== undefined ? { heldAnswerTokens: generated.slice(0, -1) } : {}),
      queueMs: startedAt - queuedAt,
      prefillMs: (firstPieceAt ?? now) - startedAt,
      totalMs: now - queuedAt,
    });
  }

  /** The tokens this host sent to the slot and got back from it: what the slot holds. */
  heldTokens(slot: number): readonly number[] {
    return this.life?.held[slot] ?? [];
  }

  /**
   * A prefix copy's first half, between llama-server workers of this host: an idle slot that
   * holds the prefix is saved by llama-server itself (`/slots/N?action=save` into this
   * worker's slot folder), with the tokens it holds beside it (`<file>.tokens.json`). A
   * server elsewhere cannot hand its file over: null (the copy then costs only its try).
   */
  override async exportPrefix(prefix: TokenIds): Promise<ExportResult | null> {
    const tokens = tokenArray(prefix);
    if (this.options.url !== undefined) return null;
    const life = this.requireLife();
    const slot = life.slots.reserveIdle((s) => commonPrefixLength(life.held[s]!, tokens) === tokens.length && tokens.length > 0);
    if (slot === undefined) return null;
    try {
      const held = [...life.held[slot]!];
      const name = `export-${this.id}-${++this.copies}.bin`;
      const saved = (await jsonOf(`${life.server.baseURL}/slots/${slot}?action=save`, "POST", { filename: name })) as { n_written?: number };
      const file = join(this.slotDir, name);
      await writeFile(`${file}.tokens.json`, JSON.stringify(held));
      return { file, tokens: held.length, bytes: saved.n_written ?? 0 };
    } finally {
      life.slots.release(slot);
    }
  }

  /**
   * The copy's second half: the file goes into this worker's slot folder and llama-server
   * restores it into the least recently used idle slot, which then holds its tokens (the local
   * scheduler finds them for the request that asked for the copy). The exported files are
   * removed either way. Fails without an idle slot, or from a server elsewhere.
   */
  override async importState(file: string): Promise<ImportResult> {
    const life = this.requireLife();
    try {
      if (this.options.url !== undefined) throw new WorkerTaskError(`worker ${this.id} (a llama-server elsewhere) cannot take in a file from this host`);
      const tokens = JSON.parse(await readFile(`${file}.tokens.json`, "utf8")) as number[];
      const idle = life.held.map((_, s) => s).filter((s) => !life.slots.isBusy(s));
      const lru = idle.sort((a, b) => life.slots.lastUsedMs(a) - life.slots.lastUsedMs(b))[0];
      const slot = lru === undefined ? undefined : life.slots.reserveIdle((s) => s === lru);
      if (slot === undefined) throw new WorkerTaskError(`worker ${this.id}: no idle slot to take the copy in`);
      const name = `import-${basename(file)}`;
      try {
        await copyFile(file, join(this.slotDir, name));
        // Until it is restored the slot's old content is no longer certain.
        life.held[slot] = [];
        await jsonOf(`${life.server.baseURL}/slots/${slot}?action=restore`, "POST", { filename: name });
        life.held[slot] = tokens;
        return { tokens: tokens.length };
      } finally {
        await rm(join(this.slotDir, name), { force: true });
        life.slots.release(slot);
      }
    } finally {
      await rm(file, { force: true });
      await rm(`${file}.tokens.json`, { force: true });
    }
  }

  async profile(options: ProfileOptions = {}): Promise<ProfileResult> {
    const life = this.requireLife();
    const slot = life.slots.reserveIdle(() => true);
    if (slot === undefined) throw new WorkerTaskError(`worker ${this.id}: no idle slot to profile in`);
    try {
      const result = await profileOverHttp(life.server.baseURL, slot, this.loadResult!.contextSize, options);
      // A server elsewhere takes no copies from this host (exportPrefix/importState): its copies are priced as recomputes.
      const copy = this.options.url !== undefined ? [] : result.copy;
      return { workerId: this.id, slot, otherBusySlots: life.slots.busyCount - 1, stateDir: this.slotDir, ...result, copy };
    } finally {
      life.held[slot] = [];
      life.slots.release(slot);
    }
  }

  async stats(): Promise<WorkerStats> {
    const life = this.requireLife();
    // A remote server started without --metrics has none: its counters then read 0.
    const metrics = await send(`${life.server.baseURL}/metrics`, "GET").then(
      (response) => textOf(response).then((text) => (response.status === 200 ? text : "")),
      () => "",
    );
    const counter = (name: string) => Number(new RegExp(`^llamacpp:${name} (\\S+)$`, "m").exec(metrics)?.[1] ?? 0);
    // llama-server's counters of finished requests: llama_decode calls and prompt tokens evaluated.
    return statsOfSlots(this.init, life.held, life.slots, {
      steps: counter("n_decode_total"),
      decodeTokens: this.decodedTokens,
      prefillTokens: counter("prompt_tokens_total"),
    });
  }

  async configure(local: WorkerInit["local"]): Promise<void> {
    this.init.local = local;
    this.life?.slots.configure(local);
  }

  /** Fault injection; refused while it is down (there is no process to kill). */
  override async crash(): Promise<void> {
    this.requireLife().server.kill();
  }

  async close(): Promise<void> {
    this.closing = true;
    await this.whenIdle();
    await this.life?.server.close();
    await rm(this.slotDir, { recursive: true, force: true });
  }

  private requireLife(): Life {
    if (!this.life || this.life.dead) throw new WorkerDiedError(`worker ${this.id} is down`);
    return this.life;
  }
}

/**
 * A generation the server refused before it began. A 400 for a request with a JSON schema is
 * the schema's fault (llama-server could not turn it into a grammar); anything else is ours.
 */
function refusalOf(status: number, text: string, sampling: SamplingParams): Error {
  let message = text;
  try {
    message = (JSON.parse(text) as { error?: { message?: string } }).error?.message ?? text;
  } catch {
    // Not JSON: keep the text.
  }
  if (status === 400 && sampling.responseFormat !== undefined) return new ResponseFormatError(message);
  return new WorkerTaskError(`llama-server answered ${status}: ${message}`);
}
