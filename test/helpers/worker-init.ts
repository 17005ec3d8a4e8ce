// A WorkerInit for engine tests: one thread, a small context, spilling on.
import type { WorkerInit } from "../../src/engine/wire/protocol.js";
import { LOCAL_SCHEDULER_DEFAULTS } from "../../src/scheduler/local-scheduler-settings.js";

export function workerInit(modelPath: string, overrides: Partial<WorkerInit> = {}): WorkerInit {
  return {
    workerId: "w0",
    hostPid: process.pid,
    modelPath,
    slots: 2,
    contextSize: 1024,
    batchSize: 256,
    threads: 1,
    gpu: false,
    local: { ...LOCAL_SCHEDULER_DEFAULTS },
    spill: { budgetBytes: 64 * 1024 * 1024, minTokens: 16, recentMs: 600_000, dir: "" },
    ...overrides,
  };
}
