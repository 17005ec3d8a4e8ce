// The server under soak: a real Radixgate in this process (createRadixgate), configured from
// a config.yml in a temp folder so that a reload is the real thing: the file is rewritten and
// the reloader reads and applies it. The file is not watched (no second reload per edit).
// Workers are killed as they would die: a thread takes its fatal path, a process gets SIGKILL.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfigFile } from "../../src/config/load-config.js";
import type { Isolation } from "../../src/engine/host/worker-handle.js";
import { createRadixgate, type Radixgate } from "../../src/radixgate.js";
import type { ReloadResult } from "../../src/serving/hot-reload.js";

export const SOAK_MODEL = "radixgate-tiny";

/** The live key a reload alternates, and its two values. */
export const RELOAD_KEY = "scheduler.local.quotaPerGroup";
export const RELOAD_VALUES = [10, 7] as const;

export interface ServerShape {
  isolation: Isolation;
  workers: number;
  slots: number;
  contextSize: number;
  threads: number;
}

export interface WorkerHealth {
  id: string;
  alive: boolean;
  in_flight: number;
  restarts: number;
  isolation: string;
}

export interface Health {
  httpStatus: number;
  status: string;
  failovers: number;
  config_error: string | null;
  local?: { quotaPerGroup?: number };
  workers: WorkerHealth[];
}

export interface KillResult {
  worker: string;
  method: "crash()" | "SIGKILL";
  pid?: number;
  /** Why no kill happened (the worker was already down). */
  skipped?: string;
  /** What the kill call answered, when that is worth a look (an error; a crash() that did not reject). */
  note?: string;
}

function configYaml(shape: ServerShape, quotaPerGroup: number): string {
  return [
    "server:",
    "  host: 127.0.0.1",
    "  port: 0",
    "  logLevel: warn",
    "models:",
    `  - id: ${SOAK_MODEL}`,
    "    source: preset:tiny",
    `    workers: ${shape.workers}`,
    `    slots: ${shape.slots}`,
    `    contextSize: ${shape.contextSize}`,
    `    threads: ${shape.threads}`,
    `    isolation: ${shape.isolation}`,
    "scheduler:",
    "  local:",
    `    quotaPerGroup: ${quotaPerGroup}`,
    "",
  ].join("\n");
}

export class SoakServer {
  private constructor(
    readonly radixgate: Radixgate,
    /** e.g. http://127.0.0.1:41234 */
    readonly address: string,
    readonly configPath: string,
    private readonly dir: string,
    private readonly shape: ServerShape,
  ) {}

  static async start(shape: ServerShape): Promise<SoakServer> {
    const dir = mkdtempSync(join(tmpdir(), "radixgate-soak-"));
    const configPath = join(dir, "config.yml");
    writeFileSync(configPath, configYaml(shape, RELOAD_VALUES[0]));
    try {
      const radixgate = await createRadixgate(loadConfigFile(configPath));
      const address = await radixgate.listen();
      return new SoakServer(radixgate, address, configPath, dir, shape);
    } catch (error) {
      rmSync(dir, { recursive: true, force: true });
      throw error;
    }
  }

  get chatURL(): string {
    return `${this.address}/v1/chat/completions`;
  }

  get workerIds(): string[] {
    return this.radixgate.fleet.workers.map((worker) => worker.engine.id);
  }

  async health(): Promise<Health> {
    const response = await fetch(`${this.address}/health`);
    return { httpStatus: response.status, ...((await response.json()) as Omit<Health, "httpStatus">) };
  }

  /** Rewrites config.yml with the live key at `quotaPerGroup`, then reloads it. */
  async reload(quotaPerGroup: number): Promise<ReloadResult> {
    writeFileSync(this.configPath, configYaml(this.shape, quotaPerGroup));
    return this.radixgate.reloader.reload("soak");
  }

  /** Kills a worker: its fatal path in a thread, SIGKILL to its process. */
  async kill(workerId: string): Promise<KillResult> {
    const worker = this.radixgate.fleet.get(workerId);
    if (!worker) return { worker: workerId, method: "crash()", skipped: "no such worker" };
    const { engine } = worker;
    if (engine.isolation === "process") {
      const pid = engine.pid;
      if (!worker.alive || pid === undefined) return { worker: workerId, method: "SIGKILL", skipped: "worker down (restarting)" };
      try {
        process.kill(pid, "SIGKILL");
        return { worker: workerId, method: "SIGKILL", pid };
      } catch (error) {
        return { worker: workerId, method: "SIGKILL", pid, note: (error as Error).message };
      }
    }
    if (!worker.alive) return { worker: workerId, method: "crash()", skipped: "worker down (restarting)" };
    // The crash task is expected to fail (its worker dies with it). Bounded, in case it never answers at all.
    const answered = await Promise.race([
      engine.crash().then(
        () => "resolved",
        (error: unknown) => `rejected: ${(error as Error).message}`,
      ),
      new Promise<string>((resolve) => setTimeout(() => resolve("no answer within 10 s"), 10_000).unref()),
    ]);
    // Resolving or rejecting are both a dying worker's answer; only silence is worth a note.
    return { worker: workerId, method: "crash()", ...(answered.startsWith("no answer") ? { note: `crash() ${answered}` } : {}) };
  }

  /** Whether the fleet holds the worker alive now (the scheduler's own view). */
  isAlive(workerId: string): boolean {
    return this.radixgate.fleet.get(workerId)?.alive ?? false;
  }

  /** OS process ids of process workers, for their memory. */
  workerPids(): number[] {
    return this.radixgate.fleet.workers.map((worker) => worker.engine.pid).filter((pid): pid is number => pid !== undefined);
  }

  async close(): Promise<void> {
    try {
      await this.radixgate.close();
    } finally {
      rmSync(this.dir, { recursive: true, force: true });
    }
  }
}
