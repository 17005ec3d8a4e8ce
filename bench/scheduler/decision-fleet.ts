// The fleet and the workloads the decision-speed benchmarks place on (bench:scheduler, and
// bench:scheduler-compare, which times two versions of the scheduler on them side by side):
// 8 workers of one model, 200k tokens of KV each, Preble's A6000 / Mistral-7B time model;
// (a) ToolBench-like, 1000 shared ~2000-token prefixes picked with Zipf(1.1), a unique
// ~200-token suffix each, Poisson arrivals; (b) the Mooncake conversation trace (real
// arrivals, lengths and 512-token prefix blocks).
import { MOONCAKE_CONVERSATION_TRACE, mooncakeRequests, readMooncakeTrace } from "../workloads/mooncake.js";
import type { WorkloadRequest } from "../workloads/tokens.js";
import { TOOLBENCH_ZIPF_DEFAULTS, toolbenchZipf } from "../workloads/toolbench-zipf.js";

export const MODEL = "mistral-7b";
export const WORKERS = 8;
export const CAPACITY_TOKENS = 200_000;
export const TIME_MODEL = "a6000-mistral-7b";
/** Requests in flight per worker on average: the oldest completes once the fleet has more. */
export const IN_FLIGHT_PER_WORKER = 4;
export const TREE_TARGET_TOKENS = 1_000_000;
export const TOOLBENCH_SLOTS = 256;
export const WORKLOADS = ["toolbench", "mooncake"] as const;
export type WorkloadName = (typeof WORKLOADS)[number];

/** A workload's request with its prompt as the scheduler gets it from the server. */
export type PlacedRequest = Omit<WorkloadRequest, "tokens"> & { tokens: Int32Array };

export interface WorkloadPlan {
  /** Slots per worker (llama.cpp -np): what the slot-holds reports rotate over. */
  slots: number;
  warmupRequests: number;
  measuredRequests: number;
  describe: string;
}

/** Records in the Mooncake trace (its requests: the plan measures all but the warm-up). */
export function mooncakeRecordCount(): number {
  return readMooncakeTrace(MOONCAKE_CONVERSATION_TRACE).length;
}

/**
 * Slots: a worker's view in the tree is the union of what its slots hold (a slot-holds
 * report drops what the slot held before), bounded by its KV capacity. ToolBench prompts
 * (~2200 tokens) share their prefixes, so a 200k-token worker holds the union of far more
 * than 200k / 2200 prompts, as a radix cache does: 256 slots (its last 256 prompts) fill it
 * to about its capacity and the tree past 1M tokens (96 slots leave it near 0.65M).
 * Mooncake prompts are ~12k tokens (up to 126k): 16 slots and the capacity bound the view.
 */
export function plan(workload: WorkloadName, quick: boolean, mooncakeRecords: number, toolbenchSlots = TOOLBENCH_SLOTS): WorkloadPlan {
  if (workload === "toolbench") {
    const o = TOOLBENCH_ZIPF_DEFAULTS;
    return {
      slots: toolbenchSlots,
      warmupRequests: quick ? 3_000 : 5_000,
      measuredRequests: quick ? 3_000 : 50_000,
      describe: `ToolBench-like: ${o.prefixes} prefixes of ~${o.prefixTokens} tokens, Zipf a=${o.zipfA}, unique ~${o.suffixTokens}-token suffix, Poisson ${o.ratePerS} req/s`,
    };
  }
  const warmupRequests = 1_000;
  return {
    slots: 16,
    warmupRequests,
    measuredRequests: quick ? 2_000 : mooncakeRecords - warmupRequests,
    describe: `Mooncake conversation trace (${mooncakeRecords} records; trace arrivals; 512-token blocks from hash_ids)`,
  };
}

/**
 * The workload's requests in order, each prompt an Int32Array as the server's prompt threads
 * hand them over (made here, outside any timed call). Throws when the workload runs out.
 */
export function placedRequests(workload: WorkloadName, seed: number, salt: number): () => PlacedRequest {
  const requests = workload === "toolbench" ? toolbenchZipf({ seed, salt }) : mooncakeRequests(readMooncakeTrace(MOONCAKE_CONVERSATION_TRACE), { seed, salt });
  return () => {
    const next = requests.next();
    if (next.done) throw new Error(`${workload}: the workload ran out of requests`);
    return { ...next.value, tokens: Int32Array.from(next.value.tokens) };
  };
}

/** The fleet's worker ids, in order. */
export const WORKER_IDS: readonly string[] = Array.from({ length: WORKERS }, (_, i) => `gpu${i}`);

/** What the benches need of a placement's ticket (any version of the scheduler has these). */
export interface ServedTicket {
  readonly workerId: string;
  readonly request: { readonly tokens: { readonly length: number } };
  started(slot: number): void;
  firstToken(): void;
  finished(outcome: {
    ok: true;
    promptTokens: number;
    cachedTokens: number;
    completionTokens: number;
    ttftMs: number;
    prefillMs: number;
    decodeMsPerToken: number;
  }): void;
}

/** The times a worker's model gives (any version of the scheduler's TimeModel). */
export interface ServedTimeModel {
  prefillMs(extendTokens: number, contextTokens: number): number;
  decodeMsPerToken(contextTokens: number): number;
}

/**
 * What follows a placement in both decision benches, as a worker would report it: the
 * worker's next slot (in turn) takes the request, its first token comes at once (the benches
 * keep no clock for prefills), and once more than IN_FLIGHT_PER_WORKER x WORKERS requests
 * are in flight the oldest completes with the time model's prefill and decode times for what
 * it computed (so the models refit online). Its TTFT is modelled: its prefill, queued behind
 * the worker's requests in flight.
 */
export class ServedRequests<T extends ServedTicket> {
  private readonly nextSlot = new Int32Array(WORKERS);
  private readonly onWorker = new Int32Array(WORKERS);
  private readonly index = new Map(WORKER_IDS.map((id, i) => [id, i]));
  private readonly entries: ({ ticket: T; hit: number; ttftMs: number; outputTokens: number } | undefined)[] = [];
  private head = 0;

  constructor(
    private readonly slots: number,
    private readonly timeModel: (workerId: string) => ServedTimeModel,
  ) {}

  /** The fleet index of a worker id. */
  workerIndex(workerId: string): number {
    return this.index.get(workerId)!;
  }

  /** The slot the ticket's worker gives its next request (they take turns), and the request's
   *  modelled TTFT when `hit` prompt tokens are reused there: what `serve` needs, untimed. */
  slotFor(ticket: T, hit: number): { slot: number; ttftMs: number } {
    const w = this.workerIndex(ticket.workerId);
    const slot = this.nextSlot[w]!;
    this.nextSlot[w] = (slot + 1) % this.slots;
    const n = ticket.request.tokens.length;
    return { slot, ttftMs: this.timeModel(ticket.workerId).prefillMs(n - hit, n) * (1 + this.onWorker[w]!) };
  }

  /** The request takes its slot and has its first token; the oldest complete while too many are in flight. */
  serve(ticket: T, slot: number, hit: number, ttftMs: number, outputTokens: number): void {
    ticket.started(slot);
    ticket.firstToken();
    this.entries.push({ ticket, hit, ttftMs, outputTokens });
    this.onWorker[this.workerIndex(ticket.workerId)]!++;
    while (this.entries.length - this.head > IN_FLIGHT_PER_WORKER * WORKERS) this.completeOldest();
  }

  /** The tickets still in flight, oldest first. */
  *inFlight(): Iterable<T> {
    for (let i = this.head; i < this.entries.length; i++) yield this.entries[i]!.ticket;
  }

  private completeOldest(): void {
    const { ticket, hit, ttftMs, outputTokens } = this.entries[this.head]!;
    this.entries[this.head++] = undefined;
    const n = ticket.request.tokens.length;
    const model = this.timeModel(ticket.workerId);
    ticket.finished({
      ok: true,
      promptTokens: n,
      cachedTokens: hit,
      completionTokens: outputTokens,
      ttftMs,
      prefillMs: model.prefillMs(n - hit, n),
      decodeMsPerToken: model.decodeMsPerToken(n + outputTokens / 2),
    });
    this.onWorker[this.workerIndex(ticket.workerId)]!--;
    if (this.head > 4096) {
      this.entries.splice(0, this.head);
      this.head = 0;
    }
  }
}
