// What this host publishes about its workers to routers in front of it (GET
// /v1/radixgate/events): per model, a snapshot of every worker (alive, slots and the tokens
// each holds, requests in flight, its calibration samples), then every change as it happens.
// A router's tree for this host is then exact whoever placed the requests, and a router that
// starts later rebuilds it from the snapshot. The scheduler reports every slot change it
// books (cache events); the fleet says when a worker goes down or comes back.
//
// A slot's change is sent as a delta against what the slot held before (`keep` tokens of the
// old content, then `append`): an agent's next turn extends its previous prompt, so the delta
// is its new message, not the whole conversation again.
//
// What a worker's state store keeps and drops goes out as it is reported (`stored` events),
// and the snapshot carries each worker's stored states: a router then knows which host can
// load an agent's history back once no slot holds it.
import { commonPrefixLength, type TokenIds } from "../common/tokens.js";
import { StoredStates } from "../scheduler/placement/stored-states.js";
import type { CacheEvent } from "../scheduler/types.js";
import type { HostEvent, HostWorkerSnapshot } from "../engine/radixgate/host-events.js";

export type CalibrationSamples = NonNullable<HostWorkerSnapshot["calibration"]>;
export type FeedEvent = HostEvent;

interface WorkerMirror {
  id: string;
  modelId: string;
  alive: boolean;
  slots: TokenIds[];
  stored: StoredStates;
  calibration: CalibrationSamples | undefined;
}

export interface CacheFeedSource {
  /** Requests in flight per worker id (the scheduler's count). */
  inFlight(): Map<string, number>;
  /** Tokens per slot of the model's workers. */
  contextSize(modelId: string): number | undefined;
  /** The model file's identity (size and sampled hash): a router checks it loads the same file. */
  fingerprint(modelId: string): string | undefined;
}

type Listener = (event: FeedEvent) => void;

/** How often a change in the workers' loads is sent (at most). */
export const LOAD_EVERY_MS = 250;

export class CacheFeed {
  private readonly workers = new Map<string, WorkerMirror>();
  private readonly listeners = new Map<string, Set<Listener>>();
  private lastLoad = "";
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly source: CacheFeedSource) {
    this.timer = setInterval(() => this.sendLoad(), LOAD_EVERY_MS);
    this.timer.unref();
  }

  /**
   * A worker the scheduler places on: known from here on, with `slots` empty slots. Routers
   * already following the model get a new snapshot: the host's shape changed (a router
   * connects again on it, its slot layout being fixed per connection).
   */
  addWorker(id: string, modelId: string, slots: number, calibration: CalibrationSamples | undefined): void {
    this.workers.set(id, { id, modelId, alive: true, slots: Array.from({ length: slots }, () => []), stored: new StoredStates(), calibration });
    if (this.listeners.get(modelId)?.size) this.emit(modelId, this.snapshot(modelId));
  }

  /** A worker that left for good: forgotten, and routers following the model get a new snapshot. */
  removeWorker(id: string): void {
    const worker = this.workers.get(id);
    if (!worker) return;
    this.workers.delete(id);
    if (this.listeners.get(worker.modelId)?.size) this.emit(worker.modelId, this.snapshot(worker.modelId));
  }

  /** The scheduler booked a change to a worker's cache. */
  cacheEvent(event: CacheEvent): void {
    const worker = this.workers.get(event.workerId);
    if (!worker) return;
    if (event.type === "worker-reset") {
      for (let slot = 0; slot < worker.slots.length; slot++) this.setSlot(worker, slot, []);
      const dropped = worker.stored.clear();
      if (dropped.length > 0) this.storeChanged(worker, [], dropped);
      return;
    }
    if (event.type === "store-changed") {
      this.storeChanged(worker, event.changes.stored, event.changes.dropped);
      return;
    }
    if (event.slot < worker.slots.length) this.setSlot(worker, event.slot, event.tokens);
  }

  /** The fleet says the worker went down or came back. */
  setAlive(workerId: string, alive: boolean): void {
    const worker = this.workers.get(workerId);
    if (!worker || worker.alive === alive) return;
    worker.alive = alive;
    this.emit(worker.modelId, { type: "alive", worker: workerId, alive });
  }

  /** Sends the snapshot of the model now, then every change until the returned function is called. */
  subscribe(modelId: string, listener: Listener): () => void {
    listener(this.snapshot(modelId));
    let set = this.listeners.get(modelId);
    if (!set) this.listeners.set(modelId, (set = new Set()));
    set.add(listener);
    return () => set.delete(listener);
  }

  get subscribers(): number {
    let count = 0;
    for (const set of this.listeners.values()) count += set.size;
    return count;
  }

  close(): void {
    clearInterval(this.timer);
    this.listeners.clear();
  }

  snapshot(modelId: string): Extract<HostEvent, { type: "snapshot" }> {
    const inFlight = this.source.inFlight();
    return {
      type: "snapshot",
      model: modelId,
      contextSize: this.source.contextSize(modelId) ?? 0,
      fingerprint: this.source.fingerprint(modelId),
      workers: [...this.workers.values()]
        .filter((worker) => worker.modelId === modelId)
        .map((worker) => ({
          id: worker.id,
          alive: worker.alive,
          slots: worker.slots.map((tokens) => [...tokens]),
          stored: [...worker.stored.entries()].map(({ id, tokens }) => ({ id, tokens: [...tokens] })),
          inFlight: inFlight.get(worker.id) ?? 0,
          calibration: worker.calibration,
        })),
    };
  }

  /** Runs on every slot report of the scheduler (each request start): with nobody following the model, it only keeps the mirror. */
  private setSlot(worker: WorkerMirror, slot: number, tokens: TokenIds): void {
    const before = worker.slots[slot]!;
    worker.slots[slot] = tokens;
    if (before === tokens || !this.listeners.get(worker.modelId)?.size) return;
    const keep = commonPrefixLength(before, tokens);
    if (keep === before.length && keep === tokens.length) return;
    this.emit(worker.modelId, { type: "slot", worker: worker.id, slot, keep, append: [...tokens.slice(keep)] });
  }

  /** The worker's store kept and dropped these: the mirror follows, and routers following the model are told. */
  private storeChanged(worker: WorkerMirror, stored: readonly { id: string; tokens: TokenIds }[], dropped: readonly string[]): void {
    worker.stored.apply({ stored, dropped });
    if (!this.listeners.get(worker.modelId)?.size) return;
    this.emit(worker.modelId, {
      type: "stored",
      worker: worker.id,
      stored: stored.map(({ id, tokens }) => ({ id, tokens: [...tokens] })),
      dropped: [...dropped],
    });
  }

  private sendLoad(): void {
    if (this.subscribers === 0) return;
    const inFlight = this.source.inFlight();
    const key = JSON.stringify([...inFlight]);
    if (key === this.lastLoad) return;
    this.lastLoad = key;
    for (const modelId of this.listeners.keys()) {
      const ofModel: Record<string, number> = {};
      for (const worker of this.workers.values()) if (worker.modelId === modelId) ofModel[worker.id] = inFlight.get(worker.id) ?? 0;
      this.emit(modelId, { type: "load", inFlight: ofModel });
    }
  }

  private emit(modelId: string, event: FeedEvent): void {
    for (const listener of this.listeners.get(modelId) ?? []) listener(event);
  }
}
