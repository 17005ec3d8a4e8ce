// Filter 1: a worker that is down is never chosen (it restarts with an empty cache), nor one
// held out of placement (its circuit breaker is open), nor a worker of another model (its
// tree holds another tokenizer's ids).
import type { FleetWorker } from "./fleet-worker.js";

export function isAliveFor(worker: FleetWorker, modelId: string): boolean {
  return worker.alive && !worker.held && worker.spec.modelId === modelId;
}
