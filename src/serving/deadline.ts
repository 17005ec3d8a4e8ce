// generation.requestTimeoutMs, kept here on the host rather than left to the worker.
import type { ChatHooks, ChatOutcome, CompletionJob } from "./completion-job.js";
import { ServingError } from "./errors.js";

/**
 * Runs `run` under a deadline of `timeoutMs` (0 = none). When it passes, the worker is told
 * to drop the request (like a client disconnect) and the client gets its 504 at once, even
 * from a worker that is stuck and never answers. Whatever the worker still sends for the
 * request after that is dropped; its bookkeeping (the scheduler's in-flight count, the slot
 * report) settles when the worker does finish.
 */
export async function withDeadline(
  timeoutMs: number,
  job: CompletionJob,
  hooks: ChatHooks,
  run: (job: CompletionJob, hooks: ChatHooks) => Promise<ChatOutcome>,
): Promise<ChatOutcome> {
  if (timeoutMs <= 0) return run(job, hooks);
  const deadline = AbortSignal.timeout(timeoutMs);
  const signal = job.signal ? AbortSignal.any([job.signal, deadline]) : deadline;
  const exceeded = () =>
    new ServingError(
      "deadline_exceeded",
      `The request ran past its deadline of ${timeoutMs} ms (generation.requestTimeoutMs) and was cancelled; ask for fewer tokens or raise the deadline.`,
    );
  const live = (): boolean => !deadline.aborted;
  const work = run(
    { ...job, signal },
    {
      ...hooks,
      onStarted: (start) => live() && hooks.onStarted?.(start),
      onText: (text, logprobs) => live() && hooks.onText?.(text, logprobs),
    },
  );
  let onDeadline!: () => void;
  const passed = new Promise<"deadline">((resolve) => (onDeadline = () => resolve("deadline")));
  deadline.addEventListener("abort", onDeadline, { once: true });
  try {
    const outcome = await Promise.race([work, passed]);
    if (outcome === "deadline") {
      // The worker's own answer (cancelled, or an error) arrives later and is not the client's.
      work.catch(() => undefined);
      throw exceeded();
    }
    if (deadline.aborted && outcome.finishReason === "cancelled") throw exceeded();
    return outcome;
  } catch (error) {
    // A request the deadline stopped before any worker had it (waiting for a place) says so.
    if (deadline.aborted) throw exceeded();
    throw error;
  } finally {
    deadline.removeEventListener("abort", onDeadline);
  }
}
