// Filter 2, back-pressure: a worker whose queue is full takes nothing more; when every worker
// of the model is full, the caller answers 429.
import type { FleetWorker } from "./fleet-worker.js";

export function hasRoom(worker: FleetWorker, fleet: Iterable<FleetWorker>, maxQueuePerWorker: number): boolean {
  return worker.inFlight < admitLimit(worker, fleet, maxQueuePerWorker);
}

/**
 * Requests a live worker may hold, running and waiting. While other workers of its model
 * are down (restarting), the live ones share their places: the model admits as many
 * requests as with every worker up, and they wait longer instead of being refused.
 */
function admitLimit(worker: FleetWorker, fleet: Iterable<FleetWorker>, maxQueuePerWorker: number): number {
  const places = (w: FleetWorker) => w.spec.slots + maxQueuePerWorker;
  let alive = 0;
  let placesOfDown = 0;
  for (const other of fleet) {
    if (other.spec.modelId !== worker.spec.modelId) continue;
    if (other.alive) alive++;
    else placesOfDown += places(other);
  }
  return places(worker) + Math.ceil(placesOfDown / Math.max(1, alive));
}
