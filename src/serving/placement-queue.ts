// Late binding: a request that finds every worker of its model full waits here, at the host,
// for a place, instead of being refused at once. It is placed when a place frees (a request
// ends, a worker comes back), first come first placed, so a burst or a worker's restart is
// absorbed by waiting rather than answered with 429s; only a wait longer than
// scheduler.maxQueueWaitMs ends in a 429. A request that waits is not bound to a worker yet,
// so it goes wherever a place frees first, the restarted worker included.
import { ServingError } from "./errors.js";

interface Waiter {
  /** Tries to place it; true when placed (or failed for good), false to keep waiting. */
  attempt(): boolean;
}

export class PlacementQueue {
  private readonly waiting = new Map<string, Waiter[]>();

  /** Requests waiting for a place, per model. */
  waitingFor(modelId: string): number {
    return this.waiting.get(modelId)?.length ?? 0;
  }

  /**
   * Places the request with `tryPlace` (undefined: every worker is full), now if nobody of
   * its model waits ahead of it, else in its turn. `refuse` is the 429 it gets when waiting
   * is off or lasts longer than `maxWaitMs`; an abort (client gone, deadline) ends the wait.
   */
  place<T>(modelId: string, tryPlace: () => T | undefined, options: { maxWaitMs: number; signal?: AbortSignal; refuse: () => Error }): Promise<T> {
    const queue = this.queueOf(modelId);
    if (queue.length === 0) {
      const placed = tryPlace();
      if (placed !== undefined) return Promise.resolve(placed);
    }
    if (options.maxWaitMs <= 0) return Promise.reject(options.refuse());
    if (options.signal?.aborted) return Promise.reject(cancelled());
    return new Promise<T>((resolve, reject) => {
      const leave = () => {
        clearTimeout(timer);
        options.signal?.removeEventListener("abort", onAbort);
        const at = queue.indexOf(waiter);
        if (at >= 0) queue.splice(at, 1);
        if (queue.length === 0) this.waiting.delete(modelId);
      };
      const waiter: Waiter = {
        attempt: () => {
          let placed: T | undefined;
          try {
            placed = tryPlace();
          } catch (error) {
            // Placing failed for another reason (every worker died): that is its answer.
            leave();
            reject(error);
            return true;
          }
          if (placed === undefined) return false;
          leave();
          resolve(placed);
          return true;
        },
      };
      const timer = setTimeout(() => {
        leave();
        reject(options.refuse());
        // Its place in line is free: the next one may fit where it did not look.
        this.wake(modelId);
      }, options.maxWaitMs);
      const onAbort = () => {
        leave();
        reject(cancelled());
      };
      options.signal?.addEventListener("abort", onAbort, { once: true });
      queue.push(waiter);
      this.waiting.set(modelId, queue);
    });
  }

  /** A place may have freed for the model: the waiters are placed in order while they fit. */
  wake(modelId: string): void {
    const queue = this.waiting.get(modelId);
    while (queue && queue.length > 0) {
      if (!queue[0]!.attempt()) return;
    }
  }

  private queueOf(modelId: string): Waiter[] {
    return this.waiting.get(modelId) ?? [];
  }
}

function cancelled(): ServingError {
  return new ServingError("cancelled", "The request was cancelled while it waited for a place.");
}
