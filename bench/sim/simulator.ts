// A discrete-event simulation of a Radixgate box at GPU scale. It drives the REAL scheduler
// code, with no copy of any policy logic: the GlobalScheduler and the registry's policies
// place every request, each simulated worker admits requests to its slots with the real
// LocalScheduler (Preble's priority groups by hit ratio, slot choice by shared prefix, LRU)
// and shares each batch with the real shareBatch (decode tokens first, then the chunked
// prefill budget: started prefills first, then by priority group). Only the card itself is
// simulated:
//
// - Continuous batching: a worker runs one step at a time while it has running requests.
//   A step's batch is shareBatch(running, batchTokens, chunkTokens): one token for every
//   decoding request, then prefill chunks. Its duration comes from the card's time model:
//       base + sum over prefill chunks of (prefillMs(chunk, context after it) - base)
//     + decodeMsPerToken(sum of the decoding requests' contexts)   (when any decodes)
//     + decodeBase for each further decode pass (below)
//   i.e. one fixed cost per forward pass, the prefill terms of every chunk, and the decode
//   passes. On the idealised cards (`decodeBatching: "shared"`) there is one, whose weight
//   reading (decodeBase) is shared by the batch while each sequence adds its attention reads
//   (decodePerContext x its context). The cards of the worker Radixgate has (`"micro-batch"`)
//   run one pass per run of consecutive busy slots: llama.cpp evaluates the sequences of a
//   step together only while their sequence ids (slots) are consecutive, and each further pass
//   adds a decodeBase. A GPU pass is bound by reading the weights, whatever the sequences in
//   it; a CPU pass is compute-bound, so one of two or more sequences costs
//   multiSequencePassFactor x decodeBase (1.6 measured with the prebuilt binary on the `bench`
//   model, where a third and fourth sequence add little to the second: hardware.ts).
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
//   may export from its store. The store's states kept and dropped reach the scheduler with the
//   start of the next request on the worker, as the real worker reports them (and every router,
//   a hop later, as the host's event stream carries them). (Not modelled: the store's recency
//   windows, recentMs and hitRatioWindowMs, minutes by default, longer than a replay.)
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
// - More than one machine (optional, `network`): engines on several machines behind several
//   routers, each router a GlobalScheduler of its own that learns of the engines' slots and
//   loads through delayed events; requests, replies and copies cross links (network.ts).
//
// Deterministic: no wall clock decides anything (the schedulers get the simulated clock; the
// wall time of each placement is measured for the report only), events at one instant run in
// the order they were scheduled, and all events of an instant are handled before any idle
// worker starts its next step.
//
// The parts: the event queue (event-queue.ts), the simulated worker (sim-worker.ts), its state
// store (sim-store.ts), the network (network.ts), and here the loop that runs them and the
// entry point, simulate().
import type { TokenIds } from "../../src/common/tokens.js";
import { GlobalScheduler, type SchedulerOptions } from "../../src/scheduler/global-scheduler.js";
import type { SlotGrant } from "../../src/scheduler/local-scheduler.js";
import { createPolicy, POLICY_DEFAULTS, type PolicyOptions } from "../../src/scheduler/registry.js";
import { TimeModel, type TimeModelCoefficients } from "../../src/scheduler/time-model.js";
import type { PlacementPolicy } from "../../src/scheduler/types.js";
import type { WorkloadRequest } from "../workloads/tokens.js";
import { EventQueue } from "./event-queue.js";
import { Links, type NetworkSpec, REQUEST_BYTES_PER_TOKEN, routerTimeModel } from "./network.js";
import { EveryPromptCached } from "./reuse-ceiling.js";
import { type Job, SimWorker, type WorkerHost, type WorkerSpec, type WorkerStats } from "./sim-worker.js";

export type { NetworkSpec } from "./network.js";
export type { SpillSpec } from "./sim-store.js";
export type { WorkerSpec, WorkerStats } from "./sim-worker.js";

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
  /** Engines on several machines behind `network.routers` routers (network.ts); absent: one box, one scheduler, no network. */
  network?: NetworkSpec;
  /**
   * The ceiling of reuse, not a real fleet (reuse-ceiling.ts): every card reuses, free, the
   * longest prefix the prompt shares with any prompt admitted before on any card.
   */
  reuseCeiling?: boolean;
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
  /** Placement decisions made (every router's, 429s included) and the wall time they took on this machine. */
  decisions: { count: number; wallMs: number };
  /** With `network`: copies within one machine and between two, bytes over the links, time transfers waited for a busy link. */
  network?: { routers: number; machines: number; copiesWithin: number; copiesAcross: number; bytes: number; queuedMs: number };
}

class Simulation implements WorkerHost {
  now = 0;
  /** The routers (one without a network): each places the requests that reach it. */
  readonly schedulers: GlobalScheduler[];
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
  private readonly decisions = { count: 0, wallMs: 0 };
  /** Requests sent so far: the next one goes to router sent % routers. */
  private sent = 0;
  private readonly network: NetworkSpec | undefined;
  private readonly links: Links | undefined;
  private readonly machines: number;
  /** The machine each worker runs on: workers fill machines in order; the routers' machines come after. */
  private readonly machine = new Map<SimWorker, number>();
  private copiesWithin = 0;
  private copiesAcross = 0;
  readonly reuseCeiling: EveryPromptCached | undefined;

  constructor(private readonly options: SimOptions) {
    this.reuseCeiling = options.reuseCeiling ? new EveryPromptCached() : undefined;
    const { network, spec } = options;
    this.network = network;
    const routers = network?.routers ?? 1;
    if (routers > 1 && typeof options.policy !== "string")
      throw new Error("simulate: several routers need a policy name (each router gets its own policy object)");
    const policy = () => (typeof options.policy === "string" ? createPolicy(options.policy, options.policyOptions ?? POLICY_DEFAULTS) : options.policy);
    this.schedulers = Array.from({ length: routers }, () => new GlobalScheduler(policy(), { ...options.scheduler, now: () => this.now }));
    this.workers = Array.from({ length: options.workers }, (_, i) => new SimWorker(`w${i}`, spec, this));
    const hosts = network ? Math.ceil(options.workers / network.gpusPerHost) : 1;
    this.machines = hosts + (network ? routers : 0);
    this.links = network ? new Links(this.machines, network) : undefined;
    const startingModel =
      options.schedulerTimeModel ?? (network ? routerTimeModel(spec.timeModel, network, spec.maxSequenceTokens ?? spec.capacityTokens) : spec.timeModel);
    this.workers.forEach((worker, i) => {
      this.byId.set(worker.id, worker);
      this.machine.set(worker, network ? Math.floor(i / network.gpusPerHost) : 0);
    });
    for (const scheduler of this.schedulers) {
      for (const worker of this.workers) {
        scheduler.addWorker({
          id: worker.id,
          modelId: this.modelId,
          slots: spec.slots,
          capacityTokens: spec.capacityTokens,
          timeModel: new TimeModel(startingModel),
        });
      }
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
    if (this.network) this.at(0, () => this.reportLoads());
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
      policy: this.schedulers[0]!.policy.name,
      records: this.records.sort((a, b) => a.index - b.index),
      refused: this.refused,
      workers: this.workers.map((worker) => worker.stats),
      startMs: this.firstArrival === Infinity ? 0 : this.firstArrival,
      endMs: this.lastFinish,
      copies: this.copies,
      rejections: this.rejections,
      reasons: this.reasons,
      events: this.events,
      decisions: this.decisions,
      ...(this.network
        ? {
            network: {
              routers: this.schedulers.length,
              machines: this.machines,
              copiesWithin: this.copiesWithin,
              copiesAcross: this.copiesAcross,
              bytes: this.links!.bytes,
              queuedMs: this.links!.queuedMs,
            },
          }
        : {}),
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
    const router = this.sent++ % this.schedulers.length;
    const decisionStarted = performance.now();
    const ticket = this.schedulers[router]!.place({
      modelId: this.modelId,
      tokens: request.tokens,
      messageCount: request.messageCount ?? 1,
      maxTokens: request.maxTokens ?? this.options.defaultMaxTokens ?? 256,
    });
    this.decisions.wallMs += performance.now() - decisionStarted;
    this.decisions.count++;
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
    // Copies run one after another before the request is sent (as the serving layer awaits them).
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
      copyMs += this.copyTime(from, to, copy.tokens.length, this.now + copyMs);
      imports.push(copy.tokens);
    }
    const job: Job = {
      request,
      ticket,
      router,
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
    // The request then crosses to the engine's machine (with a network).
    const sentAt = this.now + copyMs;
    const deliveredAt = this.links ? this.links.arrival(this.machine.get(worker)!, sentAt, request.tokens.length * REQUEST_BYTES_PER_TOKEN) : sentAt;
    if (deliveredAt === this.now) worker.submit(job);
    else {
      this.at(deliveredAt, () => {
        for (const tokens of imports) worker.store.import(tokens);
        worker.submit(job);
      });
    }
  }

  /** A copy of `tokens` from one worker to another that starts at `at`: save, (cross the link,) load. */
  private copyTime(from: SimWorker, to: SimWorker, tokens: number, at: number): number {
    const saveAndLoadMs = to.truth.copyMs(tokens);
    const fromMachine = this.machine.get(from)!;
    const toMachine = this.machine.get(to)!;
    if (!this.links || fromMachine === toMachine) {
      this.copiesWithin++;
      return saveAndLoadMs;
    }
    this.copiesAcross++;
    const saved = at + saveAndLoadMs / 2;
    const arrived = this.links.arrival(toMachine, saved, tokens * this.network!.kvBytesPerToken);
    return arrived + saveAndLoadMs / 2 - at;
  }

  /** One-way latency of a message between machines (none on one box). */
  private get hop(): number {
    return this.network?.latencyMs ?? 0;
  }

  slotTaken(worker: SimWorker, job: Job, slot: number): void {
    // With the start, the worker reports what its state store kept and dropped meanwhile.
    const states = worker.store.takeChanges();
    const stored = (scheduler: GlobalScheduler) => {
      if (states) scheduler.applyCacheEvent({ type: "store-changed", workerId: worker.id, changes: states });
    };
    if (!this.network) {
      stored(this.schedulers[0]!);
      job.ticket.started(slot);
      return;
    }
    // The router that placed it hears from the engine's reply; the others from its events.
    this.at(this.now + this.hop, () => {
      this.schedulers.forEach((scheduler, router) => {
        stored(scheduler);
        if (router === job.router) job.ticket.started(slot);
        else scheduler.applyCacheEvent({ type: "slot-holds", workerId: job.ticket.workerId, slot, tokens: job.request.tokens });
      });
    });
  }

  firstToken(_worker: SimWorker, job: Job): void {
    // The router that placed it hears of it from the engine's stream, a hop later.
    if (!this.network) job.ticket.firstToken();
    else this.at(this.now + this.hop, () => job.ticket.firstToken());
  }

  slotEmptied(worker: SimWorker, slot: number): void {
    const report = () => {
      for (const scheduler of this.schedulers) scheduler.applyCacheEvent({ type: "slot-holds", workerId: worker.id, slot, tokens: [] });
    };
    if (!this.network) report();
    else this.at(this.now + this.hop, report);
  }

  /** Every loadEveryMs while requests remain, each engine's count of requests reaches every router a hop later. */
  private reportLoads(): void {
    const network = this.network!;
    const counts = this.workers.map((worker) => worker.outstanding);
    this.at(this.now + network.latencyMs, () => {
      for (const scheduler of this.schedulers) {
        for (const [i, worker] of this.workers.entries()) scheduler.reportLoad(worker.id, counts[i]!);
      }
    });
    if (this.records.length + this.refused.length < this.options.requests.length) this.at(this.now + network.loadEveryMs, () => this.reportLoads());
  }

  completed(worker: SimWorker, job: Job): void {
    // The router that placed it learns of its end a hop later; latencies are measured there.
    const doneAt = this.now;
    if (!this.network) this.record(worker, job, doneAt);
    else this.at(doneAt + this.hop, () => this.record(worker, job, doneAt));
  }

  private record(worker: SimWorker, job: Job, doneAt: number): void {
    const now = this.now;
    const hop = now - doneAt;
    const { request, ticket } = job;
    const n = request.tokens.length;
    const arrivalMs = this.firstSent.get(request.index) ?? ticket.placedAt;
    this.firstSent.delete(request.index);
    const firstTokenMs = job.firstTokenMs + hop;
    ticket.finished({
      ok: true,
      promptTokens: n,
      cachedTokens: job.cachedTokens,
      completionTokens: job.generated,
      // As the server measures it: from its placement.
      ttftMs: firstTokenMs - ticket.placedAt,
      prefillMs: job.firstTokenMs - job.startMs,
      ...(job.generated > 1 ? { decodeMsPerToken: (doneAt - job.firstTokenMs) / (job.generated - 1) } : {}),
      ...(job.heldAnswer ? { heldAnswerTokens: job.heldAnswer } : {}),
    });
    this.records.push({
      index: request.index,
      workerId: worker.id,
      reason: ticket.placement.reason,
      arrivalMs,
      startMs: job.startMs,
      firstTokenMs,
      finishMs: now,
      ttftMs: firstTokenMs - arrivalMs,
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
