// A worker as a policy sees it for one request: one object per worker, refreshed by the
// global scheduler for every decision. What the worker's state store holds of the prompt is
// found only when something reads it. Comparing the prompt with every stored state is the
// costliest part of a view once the stores are large (a router in front of 64 engines with
// 8 GiB stores spent most of a roundrobin decision on it), and only preble reads it for every
// candidate; the others, and the booking, read the chosen worker's at most.
import type { TokenIds } from "../../common/tokens.js";
import type { TimeModel } from "../time-model.js";
import type { WorkerView } from "../types.js";
import type { StoredStates } from "./stored-states.js";

const NO_PROMPT: TokenIds = [];

export class CandidateView implements WorkerView {
  alive = true;
  inFlight = 0;
  matchedTokens = 0;
  reusableTokens = 0;
  kvTokens = 0;
  activeTokens = 0;
  pendingPrefillTokens = 0;
  windowedPrefillMs = 0;
  private prompt = NO_PROMPT;
  /** storedTokens for `prompt`, once read (-1: not yet). */
  private stored = -1;

  constructor(
    readonly id: string,
    readonly modelId: string,
    readonly slots: number,
    readonly kvCapacityTokens: number,
    /** The worker's own counts, read live. */
    readonly pendingPrefillByRank: Float64Array,
    readonly timeModel: TimeModel,
    private readonly store: StoredStates,
  ) {}

  /** The view is for this prompt now: what the store holds of it is found again when read. */
  forPrompt(prompt: TokenIds): void {
    this.prompt = prompt;
    this.stored = -1;
  }

  /** Found on first read, after reusableTokens is set for the same prompt. */
  get storedTokens(): number {
    if (this.stored < 0) this.stored = this.store.size > 0 ? this.store.longestPrefix(this.prompt, this.reusableTokens) : 0;
    return this.stored;
  }
}
