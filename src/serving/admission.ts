// Back-pressure: what the server refuses at once rather than let a client wait or time out.
// A full server answers 429, a model with no live worker 503, both with a Retry-After.
import type { GlobalScheduler } from "../scheduler/global-scheduler.js";
import type { PlacementTicket } from "../scheduler/ticket.js";
import type { PlacementRequest } from "../scheduler/types.js";
import { ServingError } from "./errors.js";
import type { Fleet } from "./fleet.js";

/** The longest Retry-After the server gives (a worker whose restart takes longer is waited for again). */
const MAX_RETRY_AFTER_S = 30;

/** Counts the requests the server holds, from validation to the last byte, against server.maxConcurrentRequests. */
export class Admission {
  private held = 0;

  constructor(private readonly limits: { maxConcurrentRequests: number }) {}

  /** Runs `work` as one held request, or refuses it with queue_full before any work. */
  async hold<T>(work: () => Promise<T>): Promise<T> {
    const max = this.limits.maxConcurrentRequests;
    if (this.held >= max) {
      throw new ServingError(
        "queue_full",
        `The server is holding its maximum of ${max} requests (server.maxConcurrentRequests); retry after a moment.`,
        null,
        1,
      );
    }
    this.held++;
    try {
      return await work();
    } finally {
      this.held--;
    }
  }
}

/** Places the request, on the pinned worker when one is named, or says why it cannot be placed now. */
export function placeOrRefuse(scheduler: GlobalScheduler, fleet: Fleet, request: PlacementRequest, pinnedWorkerId: string | undefined): PlacementTicket {
  const ticket = placeUnlessFull(scheduler, fleet, request, pinnedWorkerId);
  if (!ticket) throw queueFull(fleet, request.modelId, pinnedWorkerId);
  return ticket;
}

/** The 429 of a request that found every worker full (and, unpinned, waited its longest for a place). */
export function queueFull(fleet: Fleet, modelId: string, pinnedWorkerId: string | undefined, waitedMs = 0): ServingError {
  const who = pinnedWorkerId !== undefined ? `Worker ${pinnedWorkerId} (named by x-radixgate-worker)` : `Every worker of model "${modelId}"`;
  const waited = waitedMs > 0 ? ` and no place freed within ${waitedMs} ms (scheduler.maxQueueWaitMs)` : "";
  // While a worker restarts, capacity comes back when it does: say when (a client retrying
  // after 1 s would meet the same full queues again).
  const backInS = pinnedWorkerId === undefined ? Math.ceil(fleet.expectedBackInMs(modelId) / 1000) : 0;
  const retryAfter = Math.min(MAX_RETRY_AFTER_S, Math.max(1, backInS));
  const when = backInS > 0 ? `a worker of the model is restarting, expected back in about ${backInS} s; retry then` : "retry after a moment";
  return new ServingError("queue_full", `${who} has a full queue (scheduler.maxQueuePerWorker)${waited}; ${when}.`, null, retryAfter);
}

/**
 * Places the request, or undefined when every worker it may go to has a full queue (a place
 * may free soon); any other reason it cannot be placed is thrown.
 */
export function placeUnlessFull(
  scheduler: GlobalScheduler,
  fleet: Fleet,
  request: PlacementRequest,
  pinnedWorkerId: string | undefined,
): PlacementTicket | undefined {
  if (pinnedWorkerId !== undefined) {
    const worker = fleet.get(pinnedWorkerId);
    if (!worker || worker.modelId !== request.modelId) {
      throw new ServingError(
        "worker_not_found",
        `x-radixgate-worker names "${pinnedWorkerId}", which is not a worker of model "${request.modelId}". Its workers: ${fleet.workerIds(request.modelId).join(", ")}.`,
        "x-radixgate-worker",
      );
    }
  }
  const ticket = scheduler.place(request, pinnedWorkerId);
  if (!ticket && scheduler.allQueuesFull(request.modelId, pinnedWorkerId)) return undefined;
  if (!ticket) {
    const reason =
      pinnedWorkerId !== undefined
        ? `Worker ${pinnedWorkerId} is down; retry without x-radixgate-worker.`
        : `No live worker serves model "${request.modelId}" right now; retry shortly.`;
    throw new ServingError("no_live_worker", reason, null, 1);
  }
  return ticket;
}
