// What the soak watches on the server's side while the load runs: the event loop's lag
// (per minute and overall), memory at two points, /health over time, and the server's log.
import { readFileSync } from "node:fs";
import { monitorEventLoopDelay, type IntervalHistogram } from "node:perf_hooks";
import type { FastifyInstance } from "fastify";
import type { Health, SoakServer } from "./server.js";

const ms = (ns: number) => ns / 1e6;

/** Event-loop delay of this process (the server's: the load runs elsewhere), per minute and overall. */
export class LagMonitor {
  private readonly overall: IntervalHistogram;
  private readonly minute: IntervalHistogram;
  private timer: NodeJS.Timeout | undefined;
  readonly perMinute: { minute: number; p99Ms: number; maxMs: number }[] = [];

  constructor(resolutionMs = 10) {
    this.overall = monitorEventLoopDelay({ resolution: resolutionMs });
    this.minute = monitorEventLoopDelay({ resolution: resolutionMs });
  }

  start(): void {
    this.overall.enable();
    this.minute.enable();
    this.timer = setInterval(() => this.closeMinute(), 60_000);
  }

  /** Stops; a last partial minute is kept if it has samples. */
  stop(): { p50Ms: number; p99Ms: number; maxMs: number } {
    clearInterval(this.timer);
    if (this.minute.count > 0) this.closeMinute();
    this.overall.disable();
    this.minute.disable();
    return { p50Ms: ms(this.overall.percentile(50)), p99Ms: ms(this.overall.percentile(99)), maxMs: ms(this.overall.max) };
  }

  private closeMinute(): void {
    this.perMinute.push({ minute: this.perMinute.length + 1, p99Ms: ms(this.minute.percentile(99)), maxMs: ms(this.minute.max) });
    this.minute.reset();
  }
}

export interface MemorySample {
  /** Seconds after the soak started. */
  atS: number;
  rssMiB: number;
  heapUsedMiB: number;
  /** Whether global.gc ran just before (node --expose-gc). */
  afterGc: boolean;
  /** Process isolation: the worker processes' RSS, summed (a restarted worker starts afresh). */
  workerProcessesRssMiB?: number;
}

const MiB = 2 ** 20;

function processRssBytes(pid: number): number | undefined {
  try {
    const line = readFileSync(`/proc/${pid}/status`, "utf8")
      .split("\n")
      .find((l) => l.startsWith("VmRSS:"));
    return line ? Number(line.split(/\s+/)[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** This process's memory after a full collection when one can be asked for. */
export function sampleMemory(atS: number, workerPids: readonly number[]): MemorySample {
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  const usage = process.memoryUsage();
  const sample: MemorySample = { atS, rssMiB: usage.rss / MiB, heapUsedMiB: usage.heapUsed / MiB, afterGc: gc !== undefined };
  if (workerPids.length > 0) {
    const sizes = workerPids.map(processRssBytes).filter((bytes): bytes is number => bytes !== undefined);
    sample.workerProcessesRssMiB = sizes.reduce((sum, bytes) => sum + bytes, 0) / MiB;
  }
  return sample;
}

export interface HealthSample {
  atS: number;
  httpStatus: number;
  alive: number;
  restarts: number;
  failovers: number;
  quotaPerGroup?: number;
}

/** Polls /health, as an operator's probe would. */
export class HealthPoller {
  readonly samples: HealthSample[] = [];
  readonly errors: string[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly server: SoakServer,
    private readonly startedAt: number,
    private readonly everyMs = 2000,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.poll(), this.everyMs);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  async poll(): Promise<Health | undefined> {
    try {
      const health = await this.server.health();
      this.samples.push({
        atS: (performance.now() - this.startedAt) / 1000,
        httpStatus: health.httpStatus,
        alive: health.workers.filter((worker) => worker.alive).length,
        restarts: health.workers.reduce((sum, worker) => sum + worker.restarts, 0),
        failovers: health.failovers,
        quotaPerGroup: health.local?.quotaPerGroup,
      });
      return health;
    } catch (error) {
      this.errors.push((error as Error).message);
      return undefined;
    }
  }
}

export interface LogLine {
  level: number;
  msg: string;
}

/**
 * Counts the server's own log lines (pino JSON on its destination stream) by level and
 * message, keeping the first few of each; they still reach the terminal.
 */
export class LogTap {
  readonly lines = new Map<string, { level: string; msg: string; count: number; examples: string[] }>();
  private restore: (() => void) | undefined;

  /** Taps the logger's stream; false when it cannot be found (nothing is counted then). */
  attach(log: FastifyInstance["log"]): boolean {
    const stream = findPinoStream(log);
    if (!stream) return false;
    const write = stream.write;
    stream.write = (chunk: string | Uint8Array, ...rest: unknown[]) => {
      this.take(typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8"));
      return (write as (...args: unknown[]) => boolean).call(stream, chunk, ...rest);
    };
    this.restore = () => {
      stream.write = write;
    };
    return true;
  }

  detach(): void {
    this.restore?.();
  }

  private take(text: string): void {
    for (const line of text.split("\n")) {
      if (!line.startsWith("{")) continue;
      let entry: { level?: number; msg?: string };
      try {
        entry = JSON.parse(line) as typeof entry;
      } catch {
        continue;
      }
      const level = LEVELS[entry.level ?? 0] ?? String(entry.level);
      const msg = entry.msg ?? "";
      const key = `${level}\u0000${msg}`;
      const seen = this.lines.get(key) ?? { level, msg, count: 0, examples: [] };
      seen.count++;
      if (seen.examples.length < 3) seen.examples.push(line.length > 600 ? `${line.slice(0, 600)}…` : line);
      this.lines.set(key, seen);
    }
  }
}

const LEVELS: Record<number, string> = { 10: "trace", 20: "debug", 30: "info", 40: "warn", 50: "error", 60: "fatal" };

interface WritableLike {
  write: (...args: never[]) => unknown;
}

/** pino keeps its destination under a private symbol named "pino.stream". */
function findPinoStream(log: object): WritableLike | undefined {
  for (let object: object | null = log; object !== null; object = Object.getPrototypeOf(object) as object | null) {
    const symbol = Object.getOwnPropertySymbols(object).find((s) => s.description === "pino.stream");
    if (symbol) return (log as Record<symbol, WritableLike | undefined>)[symbol];
  }
  return undefined;
}
