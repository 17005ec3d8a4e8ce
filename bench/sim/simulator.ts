// A discrete-event simulation of a Radixgate box at GPU scale. It drives the REAL scheduler
// code, with no copy of any policy logic: the GlobalScheduler and the registry's policies
// place every request, each simulated worker admits requests to its slots with the real
// LocalScheduler (Preble's priority groups by hit ratio, slot choice by shared prefix, LRU)
// and shares each batch with the real shareBatch (decode tokens first, then the chunked
// prefill budget by priority group). Only the card itself is simulated:
//
// - Continuous batching: a worker runs one step at a time while it has running requests.
//   A step's batch is shareBatch(running, batchTokens, chunkTokens): one token for every
//   decoding request, then prefill chunks. Its duration comes from the card's time model:
//       base + sum over prefill chunks of (prefillMs(chunk, context after it) - base)
//     + decodeMsPerToken(sum of the decoding requests' contexts)   (when any decodes)
//   i.e. one fixed cost per forward pass, the prefill terms of every chunk, and one decode
//   pass whose weight reading (decodeBase) is shared by the batch while each sequence adds
//   its attention reads (decodePerContext x its context). On a CPU (`decodeBatching:
//   "per-sequence"`) the decode pass is compute-bound, not bound by reading the weights, and
//   every decoding sequence pays the whole decodeMsPerToken(its context): measured on the
//   `bench` model, 1 thread, 3 sequences decoding together take 12.2 ms a step, 3 x the 4.1 ms
//   of one alone.
// - A request's first token comes at the end of the step that finishes its prefill (TTFT),
//   and each later step adds one token until it has its output (end-to-end latency).
// - KV capacity per card, in tokens, one pool for every slot (no sharing between slots: as
//   llama.cpp sequences, two slots with the same prefix each hold it), and the longest sequence
//   a slot may hold (maxSequenceTokens). Radixgate's worker (node-llama-cpp) gives every slot
//   its own contextSize cells: its cards set capacityTokens = slots x contextSize and
//   maxSequenceTokens = contextSize, so no slot can take another's cells, the pool is never
//   short (the room waits and evictions below never happen) and a slot loses its content only
//   to the next request it runs. A card with no maxSequenceTokens is the idealised shared pool
//   of SGLang or vLLM (bench/sim/hardware.ts), where the rest of this applies. An idle slot keeps
//   what it last ran (its prompt); a running request takes cells as it goes: the prefix its
//   slot already shares, then every token a step evaluates or generates. Admission by room
//   (as SGLang and vLLM admit): a request that took a slot runs only when the cells the
//   running requests hold or will still take (to their last output token) plus its own fit
//   in the card; otherwise it waits, holding its slot, first come first served. Idle slots'
//   contents are evicted only when a step needs their cells, least recently used first (the
//   LocalScheduler's own lastUsedMs). (If a step still found no room, the request that
//   started last would be preempted and recompute later, vLLM-style; admission keeps that
//   from happening.) A request whose prompt and output exceed a whole card (or a slot's
//   maxSequenceTokens) is refused, as the host refuses a prompt that does not fit.
// - The worker reports `slot-holds` to the GlobalScheduler exactly as a real worker does:
//   when a request takes its slot (the slot now holds its prompt), and when the simulated
//   card evicts an idle slot's content (the slot now holds nothing).
// - A slot reuses the prefix it shares with the prompt (at most prompt - 1 tokens: the last
//   prompt token is always evaluated for its logits, as in node-llama-cpp). Generated tokens
//   are not reusable by the next prompt (the slot is recorded as holding its prompt): an
//   agent loop's next turn recomputes the previous answer.
// - Prefix copies (a placement's copy actions, Preble's hot-prefix replication): when the
//   source holds the prefix in an idle slot, the request waits copyMs (the target's time
//   model: save + load of the KV state) before it is queued on the target, whose store then
//   holds the prefix; the LocalScheduler sees it through `spilledPrefix`, and taking a slot
//   loads it when it is longer than what the slot shares. A copy whose source does not hold
//   the prefix in an idle slot fails at once, as the real export does.
// - The state store (optional, `spec.spill`: the real worker's src/engine/worker/state-store.ts,
//   config.yml `spill`): before a request runs in a slot, what the slot is about to lose (the
//   part of its content past the prefix it shares with the prompt) is saved to host memory
//   when it is at least minTokens long and no stored state covers it; then the stored state
//   sharing the longest prefix with the prompt is loaded into the slot when that prefix is at
//   least minRestoreGain tokens longer than what the slot shares (src/engine/worker/slot-engine.ts,
//   prepareSlot). A save and a load each take half of the time model's copyMs (which is
//   fitted to save + load), before the request's prefill, as the real worker awaits them. LRU
//   past budgetTokens. With a store, copied-in prefixes are stored states too (the real worker
//   adopts them into its store), matched by their longest common prefix, and a copy's source
//   may export from its store. (Not modelled: the store's recency windows, recentMs and
//   hitRatioWindowMs, minutes by default, longer than a replay.)
// - node-llama-cpp's context lock (optional, `spec.contextLock`, off by default: it models a
//   stall the real worker had, not a property of the card). A request taking a slot that holds
//   something (its stale tail must be erased), or saving or loading a stored state, needs the
//   context's lock; node-llama-cpp's batch loop holds that lock for as long as any sequence
//   keeps queueing tokens, so such a request waits until its worker runs nothing at all, then
//   the waiting requests take the lock in turn (their saves and loads one after another) before
//   the next step. Measured live with node-llama-cpp 3.21.1 as Radixgate first used it: with
//   three requests decoding, a fourth given a used slot started only when all three had
//   finished. Radixgate's worker no longer waits so (erase, save and load wait at most for the
//   step in flight): the option documents the old behaviour; no GPU card turns it on (the live
//   comparison's `cpu+lock` arm does).
// - Contention (optional, `spec.contention`): CPU workers share the machine's cores with each
//   other and with the server's threads; a step that starts while another worker has requests
//   running is slowed by measured factors (see WorkerSpec).
// - Clients: a request arrives at its arrivalMs; a request with `after` (a turn of an agent
//   loop) arrives thinkMs after that request's response completed. No session ids are sent:
//   placement is the policy's alone. A request the scheduler turns away (every worker's queue
//   full: the server's 429) is sent again retryAfterMs later; its latencies count from its
//   first attempt.
//
// Deterministic: no wall clock anywhere (the schedulers get the simulated clock), events at
// one instant run in the order they were scheduled, and all events of an instant are handled
// before any idle worker starts its next step.
import { commonPrefixLength, type TokenIds } from "../../src/common/tokens.js";
import { type BatchShare, evaluationPriorityOf, shareBatch } from "../../src/scheduler/batch-priority.js";
import { GlobalScheduler, type PlacementTicket, type SchedulerOptions } from "../../src/scheduler/global-scheduler.js";
import { LocalScheduler, type SlotGrant } from "../../src/scheduler/local-scheduler.js";
import { createPolicy, POLICY_DEFAULTS, type PolicyOptions } from "../../src/scheduler/registry.js";
import { TimeModel, type TimeModelCoefficients } from "../../src/scheduler/time-model.js";
import type { PlacementPolicy } from "../../src/scheduler/types.js";
import type { WorkloadRequest } from "../workloads/tokens.js";

/** One simulated card. */
export interface WorkerSpec {
  /** The card's true speed (the scheduler's model starts from `schedulerTimeModel`, default the same). */
  timeModel: TimeModelCoefficients;
  /** Sequences running at once (llama.cpp slots). */
  slots: number;
  /** KV cache of the card, tokens. */
  capacityTokens: number;
  /** Longest sequence (prompt + output) one slot may hold; default the whole card. node-llama-cpp's per-slot contextSize (then capacityTokens = slots x contextSize). */
  maxSequenceTokens?: number;
  /** Tokens one forward pass evaluates at most (llama.cpp batch size). */
  batchTokens: number;
  /** Prefill budget per step, after every decoding request got its token (Preble: 1024). */
  chunkTokens: number;
  /** Local scheduler: P priority groups, k quota per group (Preble: 10, 10). */
  priorityGroups: number;
  quotaPerGroup: number;
  /** The worker's state store of evicted slot contents (see the file comment); absent: none, only copied-in prefixes are kept. */
  spill?: SpillSpec;
  /** Decode cost of a step: "shared" (default, a GPU: one decodeBase per step) or "per-sequence" (a CPU: one per decoding sequence). */
  decodeBatching?: "shared" | "per-sequence";
  /** Model node-llama-cpp's context lock as the worker first met it (see the file comment). Default false. */
  contextLock?: boolean;
  /**
   * Workers sharing one machine's cores (CPU workers, next to the server's own threads): a
   * step that starts while another worker has requests running takes its prefill part x
   * prefillFactor and its decode part x decodeFactor. Measured factors, not derived ones
   * (bench/live/compare.ts fits them on a probe). Default none.
   */
  contention?: { prefillFactor: number; decodeFactor: number };
}

/** The real worker's state store (config.yml `spill`), in tokens. */
export interface SpillSpec {
  /** Tokens of stored states a worker keeps (config spill.budgetBytes / KV bytes per token). */
  budgetTokens: number;
  /** Only an evicted part at least this long is saved (config spill.minTokens). */
  minTokens: number;
  /** A stored state is loaded only when it shares at least this many tokens more than the slot (MIN_RESTORE_GAIN in src/engine/wire/protocol.ts). */
  minRestoreGain: number;
}

export interface SimOptions {
  /** A policy name of the registry, or a policy object. */
  policy: string | PlacementPolicy;
  policyOptions?: PolicyOptions;
  workers: number;
  spec: WorkerSpec;
  /** What the scheduler's per-worker time models start from; default spec.timeModel. */
  schedulerTimeModel?: TimeModelCoefficients;
  /** Arrivals already scaled. Indices must be 0..n-1 in order. */
  requests: readonly WorkloadRequest[];
  scheduler?: Partial<Omit<SchedulerOptions, "now">>;
  /** max_tokens of a request that sets none (the server's generation.defaultMaxTokens). */
  defaultMaxTokens?: number;
  /** A client's wait before it resends a request the server answered 429. Default 1000. */
  retryAfterMs?: number;
  /** Called every `progressEvery` completions. */
  onProgress?(done: number, total: number, simulatedMs: number): void;
  progressEvery?: number;
}

export interface RequestRecord {
  index: number;
  workerId: string;
  /** The placement's reason ("exploit", "roundrobin", ...). */
  reason: string;
  /** When the client first sent it (a 429'd request is sent again later). */
  arrivalMs: number;
  /** When it took a slot with room for it (prefill starts with the next step). */
  startMs: number;
  firstTokenMs: number;
  finishMs: number;
  ttftMs: number;
  e2eMs: number;
  promptTokens: number;
  /** Prompt tokens reused from the slot (or a copied prefix): not evaluated. */
  cachedTokens: number;
  /** cachedTokens / promptTokens: this request's own verdict. */
  cachedFraction: number;
  outputTokens: number;
  /** Time it waited for prefix copies before being queued. */
  copyMs: number;
}

export interface WorkerStats {
  id: string;
  placed: number;
  steps: number;
  busyMs: number;
  prefillTokens: number;
  decodeTokens: number;
  /** Idle slot contents evicted for room. */
  evictions: number;
  /** Times a request holding a slot waited for KV room before it could run. */
  roomWaits: number;
  /** Running requests whose cells were taken back for room (they recompute their prompt). */
  preemptions: number;
  /** State store (spec.spill): slot contents saved before a request overwrote them, and stored states loaded into a slot. */
  spills: number;
  restores: number;
  /** spec.contextLock: requests that waited for the context lock, and their total wait, ms. */
  lockWaits: number;
  lockWaitMs: number;
  /** spec.contention: steps that started while another worker had requests running. */
  contendedSteps: number;
}

export interface SimResult {
  policy: string;
  records: RequestRecord[];
  /** Indices of requests refused because prompt + output exceed a card's KV capacity (or a slot's maxSequenceTokens). */
  refused: number[];
  workers: WorkerStats[];
  /** First arrival and last completion, ms. */
  startMs: number;
  endMs: number;
  copies: { attempted: number; done: number; failed: number };
  /** Placements the scheduler refused (every worker's queue full: 429), each retried. */
  rejections: number;
  reasons: Record<string, number>;
  events: number;
}

// ---------------------------------------------------------------------------------------------
// Event queue: a binary heap ordered by (time, sequence), so events of one instant run in the
// order they were scheduled.

interface SimEvent {
  t: number;
  seq: number;
  run: () => void;
}

class EventQueue {
  private readonly heap: SimEvent[] = [];
  private seq = 0;

  get size(): number {
    return this.heap.length;
  }

  peekTime(): number {
    return this.heap[0]!.t;
  }

  push(t: number, run: () => void): void {
    const heap = this.heap;
    const event = { t, seq: this.seq++, run };
    let i = heap.length;
    heap.push(event);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(event, heap[parent]!)) break;
      heap[i] = heap[parent]!;
      i = parent;
    }
    heap[i] = event;
  }

  pop(): SimEvent {
    const heap = this.heap;
    const top = heap[0]!;
    const last = heap.pop()!;
    if (heap.length > 0) {
      let i = 0;
      for (;;) {
        const left = 2 * i + 1;
        if (left >= heap.length) break;
        const right = left + 1;
        const child = right < heap.length && before(heap[right]!, heap[left]!) ? right : left;
        if (!before(heap[child]!, last)) break;
        heap[i] = heap[child]!;
        i = child;
      }
      heap[i] = last;
    }
    return top;
  }
}

function before(a: SimEvent, b: SimEvent): boolean {
  return a.t < b.t || (a.t === b.t && a.seq < b.seq);
}

// ---------------------------------------------------------------------------------------------
// A request on its way through a worker

interface Job {
  request: WorkloadRequest;
  ticket: PlacementTicket;
  outputTokens: number;
  copyMs: number;
  slot: number;
  group: number;
  cachedTokens: number;
  prefillLeft: number;
  /** Tokens in the sequence now (cached + evaluated + generated). */
  context: number;
  generated: number;
  startMs: number;
  firstTokenMs: number;
}

interface BatchItem {
  readonly tokens: { readonly length: number };
  readonly evaluationPriority: number;
  readonly job: Job;
}

/** Copied-in prefixes a worker keeps (its state store, as far as copies go). */
const IMPORTS_KEPT = 16;

class SimWorker {
  readonly stats: WorkerStats;
  readonly local: LocalScheduler;
  readonly truth: TimeModel;
  private readonly base: number;
  /** What each slot holds, as the LocalScheduler and the reports see it (a running slot: its prompt). */
  private readonly slotTokens: TokenIds[];
  /**
   * What the LocalScheduler sees of a granted slot, as the real worker shows it a sequence's
   * contextTokens: the prefix the slot kept until the whole prompt is evaluated (node-llama-cpp
   * appends a queued prompt's tokens when its last chunk is done), then the prompt. A request
   * arriving during another's prefill does not count that prompt in its hit ratio. Undefined
   * for a slot nobody holds (the LocalScheduler then sees slotTokens).
   */
  private readonly slotView: (TokenIds | undefined)[];
  /** KV cells each slot takes now: an idle slot its content, a running one its sequence so far. */
  private readonly slotKv: number[];
  /** Slots the LocalScheduler granted and not released. */
  private readonly granted: boolean[];
  private used = 0;
  readonly running: Job[] = [];
  /** Holding a slot, waiting for KV room to run (new or preempted), first come first served. */
  private readonly ready: Job[] = [];
  private imports: TokenIds[] = [];
  /** The state store (spec.spill): stored token sequences, least recently used first. */
  private readonly stored: { tokens: TokenIds; lastUsedMs: number }[] = [];
  private storedTokens = 0;
  /** Holding a slot, saving or loading a stored state before they are ready. */
  private readonly loading: Job[] = [];
  /** spec.contextLock: holding a slot, waiting for the context lock; their save + load ms and when they started waiting. */
  private readonly blocked: { job: Job; ioMs: number; sinceMs: number }[] = [];
  /** spec.contextLock: the blocked requests hold the lock (saving, loading): no step runs. */
  private lockHeld = false;
  stepping = false;

  constructor(
    readonly id: string,
    readonly spec: WorkerSpec,
    private readonly sim: Simulation,
  ) {
    this.stats = { id, placed: 0, steps: 0, busyMs: 0, prefillTokens: 0, decodeTokens: 0, evictions: 0, roomWaits: 0, preemptions: 0, spills: 0, restores: 0, lockWaits: 0, lockWaitMs: 0, contendedSteps: 0 };
    this.truth = new TimeModel(spec.timeModel);
    this.base = spec.timeModel.base;
    this.slotTokens = new Array<TokenIds>(spec.slots).fill([]);
    this.slotKv = new Array<number>(spec.slots).fill(0);
    this.slotView = new Array<TokenIds | undefined>(spec.slots).fill(undefined);
    this.granted = new Array<boolean>(spec.slots).fill(false);
    this.local = new LocalScheduler(
      { slots: spec.slots, priorityGroups: spec.priorityGroups, quotaPerGroup: spec.quotaPerGroup, now: () => sim.now },
      { tokensOfSlot: (slot) => this.slotView[slot] ?? this.slotTokens[slot] ?? [], spilledPrefix: (tokens) => this.importedPrefix(tokens) },
    );
  }

  /** Longest copied-in prefix of `tokens`; with a state store, the longest prefix a stored state shares with them. */
  importedPrefix(tokens: TokenIds): number {
    if (this.spec.spill) return this.storedPrefix(tokens)?.length ?? 0;
    let best = 0;
    for (const prefix of this.imports) {
      if (prefix.length > best && prefix.length <= tokens.length && commonPrefixLength(prefix, tokens) === prefix.length) best = prefix.length;
    }
    return best;
  }

  /** Whether an idle slot (or, with a state store, a stored state) holds `tokens` as a prefix (what the real export needs). */
  holdsIdle(tokens: TokenIds): boolean {
    if (this.spec.spill && (this.storedPrefix(tokens)?.length ?? 0) >= tokens.length) return true;
    for (let slot = 0; slot < this.spec.slots; slot++) {
      if (!this.granted[slot] && commonPrefixLength(this.slotTokens[slot]!, tokens) === tokens.length) return true;
    }
    return false;
  }

  import(tokens: TokenIds): void {
    if (this.spec.spill) this.store(tokens);
    else this.imports = [...this.imports.filter((prefix) => prefix !== tokens), tokens].slice(-IMPORTS_KEPT);
  }

  /** The stored state sharing the longest prefix with `tokens` (the real store's bestPrefix). */
  private storedPrefix(tokens: TokenIds): { entry: { tokens: TokenIds; lastUsedMs: number }; length: number } | undefined {
    let best: { entry: { tokens: TokenIds; lastUsedMs: number }; length: number } | undefined;
    for (const entry of this.stored) {
      const length = commonPrefixLength(entry.tokens, tokens);
      if (length > 0 && (!best || length > best.length)) best = { entry, length };
    }
    return best;
  }

  /** Adds a state to the store, dropping the least recently used past the budget (a state bigger than the budget is not kept). */
  private store(tokens: TokenIds): void {
    const budget = this.spec.spill!.budgetTokens;
    if (tokens.length > budget) return;
    this.stored.push({ tokens, lastUsedMs: this.sim.now });
    this.storedTokens += tokens.length;
    while (this.storedTokens > budget) {
      let oldest = 0;
      for (let i = 1; i < this.stored.length; i++) if (this.stored[i]!.lastUsedMs < this.stored[oldest]!.lastUsedMs) oldest = i;
      this.storedTokens -= this.stored[oldest]!.tokens.length;
      this.stored.splice(oldest, 1);
    }
  }

  /** Queues the job with the LocalScheduler; its grant comes back through the simulation. */
  submit(job: Job): void {
    void this.local.acquire(String(job.request.index), job.request.tokens).then((grant) => this.sim.granted(this, job, grant));
  }

  /** The job took its slot: it keeps the prefix the slot shares with its prompt (or a longer copied one). */
  admit(job: Job, grant: SlotGrant): void {
    const { slot } = grant;
    const tokens = job.request.tokens;
    const n = tokens.length;
    job.slot = slot;
    job.group = grant.group;
    this.granted[slot] = true;
    let shared = commonPrefixLength(this.slotTokens[slot]!, tokens);
    // The real slot holds its last prompt and output: anything in it has a tail to erase.
    const erases = this.slotTokens[slot]!.length > 0;
    let ioMs = 0;
    if (this.spec.spill) {
      // The real worker's reuseSpilledState: save what the slot loses, then load a better stored state.
      const spill = this.spec.spill;
      const held = this.slotTokens[slot]!;
      if (held.length - shared >= spill.minTokens && !this.stored.some((entry) => entry.tokens.length >= held.length && commonPrefixLength(entry.tokens, held) === held.length)) {
        this.store(held);
        this.stats.spills++;
        ioMs += this.truth.copyMs(held.length) / 2;
      }
      const best = this.storedPrefix(tokens);
      if (best && best.length >= shared + spill.minRestoreGain) {
        best.entry.lastUsedMs = this.sim.now;
        this.stats.restores++;
        ioMs += this.truth.copyMs(best.entry.tokens.length) / 2;
        shared = best.length;
      }
    } else {
      const imported = this.importedPrefix(tokens);
      if (imported > shared) shared = imported;
    }
    const cached = Math.min(shared, n - 1);
    // The slot's content past the shared prefix is overwritten: its cells are free again.
    this.setKv(slot, cached);
    this.slotTokens[slot] = tokens;
    this.slotView[slot] = tokens.slice(0, cached);
    this.sim.scheduler.applyCacheEvent({ type: "slot-holds", workerId: this.id, slot, tokens });
    job.cachedTokens = cached;
    job.prefillLeft = n - cached;
    job.context = cached;
    if (this.spec.contextLock && (erases || ioMs > 0)) {
      this.blocked.push({ job, ioMs, sinceMs: this.sim.now });
      this.stats.lockWaits++;
      return;
    }
    job.startMs = this.sim.now + ioMs;
    if (ioMs === 0) {
      this.ready.push(job);
      this.startReady();
      return;
    }
    this.loading.push(job);
    this.sim.at(job.startMs, () => {
      this.loading.splice(this.loading.indexOf(job), 1);
      this.ready.push(job);
      this.startReady();
    });
  }

  /** Cells the running requests hold or will take before they end, plus what the ready ones' slots hold. */
  private committed(): number {
    let cells = 0;
    for (const job of this.running) cells += job.context + job.prefillLeft + job.outputTokens - job.generated;
    for (const job of this.ready) cells += job.context;
    for (const job of this.loading) cells += job.context;
    for (const { job } of this.blocked) cells += job.context;
    return cells;
  }

  /** Moves ready requests to running, in order, while the card can hold all of them to their end. */
  private startReady(): void {
    if (this.ready.length === 0) return;
    let committed = this.committed();
    while (this.ready.length > 0) {
      const job = this.ready[0]!;
      // Its slot's cells are counted already; what it will add is the rest.
      const need = job.prefillLeft + job.outputTokens - job.generated;
      if (committed + need > this.spec.capacityTokens) {
        if (this.running.length > 0) {
          this.stats.roomWaits++;
          return;
        }
        // Nothing runs, so nothing will free room: the other waiting slots give up their
        // cached prefixes (they recompute), and the first in line runs.
        for (const other of this.ready) if (other !== job && other.context > 0) this.dropCache(other);
        committed = this.committed();
      }
      this.ready.shift();
      if (job.context === 0 && this.slotTokens[job.slot]!.length === 0) {
        // A preempted request: its slot holds its prompt again as it recomputes.
        this.slotTokens[job.slot] = job.request.tokens;
        this.sim.scheduler.applyCacheEvent({ type: "slot-holds", workerId: this.id, slot: job.slot, tokens: job.request.tokens });
      }
      this.running.push(job);
      committed += need;
    }
  }

  private setKv(slot: number, cells: number): void {
    this.used += cells - this.slotKv[slot]!;
    this.slotKv[slot] = cells;
  }

  /** Empties idle slots, least recently used first, until `cells` more fit. */
  private evictIdle(cells: number): void {
    if (this.used + cells <= this.spec.capacityTokens) return;
    const candidates: number[] = [];
    for (let slot = 0; slot < this.spec.slots; slot++) if (this.slotKv[slot]! > 0 && !this.granted[slot]) candidates.push(slot);
    candidates.sort((a, b) => this.local.lastUsedMs(a) - this.local.lastUsedMs(b) || a - b);
    for (const slot of candidates) {
      if (this.used + cells <= this.spec.capacityTokens) return;
      this.setKv(slot, 0);
      this.slotTokens[slot] = [];
      this.stats.evictions++;
      this.sim.scheduler.applyCacheEvent({ type: "slot-holds", workerId: this.id, slot, tokens: [] });
    }
  }

  /** Frees a job's cells (its slot then holds nothing): it recomputes its whole prompt. */
  private dropCache(job: Job): void {
    this.setKv(job.slot, 0);
    this.slotTokens[job.slot] = [];
    this.slotView[job.slot] = [];
    this.sim.scheduler.applyCacheEvent({ type: "slot-holds", workerId: this.id, slot: job.slot, tokens: [] });
    job.prefillLeft = job.request.tokens.length;
    job.context = 0;
  }

  /** Takes a running job's cells back; it runs again first in line. */
  private preempt(job: Job): void {
    this.running.splice(this.running.indexOf(job), 1);
    this.dropCache(job);
    this.ready.unshift(job);
    this.stats.preemptions++;
  }

  /** spec.contextLock: the worker runs nothing, so the blocked requests take the lock in turn, then join the ready queue. */
  private takeLock(): void {
    const now = this.sim.now;
    const blocked = this.blocked.splice(0);
    let ioMs = 0;
    for (const entry of blocked) {
      ioMs += entry.ioMs;
      this.stats.lockWaitMs += now - entry.sinceMs;
      entry.job.startMs = now + ioMs;
    }
    const release = () => {
      this.lockHeld = false;
      for (const { job } of blocked) this.ready.push(job);
      this.startReady();
    };
    if (ioMs === 0) release();
    else {
      this.lockHeld = true;
      this.sim.at(now + ioMs, release);
    }
  }

  startStep(): void {
    if (this.lockHeld) return;
    if (this.blocked.length > 0 && this.running.length === 0) {
      this.takeLock();
      if (this.lockHeld) return;
    }
    for (;;) {
      this.startReady();
      if (this.running.length === 0) return;
      const items: BatchItem[] = this.running.map((job) => ({
        tokens: { length: job.prefillLeft > 0 ? job.prefillLeft : 1 },
        evaluationPriority: evaluationPriorityOf(job.group, this.spec.priorityGroups),
        job,
      }));
      const shares = shareBatch(items, this.spec.batchTokens, this.spec.chunkTokens);
      let cells = 0;
      for (const share of shares) cells += share.processAmount;
      this.evictIdle(cells);
      // Still short: trim the batch from its end (the lowest-priority prefill chunk first).
      let excess = this.used + cells - this.spec.capacityTokens;
      while (excess > 0 && shares.length > 0) {
        const last = shares[shares.length - 1]!;
        const cut = Math.min(excess, last.processAmount);
        last.processAmount -= cut;
        cells -= cut;
        excess -= cut;
        if (last.processAmount === 0) shares.pop();
      }
      if (shares.length === 0) {
        // Not one token fits (admission keeps this from happening; a safety net): preempt the
        // job that started last (vLLM's recompute preemption).
        let victim = this.running[0]!;
        for (const job of this.running) if (job.startMs >= victim.startMs) victim = job;
        this.preempt(victim);
        continue;
      }
      this.runStep(shares);
      return;
    }
  }

  private runStep(shares: BatchShare<BatchItem>[]): void {
    let prefillMs = 0;
    let prefilling = false;
    let decodeContext = 0;
    let decodeMs = 0;
    let decoding = false;
    for (const { item, processAmount } of shares) {
      const job = item.job;
      // The step's cells are taken now: nothing else can claim them while it runs.
      this.setKv(job.slot, this.slotKv[job.slot]! + processAmount);
      if (job.prefillLeft > 0) {
        prefillMs += this.truth.prefillMs(processAmount, job.context + processAmount) - this.base;
        prefilling = true;
      } else {
        decodeContext += job.context;
        decodeMs += this.truth.decodeMsPerToken(job.context);
        decoding = true;
      }
    }
    if (this.spec.decodeBatching !== "per-sequence") decodeMs = this.truth.decodeMsPerToken(decodeContext);
    let prefillPart = prefilling ? this.base + prefillMs : 0;
    const contention = this.spec.contention;
    if (contention && this.sim.workers.some((worker) => worker !== this && worker.running.length > 0)) {
      prefillPart *= contention.prefillFactor;
      decodeMs *= contention.decodeFactor;
      this.stats.contendedSteps++;
    }
    const ms = Math.max(1e-6, prefillPart + (decoding ? decodeMs : 0));
    this.stepping = true;
    this.stats.steps++;
    this.stats.busyMs += ms;
    this.sim.at(this.sim.now + ms, () => this.endStep(shares));
  }

  private endStep(shares: readonly BatchShare<BatchItem>[]): void {
    const now = this.sim.now;
    const finished: Job[] = [];
    for (const { item, processAmount } of shares) {
      const job = item.job;
      if (job.prefillLeft > 0) {
        job.prefillLeft -= processAmount;
        job.context += processAmount;
        if (job.prefillLeft === 0) this.slotView[job.slot] = job.request.tokens;
        this.stats.prefillTokens += processAmount;
        if (job.prefillLeft === 0 && job.generated === 0) {
          job.firstTokenMs = now;
          job.generated = 1;
          if (job.generated >= job.outputTokens) finished.push(job);
        }
      } else {
        job.generated++;
        job.context++;
        this.stats.decodeTokens++;
        if (job.generated >= job.outputTokens) finished.push(job);
      }
    }
    this.stepping = false;
    for (const job of finished) this.finish(job);
  }

  private finish(job: Job): void {
    const { slot } = job;
    this.running.splice(this.running.indexOf(job), 1);
    // The slot keeps the prompt (the generated tokens are not counted as reusable).
    this.setKv(slot, job.request.tokens.length);
    this.granted[slot] = false;
    this.slotView[slot] = undefined;
    this.local.release(slot);
    this.sim.completed(this, job);
    this.startReady();
  }

  get outstanding(): number {
    return this.running.length + this.ready.length + this.loading.length + this.blocked.length + this.local.waitingCount;
  }
}

// ---------------------------------------------------------------------------------------------

class Simulation {
  now = 0;
  readonly scheduler: GlobalScheduler;
  readonly workers: SimWorker[];
  private readonly byId = new Map<string, SimWorker>();
  private readonly queue = new EventQueue();
  private readonly grants: { worker: SimWorker; job: Job; grant: SlotGrant | undefined }[] = [];
  private readonly dependents = new Map<number, WorkloadRequest[]>();
  readonly records: RequestRecord[] = [];
  readonly refused: number[] = [];
  readonly copies = { attempted: 0, done: 0, failed: 0 };
  private rejections = 0;
  /** When each request was first sent (its latencies count from there). */
  private readonly firstSent = new Map<number, number>();
  readonly reasons: Record<string, number> = {};
  private readonly modelId = "sim-model";
  private events = 0;
  private firstArrival = Infinity;
  private lastFinish = 0;

  constructor(private readonly options: SimOptions) {
    const policy = typeof options.policy === "string" ? createPolicy(options.policy, options.policyOptions ?? POLICY_DEFAULTS) : options.policy;
    this.scheduler = new GlobalScheduler(policy, { ...options.scheduler, now: () => this.now });
    this.workers = Array.from({ length: options.workers }, (_, i) => new SimWorker(`w${i}`, options.spec, this));
    for (const worker of this.workers) {
      this.byId.set(worker.id, worker);
      this.scheduler.addWorker({
        id: worker.id,
        modelId: this.modelId,
        slots: options.spec.slots,
        capacityTokens: options.spec.capacityTokens,
        timeModel: new TimeModel(options.schedulerTimeModel ?? options.spec.timeModel),
      });
    }
  }

  at(t: number, run: () => void): void {
    this.queue.push(t, run);
  }

  granted(worker: SimWorker, job: Job, grant: SlotGrant | undefined): void {
    this.grants.push({ worker, job, grant });
  }

  async run(): Promise<SimResult> {
    const { requests } = this.options;
    requests.forEach((request, i) => {
      if (request.index !== i) throw new Error(`simulate: request ${i} has index ${request.index}; indices must be 0..n-1 in order`);
      if (request.after === undefined) this.at(request.arrivalMs, () => this.arrive(request));
      else {
        if (!(request.after < i)) throw new Error(`simulate: request ${i} comes after ${request.after}, which is not an earlier request`);
        const list = this.dependents.get(request.after);
        if (list) list.push(request);
        else this.dependents.set(request.after, [request]);
      }
    });
    while (this.queue.size > 0) {
      const t = this.queue.peekTime();
      this.now = t;
      while (this.queue.size > 0 && this.queue.peekTime() === t) {
        this.queue.pop().run();
        this.events++;
        // The LocalScheduler hands out slots through promises: let them settle, then admit.
        await null;
        this.admitGranted();
      }
      for (const worker of this.workers) if (!worker.stepping) worker.startStep();
    }
    const stuck = this.workers.reduce((sum, worker) => sum + worker.outstanding, 0);
    if (this.records.length + this.refused.length !== requests.length || stuck > 0) {
      throw new Error(`simulate: stalled with ${requests.length - this.records.length - this.refused.length} requests unfinished (${stuck} on workers)`);
    }
    return {
      policy: this.scheduler.policy.name,
      records: this.records.sort((a, b) => a.index - b.index),
      refused: this.refused,
      workers: this.workers.map((worker) => worker.stats),
      startMs: this.firstArrival === Infinity ? 0 : this.firstArrival,
      endMs: this.lastFinish,
      copies: this.copies,
      rejections: this.rejections,
      reasons: this.reasons,
      events: this.events,
    };
  }

  private admitGranted(): void {
    for (let i = 0; i < this.grants.length; i++) {
      const { worker, job, grant } = this.grants[i]!;
      if (grant) worker.admit(job, grant);
    }
    this.grants.length = 0;
  }

  private arrive(request: WorkloadRequest): void {
    this.firstArrival = Math.min(this.firstArrival, this.now);
    const spec = this.options.spec;
    const limit = Math.min(spec.capacityTokens, spec.maxSequenceTokens ?? Infinity);
    if (request.tokens.length + Math.max(1, request.outputTokens) > limit || request.tokens.length === 0) {
      this.refused.push(request.index);
      this.release(request.index);
      return;
    }
    const ticket = this.scheduler.place({
      modelId: this.modelId,
      tokens: request.tokens,
      messageCount: request.messageCount ?? 1,
      maxTokens: request.maxTokens ?? this.options.defaultMaxTokens ?? 256,
    });
    if (!this.firstSent.has(request.index)) this.firstSent.set(request.index, this.now);
    if (!ticket) {
      // 429: every worker's queue is full. The client tries again later.
      this.rejections++;
      this.at(this.now + (this.options.retryAfterMs ?? 1000), () => this.arrive(request));
      return;
    }
    const worker = this.byId.get(ticket.workerId)!;
    worker.stats.placed++;
    this.reasons[ticket.placement.reason] = (this.reasons[ticket.placement.reason] ?? 0) + 1;
    // Copies run one after another before the request is queued (as the serving layer awaits them).
    let copyMs = 0;
    const imports: TokenIds[] = [];
    for (const copy of ticket.placement.copies ?? []) {
      this.copies.attempted++;
      const from = this.byId.get(copy.fromWorkerId);
      const to = this.byId.get(copy.toWorkerId);
      if (!from || !to || !from.holdsIdle(copy.tokens)) {
        this.copies.failed++;
        continue;
      }
      this.copies.done++;
      copyMs += to.truth.copyMs(copy.tokens.length);
      imports.push(copy.tokens);
    }
    const job: Job = {
      request,
      ticket,
      outputTokens: Math.max(1, request.outputTokens),
      copyMs,
      slot: -1,
      group: 0,
      cachedTokens: 0,
      prefillLeft: 0,
      context: 0,
      generated: 0,
      startMs: 0,
      firstTokenMs: 0,
    };
    if (copyMs === 0) worker.submit(job);
    else {
      this.at(this.now + copyMs, () => {
        for (const tokens of imports) this.byId.get(ticket.workerId)!.import(tokens);
        worker.submit(job);
      });
    }
  }

  completed(worker: SimWorker, job: Job): void {
    const now = this.now;
    const { request, ticket } = job;
    const n = request.tokens.length;
    const arrivalMs = this.firstSent.get(request.index) ?? ticket.placedAt;
    this.firstSent.delete(request.index);
    this.scheduler.complete(ticket, {
      ok: true,
      promptTokens: n,
      cachedTokens: job.cachedTokens,
      completionTokens: job.generated,
      // As the server measures it: from its placement.
      ttftMs: job.firstTokenMs - ticket.placedAt,
      prefillMs: job.firstTokenMs - job.startMs,
      ...(job.generated > 1 ? { decodeMsPerToken: (now - job.firstTokenMs) / (job.generated - 1) } : {}),
    });
    this.records.push({
      index: request.index,
      workerId: worker.id,
      reason: ticket.placement.reason,
      arrivalMs,
      startMs: job.startMs,
      firstTokenMs: job.firstTokenMs,
      finishMs: now,
      ttftMs: job.firstTokenMs - arrivalMs,
      e2eMs: now - arrivalMs,
      promptTokens: n,
      cachedTokens: job.cachedTokens,
      cachedFraction: job.cachedTokens / n,
      outputTokens: job.generated,
      copyMs: job.copyMs,
    });
    this.lastFinish = Math.max(this.lastFinish, now);
    const every = this.options.progressEvery ?? 250;
    if (this.options.onProgress && this.records.length % every === 0) this.options.onProgress(this.records.length, this.options.requests.length, now);
    this.release(request.index);
  }

  /** The turns waiting on this request arrive thinkMs after it ended. */
  private release(index: number): void {
    for (const next of this.dependents.get(index) ?? []) this.at(this.now + (next.thinkMs ?? 0), () => this.arrive(next));
    this.dependents.delete(index);
  }
}

/** Runs one simulation to the end (every request completed or refused). */
export function simulate(options: SimOptions): Promise<SimResult> {
  if (!(options.workers >= 1)) throw new RangeError("simulate: workers >= 1");
  const { spec } = options;
  if (!(spec.slots >= 1 && spec.capacityTokens >= 1 && spec.batchTokens >= 1 && spec.chunkTokens >= 1)) {
    throw new RangeError("simulate: slots, capacityTokens, batchTokens and chunkTokens must be >= 1");
  }
  return new Simulation(options).run();
}
