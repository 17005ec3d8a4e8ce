// IPC messages between the host and a worker's child process (process isolation). Types only.
import type { GenerationControl, GenerationEvent } from "./protocol.js";
import type { TaskOutcome } from "./task-outcome.js";

export type HostToChild =
  | { type: "init"; init: unknown }
  /** A task; a generate task's events and controls travel as "port" messages under portId. */
  | { type: "task"; id: number; task: unknown; portId?: number }
  | { type: "port"; portId: number; message: GenerationControl };

export type ChildToHost = { type: "outcome"; id: number; outcome: TaskOutcome } | { type: "port"; portId: number; message: GenerationEvent };
