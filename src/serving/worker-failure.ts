// A worker's failure on a request, as the error its client gets. The engine hands over
// typed errors (engine/host/worker-errors.ts), so the mapping is by class, never by text.
import {
  EngineRefusalError,
  FirstByteTimeoutError,
  ModelOutputError,
  ResponseFormatError,
  UnsupportedOnEngineError,
  WorkerDiedError,
} from "../engine/host/worker-errors.js";
import type { CompletionJob } from "./completion-job.js";
import { ERROR_CATALOGUE, type ErrorCode, ServingError } from "./errors.js";

export function clientErrorOf(error: unknown, workerId: string, job: Pick<CompletionJob, "requestId" | "sampling">): ServingError {
  if (error instanceof WorkerDiedError) {
    return new ServingError(
      "worker_failed",
      `Worker ${workerId} stopped while generating this request (request ${job.requestId}: ${error.message}); it is being restarted. Retry the request.`,
    );
  }
  if (error instanceof FirstByteTimeoutError) {
    return new ServingError(
      "engine_timeout",
      `Worker ${workerId} sent no byte of its answer in time (request ${job.requestId}: ${error.message}); no other worker could take the request. Retry it, or raise the remote engine's firstByteTimeoutS.`,
    );
  }
  if (error instanceof ResponseFormatError) {
    // The client's schema is at fault, though only the worker's grammar builder could tell.
    const param = job.sampling.responseFormat?.type === "json_schema" ? "response_format.json_schema.schema" : "response_format";
    return new ServingError("invalid_request", `\`${param}\` cannot be turned into a grammar: ${error.message}`, param);
  }
  if (error instanceof UnsupportedOnEngineError) return new ServingError("unsupported_parameter", error.message, error.param);
  if (error instanceof ModelOutputError) {
    return new ServingError(
      "model_output_rejected",
      `Worker ${workerId}'s engine refused the text the model generated for this request (request ${job.requestId}: ${error.message}): it was not valid UTF-8 text. The worker is fine: a sampled request may succeed on a retry (with another seed), a greedy one (temperature 0) makes the same bytes again.`,
    );
  }
  if (error instanceof EngineRefusalError && error.code in ERROR_CATALOGUE && ERROR_CATALOGUE[error.code as ErrorCode].status === error.status) {
    return new ServingError(error.code as ErrorCode, error.message, error.param);
  }
  return new ServingError("worker_failed", `Worker ${workerId} failed while generating (request ${job.requestId}): ${(error as Error).message}`);
}
