// The worker side: one llama.cpp model and one context with N sequences (slots), driven by
// the local scheduler. The same engine runs in a piscina thread (thread-main.ts) or in a
// child process of its own (process-main.ts); only how tasks and generation ports reach it
// differs (task-handler.ts). The host's handle on it is host/worker-handle.ts.
import { rm } from "node:fs/promises";
import { join } from "node:path";
import {
  LlamaCompletion,
  LlamaLogLevel,
  type LLamaContextualRepeatPenalty,
  type LlamaContext,
  type LlamaContextSequence,
  type LlamaGrammar,
  type LlamaModel,
  type Llama,
  type Token,
} from "node-llama-cpp";
import { commonPrefixLength, tokenArray } from "../../common/tokens.js";
import { evaluationPriorityOf, type BatchStats } from "../../scheduler/batch-priority.js";
import { LocalScheduler } from "../../scheduler/local-scheduler.js";
import {
  DEFAULT_THREAD_POLL,
  MIN_RESTORE_GAIN,
  type ExportPrefixTask,
  type ExportResult,
  type GenerateTask,
  type GenerationControl,
  type GenerationEvent,
  type ImportResult,
  type ImportStateTask,
  type LoadResult,
  type LocalSchedulerSettings,
  type ProfileResult,
  type ProfileTask,
  type WorkerInit,
  type WorkerStats,
} from "../wire/protocol.js";
import type { FinishReason, GenerationResult, TokenLogprob } from "../../contract/generation.js";
import type { SamplingParams } from "../../contract/sampling.js";
import { cancelledInQueue } from "../wire/generation-results.js";
import { createBatchedContext } from "./batched-context.js";
import type { BatchGate } from "./batch-gate.js";
import type { ComputePool } from "./compute-pool.js";
import type { InlineDecode } from "./inline-decode.js";
import { GrammarRefusedError, grammarFor } from "./grammars.js";
import { loadLlama } from "./llama-binary.js";
import { LogprobRecorder } from "./logprobs.js";
import { bindingTestsHere } from "./binding-tests.js";
import { modelFingerprint } from "./model-fingerprint.js";
import { profileSequence } from "./profile.js";
import { defaultStateDir, StateStore, type StateEntry } from "./state-store.js";
import { StopSequenceFilter } from "./stop-sequences.js";
import { type SpelledTokens, TokenSpeller } from "./token-speller.js";
import type { NativeGeneration, NativeStop } from "./native-generation.js";

/** What happened to a slot's old content and to spilled states before a request ran in it. */
interface SlotPreparation {
  restoredTokens: number;
  evictedTokens: number;
  spilledTokens: number;
  /** A state load that failed (the request recomputed instead), with the reason. */
  restoreFailed?: string;
}

export class SlotEngine {
  private constructor(
    private readonly init: WorkerInit,
    private readonly llama: Llama,
    private readonly model: LlamaModel,
    private readonly context: LlamaContext,
    private readonly sequences: LlamaContextSequence[],
    private readonly completions: LlamaCompletion[],
    private readonly slots: LocalScheduler,
    private readonly store: StateStore,
    private readonly gate: BatchGate,
    private readonly batches: BatchStats,
    private readonly computePool: ComputePool,
    private readonly inlineDecode: InlineDecode,
    /** The generation loop, when this worker has one (native-generation.ts). */
    private readonly native: NativeGeneration | undefined,
    readonly loaded: LoadResult,
  ) {}

  /** Generations queued or running, with what cancels each. */
  private readonly active = new Map<Promise<GenerationResult>, { generationId: string; abort: AbortController }>();

  static async load(init: WorkerInit): Promise<SlotEngine> {
    const started = performance.now();
    const llama = await loadLlama({
      gpu: init.gpu,
      // A missing prebuilt binary must fail loudly, not start a source build at request time.
      build: "never",
      // Explicit: llama.cpp's default thread count oversubscribes small machines.
      maxThreads: init.threads,
      logLevel: LlamaLogLevel.warn,
    });
    const model = await llama.loadModel({ modelPath: init.modelPath, gpuLayers: init.gpu === false ? 0 : "auto" });
    const { context, sequences, gate, batches, computePool, inlineDecode, nativeGeneration } = await createBatchedContext(model, {
      slots: init.slots,
      contextSize: init.contextSize,
      batchSize: init.batchSize,
      threads: init.threads,
      threadPoll: init.threadPoll ?? DEFAULT_THREAD_POLL,
      flashAttention: init.flashAttention ?? "auto",
      // configure() replaces init.local on a live change: read at every batch.
      chunkTokens: () => init.local.chunkTokens,
      attention: { word: init.attention, channelFd: init.channelFd },
    });
    const completions = sequences.map((contextSequence) => new LlamaCompletion({ contextSequence, autoDisposeSequence: false }));
    const fingerprint = await modelFingerprint(init.modelPath);
    const store = new StateStore(
      join(init.spill.dir || defaultStateDir(), `radixgate-${init.hostPid}-${init.workerId}`),
      // Flash attention changes the V cache's layout in a saved state: part of what a state fits.
      { modelFingerprint: fingerprint, contextSize: context.contextSize, slots: init.slots, flashAttention: context.flashAttention },
      init.spill.budgetBytes,
    );
    // A worker restarted after a crash finds its predecessor's files: they are not its own state.
    await store.clear();
    const slots = new LocalScheduler(
      { slots: init.slots, priorityGroups: init.local.priorityGroups, quotaPerGroup: init.local.quotaPerGroup },
      {
        tokensOfSlot: (slot) => sequences[slot]?.contextTokens ?? [],
        spilledPrefix: (tokens) => store.bestPrefix(tokens, init.local.hitRatioWindowMs)?.length ?? 0,
      },
    );
    const loaded: LoadResult = {
      workerId: init.workerId,
      backend: llama.gpu === false ? "cpu" : llama.gpu,
      binary: llama.buildType,
      contextSize: context.contextSize,
      slots: init.slots,
      trainContextSize: model.trainContextSize,
      loadMs: performance.now() - started,
      modelFingerprint: fingerprint,
      bindingTests: bindingTestsHere(),
      computePool: computePool.kind,
      ...(computePool.poll === undefined ? {} : { threadPoll: computePool.poll }),
      ...(computePool.reason === undefined ? {} : { computePoolProblem: computePool.reason }),
      inlineDecode: inlineDecode.on,
      ...(inlineDecode.reason === undefined ? {} : { inlineDecodeProblem: inlineDecode.reason }),
      ...(inlineDecode.samplingProblem === undefined ? {} : { inlineSampleProblem: inlineDecode.samplingProblem }),
      nativeGeneration: !("problem" in nativeGeneration),
      ...("problem" in nativeGeneration ? { nativeGenerationProblem: nativeGeneration.problem } : {}),
    };
    return new SlotEngine(
      init,
      llama,
      model,
      context,
      sequences,
      completions,
      slots,
      store,
      gate,
      batches,
      computePool,
      inlineDecode,
      "problem" in nativeGeneration ? undefined : nativeGeneration,
      loaded,
    );
  }

  /** Hot reload: the batching strategy reads the settings on every batch; the local scheduler is told. */
  configure(local: LocalSchedulerSettings): void {
    this.init.local = local;
    this.slots.configure({ priorityGroups: local.priorityGroups, quotaPerGroup: local.quotaPerGroup });
  }

  /**
   * Empties every idle slot that holds tokens (running requests keep theirs); the slots
   * emptied. The host tells the global tree.
   */
  async clearIdleSlots(): Promise<number[]> {
    const cleared: number[] = [];
    for (let slot = 0; slot < this.sequences.length; slot++) {
      const sequence = this.sequences[slot]!;
      if (this.slots.reserveIdle((idle) => idle === slot && sequence.contextTokens.length > 0) === undefined) continue;
      try {
        await sequence.clearHistory();
        cleared.push(slot);
      } finally {
        this.slots.release(slot);
      }
    }
    return cleared;
  }

  /** What the worker's batches carried so far (a decode step's fill is decodeTokens / steps under load). */
  stats(): WorkerStats {
    const now = Date.now();
    const slots = this.sequences.map((sequence, slot) => {
      const tokens = sequence.contextTokens;
      const lastUsed = this.slots.lastUsedMs(slot);
      return {
        slot,
        tokens: tokens.length,
        preview: previewOf(this.model.detokenize(tokens.slice(0, PREVIEW_TOKENS), false)),
        busy: this.slots.isBusy(slot),
        idleMs: Number.isFinite(lastUsed) && !this.slots.isBusy(slot) ? Math.max(0, now - lastUsed) : null,
      };
    });
    return {
      ...this.batches,
      inlineSteps: this.inlineDecode.steps.inline,
      inlineSamples: this.inlineDecode.steps.sampled,
      ...(this.native
        ? {
            nativeCalls: this.native.stats.calls,
            nativeSteps: this.native.stats.steps,
            nativeTokens: this.native.stats.tokens,
            nativeQuietCalls: this.native.stats.quietCalls,
            nativeInterruptedCalls: this.native.stats.interruptedCalls,
          }
        : {}),
      gateWakeups: this.gate.wakeups,
      storedStates: this.store.size,
      storedBytes: this.store.bytes,
      local: { ...this.init.local },
      slots,
      waitingByGroup: this.slots.waitingByGroup(),
    };
  }

  async dispose(): Promise<void> {
    await this.store.clear();
    await this.context.dispose();
    this.computePool.release();
    await this.model.dispose();
    await this.llama.dispose();
  }

  async generate(task: GenerateTask): Promise<GenerationResult> {
    // Held until it runs in the generation loop, or ends: taken before the first await.
    const outsideLoop = this.native?.hold() ?? (() => {});
    const abort = new AbortController();
    task.port.on("message", (message: GenerationControl) => {
      if (message.type !== "cancel") return;
      // Waiting for a slot: leave the queue. Anywhere else (building the grammar, loading a
      // state, generating): the signal ends it at the next check.
      this.slots.cancel(task.generationId);
      abort.abort();
    });
    const running = this.runGeneration(task, abort, outsideLoop);
    this.active.set(running, { generationId: task.generationId, abort });
    try {
      return await running;
    } finally {
      outsideLoop();
      this.active.delete(running);
    }
  }

  /** The fatal path: every queued or running generation ends (cancelled); resolves once all have. */
  async stopAll(): Promise<void> {
    for (const { generationId, abort } of this.active.values()) {
      this.slots.cancel(generationId);
      abort.abort();
    }
    await Promise.allSettled(this.active.keys());
  }

  private async runGeneration(task: GenerateTask, abort: AbortController, outsideLoop: () => void): Promise<GenerationResult> {
    const { port, sampling } = task;
    // A prompt arrives as an Int32Array (one block to copy across the thread); node-llama-cpp takes arrays.
    const tokens = tokenArray(task.tokens);
    const send = (event: GenerationEvent) => port.postMessage(event);
    const queuedAt = performance.now();
    const cancelledBeforeStart = () => {
      send({ type: "done" });
      port.close();
      return cancelledInQueue(tokens.length, performance.now() - queuedAt);
    };
    // Built (or found in the cache) before taking a slot: a schema the worker refuses fails
    // the request before it starts, so the host can still answer it with a 400.
    let grammar: LlamaGrammar | undefined;
    try {
      grammar = await grammarFor(this.llama, sampling);
    } catch (error) {
      send({ type: "done" });
      port.close();
      throw new GrammarRefusedError((error as Error).message);
    }
    if (abort.signal.aborted) return cancelledBeforeStart();
    const grant = await this.slots.acquire(task.generationId, tokens);
    if (!grant) return cancelledBeforeStart();
    const { slot, group } = grant;
    try {
      const sequence = this.sequences[slot]!;
      const preparation = await this.prepareSlot(slot, tokens);
      // Cancelled while its slot was cleared or a state loaded: it never started ("done" follows).
      if (abort.signal.aborted) return cancelledInQueue(tokens.length, performance.now() - queuedAt);
      // LlamaCompletion re-evaluates from the first token that differs, but always evaluates the
      // last prompt token itself (it needs its logits): so at most tokens.length - 1 are reused.
      const cachedTokens = Math.min(sequence.compareContextTokens(tokens as Token[]).firstDifferentIndex, tokens.length - 1);
      const startedAt = performance.now();
      const states = this.store.takeChanges();
      send({ type: "started", slot, cachedTokens, queueMs: startedAt - queuedAt, restoredTokens: preparation.restoredTokens, ...(states ? { states } : {}) });
      let firstTokenAt: number | undefined;
      let completionTokens = 0;
      // node-llama-cpp spells each text chunk after the completion's earlier tokens, but the
      // first after nothing, and a SentencePiece tokenizer then drops the first token's leading
      // space. The client's next turn sends that text back, and its tokens no longer match the
      // ones the slot holds from the first generated token on: every turn of a conversation
      // recomputed the whole previous answer (measured on the `bench` model: 946 of 1,034
      // prompt tokens reused, the previous prompt exactly, where llama-server reused 977). So
      // the first chunk is spelled again after the prompt, as llama-server spells every token.
      let firstChunkTokens: Token[] | undefined;
      const stops = new StopSequenceFilter(sampling.stop);
      const sent: string[] = [];
      const logprobs = sampling.logprobs !== undefined ? new LogprobRecorder(this.model, sampling.logprobs, tokens as Token[]) : undefined;
      const sentLogprobs: TokenLogprob[] = [];
      // An answer asked for whole goes to the host in the result: of its pieces only the first
      // is sent (the end of its prefill), and the gaps between the others are timed here.
      const everyPiece = task.pieces !== "first";
      const textGapsMs: number[] = [];
      let lastPieceAt = 0;
      const emit = (text: string) => {
        if (text.length === 0) return;
        sent.push(text);
        const entries = logprobs?.take();
        if (entries) sentLogprobs.push(...entries);
        if (everyPiece || sent.length === 1) send(entries ? { type: "text", text, logprobs: entries } : { type: "text", text });
        if (everyPiece) return;
        const at = performance.now();
        if (sent.length > 1) textGapsMs.push(at - lastPieceAt);
        lastPieceAt = at;
      };
      // LlamaCompletion's callbacks: the tokens released, then their text.
      const onToken = (generated: Token[]) => {
        firstTokenAt ??= performance.now();
        if (completionTokens === 0) firstChunkTokens = generated;
        completionTokens += generated.length;
        logprobs?.onReleased(generated);
      };
      // Called just after onToken, with the text of the same tokens.
      const onTextChunk = (chunk: string) => {
        const text = firstChunkTokens === undefined ? chunk : this.model.detokenize(firstChunkTokens, false, tokens as Token[]);
        firstChunkTokens = undefined;
        emit(stops.push(text));
        if (stops.stopped) abort.abort();
      };
      const stopReason =
        this.native !== undefined && grammar === undefined && logprobs === undefined && nativeSampling(sampling, tokens.length, this.context.contextSize)
          ? await this.generateNatively(this.native, slot, tokens as Token[], sampling, group, abort.signal, onToken, onTextChunk, outsideLoop)
          : await this.generateWithCompletion(slot, tokens, sampling, group, grammar, abort, onToken, onTextChunk, logprobs);
      emit(stops.flush());
      const finishedAt = performance.now();
      return {
        text: sent.join(""),
        ...(logprobs ? { logprobs: sentLogprobs } : {}),
        finishReason: stops.stopped ? "stop" : finishReason(stopReason),
        promptTokens: tokens.length,
        cachedTokens,
        restoredTokens: preparation.restoredTokens,
        evictedTokens: preparation.evictedTokens,
        spilledTokens: preparation.spilledTokens,
        ...(preparation.restoreFailed !== undefined ? { restoreFailed: preparation.restoreFailed } : {}),
        completionTokens,
        slot,
        ...heldTokensOf(sequence.contextTokens, tokens),
        queueMs: startedAt - queuedAt,
        prefillMs: (firstTokenAt ?? finishedAt) - startedAt,
        totalMs: finishedAt - queuedAt,
        ...(everyPiece ? {} : { textGapsMs }),
      };
    } finally {
      this.slots.release(slot);
      send({ type: "done" });
      port.close();
    }
  }

  /** A generation through node-llama-cpp's LlamaCompletion, token by token; its stop reason. */
  private async generateWithCompletion(
    slot: number,
    tokens: readonly number[],
    sampling: SamplingParams,
    group: number,
    grammar: LlamaGrammar | undefined,
    abort: AbortController,
    onToken: (tokens: Token[]) => void,
    onTextChunk: (text: string) => void,
    logprobs: LogprobRecorder | undefined,
  ): Promise<string> {
    this.gate.begin(slot);
    try {
      const { metadata } = await this.completions[slot]!.generateCompletionWithMeta(withoutPrependedBos(this.model, tokens), {
        maxTokens: sampling.maxTokens,
        temperature: samplingTemperature(sampling.temperature),
        topP: sampling.topP,
        seed: sampling.seed,
        repeatPenalty: repeatPenaltyOf(sampling),
        grammar,
        evaluationPriority: evaluationPriorityOf(group, this.init.local.priorityGroups),
        signal: abort.signal,
        stopOnAbortSignal: true,
        // The host refuses prompts that do not fit; never shift (silently drop) context here.
        disableContextShift: true,
        // LlamaCompletion keeps only contextSize - contextShiftSize prompt tokens, even with
        // shifting disabled (default 10% of the slot): a prompt that fits would silently lose
        // its start. No room is needed for a shift that never happens.
        contextShiftSize: 0,
        onToken,
        ...(logprobs ? { onTokenProbabilities: (token: Token, probabilities: Map<Token, number>) => logprobs.onSampled(token, probabilities) } : {}),
        onTextChunk,
      });
      return metadata.stopReason;
    } finally {
      this.gate.end(slot);
    }
  }

  /**
   * A generation whose first token node-llama-cpp samples after the prompt (in the batches it
   * shares with the worker's other sequences) and whose other tokens come from the generation
   * loop, several steps per call (native-generation.ts); its stop reason, as LlamaCompletion
   * names them. Tokens and text reach the same callbacks, in LlamaCompletion's order.
   */
  private async generateNatively(
    native: NativeGeneration,
    slot: number,
    prompt: Token[],
    sampling: SamplingParams,
    group: number,
    signal: AbortSignal,
    onToken: (tokens: Token[]) => void,
    onTextChunk: (text: string) => void,
    outsideLoop: () => void,
  ): Promise<string> {
    const sequence = this.sequences[slot]!;
    const temperature = samplingTemperature(sampling.temperature);
    // node-llama-cpp's defaults where the request sets none.
    const topP = sampling.topP ?? 0.95;
    const seed = sampling.seed ?? Math.floor(Date.now() / 1000);
    const speller = new TokenSpeller(this.model, native.extraStopTokens);
    const release = ({ tokens, text }: SpelledTokens) => {
      if (tokens.length === 0) return;
      onToken(tokens);
      onTextChunk(text);
    };
    const finish = (stopReason: NativeStop) => {
      release(speller.flush());
      return stopReason;
    };
    const joined = native.announce(slot);
    // From here the loop counts it as joining.
    outsideLoop();
    try {
      let first: Token | undefined;
      this.gate.begin(slot);
      try {
        // As LlamaCompletion: keep what the slot holds of the prompt, but evaluate its last
        // token again (its logits give the first token).
        await sequence.adaptStateToTokens(prompt.slice(0, -1), false);
        const evaluation = sequence.evaluate(prompt.slice(sequence.nextTokenIndex), {
          temperature,
          topP,
          seed,
          evaluationPriority: evaluationPriorityOf(group, this.init.local.priorityGroups),
          yieldEogToken: true,
        });
        const step = await evaluation.next();
        // Its sampler is freed; the token is not decoded (the loop decodes it first).
        await evaluation.return();
        first = step.done ? undefined : step.value;
      } finally {
        this.gate.end(slot);
      }
      if (first === undefined || speller.ends(first)) return "eogToken";
      release(speller.push([first]));
      if (signal.aborted) return finish("abort");
      const maxTokens = Math.min(sampling.maxTokens, this.context.contextSize - prompt.length);
      const run = native.run({
        sequence,
        sequenceId: slot,
        firstToken: first,
        // Each step decodes one token into the slot's cells: the last cell stays free, as node-llama-cpp keeps it.
        budget: Math.min(maxTokens - 1, this.context.contextSize - 1 - sequence.nextTokenIndex),
        temperature,
        topP,
        seed,
        // A stop sequence in the text aborts the signal too (onTextChunk). With stop sequences
        // the call's tokens go one at a time, as LlamaCompletion's do: the answer ends at the
        // token that completes one, and the tokens the call sampled after it are not counted.
        onTokens: (generated) => {
          if (sampling.stop.length === 0) return release(speller.push(generated));
          for (const token of generated) {
            release(speller.push([token]));
            if (signal.aborted) return;
          }
        },
        cancelled: () => signal.aborted,
        joined,
      });
      return finish(await run);
    } finally {
      joined();
    }
  }

  /** Times this worker in one idle slot (worker/profile.ts), which it leaves empty. */
  async profile(task: ProfileTask): Promise<ProfileResult> {
    // Its evaluations go through node-llama-cpp's batches, between the loop's calls: keep them short.
    const outsideLoop = this.native?.hold() ?? (() => {});
    try {
      const { slot } = (await this.slots.acquire(`profile-${performance.now()}`, []))!;
      const busyAtStart = this.slots.busyCount - 1;
      try {
        const measured = await profileSequence(this.model, this.sequences[slot]!, task);
        const otherBusySlots = Math.max(busyAtStart, this.slots.busyCount - 1);
        return { workerId: this.init.workerId, slot, otherBusySlots, ...measured };
      } finally {
        this.slots.release(slot);
      }
    } finally {
      outsideLoop();
    }
  }

  /** Saves a prefix this worker holds, from an idle slot or its store, for another worker to import. */
  async exportPrefix(task: ExportPrefixTask): Promise<ExportResult | null> {
    const covers = (held: readonly number[]) => held.length >= task.tokens.length && commonPrefixLength(held, task.tokens) === task.tokens.length;
    let found = this.store.bestPrefix(task.tokens);
    if (!found || found.length < task.tokens.length) {
      const slot = this.slots.reserveIdle((slot) => covers(this.sequences[slot]!.contextTokens));
      if (slot === undefined) return null;
      try {
        const sequence = this.sequences[slot]!;
        const saved = await this.store.spill(sequence.contextTokens, (file) => sequence.saveStateToFile(file));
        if (!saved) return null;
        found = { entry: saved, length: task.tokens.length };
      } finally {
        this.slots.release(slot);
      }
    }
    const release = this.store.pin(found.entry);
    try {
      const file = await this.store.export(found.entry, join(this.init.spill.dir || defaultStateDir(), `radixgate-${this.init.hostPid}-copies`));
      return { file, tokens: found.entry.tokens.length, bytes: found.entry.bytes };
    } finally {
      release();
    }
  }

  /** Adopts another worker's exported state into this worker's store (then removes the export). */
  async importState(task: ImportStateTask): Promise<ImportResult> {
    try {
      const entry = await this.store.adopt(task.file);
      return { tokens: entry?.tokens.length ?? 0 };
    } finally {
      await rm(task.file, { force: true });
      await rm(`${task.file}.json`, { force: true });
    }
  }

  /**
   * Before a request runs in `slot`: save what the slot is about to lose when it is worth
   * keeping (long enough, used recently enough), then load back a spilled or copied state
   * when it holds clearly more of the prompt than the slot does. Neither may fail the
   * request: a failed save only loses the old content, a failed load leaves the slot empty
   * (our node-llama-cpp patch clears its cells) and the prompt is computed instead.
   */
  private async prepareSlot(slot: number, tokens: readonly number[]): Promise<SlotPreparation> {
    const sequence = this.sequences[slot]!;
    const held = sequence.contextTokens;
    const kept = commonPrefixLength(held, tokens);
    const evictedTokens = held.length - kept;
    const spill = this.init.spill;
    if (spill.budgetBytes <= 0) return { restoredTokens: 0, evictedTokens, spilledTokens: 0 };
    let spilledTokens = 0;
    const recent = Date.now() - this.slots.lastUsedMs(slot) <= spill.recentMs;
    // The state to load is chosen first and pinned while the slot's content is saved: the save
    // must not drop it (a newer state drops the ones it holds nearly all of).
    const found = this.store.bestPrefix(tokens);
    const stored = found && found.length >= kept + MIN_RESTORE_GAIN ? found : undefined;
    if (evictedTokens >= spill.minTokens && recent && !this.store.covers(held)) {
      const release = stored ? this.store.pin(stored.entry) : () => {};
      const saved = await this.store.spill(held, (file) => sequence.saveStateToFile(file)).catch(() => undefined);
      release();
      if (saved) spilledTokens = evictedTokens;
    }
    if (!stored) return { restoredTokens: 0, evictedTokens, spilledTokens };
    const failure = await this.loadState(sequence, stored.entry);
    if (failure !== undefined) return { restoredTokens: 0, evictedTokens: held.length, spilledTokens, restoreFailed: failure };
    return { restoredTokens: stored.length - kept, evictedTokens, spilledTokens };
  }

  /** Loads a stored state into `sequence`, its file pinned meanwhile; the reason when it failed. */
  private async loadState(sequence: LlamaContextSequence, entry: StateEntry): Promise<string | undefined> {
    const release = this.store.pin(entry);
    try {
      await sequence.loadStateFromFile(entry.file, { acceptRisk: true });
      return undefined;
    } catch (error) {
      await this.store.remove(entry);
      return `loading KV state ${entry.file} failed: ${(error as Error).message}`;
    } finally {
      release();
    }
  }
}

/** What a slot holding `held` (its sequence's tokens) keeps of a generation from `prompt`. */
function heldTokensOf(held: readonly number[], prompt: readonly number[]): Pick<GenerationResult, "heldPromptTokens" | "heldAnswerTokens"> {
  const heldPromptTokens = commonPrefixLength(held, prompt);
  if (heldPromptTokens < prompt.length || held.length === prompt.length) return { heldPromptTokens };
  return { heldPromptTokens, heldAnswerTokens: held.slice(prompt.length) };
}

/**
 * OpenAI's presence/frequency penalties on llama.cpp's penalties sampler, over every token
 * this completion generated (OpenAI counts the whole completion; node-llama-cpp's default
 * window is 64 and skips the newline token). Both 0 or absent: undefined, which leaves
 * LlamaCompletion's default untouched (its default builds no penalty sampler at all: the
 * multiplicative penalty resolves to 1 in the addon, not the documented 1.1).
 */
function repeatPenaltyOf(sampling: SamplingParams): LLamaContextualRepeatPenalty | undefined {
  const presencePenalty = sampling.presencePenalty ?? 0;
  const frequencyPenalty = sampling.frequencyPenalty ?? 0;
  if (presencePenalty === 0 && frequencyPenalty === 0) return undefined;
  return { penalty: 1, presencePenalty, frequencyPenalty, lastTokens: Math.max(1, sampling.maxTokens), penalizeNewLine: true };
}

/**
 * Below this a temperature is greedy sampling. llama.cpp divides the logits by it in float32:
 * from about 1e-37 they overflow to infinity and the sampler picks token 0, which a grammar
 * refuses ("Unexpected empty grammar stack"), and that error ends the worker (measured with
 * temperature 1e-39 and a JSON grammar). Every temperature this small is greedy already.
 */
const GREEDY_BELOW = 1e-6;

function samplingTemperature(temperature: number): number {
  return temperature < GREEDY_BELOW ? 0 : temperature;
}

/**
 * The host sends the exact token list, BOS included when the model wants one (so the global
 * tree sees what the KV holds). LlamaCompletion prepends that BOS itself: hand it the rest.
 */
function withoutPrependedBos(model: LlamaModel, tokens: readonly number[]): Token[] {
  const bos = model.tokens.shouldPrependBosToken ? model.tokens.bos : null;
  // Token is a branded number in node-llama-cpp; these ids came from the same model's tokenizer.
  return (bos !== null && tokens[0] === bos ? tokens.slice(1) : tokens.slice()) as Token[];
}

/**
 * Whether a request's sampling can run in the generation loop (native-generation.ts): no
 * presence or frequency penalty (node-llama-cpp's penalty sampler is fed the completion's
 * tokens from JavaScript at every token), and a prompt that leaves a cell to generate into.
 * Grammars and token probabilities are the caller's to check.
 */
function nativeSampling(sampling: SamplingParams, promptTokens: number, contextSize: number): boolean {
  return repeatPenaltyOf(sampling) === undefined && sampling.maxTokens >= 1 && promptTokens < contextSize - 1;
}

function finishReason(stopReason: string): FinishReason {
  switch (stopReason) {
    case "maxTokens":
      return "length";
    case "abort":
      return "cancelled";
    default:
      return "stop";
  }
}

/** Tokens of a slot shown on the status page: enough for its first words. */
const PREVIEW_TOKENS = 24;

/** The first words of a slot's text, on one line, at most 80 characters. */
function previewOf(text: string): string {
  const line = text.replace(/\s+/g, " ").trim();
  return line.length > 80 ? `${line.slice(0, 79)}…` : line;
}
