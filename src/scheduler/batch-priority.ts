// How one llama.cpp batch is shared between a worker's running sequences (plugged into
// node-llama-cpp's `itemPrioritizationStrategy`). Preble mixes hit and miss requests: a hit
// is almost pure decode, so it rides along with a miss's prefill.
//   1. Every decoding sequence (one pending token) gets its token first.
//   2. The prefill budget, min(batch left, chunkTokens) (Preble: 1024), is split across the
//      prefilling sequences, each taking what it still needs until the budget is spent:
//      chunked prefill. A prompt whose prefill has started is continued first (in arrival
//      order), as SGLang and vLLM continue a chunked prefill before they start another; then
//      the others in priority order (higher priority group first, then arrival). Strict
//      priority let a stream of cached prompts overtake a long cold prompt half-way through
//      its prefill again and again: its first token waited on every cached prompt that came
//      after it.
// Typed structurally so the scheduler core stays free of node-llama-cpp.
import { LOCAL_SCHEDULER_DEFAULTS } from "./local-scheduler-settings.js";

export interface PendingBatchItem {
  readonly tokens: { readonly length: number };
  /** 1..5: the priority group of the request, folded onto node-llama-cpp's scale. */
  readonly evaluationPriority: number;
}

export interface BatchShare<T extends PendingBatchItem> {
  item: T;
  processAmount: number;
}

/**
 * One batch's shares of `size` tokens among `items` (in arrival order). `started` says which
 * prefilling items have been given part of their prompt in an earlier batch.
 */
export function shareBatch<T extends PendingBatchItem>(
  items: readonly T[],
  size: number,
  chunkTokens: number,
  started: (item: T) => boolean = () => false,
): BatchShare<T>[] {
  const shares: BatchShare<T>[] = [];
  let left = size;
  for (const item of items) {
    if (left > 0 && item.tokens.length === 1) {
      shares.push({ item, processAmount: 1 });
      left--;
    }
  }
  let prefillBudget = Math.min(left, chunkTokens);
  const prefilling = items.filter((item) => item.tokens.length > 1);
  if (prefilling.length > 1) {
    const rank = new Map<T, number>();
    // Started ones above every priority (1..5); a stable sort keeps arrival order inside a rank.
    for (const item of prefilling) rank.set(item, started(item) ? BATCH_PRIORITIES + 1 : item.evaluationPriority);
    prefilling.sort((a, b) => rank.get(b)! - rank.get(a)!);
  }
  for (const item of prefilling) {
    if (prefillBudget <= 0) break;
    const processAmount = Math.min(item.tokens.length, prefillBudget);
    shares.push({ item, processAmount });
    prefillBudget -= processAmount;
  }
  return shares;
}

/** What a worker's batches carried since it started: decode steps, and the tokens in them. */
export interface BatchStats {
  /** Batches dispatched (each one llama.cpp decode step). */
  steps: number;
  /** Generated tokens decoded (one per generating sequence per step). */
  decodeTokens: number;
  /** Prompt tokens evaluated. */
  prefillTokens: number;
}

/** Adds one batch's shares to `stats`. */
export function countBatch(stats: BatchStats, shares: readonly BatchShare<PendingBatchItem>[]): void {
  if (shares.length === 0) return;
  stats.steps++;
  for (const { item, processAmount } of shares) {
    if (item.tokens.length === 1) stats.decodeTokens++;
    else stats.prefillTokens += processAmount;
  }
}

/** The evaluation priorities a batch orders prefills by (node-llama-cpp's 1..5). */
export const BATCH_PRIORITIES = 5;

/** Preble's priority group of a request with hit ratio `hit` among `groups`: ceil(hit x P) - 1, and 0 for no hit. */
export function groupOfHit(hit: number, groups: number): number {
  return hit <= 0 ? 0 : Math.min(groups - 1, Math.ceil(hit * groups) - 1);
}

/**
 * Where a prompt that finds `cachedTokens` of its `promptTokens` cached on a worker stands in
 * that worker's prefill order: its evaluation priority with the default priority groups,
 * 0..BATCH_PRIORITIES-1, higher first.
 */
export function prefillRankOfHit(cachedTokens: number, promptTokens: number): number {
  const groups = LOCAL_SCHEDULER_DEFAULTS.priorityGroups;
  const hit = promptTokens > 0 ? cachedTokens / promptTokens : 0;
  return evaluationPriorityOf(groupOfHit(hit, groups), groups) - 1;
}

/** Priority group 0..P-1 -> node-llama-cpp's evaluation priority 1..5. */
export function evaluationPriorityOf(group: number, priorityGroups: number): 1 | 2 | 3 | 4 | 5 {
  return (1 + Math.min(4, Math.floor((group * 5) / priorityGroups))) as 1 | 2 | 3 | 4 | 5;
}
