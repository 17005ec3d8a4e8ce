// The global scheduler: one per box. It keeps one token radix tree per model (what each
// worker holds in its KV cache, exact from the workers' slot reports, estimated from its
// own placements until a report arrives), the per-worker load and time models, and the
// sessions; it asks the configured policy where each request goes and books the result.
//
// Pure: no I/O, the clock is injected, so the server, the unit tests and the simulator run
// this same code.
import { GENERATION_DEFAULTS } from "../common/generation-settings.js";
import { BATCH_PRIORITIES, prefillRankOfHit } from "./batch-priority.js";
import { GLOBAL_SCHEDULER_DEFAULTS, type GlobalSchedulerSettings } from "./global-scheduler-settings.js";
import { isAliveFor } from "./placement/alive.js";
import { candidateNamed } from "./placement/candidate.js";
import { hasRoom, lentPlaces } from "./placement/capacity.js";
import type { FleetWorker } from "./placement/fleet-worker.js";
import { NO_PLACEMENT, pinnedPlacement } from "./placement/pinned.js";
import { Sessions } from "./placement/session.js";
import { CandidateView } from "./placement/candidate-view.js";
import { StoredStates } from "./placement/stored-states.js";
import { UnreportedPlacements } from "./placement/unreported.js";
import { PromptMatch } from "./radix/prompt-match.js";
import { RadixTree } from "./radix/tree.js";
import type { WorkerAccount } from "./radix/types.js";
import { PlacementTicket, type FinishedRequest, type TicketBook } from "./ticket.js";
import type { TimeModel } from "./time-model.js";
import type { CacheEvent, Placement, PlacementContext, PlacementPolicy, PlacementRequest, WorkerView } from "./types.js";
import { RecentMedian, WindowedSum } from "./windowed-sum.js";
import { emptyArray } from "./scratch.js";

export interface SchedulerWorker {
  id: string;
  modelId: string;
  slots: number;
  /** KV capacity in tokens (slots x context size): the tree never claims more. */
  capacityTokens: number;
  timeModel: TimeModel;
}

export interface SchedulerOptions extends GlobalSchedulerSettings {
  now: () => number;
}

interface WorkerState extends FleetWorker {
  spec: SchedulerWorker;
  prefillWindow: WindowedSum;
  /** Its account in its model's tree (what the tree sees it caching), kept for the views. */
  account: WorkerAccount;
  /** This worker as a candidate: one object, refreshed for every decision. */
  view: CandidateView;
  /** Placements on it not reported by a slot yet, by prompt array: the report of that same
   *  array then starts from the placement's path in the tree instead of walking the tokens. */
  unreported: UnreportedPlacements;
  /** What its state store holds, as its reports say: the tree sees only the slots. */
  stored: StoredStates;
  /** Prompt tokens of its requests in flight. */
  activeTokens: number;
  /** Requests on it that other routers placed, as its own reports say (remote engines shared by several routers). */
  othersInFlight: number;
  /** Uncached prompt tokens of its requests whose first token has not come (waiting or in prefill), by prefill rank. */
  pendingPrefillByRank: Float64Array;
}

interface ModelState {
  tree: RadixTree;
  outputs: RecentMedian;
  /** The request's match: one object per model, refilled for every decision (lent to the
   *  policy through the context, then resumed by the booking's walk). */
  match: PromptMatch;
  /** The context lent to the policy: one object per model, refreshed for every decision. */
  context: DecisionContext;
}

/**
 * What a policy gets for one decision (PlacementContext). One per model, its fields set
 * anew for each decision, its methods plain methods (no closures made per decision): valid
 * for the duration of the policy's `place` call only. What a policy needs of each worker is
 * on the worker's view, refreshed with the candidates: reading it there, next to the rest of
 * the view, spares a lookup of the worker's state for every question (a preble decision
 * was 6 % faster on the scheduler bench's ToolBench arm).
 */
class DecisionContext implements PlacementContext {
  now = 0;

  constructor(
    readonly tree: RadixTree,
    readonly match: PromptMatch,
    private readonly outputs: RecentMedian,
  ) {}

  expectedOutputTokens(request: PlacementRequest): number {
    // Preble: the median output seen, else the request's max_tokens, else what the server
    // gives a request that sets none.
    return this.outputs.median() ?? request.maxTokens ?? GENERATION_DEFAULTS.defaultMaxTokens;
  }
}

export class GlobalScheduler {
  private readonly workers = new Map<string, WorkerState>();
  /** The workers' states in the map's order, for the loops of every decision. */
  private workerList: WorkerState[] = [];
  /** The candidates of the decision under way (lent to the policy, refilled for the next). */
  private readonly candidates: WorkerView[] = [];
  private readonly models = new Map<string, ModelState>();
  private readonly sessions: Sessions;
  private readonly options: SchedulerOptions;
  /** What every ticket this scheduler issues reports to. */
  private readonly ticketBook: TicketBook = {
    slotHolds: (workerId, slot, tokens) => this.applyCacheEvent({ type: "slot-holds", workerId, slot, tokens }),
    slotRunning: (workerId, slot, running) => this.setSlotRunning(workerId, slot, running),
    release: (ticket, outcome) => this.release(ticket, outcome),
    workerDown: (workerId) => this.setAlive(workerId, false),
    prefillDone: (ticket) => this.prefillDone(ticket),
  };

  constructor(
    private policyImpl: PlacementPolicy,
    options: Partial<SchedulerOptions> & { now: () => number },
  ) {
    this.options = { ...GLOBAL_SCHEDULER_DEFAULTS, ...options };
    this.sessions = new Sessions(this.options);
  }

  get policy(): PlacementPolicy {
    return this.policyImpl;
  }

  /** Swaps the policy (hot reload); requests in flight finish under the old one's books. */
  setPolicy(policy: PlacementPolicy): void {
    this.policyImpl = policy;
  }

  addWorker(spec: SchedulerWorker): void {
    const model = this.model(spec.modelId);
    model.tree.setCapacity(spec.id, spec.capacityTokens);
    // One array: the candidate view reads the worker's own pending counts, live.
    const pendingPrefillByRank = new Float64Array(BATCH_PRIORITIES);
    const stored = new StoredStates();
    this.workers.set(spec.id, {
      spec,
      account: model.tree.account(spec.id),
      alive: true,
      held: false,
      inFlight: 0,
      prefillWindow: new WindowedSum(this.options.windowMs),
      activeTokens: 0,
      pendingPrefillByRank,
      othersInFlight: 0,
      view: new CandidateView(spec.id, spec.modelId, spec.slots, spec.capacityTokens, pendingPrefillByRank, spec.timeModel, stored),
      unreported: new UnreportedPlacements(),
      stored,
    });
    this.workerList = [...this.workers.values()];
  }

  /** Forgets a worker for good (discovery found it gone): its cache leaves the tree; requests still on it release as no-ops. */
  removeWorker(workerId: string): void {
    const worker = this.workers.get(workerId);
    if (!worker) return;
    this.models.get(worker.spec.modelId)?.tree.dropWorker(workerId);
    this.workers.delete(workerId);
    this.workerList = [...this.workers.values()];
  }

  hasWorker(workerId: string): boolean {
    return this.workers.has(workerId);
  }

  /** A worker that goes down is never chosen; its cache is forgotten (it restarts empty). */
  setAlive(workerId: string, alive: boolean): void {
    const worker = this.workers.get(workerId);
    if (!worker || worker.alive === alive) return;
    worker.alive = alive;
    if (!alive) this.applyCacheEvent({ type: "worker-reset", workerId });
  }

  /** Holds a live worker out of placement (its circuit breaker is open) or lets it back; its cache stays in the tree. */
  setHeld(workerId: string, held: boolean): void {
    const worker = this.workers.get(workerId);
    if (worker) worker.held = held;
  }

  timeModel(workerId: string): TimeModel | undefined {
    return this.workers.get(workerId)?.spec.timeModel;
  }

  /** The tree of one model (read-only use: metrics, tests). */
  tree(modelId: string): RadixTree | undefined {
    return this.models.get(modelId)?.tree;
  }

  /**
   * Where the request goes, or undefined when no live worker serves its model or all are
   * full. The steps, in order: filters (alive, capacity), overrides (an operator's
   * `pinnedWorkerId`, then the session), then the policy. Whatever decides, the placement
   * is booked, so the tree and the loads stay true.
   */
  place(request: PlacementRequest, pinnedWorkerId?: string): PlacementTicket | undefined {
    const now = this.options.now();
    const model = this.models.get(request.modelId);
    if (!model) return undefined;
    const match = model.tree.matchInto(model.match, request.tokens);
    const candidates = this.candidatesFor(request, model, match, now);
    if (candidates.length === 0) return undefined;
    const override = pinnedPlacement(candidates, pinnedWorkerId) ?? this.sessions.place(request, candidates, match.longest, now);
    if (override === NO_PLACEMENT) return undefined;
    const placement = override ?? this.policyImpl.place(request, candidates, this.context(model, now));
    if (!placement) return undefined;
    const chosen = candidateNamed(candidates, placement.workerId);
    // A choice outside the candidates would bypass the filters: a bug, never a placement.
    if (chosen === undefined)
      throw new Error(`${override ? placement.reason : `policy ${this.policyImpl.name}`} chose ${placement.workerId}, which is not a candidate`);
    return this.book(request, placement, Math.max(chosen.matchedTokens, chosen.storedTokens), model, match, now);
  }

  /** The filters (alive, capacity, the request's own exclusions): the workers that may take
   *  the request, their views refreshed for it. */
  private candidatesFor(request: PlacementRequest, model: ModelState, match: PromptMatch, now: number): WorkerView[] {
    const candidates = this.candidates;
    emptyArray(candidates);
    const workers = this.workerList;
    const lent = lentPlaces(workers, request.modelId, this.options.maxQueuePerWorker);
    for (let i = 0; i < workers.length; i++) {
      const worker = workers[i]!;
      if (!isAliveFor(worker, request.modelId) || !hasRoom(worker, lent, this.options.maxQueuePerWorker)) continue;
      if (request.avoidWorkerIds?.includes(worker.spec.id)) continue;
      const view = worker.view;
      view.inFlight = worker.inFlight + worker.othersInFlight;
      if (worker.account.dropped) worker.account = model.tree.account(worker.spec.id);
      const account = worker.account;
      const held = match.heldOn(account);
      view.matchedTokens = held;
      view.reusableTokens = held > 0 && account.reportsSlots ? match.reusableOn(account) : held;
      view.forPrompt(request.tokens);
      view.kvTokens = account.used;
      view.activeTokens = worker.activeTokens;
      view.pendingPrefillTokens = sumOf(worker.pendingPrefillByRank);
      view.windowedPrefillMs = worker.prefillWindow.total(now);
      candidates.push(view);
    }
    return candidates;
  }

  /** The session was served on `workerId` last (another router's placement, as a shared store says): its next request goes there. */
  rememberSession(sessionId: string, workerId: string): void {
    if (this.workers.has(workerId)) this.sessions.remember(sessionId, workerId, this.options.now());
  }

  /** The request ended (successfully or not): release its load and learn from it. Its ticket's finished() calls this. */
  private release(ticket: PlacementTicket, outcome: FinishedRequest): void {
    const now = this.options.now();
    const worker = this.workers.get(ticket.workerId);
    const model = this.models.get(ticket.request.modelId);
    // The policy first: the request's prefix node is still in the tree (its in-flight count
    // holds it), so what the policy records under it goes with it if releasing prunes it.
    this.policyImpl.onRequestComplete?.(ticket.placement, ticket.request, outcome, now);
    model?.tree.removeInFlight(ticket.inFlight);
    if (worker?.unreported.get(ticket.request.tokens) === ticket.inFlight) worker.unreported.delete(ticket.request.tokens);
    if (worker) {
      worker.inFlight = Math.max(0, worker.inFlight - 1);
      worker.activeTokens = Math.max(0, worker.activeTokens - ticket.request.tokens.length);
      if (!ticket.hasFirstToken) addPending(worker, ticket.request.tokens.length, ticket.uncachedTokens, -1);
      if (outcome.ok) {
        const extend = outcome.promptTokens - outcome.cachedTokens;
        if (outcome.prefillMs !== undefined && extend > 0) worker.spec.timeModel.observePrefill(extend, outcome.promptTokens, outcome.prefillMs);
        if (outcome.decodeMsPerToken !== undefined && outcome.completionTokens > 1) {
          worker.spec.timeModel.observeDecode(outcome.promptTokens + outcome.completionTokens / 2, outcome.decodeMsPerToken);
        }
      }
    }
    if (outcome.ok) model?.outputs.push(outcome.completionTokens);
  }

  /** A request runs in the worker's slot, or left it: the tree counts what idle slots hold. */
  private setSlotRunning(workerId: string, slot: number, running: boolean): void {
    const worker = this.workers.get(workerId);
    if (worker === undefined) return;
    this.models.get(worker.spec.modelId)?.tree.setSlotRunning(workerId, slot, running);
  }

  /** The request's prefill no longer loads its worker: its first token came. */
  private prefillDone(ticket: PlacementTicket): void {
    const worker = this.workers.get(ticket.workerId);
    if (worker) addPending(worker, ticket.request.tokens.length, ticket.uncachedTokens, -1);
  }

  /**
   * Every cache change, whoever reported it (a ticket's slot report, a worker going down, an
   * engine's own report): what this host publishes to other routers (serving/cache-feed.ts).
   */
  onCacheEvent: ((event: CacheEvent) => void) | undefined;

  /**
   * A worker's own count of the requests it holds (a remote engine that several routers
   * share): those beyond this scheduler's own placements weigh on it as load too.
   */
  reportLoad(workerId: string, inFlight: number): void {
    const worker = this.workers.get(workerId);
    if (worker) worker.othersInFlight = Math.max(0, inFlight - worker.inFlight);
  }

  /** Applies a worker's report about its KV cache; the tree then matches reality exactly. */
  applyCacheEvent(event: CacheEvent): void {
    const worker = this.workers.get(event.workerId);
    if (!worker) return;
    this.onCacheEvent?.(event);
    const tree = this.models.get(worker.spec.modelId)!.tree;
    switch (event.type) {
      case "worker-reset":
        // Forgets its cache and its slots (the tree keeps the slot mirror).
        tree.dropWorker(event.workerId);
        tree.setCapacity(event.workerId, worker.spec.capacityTokens);
        worker.unreported.clear();
        worker.stored.clear();
        return;
      case "store-changed":
        worker.stored.apply(event.changes);
        return;
      case "slot-holds": {
        // The tree keeps per slot its deepest node and per node how many slots hold it: the
        // old content's nodes that no other slot holds (and no placement still in flight
        // waits on) go, the new content is recorded; other slots are not touched.
        const placed = worker.unreported.get(event.tokens);
        if (placed !== undefined) worker.unreported.delete(event.tokens);
        tree.setSlot(event.workerId, event.slot, event.tokens, placed);
        return;
      }
      default:
        event satisfies never;
    }
  }

  /**
   * Whether a live worker exists among the model's (or the one named) and every such worker
   * has a full queue: the answer is then 429, not 503.
   */
  allQueuesFull(modelId: string, workerId?: string): boolean {
    const lent = lentPlaces(this.workerList, modelId, this.options.maxQueuePerWorker);
    let alive = 0;
    for (const worker of this.workers.values()) {
      if (!isAliveFor(worker, modelId) || (workerId !== undefined && worker.spec.id !== workerId)) continue;
      alive++;
      if (hasRoom(worker, lent, this.options.maxQueuePerWorker)) return false;
    }
    return alive > 0;
  }

  /** Live view of every worker (for /health, the status page and metrics). */
  views(): WorkerView[] {
    return [...this.workers.values()].map((worker) => ({
      id: worker.spec.id,
      modelId: worker.spec.modelId,
      alive: worker.alive,
      inFlight: worker.inFlight + worker.othersInFlight,
      slots: worker.spec.slots,
      matchedTokens: 0,
      reusableTokens: 0,
      storedTokens: 0,
      kvTokens: this.models.get(worker.spec.modelId)!.tree.cachedTokens(worker.spec.id),
      kvCapacityTokens: worker.spec.capacityTokens,
      activeTokens: worker.activeTokens,
      pendingPrefillTokens: sumOf(worker.pendingPrefillByRank),
      pendingPrefillByRank: Float64Array.from(worker.pendingPrefillByRank),
      windowedPrefillMs: worker.prefillWindow.total(this.options.now()),
      timeModel: worker.spec.timeModel,
    }));
  }

  /**
   * How many entries each part of the scheduler's state holds (read-only; tests and
   * metrics). Every part is bounded (docs/placement.md): `sessions` by maxSessions and the
   * TTL; `unreported` (placements no slot report has claimed yet) and `inFlight` by the
   * requests not completed; `storedStates` by what the workers' stores hold (and at most
   * MAX_STORED_STATES per worker); `treeNodes` and `treeTokens` by the workers' capacities
   * plus the prompts in flight; the policy's own maps come as `policy.<name>`.
   */
  stateSizes(): Record<string, number> {
    let unreported = 0;
    let inFlight = 0;
    let storedStates = 0;
    for (const worker of this.workers.values()) {
      unreported += worker.unreported.size;
      inFlight += worker.inFlight;
      storedStates += worker.stored.size;
    }
    let treeNodes = 0;
    let treeTokens = 0;
    for (const { tree } of this.models.values()) {
      treeNodes += tree.nodeCount;
      treeTokens += tree.tokenCount;
    }
    const sizes: Record<string, number> = { sessions: this.sessions.size, unreported, inFlight, storedStates, treeNodes, treeTokens };
    for (const [name, size] of Object.entries(this.policyImpl.stateSizes?.() ?? {})) sizes[`policy.${name}`] = size;
    return sizes;
  }

  private model(modelId: string): ModelState {
    let model = this.models.get(modelId);
    if (!model) {
      // One tree per model: token ids of different tokenizers must never match each other.
      // A node that leaves it takes what the policy keeps under its id along (whichever
      // policy is in place then: a swapped-out one is dropped whole).
      const tree = new RadixTree({
        now: this.options.now,
        windowMs: this.options.windowMs,
        onRemove: (nodeId) => this.policyImpl.onPrefixRemoved?.(modelId, nodeId),
      });
      const outputs = new RecentMedian(200);
      const match = new PromptMatch();
      model = { tree, outputs, match, context: new DecisionContext(tree, match, outputs) };
      this.models.set(modelId, model);
    }
    return model;
  }

  private context(model: ModelState, now: number): PlacementContext {
    const context = model.context;
    context.now = now;
    return context;
  }

  private book(request: PlacementRequest, placement: Placement, held: number, model: ModelState, match: PromptMatch, now: number): PlacementTicket {
    const worker = this.workers.get(placement.workerId)!;
    worker.inFlight++;
    worker.activeTokens += request.tokens.length;
    addPending(worker, request.tokens.length, request.tokens.length - held, 1);
    worker.prefillWindow.add(now, worker.spec.timeModel.prefillMs(request.tokens.length - held, request.tokens.length));
    // In flight (records hit or miss per node), then the estimate: the worker will hold the
    // prompt once it runs, so concurrent requests of the same prefix see it now. One walk,
    // resumed from the match (nothing changed the tree since it was taken).
    const inFlight = model.tree.placeOn(worker.spec.id, request.tokens, match);
    worker.unreported.set(request.tokens, inFlight);
    this.sessions.served(request, worker.spec.id, now);
    return new PlacementTicket(this.ticketBook, request, placement, worker.spec.id, now, inFlight, request.tokens.length - held);
  }
}

/** Adds (sign 1) or removes (sign -1) a prompt's `uncached` tokens of `promptTokens` in the worker's pending prefill, at the prompt's rank there. */
function addPending(worker: WorkerState, promptTokens: number, uncached: number, sign: 1 | -1): void {
  const rank = prefillRankOfHit(promptTokens - uncached, promptTokens);
  worker.pendingPrefillByRank[rank] = Math.max(0, worker.pendingPrefillByRank[rank]! + sign * uncached);
}

function sumOf(values: ArrayLike<number>): number {
  let sum = 0;
  for (let i = 0; i < values.length; i++) sum += values[i]!;
  return sum;
}
