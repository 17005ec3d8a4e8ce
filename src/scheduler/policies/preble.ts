// preble: the E2 placement of Preble (ICLR 2025; WukLab/preble global_scheduler_with_time.py),
// the default policy.
//
// For a request of n prompt tokens, `matched` = the longest prefix any candidate worker
// holds in its KV cache, `remaining` = n - matched.
//   - Exploit when remaining < matched: the cache covers more than what is left to compute.
//     Go to the cheapest of the workers holding that longest prefix.
//   - Explore otherwise: go to the worker with the lowest total cost.
// Cost of a worker w, in milliseconds from w's own time model (M is only priced where it can
// change the outcome; `costs` in the decision lists the workers that were fully priced):
//   L  load over the window H (Preble: 3 minutes): the prefill work placed on w in the
//      window, plus decode load = requests in flight x expected output tokens x decode ms
//      per token (expected output = median of the last 200 outputs, else max_tokens);
//   M  eviction: the entries LRU would push out of w to fit this request, each priced as
//      its future recompute = its requests in the window x its prefill time;
//   P  this request's new prefill on w: prefill of (n - what w holds) at context n.
// Load rebalancing: once there is enough history (Preble: 50 x workers placements in the
// window), an exploit whose worker's load L is >= rebalanceRatio (1.5) x the lightest
// candidate's goes to the cheapest worker instead ("rebalance").
// Hot prefixes: the TTFT of requests sharing a cached prefix is kept per prefix node; when
// its mean in the second half of the window is >= hotTtftRatio (2) x the first half's,
// the prefix is hot: its next request goes to the cheapest worker that does NOT hold it
// ("replicate"), and when copying its KV is predicted cheaper than recomputing it there,
// the decision carries a copy action from a holder to that worker.
import type { TimeModel } from "../time-model.js";
import type { CopyAction, Placement, PlacementContext, PlacementPolicy, PlacementRequest, RequestOutcome, WorkerView } from "../types.js";
import { minBy } from "./pick.js";

export interface PrebleOptions {
  /** Exploit is overridden when the holder's load >= this x the lightest load. Preble: 1.5. */
  rebalanceRatio: number;
  /** Placements per worker in the window before rebalancing starts. Preble: 50. */
  historyPerWorker: number;
  /** Second-half mean TTFT >= this x first-half mean marks a prefix hot. Preble: 2. */
  hotTtftRatio: number;
  /** TTFT samples needed in each half of the window before a prefix can be called hot. */
  hotMinSamples: number;
  /** The window H, ms. Preble: 180 000. */
  windowMs: number;
}

export const PREBLE_DEFAULTS: PrebleOptions = {
  rebalanceRatio: 1.5,
  historyPerWorker: 50,
  hotTtftRatio: 2,
  hotMinSamples: 3,
  windowMs: 180_000,
};

interface TtftSample {
  at: number;
  ttftMs: number;
}

export class PreblePolicy implements PlacementPolicy {
  readonly name = "preble";
  /** TTFT samples per prefix node id, oldest first. */
  private readonly ttftByPrefix = new Map<number, TtftSample[]>();

  constructor(private readonly options: PrebleOptions = PREBLE_DEFAULTS) {}

  place(request: PlacementRequest, candidates: readonly WorkerView[], context: PlacementContext): Placement | undefined {
    if (candidates.length === 0) return undefined;
    const n = request.tokens.length;
    let matched = 0;
    for (const worker of candidates) matched = Math.max(matched, worker.matchedTokens);
    const remaining = n - matched;
    // L and P are cheap; M (simulated LRU eviction) is not, and it is never negative, so it is
    // priced only for a worker whose L + P can still beat the best total found so far.
    const loads: Record<string, number> = {};
    const partial: Record<string, number> = {};
    for (const worker of candidates) {
      const model = context.timeModel(worker.id);
      loads[worker.id] = this.load(worker, model, request, context);
      partial[worker.id] = loads[worker.id]! + model.prefillMs(n - worker.matchedTokens, n);
    }
    const costs: Record<string, number> = {};
    const cheapest = (workers: readonly WorkerView[]): WorkerView => {
      const byPartial = [...workers].sort((a, b) => partial[a.id]! - partial[b.id]!);
      let best: WorkerView | undefined;
      let bestCost = Infinity;
      for (const worker of byPartial) {
        if (partial[worker.id]! >= bestCost) break;
        const cost = partial[worker.id]! + this.evictionCost(worker, context.timeModel(worker.id), request, context);
        costs[worker.id] = cost;
        if (cost < bestCost || (cost === bestCost && workers.indexOf(worker) < workers.indexOf(best!))) {
          best = worker;
          bestCost = cost;
        }
      }
      return best!;
    };
    const prefixKey = this.prefixKey(context, matched);
    const decide = (worker: WorkerView, reason: string, copies?: CopyAction[]): Placement => ({
      workerId: worker.id,
      reason,
      matchedTokens: matched,
      costs,
      ...(copies && copies.length > 0 ? { copies } : {}),
      ...(prefixKey !== undefined ? { prefixKey } : {}),
    });

    if (matched === 0 || remaining >= matched) return decide(cheapest(candidates), "explore");

    const holders = candidates.filter((worker) => worker.matchedTokens === matched);
    const others = candidates.filter((worker) => worker.matchedTokens < matched);
    if (prefixKey !== undefined && others.length > 0 && this.isHot(prefixKey, context.now)) {
      // Redirect first, then copy: the new worker serves this request either way.
      this.ttftByPrefix.delete(prefixKey);
      const target = cheapest(others);
      const source = minBy(holders, (worker) => loads[worker.id]!)!;
      return decide(target, "replicate", this.copyIfCheaper(request, source, target, matched, context));
    }
    const holder = cheapest(holders);
    const enoughHistory = context.placementsInWindow >= this.options.historyPerWorker * candidates.length;
    if (enoughHistory && loads[holder.id]! > 0) {
      let lightest = Infinity;
      for (const worker of candidates) lightest = Math.min(lightest, loads[worker.id]!);
      if (loads[holder.id]! >= this.options.rebalanceRatio * lightest) return decide(cheapest(candidates), "rebalance");
    }
    return decide(holder, "exploit");
  }

  onRequestComplete(placement: Placement, _request: PlacementRequest, outcome: RequestOutcome, now: number): void {
    if (placement.prefixKey === undefined || !outcome.ok) return;
    let samples = this.ttftByPrefix.get(placement.prefixKey);
    if (!samples) {
      samples = [];
      this.ttftByPrefix.set(placement.prefixKey, samples);
    }
    samples.push({ at: now, ttftMs: outcome.ttftMs });
    const horizon = now - this.options.windowMs;
    while (samples.length > 0 && samples[0]!.at < horizon) samples.shift();
    // Bound memory: a prefix keeps at most its last 256 samples.
    if (samples.length > 256) samples.splice(0, samples.length - 256);
  }

  /** Whether the prefix's TTFT degraded: second half of the window vs the first. */
  isHot(prefixKey: number, now: number): boolean {
    const samples = this.ttftByPrefix.get(prefixKey);
    if (!samples) return false;
    const middle = now - this.options.windowMs / 2;
    const horizon = now - this.options.windowMs;
    let firstSum = 0;
    let firstCount = 0;
    let secondSum = 0;
    let secondCount = 0;
    for (const sample of samples) {
      if (sample.at < horizon) continue;
      if (sample.at < middle) {
        firstSum += sample.ttftMs;
        firstCount++;
      } else {
        secondSum += sample.ttftMs;
        secondCount++;
      }
    }
    if (firstCount < this.options.hotMinSamples || secondCount < this.options.hotMinSamples) return false;
    return secondSum / secondCount >= this.options.hotTtftRatio * (firstSum / firstCount);
  }

  private load(worker: WorkerView, model: TimeModel, request: PlacementRequest, context: PlacementContext): number {
    const decode = worker.inFlight * context.expectedOutputTokens(request) * model.decodeMsPerToken(request.tokens.length);
    return context.windowedPrefillMs(worker.id) + decode;
  }

  private evictionCost(worker: WorkerView, model: TimeModel, request: PlacementRequest, context: PlacementContext): number {
    const needed = request.tokens.length - worker.matchedTokens;
    let cost = 0;
    for (const entry of context.tree.simulateEviction(worker.id, needed, context.match)) {
      cost += entry.node.requestsInWindow() * model.prefillMs(entry.tokens, entry.contextLength);
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

  private copyIfCheaper(request: PlacementRequest, source: WorkerView, target: WorkerView, matched: number, context: PlacementContext): CopyAction[] {
    const model = context.timeModel(target.id);
    const copyMs = model.copyMs(matched);
    const recomputeMs = model.prefillMs(matched - target.matchedTokens, matched);
    if (copyMs >= recomputeMs) return [];
    return [{ modelId: request.modelId, fromWorkerId: source.id, toWorkerId: target.id, tokens: request.tokens.slice(0, matched), copyMs, recomputeMs }];
  }
}
