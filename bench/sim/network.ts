// More than one machine: what a multi-host simulation (simulator.ts, `SimOptions.network`) adds
// to the one-box one.
//
// The deployment: GPU engines, each a Radixgate host with one worker (as deploy/k8s's engine
// StatefulSet runs them, one GPU a pod), `gpusPerHost` of them on each machine, and `routers`
// Radixgate routers on machines of their own in front of all of them (`kind: radixgate` remotes).
// Every router is the real GlobalScheduler with the real policy over every engine; clients'
// requests reach the routers in turn (a load balancer in front of them, per request, so an agent's
// turns go through either router). The routers never talk to each other: each one's tree and
// load figures come from its own placements and the engines' events, as in the real system.
//
// What crosses the network, and its price (one-way latency plus bytes over the receiving
// machine's link, one transfer after another on each link: the `Links` below):
// - A request, router to engine: its token ids on the wire (REQUEST_BYTES_PER_TOKEN).
// - The engine's answers to the router that placed it: the slot it took (the router's ticket
//   reports it to its tree), the end of the request. TTFT and end-to-end latency are measured at
//   the router, so each includes the way there and back; the client's own hop is not modelled
//   (the same for every arm).
// - The engines' event streams to every router: each slot change (the tree follows it exactly)
//   and, every `loadEveryMs`, the engine's count of requests (the load other routers' requests
//   add: GlobalScheduler.reportLoad). Small messages: latency only.
// - A prefix copy a policy asks for (Preble's hot-prefix replication): the source saves the KV
//   state, the target loads it (the card's copyMs, save + load); between two machines the state
//   also crosses the link: latency + tokens x kvBytesPerToken / bandwidth. The routers' time
//   models price every copy as one between machines (a policy has one copy price per target
//   worker; most pairs of a large fleet are on different machines). The real routers do not copy
//   between remote engines yet (a remote engine's copies are priced as recomputes, so none is
//   asked for): `hostCopies: false` simulates exactly that; with copies on, the simulation
//   shows what copying across machines would give.
//
// Not modelled: loss, retransmission and congestion beyond one transfer at a time per link;
// engines' and routers' own processing time (the decision time of a router is measured on this
// machine and reported next to the rate it needs: run.ts).
import type { TimeModelCoefficients } from "../../src/scheduler/time-model.js";

export interface NetworkSpec {
  /** Engines (GPUs) per machine. */
  gpusPerHost: number;
  /** Routers in front of every engine. */
  routers: number;
  /** One-way latency between two machines, ms. */
  latencyMs: number;
  /** Bandwidth of each machine's link, gigabits per second. */
  bandwidthGbps: number;
  /** The model's KV bytes per token (what a copied prefix weighs). */
  kvBytesPerToken: number;
  /** How often each engine sends its count of requests to the routers, ms. */
  loadEveryMs: number;
  /** Whether routers copy prefixes between engines (false: as the real routers, they never ask). */
  hostCopies: boolean;
}

/** A request's token ids as JSON on the wire: up to 6 digits and a comma each. */
export const REQUEST_BYTES_PER_TOKEN = 7;

/**
 * Defaults: 8 GPUs a machine (an 8-GPU box), 2 routers, 0.5 ms one-way (a data-centre hop with
 * HTTP and TCP on both ends, not the wire alone), 25 Gb/s (a common front-end network of GPU
 * machines; the GPUs' own fabric is faster but is not what HTTP engines use), load reports every
 * 250 ms (the host's event stream's period).
 */
export const NETWORK_DEFAULTS: Omit<NetworkSpec, "kvBytesPerToken"> = {
  gpusPerHost: 8,
  routers: 2,
  latencyMs: 0.5,
  bandwidthGbps: 25,
  loadEveryMs: 250,
  hostCopies: true,
};

/** Bytes a link moves per ms. */
export function bytesPerMs(spec: Pick<NetworkSpec, "bandwidthGbps">): number {
  return (spec.bandwidthGbps * 1e9) / 8 / 1000;
}

/**
 * The time model the routers start from: the card's, with every copy priced as a copy between
 * machines (the card's save + load, one hop, the KV bytes over the link), or, without host
 * copies, as the real router prices a remote engine's copies: as recomputing the prefix at the
 * longest context (`maxContext`), never cheaper than recomputing it.
 */
export function routerTimeModel(card: TimeModelCoefficients, spec: NetworkSpec, maxContext: number): TimeModelCoefficients {
  if (!spec.hostCopies) {
    return { ...card, copyBase: card.base + card.perContext * maxContext, copyPerToken: card.perExtend + card.perExtendContext * maxContext };
  }
  return { ...card, copyBase: card.copyBase + spec.latencyMs, copyPerToken: card.copyPerToken + spec.kvBytesPerToken / bytesPerMs(spec) };
}

/** Each machine's link: what arrives on it crosses one transfer after another. */
export class Links {
  private readonly freeAt: number[];
  private readonly perMs: number;
  /** Bytes moved and ms spent waiting for a busy link, for the report. */
  bytes = 0;
  queuedMs = 0;

  constructor(
    machines: number,
    private readonly spec: Pick<NetworkSpec, "latencyMs" | "bandwidthGbps">,
  ) {
    this.freeAt = new Array<number>(machines).fill(0);
    this.perMs = bytesPerMs(spec);
  }

  /** When `bytes` sent at `now` to `machine` have all arrived. */
  arrival(machine: number, now: number, bytes: number): number {
    const start = Math.max(now + this.spec.latencyMs, this.freeAt[machine]!);
    const end = start + bytes / this.perMs;
    this.queuedMs += start - (now + this.spec.latencyMs);
    this.freeAt[machine] = end;
    this.bytes += bytes;
    return end;
  }
}
