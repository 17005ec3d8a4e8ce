// Capacity at a latency SLO: the highest arrival rate at which a fleet keeps its p99 TTFT
// within the workload's SLO, found by bracketing and bisection over the load (the rate in
// units of r0, bench/sim/workloads.ts). The simulator refuses only requests too long for any
// slot, at every load alike: they are reported, not counted against the SLO.

/** What one probe at a load measured. */
export interface Probe {
  load: number;
  ttftP99Ms: number;
  refused: number;
}

export interface CapacityResult {
  /** The highest load that met the SLO (0 when even the lowest probed did not). */
  load: number;
  probes: Probe[];
}

export interface CapacityOptions {
  sloTtftP99Ms: number;
  /** First load probed; the bracket grows or shrinks by doubling from there. */
  start: number;
  /** Bisection steps once a passing and a failing load bracket the capacity (at least 8). */
  steps: number;
  /** Loads are not probed outside [minLoad, maxLoad]. */
  minLoad: number;
  maxLoad: number;
}

export const CAPACITY_DEFAULTS: CapacityOptions = { sloTtftP99Ms: Number.NaN, start: 0.25, steps: 8, minLoad: 1 / 256, maxLoad: 64 };

/**
 * The capacity, assuming p99 TTFT grows with the load (queueing). Doubling finds a passing
 * load below a failing one; `steps` halvings of that bracket then leave it within
 * (failing - passing) / 2^steps of the threshold.
 */
export async function findCapacity(measure: (load: number) => Promise<Omit<Probe, "load">>, options: CapacityOptions): Promise<CapacityResult> {
  const probes: Probe[] = [];
  const within = (probe: Probe) => probe.ttftP99Ms <= options.sloTtftP99Ms;
  const meets = async (load: number) => {
    const probe = { load, ...(await measure(load)) };
    probes.push(probe);
    return within(probe);
  };
  const bracket = await bracketOf(meets, options);
  // No bracket in range: every load passed (the highest is the answer) or every one failed (0).
  if (!bracket) return { load: Math.max(0, ...probes.filter(within).map((probe) => probe.load)), probes };
  let { pass, fail } = bracket;
  for (let step = 0; step < options.steps; step++) {
    const middle = (pass + fail) / 2;
    if (await meets(middle)) pass = middle;
    else fail = middle;
  }
  return { load: pass, probes };
}

/** A passing load with a failing one at twice it, by doubling or halving from the start; undefined when the range has none. */
async function bracketOf(meets: (load: number) => Promise<boolean>, options: CapacityOptions): Promise<{ pass: number; fail: number } | undefined> {
  let load = options.start;
  const up = await meets(load);
  for (;;) {
    const next = up ? load * 2 : load / 2;
    if (next > options.maxLoad || next < options.minLoad) return undefined;
    const ok = await meets(next);
    if (ok !== up) return up ? { pass: load, fail: next } : { pass: next, fail: load };
    load = next;
  }
}

/** A workload's SLO on a card: 10x the mean cold prefill of its prompts there (r0 = workers x 1000 / that). */
export function sloTtftP99Ms(r0PerS: number, workers: number): number {
  return (10 * workers * 1000) / r0PerS;
}
