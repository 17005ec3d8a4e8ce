// Filter 2, back-pressure: a worker whose queue is full takes nothing more; when every worker
// of the model is full, the caller answers 429.
import type { FleetWorker } from "./fleet-worker.js";

/**
 * Places (running + waiting) each live worker of `modelId` gets on top of its own: while
 * other workers of the model are down (restarting), the live ones share their places, so
 * the model admits as many requests as with every worker up and they wait longer instead
 * of being refused. The same for every worker of the model: computed once per decision.
 */
export function lentPlaces(fleet: Iterable<FleetWorker>, modelId: string, maxQueuePerWorker: number): number {
  let alive = 0;
  let placesOfDown = 0;
  for (const worker of fleet) {
    if (worker.spec.modelId !== modelId) continue;
    if (worker.alive && !worker.held) alive++;
    else placesOfDown += worker.spec.slots + maxQueuePerWorker;
  }
  return Math.ceil(placesOfDown / Math.max(1, alive));
}

export function hasRoom(worker: FleetWorker, lent: number, maxQueuePerWorker: number): boolean {
  return worker.inFlight + (worker.othersInFlight ?? 0) < worker.spec.slots + maxQueuePerWorker + lent;
}
