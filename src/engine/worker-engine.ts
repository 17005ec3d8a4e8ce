// A worker: one llama.cpp model and one context with N sequences (slots). The same code runs
// in a piscina thread (worker-thread.ts) or in a child process of its own (worker-process.ts);
// only how tasks and generation ports reach it differs. Tasks: load, generate (streams over
// a port), profile, export-prefix, import-state, dispose.
import { rm } from "node:fs/promises";
import { join } from "node:path";
import {
  getLlama,
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
import { commonPrefixLength } from "../common/tokens.js";
import { modelFingerprint } from "./model-fingerprint.js";
import { defaultStateDir, StateStore } from "./state-store.js";
import type {
  ExportPrefixTask,
  ExportResult,
  ImportResult,
  ImportStateTask,
  GenerateTask,
  GenerationControl,
  GenerationEvent,
  GenerationResult,
  FinishReason,
  LoadResult,
  ProfileResult,
  ProfileTask,
  ResponseFormat,
  SamplingParams,
  WorkerInit,
  WorkerTask,
} from "./protocol.js";
import { RESPONSE_FORMAT_ERROR } from "./protocol.js";
import { profileSequence } from "./calibration.js";
import { evaluationPriorityOf, shareBatch } from "../scheduler/batch-priority.js";
import { LocalScheduler } from "../scheduler/local-scheduler.js";
import { StopSequenceFilter } from "./stop-sequences.js";

/** This thread's or process's worker: one per module instance. */
let init: WorkerInit;

/** Binds the worker's settings and returns its task handler. */
export function createTaskHandler(workerInit: WorkerInit): typeof handleTask {
  init = workerInit;
  return handleTask;
}

interface Engine {
  llama: Llama;
  model: LlamaModel;
  context: LlamaContext;
  sequences: LlamaContextSequence[];
  completions: LlamaCompletion[];
  slots: LocalScheduler;
  store: StateStore;
  loaded: LoadResult;
}

/** A restore must save at least this many tokens over what the slot keeps to be worth a load. */
const MIN_RESTORE_GAIN = 16;

let engine: Promise<Engine> | undefined;

async function handleTask(
  task: WorkerTask,
): Promise<LoadResult | GenerationResult | ProfileResult | ExportResult | ImportResult | null> {
  switch (task.kind) {
    case "load":
      return (await loadEngine()).loaded;
    case "generate":
      return generate(await loadEngine(), task);
    case "dispose":
      await disposeEngine();
      return null;
    case "profile":
      return profile(await loadEngine(), task);
    case "export-prefix":
      return exportPrefix(await loadEngine(), task);
    case "import-state":
      return importState(await loadEngine(), task);
    case "configure":
      // The batching strategy reads init.local on every batch; the local scheduler is told.
      init.local = task.local;
      (await loadEngine()).slots.configure({ priorityGroups: task.local.priorityGroups, quotaPerGroup: task.local.quotaPerGroup });
      return null;
    default:
      return task satisfies never;
  }
}

function loadEngine(): Promise<Engine> {
  engine ??= createEngine();
  return engine;
}

async function createEngine(): Promise<Engine> {
  const started = performance.now();
  const llama = await getLlama({
    gpu: init.gpu,
    // A missing prebuilt binary must fail loudly, not start a source build at request time.
    build: "never",
    // Explicit: llama.cpp's default thread count oversubscribes small machines (DESIGN.md 5).
    maxThreads: init.threads,
    logLevel: LlamaLogLevel.warn,
  });
  const model = await llama.loadModel({ modelPath: init.modelPath, gpuLayers: init.gpu === false ? 0 : "auto" });
  const context = await model.createContext({
    sequences: init.slots,
    contextSize: init.contextSize,
    batchSize: init.batchSize,
    threads: init.threads,
    // Decode tokens first, then the prefill budget by priority group (batch-priority.ts).
    batching: { itemPrioritizationStrategy: ({ items, size }) => shareBatch(items, size, init.local.chunkTokens) },
  });
  const sequences = Array.from({ length: init.slots }, () => context.getSequence());
  const completions = sequences.map((contextSequence) => new LlamaCompletion({ contextSequence, autoDisposeSequence: false }));
  const fingerprint = await modelFingerprint(init.modelPath);
  const store = new StateStore(
    join(init.spill.dir || defaultStateDir(), `radixgate-${init.hostPid}-${init.workerId}`),
    { modelFingerprint: fingerprint, contextSize: context.contextSize, slots: init.slots },
    init.spill.budgetBytes,
  );
  // A worker restarted after a crash finds its predecessor's files: they are not its own state.
  await store.clear();
  const slots = new LocalScheduler(
    { slots: init.slots, priorityGroups: init.local.priorityGroups, quotaPerGroup: init.local.quotaPerGroup },
    { tokensOfSlot: (slot) => sequences[slot]?.contextTokens ?? [], spilledPrefix: (tokens) => store.bestPrefix(tokens, init.local.hitRatioWindowMs)?.length ?? 0 },
  );
  const loaded: LoadResult = {
    workerId: init.workerId,
    backend: llama.gpu === false ? "cpu" : llama.gpu,
    contextSize: context.contextSize,
    slots: init.slots,
    trainContextSize: model.trainContextSize,
    loadMs: performance.now() - started,
    modelFingerprint: fingerprint,
  };
  return { llama, model, context, sequences, completions, slots, store, loaded };
}

async function disposeEngine(): Promise<void> {
  if (!engine) return;
  const { llama, model, context, store } = await engine;
  engine = undefined;
  await store.clear();
  await context.dispose();
  await model.dispose();
  await llama.dispose();
}

async function generate(engine: Engine, task: GenerateTask): Promise<GenerationResult> {
  const { port, tokens, sampling } = task;
  const abort = new AbortController();
  port.on("message", (message: GenerationControl) => {
    if (message.type !== "cancel") return;
    // Still waiting for a slot: leave the queue. Running: stop the generation.
    if (!engine.slots.cancel(task.requestId)) abort.abort();
  });
  const send = (event: GenerationEvent) => port.postMessage(event);
  const queuedAt = performance.now();
  // Built (or found in the cache) before taking a slot: a schema the worker refuses fails
  // the request before it starts, so the host can still answer it with a 400.
  let grammar: LlamaGrammar | undefined;
  try {
    grammar = await grammarFor(engine.llama, sampling.responseFormat);
  } catch (error) {
    send({ type: "done" });
    port.close();
    throw new Error(`${RESPONSE_FORMAT_ERROR}${(error as Error).message}`);
  }
  const grant = await engine.slots.acquire(task.requestId, tokens);
  if (!grant) {
    send({ type: "done" });
    port.close();
    return cancelledInQueue(tokens.length, performance.now() - queuedAt);
  }
  const { slot, group } = grant;
  try {
    const sequence = engine.sequences[slot]!;
    const completion = engine.completions[slot]!;
    const { restoredTokens, evictedTokens, spilledTokens } = await reuseSpilledState(engine, slot, tokens);
    // LlamaCompletion re-evaluates from the first token that differs, but always evaluates the
    // last prompt token itself (it needs its logits): so at most tokens.length - 1 are reused.
    const cachedTokens = Math.min(sequence.compareContextTokens(tokens as Token[]).firstDifferentIndex, tokens.length - 1);
    const startedAt = performance.now();
    send({ type: "started", slot, cachedTokens, queueMs: startedAt - queuedAt, restoredTokens });
    let firstTokenAt: number | undefined;
    let completionTokens = 0;
    const stops = new StopSequenceFilter(sampling.stop);
    const sent: string[] = [];
    const emit = (text: string) => {
      if (text.length === 0) return;
      sent.push(text);
      send({ type: "text", text });
    };
    const { metadata } = await completion.generateCompletionWithMeta(withoutPrependedBos(engine.model, tokens), {
      maxTokens: sampling.maxTokens,
      temperature: sampling.temperature,
      topP: sampling.topP,
      seed: sampling.seed,
      repeatPenalty: repeatPenaltyOf(sampling),
      grammar,
      evaluationPriority: evaluationPriorityOf(group, init.local.priorityGroups),
      signal: abort.signal,
      stopOnAbortSignal: true,
      // The host refuses prompts that do not fit; never shift (silently drop) context here.
      disableContextShift: true,
      // LlamaCompletion keeps only contextSize - contextShiftSize prompt tokens, even with
      // shifting disabled (default 10% of the slot): a prompt that fits would silently lose
      // its start. No room is needed for a shift that never happens.
      contextShiftSize: 0,
      onToken: (generated) => {
        firstTokenAt ??= performance.now();
        completionTokens += generated.length;
      },
      onTextChunk: (text) => {
        emit(stops.push(text));
        if (stops.stopped) abort.abort();
      },
    });
    emit(stops.flush());
    const finishedAt = performance.now();
    return {
      text: sent.join(""),
      finishReason: stops.stopped ? "stop" : finishReason(metadata.stopReason),
      promptTokens: tokens.length,
      cachedTokens,
      restoredTokens,
      evictedTokens,
      spilledTokens,
      completionTokens,
      slot,
      queueMs: startedAt - queuedAt,
      prefillMs: (firstTokenAt ?? finishedAt) - startedAt,
      totalMs: finishedAt - queuedAt,
    };
  } finally {
    engine.slots.release(slot);
    send({ type: "done" });
    port.close();
  }
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
 * Compiled grammars, per Llama instance (a reloaded engine starts empty) and per response
 * format (the schema's JSON text), least recently used out past GRAMMAR_CACHE_SIZE. A
 * grammar is read-only: generations in every slot share it, each with its own state.
 */
const grammarCache = new WeakMap<Llama, Map<string, Promise<LlamaGrammar>>>();
const GRAMMAR_CACHE_SIZE = 64;

async function grammarFor(llama: Llama, format: ResponseFormat | undefined): Promise<LlamaGrammar | undefined> {
  if (format === undefined) return undefined;
  let cache = grammarCache.get(llama);
  if (!cache) {
    cache = new Map();
    grammarCache.set(llama, cache);
  }
  const key = format.type === "json_object" ? "json_object" : `json_schema:${JSON.stringify(format.schema)}`;
  let grammar = cache.get(key);
  if (grammar) {
    cache.delete(key);
  } else {
    grammar = format.type === "json_object" ? llama.getGrammarFor("json") : jsonSchemaGrammar(llama, format.schema);
    const built = grammar;
    // A refused schema is not remembered.
    built.catch(() => {
      if (cache.get(key) === built) cache.delete(key);
    });
  }
  cache.set(key, grammar);
  if (cache.size > GRAMMAR_CACHE_SIZE) cache.delete(cache.keys().next().value!);
  return grammar;
}

/**
 * node-llama-cpp's grammar for a JSON schema, with one fix: its `integer` rule allows an
 * exponent, signed too (`1e-5`, or `2E9439000074390707`, which a JSON parser reads as
 * Infinity); JSON Schema's integer is a whole number, so the rule keeps sign and digits only.
 */
async function jsonSchemaGrammar(llama: Llama, schema: Record<string, unknown>): Promise<LlamaGrammar> {
  // The host checked the schema against the subset node-llama-cpp's converter understands;
  // its generic type cannot describe a schema known only at run time.
  const converted = await llama.createGrammarForJsonSchema(schema as never);
  const integerRule = /^integer-number-rule ::= .*$/m;
  if (!integerRule.test(converted.grammar)) return converted;
  return llama.createGrammar({
    grammar: converted.grammar.replace(integerRule, 'integer-number-rule ::= "-"? ("0" | [1-9] [0-9]{0,15})'),
    stopGenerationTriggers: converted.stopGenerationTriggers,
    trimWhitespaceSuffix: converted.trimWhitespaceSuffix,
  });
}

/** Times this worker in one idle slot (calibration.ts), which it leaves empty. */
async function profile(engine: Engine, task: ProfileTask): Promise<ProfileResult> {
  const { slot } = (await engine.slots.acquire(`profile-${performance.now()}`, []))!;
  const busyAtStart = engine.slots.busyCount - 1;
  try {
    const measured = await profileSequence(engine.model, engine.sequences[slot]!, task);
    const otherBusySlots = Math.max(busyAtStart, engine.slots.busyCount - 1);
    return { workerId: init.workerId, slot, otherBusySlots, ...measured };
  } finally {
    engine.slots.release(slot);
  }
}

function cancelledInQueue(promptTokens: number, queueMs: number): GenerationResult {
  return {
    text: "",
    finishReason: "cancelled",
    promptTokens,
    cachedTokens: 0,
    restoredTokens: 0,
    evictedTokens: 0,
    spilledTokens: 0,
    completionTokens: 0,
    slot: -1,
    queueMs,
    prefillMs: 0,
    totalMs: queueMs,
  };
}

/**
 * Before a request runs in `slot`: save what the slot is about to lose when it is worth
 * keeping (long enough, used recently enough), then load back a spilled or copied state
 * when it holds clearly more of the prompt than the slot does.
 */
async function reuseSpilledState(
  engine: Engine,
  slot: number,
  tokens: readonly number[],
): Promise<{ restoredTokens: number; evictedTokens: number; spilledTokens: number }> {
  const sequence = engine.sequences[slot]!;
  const held = sequence.contextTokens;
  const kept = commonPrefixLength(held, tokens);
  const evictedTokens = held.length - kept;
  if (init.spill.budgetBytes <= 0) return { restoredTokens: 0, evictedTokens, spilledTokens: 0 };
  let spilledTokens = 0;
  const recent = Date.now() - engine.slots.lastUsedMs(slot) <= init.spill.recentMs;
  if (evictedTokens >= init.spill.minTokens && recent && !engine.store.covers(held)) {
    if (await engine.store.spill(held, (file) => sequence.saveStateToFile(file))) spilledTokens = evictedTokens;
  }
  const stored = engine.store.bestPrefix(tokens);
  if (!stored || stored.length < kept + MIN_RESTORE_GAIN) return { restoredTokens: 0, evictedTokens, spilledTokens };
  await sequence.loadStateFromFile(stored.entry.file, { acceptRisk: true });
  engine.store.touch(stored.entry);
  return { restoredTokens: stored.length - kept, evictedTokens, spilledTokens };
}

/** Saves a prefix this worker holds, from an idle slot or its store, for another worker to import. */
async function exportPrefix(engine: Engine, task: ExportPrefixTask): Promise<ExportResult | null> {
  const covers = (held: readonly number[]) => held.length >= task.tokens.length && commonPrefixLength(held, task.tokens) === task.tokens.length;
  let entry = engine.store.bestPrefix(task.tokens);
  if (!entry || entry.length < task.tokens.length) {
    const slot = engine.slots.reserveIdle((slot) => covers(engine.sequences[slot]!.contextTokens));
    if (slot === undefined) return null;
    try {
      const sequence = engine.sequences[slot]!;
      const saved = await engine.store.spill(sequence.contextTokens, (file) => sequence.saveStateToFile(file));
      if (!saved) return null;
      entry = { entry: saved, length: task.tokens.length };
    } finally {
      engine.slots.release(slot);
    }
  }
  const file = await engine.store.export(entry.entry, join(init.spill.dir || defaultStateDir(), `radixgate-${init.hostPid}-copies`));
  return { file, tokens: entry.entry.tokens.length, bytes: entry.entry.bytes };
}

/** Adopts another worker's exported state into this worker's store (then removes the export). */
async function importState(engine: Engine, task: ImportStateTask): Promise<ImportResult> {
  try {
    const entry = await engine.store.adopt(task.file);
    return { tokens: entry?.tokens.length ?? 0 };
  } finally {
    await rm(task.file, { force: true });
    await rm(`${task.file}.json`, { force: true });
  }
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
