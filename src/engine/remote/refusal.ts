// A remote server's refusal of a request before it started it, as the typed error the
// serving layer maps: one of our own error codes (another Radixgate host's, or any server
// that writes OpenAI's error shape) passes on as it is; anything else is the server's failure.
import { EngineRefusalError, WorkerTaskError } from "../host/worker-errors.js";

/** `who` names the server in messages, e.g. "the Radixgate host at http://10.0.0.8:8080". */
export function refusalOf(status: number, text: string, who: string): Error {
  try {
    const { error } = JSON.parse(text) as { error: { message: string; param: string | null; code: string | null } };
    if (typeof error.message === "string" && typeof error.code === "string") {
      return new EngineRefusalError(`${error.message} (${who})`, status, error.code, error.param ?? null);
    }
  } catch {
    // Not an error body: fall through.
  }
  return new WorkerTaskError(`${who} answered ${status}: ${text.slice(0, 300)}`);
}
