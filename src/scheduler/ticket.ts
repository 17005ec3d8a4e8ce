// A placed request's life as the scheduler sees it: placed -> started in a slot -> first
// token -> finished, or lost with its worker. Serving, the simulator, the benchmarks and the
// tests all drive a request through this one object instead of re-writing the sequence of
// scheduler calls.
import { joinedTokens, type TokenIds } from "../common/tokens.js";
import type { InFlightHandle } from "./radix/types.js";
import type { Placement, PlacementRequest, RequestOutcome } from "./types.js";

/** How a request ended, as the worker and the host measured it. */
export interface FinishedRequest extends RequestOutcome {
  /** The worker's prefill time (slot taken -> first token): the time model learns from it. */
  prefillMs?: number;
  decodeMsPerToken?: number;
  /**
   * Prompt tokens its slot still holds at the end; all of them when absent. A request that
   * ended in its prefill (cancelled, failed) holds fewer than it was reported to hold.
   */
  heldPromptTokens?: number;
  /** Generated tokens the slot holds after the whole prompt (its answer but the last token). */
  heldAnswerTokens?: TokenIds;
}

/** What a ticket needs from the scheduler that issued it. */
export interface TicketBook {
  /** The worker's slot now holds exactly `tokens` (the tree follows). */
  slotHolds(workerId: string, slot: number, tokens: TokenIds): void;
  /** The request runs in the worker's slot (`running`), or has left it. */
  slotRunning(workerId: string, slot: number, running: boolean): void;
  /** Releases the request's load and lets the policy and the time model learn from it. */
  release(ticket: PlacementTicket, outcome: FinishedRequest): void;
  /** The worker is down: never chosen, its cache forgotten, until it is back. */
  workerDown(workerId: string): void;
  /** The request's first token came: its prefill no longer loads the worker. */
  prefillDone(ticket: PlacementTicket): void;
}

export class PlacementTicket {
  private slot: number | undefined;
  private prefilled = false;
  private done = false;
  private lost = false;

  constructor(
    private readonly book: TicketBook,
    readonly request: PlacementRequest,
    readonly placement: Placement,
    readonly workerId: string,
    readonly placedAt: number,
    /** The tree's handle on the request while it is in flight. */
    readonly inFlight: InFlightHandle,
    /** Prompt tokens the worker did not hold when the request was placed: its prefill work. */
    readonly uncachedTokens: number,
  ) {}

  /** Whether the request's first token came (its prefill is over). */
  get hasFirstToken(): boolean {
    return this.prefilled;
  }

  /** The worker put the request in `slot`: the slot holds its prompt from now on. */
  started(slot: number): void {
    if (this.done || this.lost) return;
    this.slot = slot;
    this.book.slotRunning(this.workerId, slot, true);
    this.book.slotHolds(this.workerId, slot, this.request.tokens);
  }

  /** The request's first token came: its prefill is over. Once; later calls do nothing. */
  firstToken(): void {
    if (this.done || this.lost || this.prefilled) return;
    this.prefilled = true;
    this.book.prefillDone(this);
  }

  /**
   * The request ended, however it ended: its load is released, then the slot's report is set
   * to what the slot now holds (while the request was in flight the tree kept its whole prompt
   * as the worker's estimate): cut back when it lost part of the prompt, grown by the answer's
   * tokens when the worker says which they are (the next turn of the conversation sends the
   * answer back, and matches through it). Once; later calls do nothing.
   */
  finished(outcome: FinishedRequest): void {
    if (this.done) return;
    this.done = true;
    if (this.slot !== undefined) this.book.slotRunning(this.workerId, this.slot, false);
    this.book.release(this, outcome);
    if (this.slot === undefined || this.lost) return;
    const prompt = this.request.tokens;
    const held = outcome.heldPromptTokens ?? prompt.length;
    const answer = outcome.heldAnswerTokens;
    if (held < prompt.length) this.book.slotHolds(this.workerId, this.slot, prompt.slice(0, held));
    else if (answer !== undefined && answer.length > 0) this.book.slotHolds(this.workerId, this.slot, joinedTokens(prompt, answer));
  }

  /** Its worker died with the request on it: the worker is demoted at once (the fleet restarts it). Call finished() after. */
  workerDied(): void {
    this.lost = true;
    this.book.workerDown(this.workerId);
  }
}
