// The simulated worker: one card's slots and KV cells, the steps it runs (continuous batching
// with chunked prefill, timed by the card's time model), and the real LocalScheduler and
// shareBatch deciding which request takes a slot and what each step evaluates.
import { commonPrefixLength, joinedTokens, type TokenIds } from "../../src/common/tokens.js";
import { type BatchShare, evaluationPriorityOf, groupOfHit, shareBatch } from "../../src/scheduler/batch-priority.js";
import type { EveryPromptCached } from "./reuse-ceiling.js";
import type { PlacementTicket } from "../../src/scheduler/ticket.js";
import { LocalScheduler, type SlotGrant } from "../../src/scheduler/local-scheduler.js";
import type { LocalSchedulerSettings } from "../../src/scheduler/local-scheduler-settings.js";
import { TimeModel, type TimeModelCoefficients } from "../../src/scheduler/time-model.js";
import type { WorkloadRequest } from "../workloads/tokens.js";
import { SimStore, type SpillSpec } from "./sim-store.js";

/** One simulated card. Its local scheduler: P priority groups, k quota per group, and the
 *  prefill budget per step after every decoding request got its token (chunkTokens). */
export interface WorkerSpec extends Pick<LocalSchedulerSettings, "chunkTokens" | "priorityGroups" | "quotaPerGroup"> {
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
  /** The worker's state store of evicted slot contents (see simulator.ts's header); absent: none, only copied-in prefixes are kept. */
  spill?: SpillSpec;
  /**
   * Decode cost of a step: "shared" (default: one pass for all decoding sequences, as one
   * unified KV cache would run them; the idealised cards) or "micro-batch" (one pass per run
   * of consecutive busy slots, as node-llama-cpp's per-sequence KV streams run them: the
   * worker Radixgate has, see simulator.ts).
   */
  decodeBatching?: "shared" | "micro-batch";
  /** "micro-batch": what a pass of two or more sequences costs, in decodeBase of one sequence alone (default 1). */
  multiSequencePassFactor?: number;
  /** Model node-llama-cpp's context lock as the worker first met it (see simulator.ts's header). Default false. */
  contextLock?: boolean;
  /**
   * Workers sharing one machine's cores (CPU workers, next to the server's own threads): a
   * step that starts while another worker has requests running takes its prefill part x
   * prefillFactor and its decode part x decodeFactor. Measured factors, not derived ones
   * (bench/live/compare.ts fits them on a probe). Default none.
   */
  contention?: { prefillFactor: number; decodeFactor: number };
}

/** What one worker did, for the result. */
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
  /** Step time spent on decoding and on prefill (busyMs is their sum, give or take a step of neither). */
  decodeMs: number;
  prefillMs: number;
  /** Steps that decoded, the passes over the weights they took (one per run of consecutive busy
   *  slots on a "micro-batch" card, one on a "shared" one), and the sequences they decoded. */
  decodeSteps: number;
  decodePasses: number;
}

/** A request on its way through a worker. */
export interface Job {
  request: WorkloadRequest;
  ticket: PlacementTicket;
  /** The router that placed it (0 on one box). */
  router: number;
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
  /** Once it ended: the answer's tokens its slot holds after the prompt (all generated but the last), when the workload knows them. */
  heldAnswer?: number[];
}

interface BatchItem {
  readonly tokens: { readonly length: number };
  readonly evaluationPriority: number;
  readonly job: Job;
}

/** What a worker needs of the simulation that runs it. */
export interface WorkerHost {
  /** The simulated clock, ms. */
  readonly now: number;
  /** A slot took the job's request: it holds the request's prompt from now on (the ticket's report). */
  slotTaken(worker: SimWorker, job: Job, slot: number): void;
  /** The job's first token came: its prefill is over (the ticket's report). */
  firstToken(worker: SimWorker, job: Job): void;
  /** A slot lost what it held for room (`slot-holds` of nothing, as a real worker reports it). */
  slotEmptied(worker: SimWorker, slot: number): void;
  readonly workers: readonly SimWorker[];
  /** Runs `run` at simulated time `t`. */
  at(t: number, run: () => void): void;
  /** The LocalScheduler settled a job's request for a slot (admitted once the instant's promises have settled). */
  granted(worker: SimWorker, job: Job, grant: SlotGrant | undefined): void;
  completed(worker: SimWorker, job: Job): void;
  /** The ceiling of reuse (reuse-ceiling.ts): every card holds every prompt seen so far. Absent on a real fleet. */
  readonly reuseCeiling: EveryPromptCached | undefined;
}

export class SimWorker {
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
  /** Copied-in prefixes and, with spec.spill, the state store. */
  readonly store: SimStore;
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
    private readonly sim: WorkerHost,
  ) {
    this.stats = {
      id,
      placed: 0,
      steps: 0,
      busyMs: 0,
      prefillTokens: 0,
      decodeTokens: 0,
      evictions: 0,
      roomWaits: 0,
      preemptions: 0,
      spills: 0,
      restores: 0,
      lockWaits: 0,
      lockWaitMs: 0,
      contendedSteps: 0,
      decodeMs: 0,
      prefillMs: 0,
      decodeSteps: 0,
      decodePasses: 0,
    };
    this.truth = new TimeModel(spec.timeModel);
    this.base = spec.timeModel.base;
    this.slotTokens = new Array<TokenIds>(spec.slots).fill([]);
    this.slotKv = new Array<number>(spec.slots).fill(0);
    this.slotView = new Array<TokenIds | undefined>(spec.slots).fill(undefined);
    this.granted = new Array<boolean>(spec.slots).fill(false);
    this.store = new SimStore(spec.spill, this.truth, () => sim.now);
    this.local = new LocalScheduler(
      { slots: spec.slots, priorityGroups: spec.priorityGroups, quotaPerGroup: spec.quotaPerGroup, now: () => sim.now },
      { tokensOfSlot: (slot) => this.slotView[slot] ?? this.slotTokens[slot] ?? [], spilledPrefix: (tokens) => this.store.prefixOf(tokens) },
    );
  }

  /** Whether an idle slot (or, with a state store, a stored state) holds `tokens` as a prefix (what the real export needs). */
  holdsIdle(tokens: TokenIds): boolean {
    if (this.store.holds(tokens)) return true;
    for (let slot = 0; slot < this.spec.slots; slot++) {
      if (!this.granted[slot] && commonPrefixLength(this.slotTokens[slot]!, tokens) === tokens.length) return true;
    }
    return false;
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
    const held = this.slotTokens[slot]!;
    // The real slot holds its last prompt and output: anything in it has a tail to erase.
    const erases = held.length > 0;
    const { shared, ioMs, spilled, restored } = this.store.prepareSlot(held, tokens, commonPrefixLength(held, tokens));
    if (spilled) this.stats.spills++;
    if (restored) this.stats.restores++;
    const ceiling = this.sim.reuseCeiling;
    const cached = Math.min(ceiling ? Math.max(shared, ceiling.longestPrefix(tokens)) : shared, n - 1);
    if (ceiling) {
      ceiling.add(tokens);
      // Its batch priority from what it reuses, as a slot that held the prefix would give it.
      job.group = groupOfHit(cached / n, this.spec.priorityGroups);
    }
    // The slot's content past the shared prefix is overwritten: its cells are free again.
    this.setKv(slot, cached);
    this.slotTokens[slot] = tokens;
    this.slotView[slot] = tokens.slice(0, cached);
    this.sim.slotTaken(this, job, slot);
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
        this.sim.slotTaken(this, job, job.slot);
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
      this.sim.slotEmptied(this, slot);
    }
  }

  /** Frees a job's cells (its slot then holds nothing): it recomputes its whole prompt. */
  private dropCache(job: Job): void {
    this.setKv(job.slot, 0);
    this.slotTokens[job.slot] = [];
    this.slotView[job.slot] = [];
    this.sim.slotEmptied(this, job.slot);
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
      // Started: part of its prompt is evaluated (a job whose cells were taken back starts over).
      const shares = shareBatch(items, this.spec.batchTokens, this.spec.chunkTokens, ({ job }) => job.context > job.cachedTokens);
      let cells = 0;
      for (const share of shares) cells += share.processAmount;
      this.evictIdle(cells);
      // Still short: trim the batch from its end (the last prefill chunk in the batch's order first).
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

  /**
   * The decode part of a step. "shared": one pass for every decoding sequence, its weight
   * reading (decodeBase) paid once. "micro-batch": one pass per run of consecutive slot
   * numbers (llama.cpp evaluates only consecutive sequence ids together), a pass of two or
   * more costing multiSequencePassFactor x decodeBase; each sequence adds its attention reads.
   */
  private decodePart(decoders: readonly { slot: number; context: number }[]): { ms: number; passes: number } {
    if (decoders.length === 0) return { ms: 0, passes: 0 };
    const context = decoders.reduce((sum, d) => sum + d.context, 0);
    if (this.spec.decodeBatching !== "micro-batch") return { ms: this.truth.decodeMsPerToken(context), passes: 1 };
    // One pass is the time model's own decode time; each further pass adds its decodeBase, and
    // a pass of two or more sequences (multi - 1) x decodeBase on top.
    const { decodeBase } = this.spec.timeModel;
    const multi = this.spec.multiSequencePassFactor ?? 1;
    const runs = consecutiveRuns(decoders.map((d) => d.slot));
    let ms = this.truth.decodeMsPerToken(context) + (runs.length - 1) * decodeBase;
    for (const run of runs) if (run > 1) ms += (multi - 1) * decodeBase;
    return { ms, passes: runs.length };
  }

  private runStep(shares: BatchShare<BatchItem>[]): void {
    let prefillMs = 0;
    let prefilling = false;
    const decoders: { slot: number; context: number }[] = [];
    for (const { item, processAmount } of shares) {
      const job = item.job;
      // The step's cells are taken now: nothing else can claim them while it runs.
      this.setKv(job.slot, this.slotKv[job.slot]! + processAmount);
      if (job.prefillLeft > 0) {
        prefillMs += this.truth.prefillMs(processAmount, job.context + processAmount) - this.base;
        prefilling = true;
      } else {
        decoders.push({ slot: job.slot, context: job.context });
      }
    }
    const decoding = decoders.length > 0;
    const decode = this.decodePart(decoders);
    let decodeMs = decode.ms;
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
    this.stats.prefillMs += prefillPart;
    if (decoding) {
      this.stats.decodeMs += decodeMs;
      this.stats.decodeSteps++;
      this.stats.decodePasses += decode.passes;
    }
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
          this.sim.firstToken(this, job);
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
    // The slot keeps the prompt and the answer but its last token (sampled, never evaluated);
    // where the workload does not know the answer's tokens, only the prompt counts as reusable.
    const prompt = job.request.tokens;
    const answer = job.request.answerTokens?.slice(0, Math.max(0, job.generated - 1));
    if (answer !== undefined && answer.length > 0) {
      job.heldAnswer = answer;
      this.slotTokens[slot] = joinedTokens(prompt, answer);
    }
    this.setKv(slot, prompt.length + (job.heldAnswer?.length ?? 0));
    if (job.heldAnswer) this.sim.reuseCeiling?.add(this.slotTokens[slot]!);
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

/** The lengths of the runs of consecutive numbers among `slots` (each slot once): [0, 1, 3] gives [2, 1]. */
export function consecutiveRuns(slots: readonly number[]): number[] {
  const sorted = [...slots].sort((a, b) => a - b);
  const runs: number[] = [];
  for (let i = 0; i < sorted.length; i++) {
    if (i > 0 && sorted[i] === sorted[i - 1]! + 1) runs[runs.length - 1]!++;
    else runs.push(1);
  }
  return runs;
}
