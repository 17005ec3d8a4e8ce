// preble: the E2 placement of Preble (ICLR 2025; WukLab/preble global_scheduler_with_time.py),
// the default policy, with the queue its workers really have priced in.
//
// For a request of n prompt tokens, `matched` = the longest prefix any candidate worker
// could reuse for it now (`reusableTokens`: held by an idle slot; or `storedTokens`: held by
// a state in its state store, which it loads into the slot), `remaining` = n - matched.
// Preble's workers share one KV pool, so whatever they cache is reusable; ours give each
// slot its own cells, and a prefix that only a running request's slot holds (or that a
// request placed there is still to compute) is computed again in another slot. Counting it
// as a hit sent such requests to a busy holder to recompute their prompt beside it: on the
// simulated LooGLE fleet of 8 cards (~23k-token documents) they were nine in ten of preble's
// slowest 1 %, each with nothing cached (docs/placement.md).
//   - Exploit when remaining < matched: the cache covers more than what is left to compute.
//     Go to the cheapest of the workers holding that longest prefix, unless another worker
//     would give the request its first token sooner by more than it costs the requests
//     running there ("yield", below).
//   - Explore otherwise: go to the worker with the lowest total cost.
// Cost of a worker w, in milliseconds from w's own time model (M is only priced where it can
// change the outcome; `costs` in the decision lists the workers that were fully priced):
//   L  load over the window H (Preble: 3 minutes): the prefill work placed on w in the
//      window, plus decode load = requests in flight x expected output tokens x decode ms
//      per token (expected output = median of the last 200 outputs, else max_tokens);
//   M  eviction: the entries LRU would push out of w to fit this request, each priced as
//      its future recompute = its requests in the window x its prefill time;
//   P  this request's new prefill on w: prefill of (n - what w could reuse now) at context n,
//      plus the load of a stored state where that is what w would reuse (TimeModel.restoreMs).
//      Without the store in the count, an agent whose turn was spilled from its slot lost its
//      worker: the next turn saw only the chat template matched anywhere and explored, and
//      half of those turns (4 of 8, two workers of two slots) computed their whole history
//      again on the other worker (docs/placement.md);
//   W  the wait for the prefill ahead of it on w, as w stands now (not in Preble, whose
//      workers batch hundreds of requests over one shared KV pool: ours run a fixed number of
//      slots): the prefill still ahead of it on w (the uncached prompts placed there whose
//      first token has not come, waiting for a slot or being evaluated, of the same prefill
//      rank or higher: a worker shares each step's prefill budget out by hit ratio, highest
//      first), plus, when every slot is taken, the requests ahead of this one for a slot x
//      the time one request holds a slot (expected output x decode ms per token) / slots.
//      Counting only the prompts no slot had taken yet priced a worker busy evaluating a
//      30k-token prompt as idle (docs/placement.md).
//   D  (not in Preble) what this request's prefill on w costs the requests in flight there:
//      a step carries the next token of every running sequence beside the prefill's chunk,
//      and a stored state loads between steps, so each of them waits out about P: P x their
//      number. Only a yield weighs it (below): in the explore cost too it moved NExT-QA's
//      capacity up 7 % on the simulated fleets, but pushed the agent loops' p99 TTFT on 8
//      cards past 1.05x the best published rule's at 0.8x round robin's capacity
//      (docs/placement.md).
// Yield: W + P is the request's predicted time to first token on w. An exploit goes to another
// worker instead when W + P + D is lower there than on the holder: the request's own first
// token sooner, by more than it costs the requests it joins. Without a yield, the holder of
// a popular prefix (a Zipf head) kept every request of it, queued them behind its few slots
// and left the other workers idle: on the simulated 32-card ToolBench-Zipf fleet preble
// sustained 9 requests/s at the SLO against round robin's 30 (the simulator's results,
// docs/simulator.md). The worker it yields to then holds the prefix too, so a hot prefix
// spreads over as many workers as its load needs. Without D, a request yielded as soon as
// its own first token came sooner elsewhere, and the recomputed prefix slowed every request
// running there: on the simulated ToolBench fleet of 4 cards at preble's capacity, 1 in 5
// requests yielded, 123 of the 128 prefixes spread over every card and outgrew the cards'
// stores, and more than a quarter of all requests found nothing of a prefix that their card
// had served (with D: 1 in 11, 101 prefixes, 1 in 7; docs/placement.md).
// No load rebalancing: Preble also moves an exploit to the cheapest worker once the holder's
// load L over the window is 1.5x the lightest (after 50 placements per worker). With W priced
// such a move could only delay the request's own first token or cost the requests it joins
// more than it saves (the yield above takes every other move). In the simulator, before D,
// it delayed them: the agent loops' continuations it moved recomputed their whole history
// elsewhere, a third of the slowest 1 % on 4 and 8 cards; without it their p99 TTFT at 0.8x
// round robin's capacity fell from 1.6-1.8 s to 1.0-1.1 s, and no other workload lost
// (docs/placement.md).
// Hot prefixes: the TTFT of requests sharing a cached prefix is kept per prefix node (per
// model: node ids are per tree), dropped when the node leaves the tree or when its newest
// sample falls out of the window, so it never outgrows the tree nor the window; when
// its mean in the second half of the window is >= hotTtftRatio x the first half's,
// the prefix is hot: its next request goes to the cheapest worker that does NOT hold it
// ("replicate"), and when copying its KV is predicted cheaper than recomputing it there,
// the decision carries a copy action from a holder to that worker.
import { Type, type Static } from "@sinclair/typebox";
import { SETTINGS_OBJECT } from "../../common/settings-schema.js";
import { prefillRankOfHit } from "../batch-priority.js";
import type { TimeModel } from "../time-model.js";
import type { CopyAction, Placement, PlacementContext, PlacementPolicy, PlacementRequest, RequestOutcome, WorkerView } from "../types.js";

/** scheduler.preble in config.yml. */
export const PrebleSettingsSchema = Type.Object(
  {
    hotTtftRatio: Type.Number({
      minimum: 1,
      default: 2,
      description: "A prefix is hot when its TTFT in the second half of the window >= this x the first half.",
    }),
    hotMinSamples: Type.Integer({ minimum: 1, default: 3, description: "TTFT samples needed in each half before a prefix can be hot." }),
  },
  SETTINGS_OBJECT,
);

export type PrebleSettings = Static<typeof PrebleSettingsSchema>;

export interface PrebleOptions extends PrebleSettings {
  /** The window H, ms: the global scheduler's windowMs. */
  windowMs: number;
}

/**
 * The TTFT samples of one prefix, oldest first (by time; a sample that arrives out of order
 * is slotted in place), at most `limit`, none older than the window at the last push. Next
 * to them, running sums of their TTFTs, so the sum over any run of samples is one
 * subtraction and a half-window's first sample is found by binary search: `isHot` costs
 * O(log limit) whatever the number of samples, and counts exactly the samples the window
 * holds (no bucketing). The sum of a run is a difference of running sums: it may differ
 * from a fresh left-to-right sum in the last bits of the float.
 */
class TtftHistory {
  /** Sample times, live from `head` on. */
  private at: number[] = [];
  /** sums[i] = TTFT of samples [0, i): one more entry than `at`. */
  private sums: number[] = [0];
  private head = 0;

  /** One past the last sample. */
  get end(): number {
    return this.at.length;
  }

  /** Time of the newest sample (samples are kept in time order). */
  get newest(): number {
    return this.at[this.at.length - 1]!;
  }

  push(at: number, ttftMs: number, horizon: number, limit: number): void {
    const times = this.at;
    if (times.length === this.head || times[times.length - 1]! <= at) {
      times.push(at);
      this.sums.push(this.sums[this.sums.length - 1]! + ttftMs);
    } else {
      // Out of order (a clock that went back): slot it in after its equals, redo the sums after it.
      const i = this.firstPast(at, false);
      const ttfts = [ttftMs];
      for (let k = i; k < times.length; k++) ttfts.push(this.sums[k + 1]! - this.sums[k]!);
      times.splice(i, 0, at);
      this.sums.length = i + 1;
      for (const t of ttfts) this.sums.push(this.sums[this.sums.length - 1]! + t);
    }
    let head = this.head;
    while (head < times.length && times[head]! < horizon) head++;
    if (times.length - head > limit) head = times.length - limit;
    this.head = head;
    // Drop the dead front once it outgrows the live part.
    if (head > 64 && head > times.length - head) {
      const base = this.sums[head]!;
      this.at = times.slice(head);
      this.sums = this.sums.slice(head).map((sum) => sum - base);
      this.head = 0;
    }
  }

  /** Index of the first live sample at or after `time`. */
  firstAt(time: number): number {
    return this.firstPast(time, true);
  }

  /** TTFT sum of samples [i, j). */
  sum(i: number, j: number): number {
    return this.sums[j]! - this.sums[i]!;
  }

  /** Index of the first live sample after `time`, or at it when `orAt` (binary search). */
  private firstPast(time: number, orAt: boolean): number {
    const times = this.at;
    let lo = this.head;
    let hi = times.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const t = times[mid]!;
      if (t < time || (!orAt && t === time)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}

/** Candidates per decision, by index in the candidate list: reused scratch. */
class Scratch {
  loads = new Float64Array(16);
  /** W + P + D: the predicted time to first token and what the request's prefill costs the others (what a yield compares). */
  yieldCost = new Float64Array(16);
  partial = new Float64Array(16);
  /** Full cost, NaN until priced in this decision. */
  cost = new Float64Array(16);
  order = new Int32Array(16);

  reset(n: number): void {
    if (this.loads.length < n) {
      const size = Math.max(n, 2 * this.loads.length);
      this.loads = new Float64Array(size);
      this.yieldCost = new Float64Array(size);
      this.partial = new Float64Array(size);
      this.cost = new Float64Array(size);
      this.order = new Int32Array(size);
    }
    this.cost.fill(Number.NaN, 0, n);
  }
}

/**
 * W: how long a request placed on `worker` now would wait for the prefill ahead of it there.
 * A worker shares each step's prefill budget out in rank order (its hit ratio there: higher
 * first) once the prefills it has started have their share, so what is ahead is the prefill
 * still pending there (waiting for a slot or being evaluated) of this request's rank and
 * above (at least as long a context as this one's; a started prefill of a lower rank is
 * ahead too, and the view does not tell it apart);
 * and when every slot is taken, the requests beyond the slots (this one included) each wait
 * for one to free: a slot turns over every `slotMs` / slots.
 */
function waitMs(worker: WorkerView, model: TimeModel, slotMs: number, n: number): number {
  const byRank = worker.pendingPrefillByRank;
  // The rank from all the worker holds, busy slots and its store included: so does the worker's own queue.
  let pending = 0;
  for (let rank = prefillRankOfHit(Math.max(worker.matchedTokens, worker.storedTokens), n); rank < byRank.length; rank++) pending += byRank[rank]!;
  const queuedPrefill = pending > 0 ? model.prefillMs(pending, Math.max(n, pending)) : 0;
  const ahead = worker.inFlight - worker.slots + 1;
  return queuedPrefill + (ahead > 0 ? (ahead * slotMs) / worker.slots : 0);
}

/** What the worker would reuse of the prompt now: an idle slot's prefix, or a stored state's when longer. */
function usableTokens(worker: WorkerView): number {
  return Math.max(worker.reusableTokens, worker.storedTokens);
}

/** P: the request's prefill on the worker, after what it reuses (a stored state's load included). */
function newPrefillMs(worker: WorkerView, n: number): number {
  const model = worker.timeModel;
  if (worker.storedTokens > worker.reusableTokens) return model.restoreMs(worker.storedTokens) + model.prefillMs(n - worker.storedTokens, n);
  return model.prefillMs(n - worker.reusableTokens, n);
}

const ALL = 0;
const HOLDERS = 1;
const OTHERS = 2;

export class PreblePolicy implements PlacementPolicy {
  readonly name = "preble";
  /** TTFT samples per model, then per prefix node id; each inner map in the order of its
   *  histories' newest samples (a history is moved to the back when it gets one; with a
   *  clock that only moves forward), so the ones whose window has passed are at the front. */
  private readonly ttftByPrefix = new Map<string, Map<number, TtftHistory>>();
  /** Per model, the prefix whose history was moved to the back of its map last (while it is
   *  still there, it is still the last one: nothing else adds to the map). */
  private readonly lastMoved = new Map<string, number>();
  private readonly scratch = new Scratch();

  constructor(private readonly options: PrebleOptions) {}

  place(request: PlacementRequest, candidates: readonly WorkerView[], context: PlacementContext): Placement | undefined {
    const count = candidates.length;
    if (count === 0) return undefined;
    const n = request.tokens.length;
    let matched = 0;
    for (let i = 0; i < count; i++) matched = Math.max(matched, usableTokens(candidates[i]!));
    const remaining = n - matched;
    // L, P and W are cheap; M (simulated LRU eviction) is not, and it is never negative, so it is
    // priced only for a worker whose L + P + W can still beat the best total found so far.
    const scratch = this.scratch;
    scratch.reset(count);
    const { loads, yieldCost, partial } = scratch;
    const expectedOutput = context.expectedOutputTokens(request);
    for (let i = 0; i < count; i++) {
      const worker = candidates[i]!;
      const model = worker.timeModel;
      const slotMs = expectedOutput * model.decodeMsPerToken(n);
      loads[i] = worker.windowedPrefillMs + worker.inFlight * slotMs;
      const prefill = newPrefillMs(worker, n);
      const firstToken = waitMs(worker, model, slotMs, n) + prefill;
      yieldCost[i] = firstToken + worker.inFlight * prefill;
      partial[i] = loads[i]! + firstToken;
    }
    // A hash-table object from the start: the workers priced, and so the keys and their order,
    // vary from one decision to the next, and adding them to a plain object walks V8 through a
    // new hidden class each time (on 10k-token prompts that was an eighth of a decision).
    const costs: Record<string, number> = Object.create(null);
    const prefixKey = this.prefixKey(context, matched);

    if (matched === 0 || remaining >= matched)
      return this.decide(candidates[this.cheapest(ALL, matched, costs, candidates, request, context)]!, "explore", matched, costs, prefixKey);

    let hasOthers = false;
    for (let i = 0; i < count; i++) if (usableTokens(candidates[i]!) < matched) hasOthers = true;
    if (prefixKey !== undefined && hasOthers && this.isHot(request.modelId, prefixKey, context.now)) {
      // Redirect first, then copy: the new worker serves this request either way.
      this.ttftByPrefix.get(request.modelId)!.delete(prefixKey);
      const target = candidates[this.cheapest(OTHERS, matched, costs, candidates, request, context)]!;
      // The least loaded holder (the first among equals).
      let source = -1;
      for (let i = 0; i < count; i++) {
        if (usableTokens(candidates[i]!) === matched && (source < 0 || loads[i]! < loads[source]!)) source = i;
      }
      return this.decide(target, "replicate", matched, costs, prefixKey, this.copyIfCheaper(request, candidates[source]!, target, matched));
    }
    const holder = this.cheapest(HOLDERS, matched, costs, candidates, request, context);
    let soonest = holder;
    for (let i = 0; i < count; i++) if (yieldCost[i]! < yieldCost[soonest]!) soonest = i;
    if (soonest !== holder) return this.decide(candidates[soonest]!, "yield", matched, costs, prefixKey);
    return this.decide(candidates[holder]!, "exploit", matched, costs, prefixKey);
  }

  onRequestComplete(placement: Placement, request: PlacementRequest, outcome: RequestOutcome, now: number): void {
    if (placement.prefixKey === undefined || !outcome.ok) return;
    let histories = this.ttftByPrefix.get(request.modelId);
    if (!histories) {
      histories = new Map();
      this.ttftByPrefix.set(request.modelId, histories);
    }
    const horizon = now - this.options.windowMs;
    let history = histories.get(placement.prefixKey);
    if (history === undefined || this.lastMoved.get(request.modelId) !== placement.prefixKey) {
      // To the back of the map (where it is already when it was the last one moved).
      if (history) histories.delete(placement.prefixKey);
      else history = new TtftHistory();
      histories.set(placement.prefixKey, history);
      this.lastMoved.set(request.modelId, placement.prefixKey);
    }
    // Keeps the window's samples, at most the last 256 (bounds memory).
    history.push(now, outcome.ttftMs, horizon, 256);
    // Histories with no sample left in the window say nothing to isHot: drop them.
    for (const [key, oldest] of histories) {
      if (oldest.newest >= horizon) break;
      histories.delete(key);
    }
  }

  onPrefixRemoved(modelId: string, prefixKey: number): void {
    this.ttftByPrefix.get(modelId)?.delete(prefixKey);
  }

  stateSizes(): Record<string, number> {
    let ttftHistories = 0;
    for (const histories of this.ttftByPrefix.values()) ttftHistories += histories.size;
    return { ttftHistories };
  }

  /** Whether the prefix's TTFT degraded: second half of the window vs the first. */
  isHot(modelId: string, prefixKey: number, now: number): boolean {
    const history = this.ttftByPrefix.get(modelId)?.get(prefixKey);
    if (!history) return false;
    const middle = now - this.options.windowMs / 2;
    const horizon = now - this.options.windowMs;
    const first = history.firstAt(horizon);
    const second = history.firstAt(middle);
    const end = history.end;
    const firstCount = second - first;
    const secondCount = end - second;
    if (firstCount < this.options.hotMinSamples || secondCount < this.options.hotMinSamples) return false;
    return history.sum(second, end) / secondCount >= this.options.hotTtftRatio * (history.sum(first, second) / firstCount);
  }

  private decide(
    worker: WorkerView,
    reason: string,
    matched: number,
    costs: Record<string, number>,
    prefixKey: number | undefined,
    copies?: CopyAction[],
  ): Placement {
    const placement: Placement = { workerId: worker.id, reason, matchedTokens: matched, costs };
    if (copies && copies.length > 0) placement.copies = copies;
    if (prefixKey !== undefined) placement.prefixKey = prefixKey;
    return placement;
  }

  /**
   * Index of the cheapest worker of a group (all candidates, the holders of the longest
   * prefix, or the others): by L + P + W first (stable: list order among equals), the full cost
   * L + P + W + M for as long as L + P + W alone can still win; ties go to the earlier one in the
   * list. Every worker priced in full is entered in `costs` (once: its M does not change
   * within a decision). The only member of a group is not priced: most exploits have one
   * holder, whose M nothing is compared with.
   */
  private cheapest(
    group: number,
    matched: number,
    costs: Record<string, number>,
    candidates: readonly WorkerView[],
    request: PlacementRequest,
    context: PlacementContext,
  ): number {
    const { partial, cost, order } = this.scratch;
    let size = 0;
    for (let i = 0; i < candidates.length; i++) {
      const m = usableTokens(candidates[i]!);
      if (group === HOLDERS ? m !== matched : group === OTHERS ? m >= matched : false) continue;
      // Insertion sort by partial cost, stable.
      let j = size++;
      while (j > 0 && partial[order[j - 1]!]! > partial[i]!) {
        order[j] = order[j - 1]!;
        j--;
      }
      order[j] = i;
    }
    // A group of one has nothing to be priced against: its M could not change the outcome.
    if (size === 1) return order[0]!;
    let best = -1;
    let bestCost = Infinity;
    for (let k = 0; k < size; k++) {
      const i = order[k]!;
      if (partial[i]! >= bestCost) break;
      let total = cost[i]!;
      if (Number.isNaN(total)) {
        const worker = candidates[i]!;
        total = partial[i]! + this.evictionCost(worker, request, context);
        cost[i] = total;
        costs[worker.id] = total;
      }
      if (total < bestCost || (total === bestCost && i < best)) {
        best = i;
        bestCost = total;
      }
    }
    return best;
  }

  /** M: what LRU would evict from the worker to fit the request, each entry priced as its
   *  recompute (requests in the window x its prefill), in eviction order. */
  private evictionCost(worker: WorkerView, request: PlacementRequest, context: PlacementContext): number {
    const model = worker.timeModel;
    const needed = request.tokens.length - worker.matchedTokens;
    const order = context.tree.evictionOrder(worker.id, needed, context.match);
    let cost = 0;
    for (let node = order.next(); node !== undefined; node = order.next()) {
      cost += node.requestsInWindow() * model.prefillMs(node.segmentLength, node.contextLength);
    }
    return cost;
  }

  /** The deepest node of the request's path that lies within the matched prefix. */
  private prefixKey(context: PlacementContext, matched: number): number | undefined {
    let key: number | undefined;
    for (const node of context.match.path) {
      if (node.contextLength > matched) break;
      key = node.id;
    }
    return key;
  }

  private copyIfCheaper(request: PlacementRequest, source: WorkerView, target: WorkerView, matched: number): CopyAction[] {
    const model = target.timeModel;
    const copyMs = model.copyMs(matched);
    const recomputeMs = model.prefillMs(matched - Math.max(target.matchedTokens, target.storedTokens), matched);
    if (copyMs >= recomputeMs) return [];
    return [{ modelId: request.modelId, fromWorkerId: source.id, toWorkerId: target.id, tokens: request.tokens.slice(0, matched), copyMs, recomputeMs }];
  }
}
