// What the status page shows, assembled at each request: every worker (alive, restarts,
// what each slot holds, the queue by priority group, KV use) and the last minutes of traffic.
import type { SlotReport } from "../engine/wire/protocol.js";
import type { GlobalScheduler } from "../scheduler/global-scheduler.js";
import type { Fleet } from "./fleet.js";
import { BUCKET_MS, type ActivityPoint, type RecentActivity } from "./recent-activity.js";

export interface WorkerReport {
  id: string;
  model: string;
  alive: boolean;
  restarts: number;
  isolation: string;
  /** node-llama-cpp, llama-server, or radixgate (another host). */
  engine: string;
  /** How exact the placement tree is about its cache: exact, at-least, approximate. */
  precision: string;
  /** A remote engine's URL, else null. */
  url: string | null;
  slots: number;
  running: number;
  /** Placed on it beyond its slots. */
  queued: number;
  kvTokens: number;
  kvCapacityTokens: number;
  /** What each slot holds; null while the worker is down. */
  slotReports: SlotReport[] | null;
  /** Waiting per priority group, 0 = lowest hit ratio; null while the worker is down. */
  waitingByGroup: number[] | null;
}

export interface StatusReport {
  time: number;
  policy: string;
  workers: WorkerReport[];
  bucketMs: number;
  activity: ActivityPoint[];
}

export async function statusReport(fleet: Fleet, scheduler: GlobalScheduler, activity: RecentActivity): Promise<StatusReport> {
  const fleetStatus = new Map(fleet.status().workers.map((worker) => [worker.id, worker]));
  const workers = await Promise.all(
    scheduler.views().map(async (view): Promise<WorkerReport> => {
      const handle = fleet.get(view.id);
      const stats = view.alive && handle ? await handle.engine.stats().catch(() => undefined) : undefined;
      return {
        id: view.id,
        model: view.modelId,
        alive: view.alive,
        restarts: fleetStatus.get(view.id)?.restarts ?? 0,
        isolation: fleetStatus.get(view.id)?.isolation ?? "thread",
        engine: fleetStatus.get(view.id)?.engine ?? "node-llama-cpp",
        precision: fleetStatus.get(view.id)?.precision ?? "exact",
        url: fleetStatus.get(view.id)?.url ?? null,
        slots: view.slots,
        running: Math.min(view.inFlight, view.slots),
        queued: Math.max(0, view.inFlight - view.slots),
        kvTokens: view.kvTokens,
        kvCapacityTokens: view.kvCapacityTokens,
        slotReports: stats?.slots ?? null,
        waitingByGroup: stats?.waitingByGroup ?? null,
      };
    }),
  );
  return { time: Date.now(), policy: scheduler.policy.name, workers, bucketMs: BUCKET_MS, activity: activity.points() };
}
