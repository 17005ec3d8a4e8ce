// A circuit breaker per worker: a worker that stays up but fails request after request (a
// remote engine answering 500s while its /health says 200, a local one whose model cannot
// evaluate) would otherwise keep being chosen, and a policy that prices load even prefers it:
// failing fast leaves it idle. After `failures` failures in a row it is held out of
// placement (open; its cache stays in the tree) for `openMs`; then requests may be placed on
// it again (half-open) and the first outcome decides: a success closes the circuit, a
// failure opens it again for twice as long, up to 60 s. Deaths are the fleet's
// (restart with back-off): a worker that comes back starts with a closed circuit.

export type CircuitState = "closed" | "open" | "half-open";

export interface BreakerSettings {
  /** Failures in a row that open the circuit; 0 = never. */
  failures: number;
  /** How long the first opening lasts; each reopening doubles it. */
  openMs: number;
}

export interface BreakerHooks {
  /** Take the worker out of placement (open), or let it be placed on again (half-open). */
  setPlaceable(workerId: string, placeable: boolean): void;
  opened?(workerId: string, forMs: number, reason: string): void;
}

/** The longest an opening lasts, however often it reopened. */
export const MAX_OPEN_MS = 60_000;

interface Circuit {
  state: CircuitState;
  failuresInRow: number;
  /** The next opening's length. */
  nextOpenMs: number;
  timer?: NodeJS.Timeout;
  lastReason?: string;
}

export class CircuitBreakers {
  private readonly circuits = new Map<string, Circuit>();

  constructor(
    private readonly settings: BreakerSettings,
    private readonly hooks: BreakerHooks,
  ) {}

  state(workerId: string): CircuitState {
    return this.circuits.get(workerId)?.state ?? "closed";
  }

  /** Why it opened last, while it is not closed. */
  reason(workerId: string): string | undefined {
    const circuit = this.circuits.get(workerId);
    return circuit && circuit.state !== "closed" ? circuit.lastReason : undefined;
  }

  succeeded(workerId: string): void {
    const circuit = this.circuits.get(workerId);
    if (!circuit) return;
    // Closed again: the next trouble starts from the first opening's length.
    this.circuits.delete(workerId);
    if (circuit.timer) clearTimeout(circuit.timer);
  }

  failed(workerId: string, reason: string): void {
    if (this.settings.failures <= 0) return;
    const circuit = this.circuits.get(workerId) ?? { state: "closed" as CircuitState, failuresInRow: 0, nextOpenMs: this.settings.openMs };
    this.circuits.set(workerId, circuit);
    circuit.failuresInRow++;
    circuit.lastReason = reason;
    if (circuit.state === "open") return;
    if (circuit.state === "half-open" || circuit.failuresInRow >= this.settings.failures) this.open(workerId, circuit);
  }

  /** The worker died and came back (or was replaced): whatever its circuit said is over. */
  reset(workerId: string): void {
    const circuit = this.circuits.get(workerId);
    if (!circuit) return;
    if (circuit.timer) clearTimeout(circuit.timer);
    this.circuits.delete(workerId);
  }

  close(): void {
    for (const circuit of this.circuits.values()) if (circuit.timer) clearTimeout(circuit.timer);
    this.circuits.clear();
  }

  private open(workerId: string, circuit: Circuit): void {
    const forMs = circuit.nextOpenMs;
    circuit.state = "open";
    circuit.nextOpenMs = Math.min(MAX_OPEN_MS, forMs * 2);
    this.hooks.setPlaceable(workerId, false);
    this.hooks.opened?.(workerId, forMs, circuit.lastReason ?? "");
    circuit.timer = setTimeout(() => {
      circuit.timer = undefined;
      circuit.state = "half-open";
      this.hooks.setPlaceable(workerId, true);
    }, forMs);
    circuit.timer.unref();
  }
}
