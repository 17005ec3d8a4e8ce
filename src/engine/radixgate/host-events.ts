// The router's side of another Radixgate host's event stream (GET /v1/radixgate/events): the
// snapshot, then every slot change, worker death and load report, kept as a mirror of what
// each of the host's slots holds. The host's workers are laid end to end: its worker i's slot
// s is slot offset(i) + s of the one worker the router sees for the whole host, so the
// router's tree holds the host's cache exactly, whoever placed the requests there. What the
// host's workers keep in their state stores comes along, as one store for the whole host: the
// router's scheduler then sends an agent's next turn to the host that can load its history,
// and the host's own scheduler to the worker that holds it.
import { StoredStates, type StoreChanges } from "../../scheduler/placement/stored-states.js";
import type { CacheReports } from "../host/worker-engine.js";
import { send, sseEvents } from "../remote/http-client.js";

/** One worker of the host as the snapshot gives it. */
export interface HostWorkerSnapshot {
  id: string;
  alive: boolean;
  /** What each slot holds, token for token. */
  slots: number[][];
  inFlight: number;
  /** The host's calibration samples of this worker: a router fits its time model from them
   *  (`copy`, a state's save + load, prices loading a stored state there; absent from older hosts). */
  calibration:
    | {
        prefill: { extend: number; context: number; ms: number }[];
        decode: { context: number; msPerToken: number }[];
        copy?: { tokens: number; ms: number }[];
      }
    | undefined;
  /** What its state store holds, by state id (absent: a host that does not say). */
  stored?: { id: string; tokens: number[] }[];
}

/**
 * The event stream's messages (the host's side: serving/cache-feed.ts). A slot's change is
 * `keep` tokens of what it held, then `append`. `fingerprint` is the model file's identity.
 */
export type HostEvent =
  | { type: "snapshot"; model: string; contextSize: number; fingerprint: string | undefined; workers: HostWorkerSnapshot[] }
  | { type: "slot"; worker: string; slot: number; keep: number; append: number[] }
  | { type: "alive"; worker: string; alive: boolean }
  /** A worker's state store kept (`stored`) and dropped (by id) these states. */
  | { type: "stored"; worker: string; stored: { id: string; tokens: number[] }[]; dropped: string[] }
  | { type: "load"; inFlight: Record<string, number> };

export interface HostLayout {
  /** The flat slot index of each host worker's slot 0. */
  offsets: Map<string, number>;
  slotsOf: Map<string, number>;
  totalSlots: number;
}

export function layoutOf(snapshot: Extract<HostEvent, { type: "snapshot" }>): HostLayout {
  const offsets = new Map<string, number>();
  const slotsOf = new Map<string, number>();
  let total = 0;
  for (const worker of snapshot.workers) {
    offsets.set(worker.id, total);
    slotsOf.set(worker.id, worker.slots.length);
    total += worker.slots.length;
  }
  return { offsets, slotsOf, totalSlots: total };
}

/** What each flat slot of the host holds, kept from its events. */
export class HostMirror {
  readonly slots: number[][];
  inFlight = 0;
  /** Each host worker's stored states (ids are unique across the host: state file names). */
  private readonly stored = new Map<string, StoredStates>();
  private listener: CacheReports | undefined;

  constructor(
    readonly layout: HostLayout,
    snapshot: Extract<HostEvent, { type: "snapshot" }>,
  ) {
    this.slots = Array.from({ length: layout.totalSlots }, () => []);
    for (const worker of snapshot.workers) {
      const offset = layout.offsets.get(worker.id)!;
      for (const [slot, tokens] of worker.slots.entries()) this.slots[offset + slot] = worker.alive ? tokens : [];
      const stored = new StoredStates();
      if (worker.alive) stored.apply({ stored: worker.stored ?? [], dropped: [] });
      this.stored.set(worker.id, stored);
    }
    this.inFlight = snapshot.workers.reduce((sum, worker) => sum + worker.inFlight, 0);
  }

  /** From now on changes go to `listener`; it is first told what every slot holds now. */
  listen(listener: CacheReports): void {
    this.listener = listener;
    for (const [slot, tokens] of this.slots.entries()) listener.slotHolds(slot, tokens);
    const stored = [...this.stored.values()].flatMap((states) => [...states.entries()]);
    if (stored.length > 0) listener.storeChanged({ stored, dropped: [] });
    listener.load(this.inFlight);
  }

  /** The flat slot of a host worker's slot; undefined for a worker or slot the snapshot did not have. */
  flatSlot(worker: string, slot: number): number | undefined {
    const offset = this.layout.offsets.get(worker);
    if (offset === undefined || slot >= (this.layout.slotsOf.get(worker) ?? 0)) return undefined;
    return offset + slot;
  }

  /** Applies one event; false when it does not fit the snapshot's layout (the host changed shape). */
  apply(event: HostEvent): boolean {
    switch (event.type) {
      case "snapshot":
        return false;
      case "slot": {
        const flat = this.flatSlot(event.worker, event.slot);
        if (flat === undefined) return false;
        const tokens = [...this.slots[flat]!.slice(0, event.keep), ...event.append];
        this.slots[flat] = tokens;
        this.listener?.slotHolds(flat, tokens);
        return true;
      }
      case "alive": {
        const offset = this.layout.offsets.get(event.worker);
        if (offset === undefined) return false;
        // A worker that went down lost its cache (the host says so slot by slot too), its store included.
        if (!event.alive) {
          for (let slot = offset; slot < offset + this.layout.slotsOf.get(event.worker)!; slot++) {
            this.slots[slot] = [];
            this.listener?.slotHolds(slot, []);
          }
          const dropped = this.stored.get(event.worker)!.clear();
          if (dropped.length > 0) this.listener?.storeChanged({ stored: [], dropped });
        }
        return true;
      }
      case "stored": {
        const states = this.stored.get(event.worker);
        if (states === undefined) return false;
        const changes: StoreChanges = { stored: event.stored, dropped: event.dropped };
        states.apply(changes);
        this.listener?.storeChanged(changes);
        return true;
      }
      case "load":
        this.inFlight = Object.values(event.inFlight).reduce((sum, n) => sum + n, 0);
        this.listener?.load(this.inFlight);
        return true;
      default:
        return event satisfies never;
    }
  }
}

/**
 * Opens the event stream of `modelId` at `baseURL` and yields its events. The connection is
 * dropped after `silenceMs` without a byte (the host sends a comment every 2 s), so a host
 * that went silent ends the stream instead of leaving it open forever.
 */
export async function* hostEvents(
  baseURL: string,
  modelId: string,
  silenceMs: number,
  signal: AbortSignal,
  headers: Record<string, string>,
): AsyncGenerator<HostEvent> {
  const response = await send(`${baseURL}/v1/radixgate/events?model=${encodeURIComponent(modelId)}`, "GET", undefined, signal, silenceMs, headers);
  if (response.status !== 200) {
    const chunks: Buffer[] = [];
    for await (const chunk of response.body) chunks.push(chunk as Buffer);
    throw new Error(`the event stream of ${baseURL} answered ${response.status}: ${Buffer.concat(chunks).toString("utf8").slice(0, 300)}`);
  }
  for await (const data of sseEvents(response.body)) yield JSON.parse(data) as HostEvent;
  throw new Error(`the event stream of ${baseURL} ended`);
}
