// How a worker task ends, as it crosses the thread or process boundary. A thrown error
// arrives as a bare Error (structured clone keeps name, message and stack, never its class),
// so a task never throws across: it resolves with a value or with a failure of a known kind.
// Types only, like protocol.ts.

/**
 * - `worker_died`: the worker hit a fatal error and is going away; the host restarts it.
 * - `response_format`: the worker could not build a grammar for the response format.
 * - `task_failed`: anything else; the message says what.
 */
export type FailureKind = "worker_died" | "response_format" | "task_failed";

export interface TaskFailure {
  kind: FailureKind;
  message: string;
}

export type TaskOutcome<T = unknown> = { ok: true; value: T } | { ok: false; failure: TaskFailure };
