// `n` choices for one request. They run one after another on the worker that served the
// first, so the prompt is evaluated once: each later choice finds it in the KV cache of the
// slot the previous choice used (its `cached_tokens` says so, in x-radixgate-choice-cached-tokens).
// With a `seed`, choice i samples with seed + i, so seeded choices differ and stay reproducible.
import type { ChatHooks, ChatOutcome, CompletionJob, CompletionService } from "../serving/completion-service.js";
import { ServingError } from "../serving/errors.js";
import { usage, type Usage } from "./openai-format.js";

export const CHOICE_CACHED_TOKENS_HEADER = "x-radixgate-choice-cached-tokens";

/** `n` from the request, checked against generation.maxChoices. */
export function choiceCount(n: number | null | undefined, maxChoices: number): number {
  const count = n ?? 1;
  if (count > maxChoices) {
    throw new ServingError("invalid_request", `\`n\` is ${count}, but at most ${maxChoices} choices are served per request (generation.maxChoices).`, "n");
  }
  return count;
}

/** The job of choice `index`: on the first choice's worker, with its own seed. */
export function choiceJob(job: CompletionJob, index: number, firstWorkerId: string | undefined): CompletionJob {
  if (index === 0) return job;
  const seed = job.sampling.seed;
  return {
    ...job,
    pinnedWorkerId: job.pinnedWorkerId ?? firstWorkerId,
    sampling: { ...job.sampling, ...(seed !== undefined ? { seed: seed + index } : {}) },
  };
}

/** Runs every choice, one after another: `hooks(index)` gets each one's stream events, `finished` each one's end. */
export async function completeChoices(
  service: CompletionService,
  job: CompletionJob,
  n: number,
  hooks?: (index: number) => ChatHooks,
  finished?: (outcome: ChatOutcome, index: number) => void,
): Promise<ChatOutcome[]> {
  const outcomes: ChatOutcome[] = [];
  for (let index = 0; index < n; index++) {
    const outcome = await service.complete(choiceJob(job, index, outcomes[0]?.workerId), hooks?.(index));
    finished?.(outcome, index);
    outcomes.push(outcome);
  }
  return outcomes;
}

/** One prompt, counted once; the completions of every choice. */
export function choicesUsage(outcomes: readonly ChatOutcome[]): Usage {
  const first = outcomes[0]!;
  const completion = outcomes.reduce((sum, outcome) => sum + outcome.completionTokens, 0);
  return usage(first.promptTokens, first.cachedTokens, completion);
}

export function choiceCachedTokensHeader(outcomes: readonly ChatOutcome[]): Record<string, string> {
  return outcomes.length > 1 ? { [CHOICE_CACHED_TOKENS_HEADER]: outcomes.map((outcome) => outcome.cachedTokens).join(",") } : {};
}
