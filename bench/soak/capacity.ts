// The soak's capacity: the highest Poisson arrival rate the server keeps up with, found by
// short open-loop steps. A closed loop is measured first and bounds the search from above:
// at a fixed concurrency nothing ever queues and agent sessions run their turns back to back
// on a warm slot, so its rate overstates what the server sustains when arrivals are random
// (on the 2-core AMD machine thread isolation completed 54 good requests/s in the closed loop
// and fell behind at 38/s of Poisson arrivals). The soak then runs at a fraction of the
// sustained rate, which is what "capacity" means for a server that must not build a queue.
import { DEFAULT_WEIGHTS } from "./mix.js";
import type { RequestRecord } from "./client.js";
import { runLoad, type LoadGeneratorHealth, type LoadPlan } from "./load-process.js";
import { summarize, type LoadSummary } from "./summary.js";
import { findCapacity } from "../sim/capacity.js";

export interface ClosedLoopCapacity {
  seconds: number;
  concurrency: number;
  /** Requests of the whole mix per second, from the good ones completed in the loop's second half. */
  requestsPerS: number;
  answered: number;
  summary: LoadSummary;
  generator: LoadGeneratorHealth;
}

export interface RateStep {
  ratePerS: number;
  /** Every good request completed, none was sent again after a 429 or 503, and TTFT p99 stayed within the bound. */
  kept: boolean;
  sent: number;
  failed: number;
  retried: number;
  hangs: number;
  ttftP99Ms: number;
  /** Seconds from the step's start to its last answer (a queue shows as a long tail after the arrivals stop). */
  wallS: number;
}

export interface SustainedCapacity {
  /** The highest rate kept up with (0 when none was, down to 1/16 of the closed loop's). */
  requestsPerS: number;
  stepSeconds: number;
  ttftP99BoundMs: number;
  steps: RateStep[];
}

export interface CapacityOptions {
  plan: Pick<LoadPlan, "url" | "model" | "hangMs">;
  salt: string;
  seed: number;
  closedSeconds: number;
  concurrency: number;
  stepSeconds: number;
  /** The first rate tried, as a fraction of the closed loop's; the search doubles or halves from there, never above the closed loop's rate. */
  startFraction: number;
  /** Halvings of the bracket once found. */
  bisectionSteps: number;
  ttftP99BoundMs: number;
  onProgress: (line: string) => void;
}

const GOOD_KINDS = new Set(["agent-turn", "one-shot", "stream"]);
const GOOD_SHARE = DEFAULT_WEIGHTS["agent-turn"] + DEFAULT_WEIGHTS["one-shot"] + DEFAULT_WEIGHTS.stream;

/** Good requests completed per second in the closed loop's second half (agent sessions have
 *  reached their longer turns), scaled to the whole mix by their share: aborts and bad requests
 *  cost the server next to nothing. */
export function closedLoopRate(records: readonly RequestRecord[], seconds: number): { requestsPerS: number; answered: number } {
  const endMs = seconds * 1000;
  const answered = records.filter(
    (r) => r.outcome === "completed" && GOOD_KINDS.has(r.kind) && r.sentAtMs >= endMs / 2 && r.sentAtMs + r.totalMs <= endMs,
  ).length;
  return { requestsPerS: answered / (seconds / 2) / GOOD_SHARE, answered };
}

/** Whether a step at one rate kept up: nothing failed, hung or was turned back, and the p99
 *  TTFT of streams stayed within the bound (a growing queue shows in it within seconds). */
export function judgeStep(ratePerS: number, records: readonly RequestRecord[], wallS: number, ttftP99BoundMs: number): RateStep {
  const summary = summarize(records);
  const good = records.filter((r) => GOOD_KINDS.has(r.kind));
  const retried = good.filter((r) => (r.retries ?? 0) > 0).length;
  const failed = good.filter((r) => r.outcome === "failed").length;
  const kept = failed === 0 && summary.hangs === 0 && retried === 0 && summary.ttft.n > 0 && summary.ttft.p99Ms <= ttftP99BoundMs;
  return { ratePerS, kept, sent: summary.sent, failed, retried, hangs: summary.hangs, ttftP99Ms: summary.ttft.p99Ms, wallS };
}

export async function measureCapacity(options: CapacityOptions): Promise<{ closedLoop: ClosedLoopCapacity; sustained: SustainedCapacity }> {
  const { plan, onProgress: progress } = options;
  progress(`capacity: ${options.closedSeconds} s closed loop at concurrency ${options.concurrency}`);
  const closedRun = await runLoad({
    ...plan,
    phase: "capacity",
    seconds: options.closedSeconds,
    concurrency: options.concurrency,
    seed: options.seed,
    salt: `${options.salt}-c`,
  });
  const closedLoop: ClosedLoopCapacity = {
    seconds: options.closedSeconds,
    concurrency: options.concurrency,
    ...closedLoopRate(closedRun.records, options.closedSeconds),
    summary: summarize(closedRun.records),
    generator: closedRun.health,
  };
  progress(`capacity: closed loop ${closedLoop.requestsPerS.toFixed(1)} requests/s; searching the sustained rate below it`);

  // The simulator's search (doubling to a bracket, then bisection), over rates in requests/s;
  // a step that did not keep up counts as an infinite p99. Each step is fresh (its own salt:
  // nothing cached from the step before, sessions start at their first turn).
  const steps: RateStep[] = [];
  const found = await findCapacity(
    async (rate) => {
      const i = steps.length;
      const run = await runLoad({
        ...plan,
        phase: "soak",
        seconds: options.stepSeconds,
        ratePerS: rate,
        seed: options.seed + 100 + i,
        salt: `${options.salt}-r${i}`,
      });
      const step = judgeStep(rate, run.records, run.wallS, options.ttftP99BoundMs);
      steps.push(step);
      progress(
        `capacity: ${rate.toFixed(1)} requests/s ${step.kept ? "kept up" : "fell behind"} (TTFT p99 ${step.ttftP99Ms.toFixed(0)} ms, ${step.failed} failed, ${step.retried} turned back, last answer at ${step.wallS.toFixed(1)} s)`,
      );
      return { ttftP99Ms: step.kept ? step.ttftP99Ms : Number.POSITIVE_INFINITY, refused: 0 };
    },
    {
      sloTtftP99Ms: options.ttftP99BoundMs,
      start: closedLoop.requestsPerS * options.startFraction,
      steps: options.bisectionSteps,
      minLoad: closedLoop.requestsPerS / 16,
      maxLoad: closedLoop.requestsPerS,
    },
  );
  return {
    closedLoop,
    sustained: {
      requestsPerS: found.load,
      stepSeconds: options.stepSeconds,
      ttftP99BoundMs: options.ttftP99BoundMs,
      steps,
    },
  };
}
