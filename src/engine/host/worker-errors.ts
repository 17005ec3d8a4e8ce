// A worker task's failure as the host sees it: a typed error per kind of TaskFailure. The
// one place a failure off the wire becomes an error, for both isolations.
import type { TaskFailure, TaskOutcome } from "../wire/task-outcome.js";

/** The worker died (fatal error, crash, kill) with the task on it; the fleet restarts it. */
export class WorkerDiedError extends Error {
  override name = "WorkerDiedError";
}

/** The worker could not turn the request's response format into a grammar; the message is node-llama-cpp's reason. */
export class ResponseFormatError extends Error {
  override name = "ResponseFormatError";
}

/** The request asks for something this worker's engine cannot do; `param` names the request field. */
export class UnsupportedOnEngineError extends Error {
  override name = "UnsupportedOnEngineError";
  constructor(
    message: string,
    readonly param: string,
  ) {
    super(message);
  }
}

/**
 * A remote engine refused the request with an error of its own before starting it (another
 * Radixgate host: its queue was full, the prompt did not fit): passed on to the client as the
 * host gave it, when it is one of the error codes this server knows.
 */
export class EngineRefusalError extends Error {
  override name = "EngineRefusalError";
  constructor(
    message: string,
    readonly status: number,
    readonly code: string,
    readonly param: string | null,
  ) {
    super(message);
  }
}

/**
 * An engine elsewhere sent no byte of its answer within its first-byte timeout (remote
 * `firstByteTimeoutMs`): the connection was closed, which drops the request there. Nothing
 * reached the client, so the request may run on another engine.
 */
export class FirstByteTimeoutError extends Error {
  override name = "FirstByteTimeoutError";
}

/** Any other failure of a task in the worker. */
export class WorkerTaskError extends Error {
  override name = "WorkerTaskError";
}

/** The task's value, or its failure thrown as the matching typed error. */
export function taskValue(outcome: TaskOutcome): unknown {
  if (outcome.ok) return outcome.value;
  throw errorOf(outcome.failure);
}

function errorOf(failure: TaskFailure): Error {
  switch (failure.kind) {
    case "worker_died":
      return new WorkerDiedError(failure.message);
    case "response_format":
      return new ResponseFormatError(failure.message);
    case "task_failed":
      return new WorkerTaskError(failure.message);
    default:
      return failure.kind satisfies never;
  }
}
