// A worker's failure on a request, as the error its client gets.
import { RESPONSE_FORMAT_ERROR } from "../contract/sampling.js";
import { WorkerDiedError } from "../engine/host/runners.js";
import type { CompletionJob } from "./completion-job.js";
import { ServingError } from "./errors.js";

export function clientErrorOf(error: unknown, workerId: string, job: Pick<CompletionJob, "requestId" | "sampling">): ServingError {
  if (error instanceof WorkerDiedError) {
    return new ServingError(
      "worker_failed",
      `Worker ${workerId} stopped while generating this request (request ${job.requestId}: ${error.message}); it is being restarted. Retry the request.`,
    );
  }
  const message = (error as Error).message ?? "";
  if (message.startsWith(RESPONSE_FORMAT_ERROR)) {
    // The worker could not build the grammar (node-llama-cpp's reason follows the marker).
    const param = job.sampling.responseFormat?.type === "json_schema" ? "response_format.json_schema.schema" : "response_format";
    return new ServingError("invalid_request", `\`${param}\` cannot be turned into a grammar: ${message.slice(RESPONSE_FORMAT_ERROR.length)}`, param);
  }
  return new ServingError("worker_failed", `Worker ${workerId} failed while generating (request ${job.requestId}): ${(error as Error).message}`);
}
