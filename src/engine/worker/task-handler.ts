// A worker's task handler: the one entry both thread-main.ts and process-main.ts hand their
// tasks to. The engine is loaded by the first task that needs it and held here, one per
// thread or process, until a dispose task.
//
// A fatal error (an exception nothing caught) ends the worker through one path, in a thread
// as in a process: every task it holds fails at once as `worker_died` (the host places the
// requests that had no token yet again), the generations are stopped, llama.cpp is freed, and
// only then does the thread or process exit. The order matters in a thread: one that exits
// while llama.cpp objects are alive aborts the whole host process (measured with
// node-llama-cpp 3.21.1: "terminate called after throwing an instance of 'Napi::Error'").
import type { ExportResult, ImportResult, LoadResult, ProfileResult, WorkerInit, WorkerStats, WorkerTask, ClearedSlots } from "../wire/protocol.js";
import type { TaskFailure, TaskOutcome } from "../wire/task-outcome.js";
import type { GenerationResult } from "../../contract/generation.js";
import { GrammarRefusedError } from "./grammars.js";
import { SlotEngine } from "./slot-engine.js";

export type TaskResult = LoadResult | GenerationResult | ProfileResult | ExportResult | ImportResult | WorkerStats | ClearedSlots | null;

export interface TaskHandler {
  /** Never rejects: how the task failed travels in its outcome (wire/task-outcome.ts). */
  run(task: WorkerTask): Promise<TaskOutcome<TaskResult>>;
  /** The fatal path: fail every task, stop and free the engine, then exit. */
  fail(error: unknown): Promise<void>;
}

/** How long a dying worker waits for its generations to stop and llama.cpp to be freed. */
const STOP_TIMEOUT_MS = 30_000;

/** The task handler of a worker with these settings. */
export function createTaskHandler(init: WorkerInit, exit: (code: number) => void = (code) => process.exit(code)): TaskHandler {
  let engine: Promise<SlotEngine> | undefined;
  let died: TaskOutcome<TaskResult> | undefined;
  let failAll!: (outcome: TaskOutcome<TaskResult>) => void;
  const death = new Promise<TaskOutcome<TaskResult>>((resolve) => (failAll = resolve));
  const loaded = () => (engine ??= SlotEngine.load(init));

  async function perform(task: WorkerTask): Promise<TaskResult> {
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
        init.local = task.local;
        if (engine) (await engine).configure(task.local);
        return null;
      case "crash":
        // Thrown outside any task's promise, so nothing catches it: the fatal path runs.
        setImmediate(() => {
          throw new Error("crash injected by the host (fault injection)");
        });
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
  }

  return {
    run(task) {
      if (died) return Promise.resolve(died);
      const work = perform(task).then(
        (value): TaskOutcome<TaskResult> => ({ ok: true, value }),
        (error: unknown): TaskOutcome<TaskResult> => ({ ok: false, failure: failureOf(error) }),
      );
      // Whatever the task does after the worker failed is nobody's: its answer was worker_died.
      return Promise.race([work, death]);
    },
    async fail(error) {
      if (died) return;
      const reason = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
      died = { ok: false, failure: { kind: "worker_died", message: reason } };
      failAll(died);
      console.error(`radixgate worker ${init.workerId}: fatal error (${reason}); stopping its generations and exiting`);
      const stopping = engine;
      engine = undefined;
      const stop = async () => {
        const running = await stopping?.catch(() => undefined);
        if (!running) return;
        await running.stopAll();
        await running.dispose();
      };
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<void>((resolve) => (timer = setTimeout(resolve, STOP_TIMEOUT_MS)));
      await Promise.race([stop().catch(() => undefined), timeout]);
      clearTimeout(timer);
      exit(1);
    },
  };
}

/** The one place a task's error becomes a failure of a kind the host tells apart. */
function failureOf(error: unknown): TaskFailure {
  const message = error instanceof Error ? error.message : String(error);
  return { kind: error instanceof GrammarRefusedError ? "response_format" : "task_failed", message };
}

/** Routes the thread's or process's uncaught errors into the handler's fatal path. */
export function failOnUncaught(handler: TaskHandler): void {
  process.on("uncaughtException", (error) => void handler.fail(error));
  process.on("unhandledRejection", (reason) => void handler.fail(reason));
}
