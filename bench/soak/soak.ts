// One soak run in one isolation: start the server, measure the arrival rate it sustains
// (capacity.ts), then hold it at a fraction of that rate with Poisson arrivals while a
// worker is killed and the config reloaded on a timer. Returns everything the report needs.
import { measureCapacity, type ClosedLoopCapacity, type SustainedCapacity } from "./capacity.js";
import type { Isolation } from "../../src/engine/host/worker-handle.js";
import type { RequestRecord } from "./client.js";
import { runLoad, type LoadGeneratorHealth } from "./load-process.js";
import { HealthPoller, LagMonitor, LogTap, sampleMemory, type HealthSample, type MemorySample } from "./monitor.js";
import { RELOAD_KEY, RELOAD_VALUES, SoakServer, SOAK_MODEL, type Health, type KillResult, type ServerShape } from "./server.js";
import { summarize, type LoadSummary } from "./summary.js";

export interface SoakOptions {
  isolation: Isolation;
  shape: Omit<ServerShape, "isolation">;
  soakSeconds: number;
  capacitySeconds: number;
  capacityConcurrency: number;
  /** The open-loop search for the sustained rate (capacity.ts). */
  search: { stepSeconds: number; startFraction: number; bisectionSteps: number; ttftP99BoundMs: number };
  /** The soak's arrival rate as a fraction of the sustained rate. */
  loadFraction: number;
  killEveryS: number;
  reloadEveryS: number;
  /** Memory is first sampled this long into the soak (the warm-up), then at its end. */
  warmUpS: number;
  hangMs: number;
  seed: number;
  onProgress: (line: string) => void;
}

export interface KillEvent extends KillResult {
  atS: number;
  /** How long until the fleet held it down, then alive again (ms after the kill). */
  downAfterMs?: number;
  backAfterMs?: number;
}

export interface ReloadEvent {
  atS: number;
  quotaPerGroup: number;
  ok: boolean;
  error?: string;
  restartNeeded: string[];
  durationMs: number;
  /** /health's local settings show the new value right after. */
  visibleInHealth: boolean;
}

export interface IsolationResult {
  isolation: Isolation;
  startedAt: string;
  startupS: number;
  capacity: { closedLoop: ClosedLoopCapacity; sustained: SustainedCapacity };
  ratePerS: number;
  soak: {
    plannedS: number;
    wallS: number;
    /** Requests sent per second over the arrival window, as the generator managed it. */
    sentPerS: number;
    summary: LoadSummary;
    generator: LoadGeneratorHealth;
    /** Every request that failed or hung, as recorded. */
    failures: RequestRecord[];
  };
  kills: KillEvent[];
  reloads: ReloadEvent[];
  health: {
    atSoakStart: Health;
    atEnd: Health;
    /** Worker restarts and failovers during the soak, from /health. */
    restarts: number;
    failovers: number;
    /** Polls that answered 503 (no live worker) or failed. */
    unhealthyPolls: number;
    pollErrors: string[];
    samples: HealthSample[];
  };
  memory: {
    warmUp?: MemorySample;
    end?: MemorySample /** Every 30 s over the soak: where growth happens (after restarts or steadily). */;
    curve: MemorySample[];
  };
  eventLoop: { p50Ms: number; p99Ms: number; maxMs: number; perMinute: { minute: number; p99Ms: number; maxMs: number }[] };
  log: { tapped: boolean; lines: { level: string; msg: string; count: number; examples: string[] }[] };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** How often memory is sampled for the curve in the report. */
const MEMORY_CURVE_EVERY_S = 30;

/** Polls `condition` every 50 ms for up to `limitMs`; the ms it took, or undefined. */
async function waitFor(condition: () => boolean, limitMs: number): Promise<number | undefined> {
  const start = performance.now();
  while (performance.now() - start < limitMs) {
    if (condition()) return performance.now() - start;
    await sleep(50);
  }
  return undefined;
}

export async function runIsolation(options: SoakOptions): Promise<IsolationResult> {
  const { isolation, onProgress: progress } = options;
  const salt = `${isolation}-${Date.now().toString(36)}`;
  const startedAt = new Date().toISOString();
  const bootStart = performance.now();
  const server = await SoakServer.start({ ...options.shape, isolation });
  const startupS = (performance.now() - bootStart) / 1000;
  progress(`${isolation}: server up in ${startupS.toFixed(1)} s at ${server.address}, workers ${server.workerIds.join(", ")}`);
  const logTap = new LogTap();
  const tapped = logTap.attach(server.radixgate.app.log);
  try {
    const capacity = await measureCapacity({
      plan: { url: server.chatURL, model: SOAK_MODEL, hangMs: options.hangMs },
      salt,
      seed: options.seed,
      closedSeconds: options.capacitySeconds,
      concurrency: options.capacityConcurrency,
      stepSeconds: options.search.stepSeconds,
      startFraction: options.search.startFraction,
      bisectionSteps: options.search.bisectionSteps,
      ttftP99BoundMs: options.search.ttftP99BoundMs,
      onProgress: (line) => progress(`${isolation}: ${line}`),
    });
    // When no step kept up, the soak still runs (at the fraction of the lowest rate tried) so the
    // report shows what overload does; the report flags it.
    const lowestTried = Math.min(...capacity.sustained.steps.map((step) => step.ratePerS));
    const ratePerS = (capacity.sustained.requestsPerS > 0 ? capacity.sustained.requestsPerS : lowestTried) * options.loadFraction;
    progress(
      `${isolation}: capacity ${capacity.sustained.requestsPerS.toFixed(1)} requests/s sustained (closed loop ${capacity.closedLoop.requestsPerS.toFixed(1)}); soak at ${ratePerS.toFixed(1)}/s for ${options.soakSeconds} s`,
    );

    // The soak.
    const atSoakStart = await server.health();
    const lag = new LagMonitor();
    let soakStart = performance.now();
    const poller = new HealthPoller(server, soakStart);
    const kills: KillEvent[] = [];
    const reloads: ReloadEvent[] = [];
    const memory: IsolationResult["memory"] = { curve: [] };
    const timers: NodeJS.Timeout[] = [];
    const chores: Promise<void>[] = [];
    const atS = () => (performance.now() - soakStart) / 1000;
    const every = (periodS: number, chore: (n: number) => Promise<void>) => {
      for (let n = 1; n * periodS < options.soakSeconds; n++) timers.push(setTimeout(() => chores.push(chore(n - 1)), n * periodS * 1000));
    };
    const at = (s: number, chore: () => Promise<void>) => timers.push(setTimeout(() => chores.push(chore()), s * 1000));

    const kill = async (n: number) => {
      const workerId = server.workerIds[n % server.workerIds.length]!;
      const event: KillEvent = { atS: atS(), ...(await server.kill(workerId)) };
      kills.push(event);
      progress(
        `${isolation}: t=${event.atS.toFixed(0)} s kill ${workerId} by ${event.method}${event.skipped ? ` skipped: ${event.skipped}` : ""}${event.note ? ` (${event.note})` : ""}`,
      );
      if (event.skipped) return;
      const killedAt = performance.now();
      if ((await waitFor(() => !server.isAlive(workerId), 5_000)) !== undefined) event.downAfterMs = performance.now() - killedAt;
      if ((await waitFor(() => server.isAlive(workerId), 60_000)) !== undefined) event.backAfterMs = performance.now() - killedAt;
      progress(
        `${isolation}: ${workerId} ${event.backAfterMs !== undefined ? `back after ${(event.backAfterMs / 1000).toFixed(1)} s` : "not back within 60 s"}`,
      );
    };
    const reload = async (n: number) => {
      const quotaPerGroup = RELOAD_VALUES[(n + 1) % RELOAD_VALUES.length]!;
      const began = performance.now();
      const event: ReloadEvent = { atS: atS(), quotaPerGroup, ok: false, restartNeeded: [], durationMs: 0, visibleInHealth: false };
      const result = await server.reload(quotaPerGroup);
      event.durationMs = performance.now() - began;
      event.ok = result.ok;
      event.restartNeeded = result.restartNeeded;
      if (result.error !== undefined) event.error = result.error;
      const health = await poller.poll();
      event.visibleInHealth = health?.local?.quotaPerGroup === quotaPerGroup;
      reloads.push(event);
      if (!event.ok || !event.visibleInHealth)
        progress(
          `${isolation}: t=${event.atS.toFixed(0)} s reload to ${RELOAD_KEY}=${quotaPerGroup}: ok=${event.ok}${event.error ? ` ${event.error}` : ""}, in /health: ${event.visibleInHealth}`,
        );
    };
    const memoryNow = () => sampleMemory(atS(), isolation === "process" ? server.workerPids() : []);
    const memoryAt = (key: "warmUp" | "end") => async () => {
      memory[key] = memoryNow();
    };

    const soakRun = await runLoad(
      {
        url: server.chatURL,
        model: SOAK_MODEL,
        phase: "soak",
        seconds: options.soakSeconds,
        ratePerS,
        seed: options.seed + 1,
        salt: `${salt}-s`,
        hangMs: options.hangMs,
      },
      () => {
        soakStart = performance.now();
        lag.start();
        poller.start();
        every(options.killEveryS, kill);
        every(options.reloadEveryS, reload);
        at(options.warmUpS, memoryAt("warmUp"));
        every(MEMORY_CURVE_EVERY_S, async () => void memory.curve.push(memoryNow()));
        // The end sample is taken while the load still runs, like the warm-up one.
        if (options.soakSeconds - 2 > options.warmUpS) at(options.soakSeconds - 2, memoryAt("end"));
        for (let minute = 1; minute * 60 <= options.soakSeconds; minute++) {
          at(minute * 60, async () => progress(`${isolation}: minute ${minute} of ${(options.soakSeconds / 60).toFixed(1)}`));
        }
      },
    );
    for (const timer of timers) clearTimeout(timer);
    await Promise.all(chores);
    const eventLoop = { ...lag.stop(), perMinute: lag.perMinute };
    poller.stop();
    // A worker killed near the end is given time to come back before the last look.
    await waitFor(() => server.workerIds.every((id) => server.isAlive(id)), 60_000);
    const atEnd = await server.health();
    const summary = summarize(soakRun.records);
    const sumRestarts = (health: Health) => health.workers.reduce((sum, worker) => sum + worker.restarts, 0);
    progress(
      `${isolation}: done, ${summary.sent} sent, ${summary.completed} completed, ${summary.failed} failed (${summary.failedWithoutFirstToken} without a first token), ${summary.hangs} hangs`,
    );
    return {
      isolation,
      startedAt,
      startupS,
      capacity,
      ratePerS,
      soak: {
        plannedS: options.soakSeconds,
        wallS: soakRun.wallS,
        sentPerS: summary.sent / options.soakSeconds,
        summary,
        generator: soakRun.health,
        failures: soakRun.records.filter((r) => r.outcome === "failed" || r.outcome === "hang" || r.outcome === "misanswered"),
      },
      kills,
      reloads,
      health: {
        atSoakStart,
        atEnd,
        restarts: sumRestarts(atEnd) - sumRestarts(atSoakStart),
        failovers: atEnd.failovers - atSoakStart.failovers,
        unhealthyPolls: poller.samples.filter((s) => s.httpStatus !== 200).length + poller.errors.length,
        pollErrors: poller.errors.slice(0, 10),
        samples: poller.samples,
      },
      memory,
      eventLoop,
      log: { tapped, lines: [...logTap.lines.values()].sort((a, b) => b.count - a.count) },
    };
  } finally {
    logTap.detach();
    await server.close();
  }
}
