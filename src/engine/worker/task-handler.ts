// A worker's task handler: the one entry both thread-main.ts and process-main.ts hand their
// tasks to. The engine is loaded by the first task that needs it and held here, one per
// thread or process, until a dispose task.
import type { ExportResult, GenerationResult, ImportResult, LoadResult, ProfileResult, WorkerInit, WorkerStats, WorkerTask, ClearedSlots } from "../wire/protocol.js";
import { SlotEngine } from "./slot-engine.js";

export type TaskResult = LoadResult | GenerationResult | ProfileResult | ExportResult | ImportResult | WorkerStats | ClearedSlots | null;

/** The task handler of a worker with these settings. */
export function createTaskHandler(init: WorkerInit): (task: WorkerTask) => Promise<TaskResult> {
  let engine: Promise<SlotEngine> | undefined;
  const loaded = () => (engine ??= SlotEngine.load(init));
  return async (task) => {
    switch (task.kind) {
      case "load":
        return (await loaded()).loaded;
      case "generate":
        return (await loaded()).generate(task);
      case "profile":
        return (await loaded()).profile(task);
      case "export-prefix":
        return (await loaded()).exportPrefix(task);
      case "import-state":
        return (await loaded()).importState(task);
      case "clear-idle-slots":
        return { slots: await (await loaded()).clearIdleSlots() };
      case "stats":
        return (await loaded()).stats();
      case "configure":
        (await loaded()).configure(task.local);
        return null;
      case "dispose": {
        const disposing = engine;
        engine = undefined;
        if (disposing) await (await disposing).dispose();
        return null;
      }
      default:
        return task satisfies never;
    }
  };
}
