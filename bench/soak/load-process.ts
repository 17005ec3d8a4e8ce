// The load generator runs in a child process of its own (load.ts), so the server's event
// loop, whose lag the soak measures, carries only the server. This is the parent's side:
// start a phase, learn when it started (the kill and reload timers count from there), and
// collect every request's record when it ends.
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { RequestRecord } from "./client.js";

export interface LoadPlan {
  /** The chat completions URL. */
  url: string;
  model: string;
  /** `capacity`: closed loop at `concurrency`; `soak`: Poisson arrivals at `ratePerS`. */
  phase: "capacity" | "soak";
  seconds: number;
  concurrency?: number;
  ratePerS?: number;
  seed: number;
  /** Salts every prompt and session id: nothing is cached from another phase or run. */
  salt: string;
  /** A request with no answer after this long is given up and counted as a hang. */
  hangMs: number;
}

/** What the load generator says about itself (its lag delays arrivals and inflates client-side times). */
export interface LoadGeneratorHealth {
  transcriptSource: string;
  eventLoopLagP99Ms: number;
  /** Open loop: how late arrivals were sent against their Poisson schedule. */
  arrivalLatenessP99Ms: number;
  arrivalLatenessMaxMs: number;
}

export type LoadMessage = { type: "started" } | { type: "done"; records: RequestRecord[]; health: LoadGeneratorHealth };

export interface LoadResult {
  records: RequestRecord[];
  health: LoadGeneratorHealth;
  /** Wall-clock seconds from the phase's start to its last answer. */
  wallS: number;
}

const LOAD_ENTRY = fileURLToPath(new URL("./load.ts", import.meta.url));

/** Runs one phase in a child process; `onStarted` fires when its first request may go out. */
export function runLoad(plan: LoadPlan, onStarted: () => void = () => undefined): Promise<LoadResult> {
  const child = spawn(process.execPath, ["--import", "tsx", LOAD_ENTRY, JSON.stringify(plan)], {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
    serialization: "advanced",
  });
  return new Promise((resolve, reject) => {
    let startedAt: number | undefined;
    let result: LoadResult | undefined;
    child.on("message", (message: LoadMessage) => {
      if (message.type === "started") {
        startedAt = performance.now();
        onStarted();
      } else {
        result = { records: message.records, health: message.health, wallS: (performance.now() - (startedAt ?? performance.now())) / 1000 };
      }
    });
    child.once("error", reject);
    child.once("exit", (code, signal) => {
      if (result) resolve(result);
      else reject(new Error(`the load generator exited with ${code ?? signal} before reporting its requests`));
    });
  });
}
