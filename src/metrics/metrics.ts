// Prometheus metrics (prom-client). Per request: counts and durations by route and status,
// TTFT, inter-token latency, and prompt / cached / completion tokens as histograms (a
// per-request verdict, not only a lifetime ratio). Per worker, read at scrape time: queue,
// running, slots, KV tokens held and capacity, alive, restarts; and counters of evictions,
// spills, restores, placements by policy and reason, replications, copies and failovers.
// Node process defaults too. Every name is in the README's Metrics section (a test checks both ways).
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";
import type { GlobalScheduler } from "../scheduler/global-scheduler.js";
import type { CopyAction, Placement } from "../scheduler/types.js";
import type { Fleet } from "../serving/fleet.js";
import type { RequestRecord, ServingObserver } from "../serving/observer.js";
import type { SharedSessions } from "../serving/session-store.js";

const TOKEN_BUCKETS = [16, 64, 256, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072];
const SECONDS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/**
 * Node's own metrics (CPU, memory, event-loop lag, GC): prom-client's default collectors, in
 * one registry per process. They start things prom-client never stops (an enabled event-loop
 * delay monitor, a GC PerformanceObserver), and those keep the registry they report to
 * reachable: with the collectors in each server's registry, every server created and closed
 * in one process (the tests, bench:live's servers, an embedding application) left its
 * registry and all its metrics behind (test/server/metrics.test.ts checks they are collected).
 */
let processRegistry: Registry | undefined;

function nodeProcessRegistry(): Registry {
  if (processRegistry === undefined) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

export class Metrics implements ServingObserver {
  /** The server's own metrics (the process's are in a registry of their own: `exposition`). */
  readonly registry = new Registry();
  readonly contentType = this.registry.contentType;
  /** What a scrape reads: the process's metrics and this server's, in one registry made once
   *  (every metric is registered in the constructor). */
  private readonly scraped: Registry;
  private readonly httpRequests: Counter<"route" | "method" | "status">;
  private readonly httpDuration: Histogram<"route" | "method" | "status">;
  private readonly requests: Counter<"model" | "worker" | "outcome">;
  private readonly ttft: Histogram<"model">;
  private readonly interToken: Histogram<"model">;
  private readonly queue: Histogram<"model">;
  private readonly promptTokens: Histogram<"model">;
  private readonly cachedTokens: Histogram<"model">;
  private readonly cachedFraction: Histogram<"model">;
  private readonly completionTokens: Histogram<"model">;
  private readonly evictions: Counter<"worker">;
  private readonly spills: Counter<"worker">;
  private readonly restores: Counter<"worker">;
  private readonly restoreFailures: Counter<"worker">;
  private readonly placements: Counter<"policy" | "reason">;
  private readonly replications: Counter;
  private readonly copies: Counter<"outcome">;
  private readonly failovers: Counter<"worker">;
  private sessionStore: Pick<SharedSessions, "counts"> | undefined;

  constructor(fleet: Fleet, scheduler: GlobalScheduler) {
    const registers = [this.registry];
    this.httpRequests = new Counter({
      name: "radixgate_http_requests_total",
      help: "HTTP requests by route, method and status.",
      labelNames: ["route", "method", "status"],
      registers,
    });
    this.httpDuration = new Histogram({
      name: "radixgate_http_request_duration_seconds",
      help: "HTTP request duration by route, method and status.",
      labelNames: ["route", "method", "status"],
      buckets: SECONDS_BUCKETS,
      registers,
    });
    this.requests = new Counter({
      name: "radixgate_requests_total",
      help: "Completions by model, worker and outcome (ok, cancelled, or an error code).",
      labelNames: ["model", "worker", "outcome"],
      registers,
    });
    this.ttft = new Histogram({
      name: "radixgate_ttft_seconds",
      help: "Time to first token, from placement to the first text.",
      labelNames: ["model"],
      buckets: SECONDS_BUCKETS,
      registers,
    });
    this.interToken = new Histogram({
      name: "radixgate_inter_token_latency_seconds",
      help: "Time between two text pieces of one request (at the host for a stream; in the worker for an answer returned whole, where the engine times them).",
      labelNames: ["model"],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
      registers,
    });
    this.queue = new Histogram({
      name: "radixgate_queue_seconds",
      help: "Time a request waited in its worker's queue for a slot.",
      labelNames: ["model"],
      buckets: SECONDS_BUCKETS,
      registers,
    });
    this.promptTokens = new Histogram({
      name: "radixgate_prompt_tokens",
      help: "Prompt tokens per request.",
      labelNames: ["model"],
      buckets: TOKEN_BUCKETS,
      registers,
    });
    this.cachedTokens = new Histogram({
      name: "radixgate_cached_tokens",
      help: "Prompt tokens per request taken from the worker's KV cache (not evaluated).",
      labelNames: ["model"],
      buckets: [0, ...TOKEN_BUCKETS],
      registers,
    });
    this.cachedFraction = new Histogram({
      name: "radixgate_cached_fraction",
      help: "Per request: cached tokens / prompt tokens.",
      labelNames: ["model"],
      buckets: [0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1],
      registers,
    });
    this.completionTokens = new Histogram({
      name: "radixgate_completion_tokens",
      help: "Completion tokens per request.",
      labelNames: ["model"],
      buckets: TOKEN_BUCKETS,
      registers,
    });
    this.evictions = new Counter({
      name: "radixgate_worker_evictions_total",
      help: "Slot contents discarded (LRU) to serve another request.",
      labelNames: ["worker"],
      registers,
    });
    this.spills = new Counter({
      name: "radixgate_worker_spills_total",
      help: "Evicted slot contents saved to the worker's state store.",
      labelNames: ["worker"],
      registers,
    });
    this.restores = new Counter({
      name: "radixgate_worker_restores_total",
      help: "Requests whose prefix was loaded back from a spilled or copied state.",
      labelNames: ["worker"],
      registers,
    });
    this.restoreFailures = new Counter({
      name: "radixgate_worker_restore_failures_total",
      help: "Stored KV states that failed to load (the request computed its prompt instead).",
      labelNames: ["worker"],
      registers,
    });
    this.placements = new Counter({
      name: "radixgate_placements_total",
      help: "Placements by policy and reason (exploit, explore, yield, replicate, ...).",
      labelNames: ["policy", "reason"],
      registers,
    });
    this.replications = new Counter({ name: "radixgate_replications_total", help: "Hot prefixes sent to a second worker.", registers });
    this.copies = new Counter({
      name: "radixgate_prefix_copies_total",
      help: "KV prefix copies between workers by outcome.",
      labelNames: ["outcome"],
      registers,
    });
    this.failovers = new Counter({
      name: "radixgate_failovers_total",
      help: "Requests placed again because their worker died before their first token reached the client.",
      labelNames: ["worker"],
      registers,
    });

    const byWorker = (name: string, help: string, value: (view: ReturnType<GlobalScheduler["views"]>[number]) => number) =>
      new Gauge({
        name,
        help,
        labelNames: ["worker", "model"],
        registers,
        collect() {
          // Only the workers there are now: one that left (discovery) leaves the metrics too.
          this.reset();
          for (const view of scheduler.views()) this.set({ worker: view.id, model: view.modelId }, value(view));
        },
      });
    byWorker("radixgate_worker_queue_depth", "Requests placed on the worker beyond its slots (waiting).", (view) => Math.max(0, view.inFlight - view.slots));
    byWorker("radixgate_worker_running", "Requests running in the worker's slots.", (view) => Math.min(view.inFlight, view.slots));
    byWorker("radixgate_worker_slots", "Slots (sequences) of the worker.", (view) => view.slots);
    byWorker("radixgate_worker_kv_tokens", "KV tokens the global tree sees the worker holding.", (view) => view.kvTokens);
    byWorker("radixgate_worker_kv_capacity_tokens", "KV capacity of the worker in tokens (slots x context).", (view) => view.kvCapacityTokens);
    byWorker("radixgate_worker_alive", "1 while the worker is up.", (view) => (view.alive ? 1 : 0));
    const metrics = this;
    new Gauge({
      name: "radixgate_session_store_lookups_total",
      help: "Lookups of a session in the store shared with other routers (scheduler.sessionStore): hit, miss, or failed (unreachable, too slow; failed records too). 0 without a store.",
      labelNames: ["outcome"],
      registers,
      collect() {
        const counts = metrics.sessionStore?.counts ?? { hits: 0, misses: 0, failures: 0 };
        this.set({ outcome: "hit" }, counts.hits);
        this.set({ outcome: "miss" }, counts.misses);
        this.set({ outcome: "failed" }, counts.failures);
      },
    });
    new Gauge({
      name: "radixgate_worker_restarts_total",
      help: "Restarts of the worker after it died.",
      labelNames: ["worker"],
      registers,
      collect() {
        this.reset();
        for (const worker of fleet.workers) this.set({ worker: worker.engine.id }, worker.restarts);
      },
    });

    new Gauge({
      name: "radixgate_scheduler_state_entries",
      help: "Entries the global scheduler keeps, by kind (sessions, tree nodes and tokens, the policy's own): each is bounded.",
      labelNames: ["kind"],
      registers,
      collect() {
        for (const [kind, size] of Object.entries(scheduler.stateSizes())) this.set({ kind }, size);
      },
    });

    // The worker's own counters, asked for at scrape time (a worker that is down is left out).
    const batchCounters = [
      ["radixgate_worker_decode_steps_total", "llama.cpp decode steps (batches) of the worker.", "steps"],
      ["radixgate_worker_decode_tokens_total", "Generated tokens decoded; over decode steps, the sequences a step carried.", "decodeTokens"],
      ["radixgate_worker_prefill_tokens_total", "Prompt tokens the worker evaluated.", "prefillTokens"],
    ] as const;
    const statsOfLiveWorkers = async () =>
      Promise.all(
        fleet.workers
          .filter((worker) => worker.alive)
          .map(async (worker) => ({ worker: worker.engine.id, stats: await worker.engine.stats().catch(() => undefined) })),
      );
    let pending: ReturnType<typeof statsOfLiveWorkers> | undefined;
    for (const [name, help, field] of batchCounters) {
      new Gauge({
        name,
        help,
        labelNames: ["worker"],
        registers,
        async collect() {
          // One stats task per worker per scrape, shared by the three counters.
          pending ??= statsOfLiveWorkers().finally(() => setImmediate(() => (pending = undefined)));
          const live = await pending;
          this.reset();
          for (const { worker, stats } of live) if (stats) this.set({ worker }, stats[field]);
        },
      });
    }
    this.scraped = Registry.merge([nodeProcessRegistry(), this.registry]);
  }

  /** The store of sessions shared with other routers (scheduler.sessionStore), whose lookups the metrics count. */
  followSessionStore(sessions: Pick<SharedSessions, "counts">): void {
    this.sessionStore = sessions;
  }

  restoreFailed(workerId: string): void {
    this.restoreFailures.inc({ worker: workerId });
  }

  /** Everything a scrape returns: the server's metrics and the process's, in Prometheus text format. */
  exposition(): Promise<string> {
    return this.scraped.metrics();
  }

  /** Fastify's onResponse: counts and times every HTTP request by its route pattern. */
  httpResponse(route: string, method: string, status: number, seconds: number): void {
    const labels = { route, method, status: String(status) };
    this.httpRequests.inc(labels);
    this.httpDuration.observe(labels, seconds);
  }

  placed(placement: Placement, policy: string): void {
    this.placements.inc({ policy, reason: placement.reason });
    if (placement.reason === "replicate") this.replications.inc();
  }

  interTokenGap(ms: number, modelId: string): void {
    this.interToken.observe({ model: modelId }, ms / 1000);
  }

  requestFinished(record: RequestRecord): void {
    const model = { model: record.modelId };
    this.requests.inc({ ...model, worker: record.workerId ?? "none", outcome: record.outcome });
    if (record.outcome !== "ok") return;
    if (record.ttftMs !== undefined) this.ttft.observe(model, record.ttftMs / 1000);
    if (record.queueMs !== undefined) this.queue.observe(model, record.queueMs / 1000);
    this.promptTokens.observe(model, record.promptTokens);
    this.cachedTokens.observe(model, record.cachedTokens);
    this.cachedFraction.observe(model, record.promptTokens > 0 ? record.cachedTokens / record.promptTokens : 0);
    this.completionTokens.observe(model, record.completionTokens);
    if (record.workerId) {
      const worker = { worker: record.workerId };
      if (record.evictedTokens > 0) this.evictions.inc(worker);
      if (record.spilledTokens > 0) this.spills.inc(worker);
      if (record.restoredTokens > 0) this.restores.inc(worker);
    }
  }

  failover(fromWorkerId: string): void {
    this.failovers.inc({ worker: fromWorkerId });
  }

  copied(_copy: CopyAction, ok: boolean): void {
    this.copies.inc({ outcome: ok ? "ok" : "failed" });
  }
}
