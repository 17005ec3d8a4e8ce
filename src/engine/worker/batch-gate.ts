// When the worker's next llama.cpp batch is dispatched (node-llama-cpp's custom
// `batching.dispatchSchedule`). A decode step costs about the same for one sequence as for
// several (the weights are read once per step), so a step should carry the next token of
// every sequence that is generating.
//
// node-llama-cpp's own schedule dispatches on the next event-loop turn after the first
// sequence queues. Each sequence samples its token after the step (an async native call per
// sequence) and only then queues the next one, so the first sequence back always went alone:
// measured on the `bench` model with 1 thread, two generating sequences alternated in
// one-token batches (298 of 300 steps) and four ran three to a step, while llama-server
// puts all of them in every step.
//
// The gate holds a dispatch until every generating sequence has queued. A sequence that was
// in the batch now being decoded is waited for until it queues again or ends (it comes back
// within a millisecond of that batch's end; dispatching without it puts the sequences out of
// step for good: measured, two sequences then ran one at a time for 274 of 287 steps). Any
// other missing sequence (one busy loading a state, say) is waited for at most `maxWaitMs`
// after the first one queued. The context lock is free while the gate waits (our patch to
// node-llama-cpp releases it after every batch), so a sequence that must erase tokens before
// it queues can do so.
//
// The gate never polls. Our patch to node-llama-cpp calls the schedule again each time
// another sequence queues while the dispatch is held, and `end` is called when a sequence
// stops: those are the only events that can make a held batch ready, and a timer covers the
// wait limits. A schedule call can come while a batch is still being decoded (a request that
// arrives during a prompt's batch queues its own prompt): the gate then waits for that batch's
// sequences to queue again, which is that whole batch. It used to look again on every
// event-loop turn (setImmediate), which kept the worker's thread busy for as long as the batch
// ran: on a prompt batch of several hundred milliseconds, a core taken from llama.cpp's own
// threads (or from the other worker on the machine). Measured on 2 workers x 1 thread on 2
// cores, 8 requests of ~1,100 tokens: each worker's thread spun about 250,000 times a second
// and held batches up to the 1 s limit.
//
// A batch that is ready still waits one event-loop turn before it goes out, so that the
// worker reads the messages that came in meanwhile. A request the host sends while a
// generation step is decoded on the worker's thread (inline-decode.ts: the thread is busy for
// that step's few milliseconds) waits in the thread's message queue; without that turn the
// next batch was formed the moment the step's sequences had queued again, before the request
// was read, so its prompt missed that batch and waited a whole step more. llama-server's loop
// takes the requests that arrived during a step into the very next batch. Measured with a
// scratch client (bench:peer's four-agent rows show the same, docs/engine.md) on the `bench` model, one worker with 4 slots and 2 threads (built here), four agents taking turns
// at once: warm-turn TTFT 151 ms mean without the turn, 104 ms with it, llama-server 122 ms on
// the same run (160 turns each). The new request's path to its queued prompt (slot, prepare,
// node-llama-cpp's evaluate) runs in promise callbacks within that turn when its slot holds
// its prefix, and the gate then waits for it as for any sequence not in the last batch.
// The gate decides every dispatch: node-llama-cpp 3.21.1 dispatched at once, without asking,
// when every sequence of the context had queued, and our patch makes it ask here too. So this
// turn is also where a worker whose slots are all generating reads a cancellation between
// two steps (with the steps decoded on its own thread, nothing else would let it).
//
// Sequence ids are the slot numbers: the worker creates all of its context's sequences at
// start, in order, and node-llama-cpp numbers them from 0 as they are created.

/** The most a batch waits for a late sequence that was not in the last batch. Sampling one sequence took ~0.3 ms here. */
export const DEFAULT_MAX_WAIT_MS = 2;

/** Never wait longer than this, whatever the sequences do: a stuck sequence must not stop the others. */
export const HARD_MAX_WAIT_MS = 1000;

export class BatchGate {
  private readonly generating = new Set<number>();
  /** The sequences queued when the last batch started (its decode tokens). */
  private readonly inLastBatch = new Set<number>();
  /** node-llama-cpp's live set of queued sequence ids (from the last schedule call; none from
   *  an unpatched node-llama-cpp). */
  private queued: ReadonlySet<number> | undefined;
  /** The dispatch held now, since when, and whether the event loop has turned since it was
   *  ready (`turned`) or is turning for it (`turning`). */
  private waiting: { dispatch: () => void; since: number; turning: boolean; turned: boolean } | undefined;
  /** The timer that ends the wait at its limit, while a batch is held. */
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** When that timer fires (the gate's clock). */
  private timerDueAt = 0;
  /** Times the gate looked again on its own, not called in: a held batch reaching a wait limit
   *  (a sequence late by more than maxWaitMs, or the hard limit). Rare; never one per turn. */
  wakeups = 0;

  constructor(
    private readonly maxWaitMs: number = DEFAULT_MAX_WAIT_MS,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** The sequence of `slot` is generating: batches wait for its next token. */
  begin(slot: number): void {
    this.generating.add(slot);
  }

  /** The sequence of `slot` stopped generating: batches no longer wait for it. */
  end(slot: number): void {
    this.generating.delete(slot);
    this.check();
  }

  /** The `dispatchSchedule` to hand node-llama-cpp (bound: pass it as is). */
  readonly schedule = (dispatch: () => void, queued?: ReadonlySet<number>): void => {
    this.queued = queued;
    // Told again for the same held dispatch (another sequence queued): the wait goes on from
    // when the dispatch was first held.
    if (this.waiting?.dispatch !== dispatch) this.waiting = { dispatch, since: this.now(), turning: false, turned: false };
    this.check();
  };

  /** Call when a batch starts (from the batch's prioritization strategy, before it takes the
   *  items); the sequences queued for it (none known from an unpatched node-llama-cpp). */
  batchStarted(): ReadonlySet<number> {
    // One set, refilled: this runs at every decode step.
    this.inLastBatch.clear();
    if (this.queued) for (const slot of this.queued) this.inLastBatch.add(slot);
    return this.inLastBatch;
  }

  /**
   * How long a held batch may wait, given what has queued: not at all once every generating
   * sequence has; while one that was in the last batch has not, until the hard limit (it comes
   * back within a millisecond of that batch's end); while only others are late, maxWaitMs.
   */
  private waitLimitMs(queued: ReadonlySet<number>): number {
    let limit = 0;
    for (const slot of this.generating) {
      if (queued.has(slot)) continue;
      if (this.inLastBatch.has(slot)) return HARD_MAX_WAIT_MS;
      limit = this.maxWaitMs;
    }
    return limit;
  }

  private check(): void {
    const waiting = this.waiting;
    if (!waiting) return;
    const waitedMs = this.now() - waiting.since;
    // Without the queue's view (an unpatched node-llama-cpp), behave as node-llama-cpp does.
    const limitMs = this.queued ? this.waitLimitMs(this.queued) : 0;
    if (waitedMs >= limitMs) {
      if (!waiting.turned) {
        this.turnFirst(waiting);
        return;
      }
      this.waiting = undefined;
      this.clearTimer();
      waiting.dispatch();
      return;
    }
    // Until a sequence queues or ends (each calls in again), or the wait reaches its limit. One
    // timer per held batch: set again only when the limit comes sooner than the one it is set
    // for (the sequence of the last batch came back, others are still late).
    const dueAt = waiting.since + limitMs;
    if (this.timer !== undefined && this.timerDueAt <= dueAt) return;
    this.clearTimer();
    this.timerDueAt = dueAt;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.wakeups++;
      this.check();
    }, dueAt - this.now());
  }

  /** Lets the event loop turn once (the worker reads its messages), then looks again: a new
   *  request's prompt queued meanwhile goes in this batch. */
  private turnFirst(waiting: NonNullable<BatchGate["waiting"]>): void {
    if (waiting.turning) return;
    waiting.turning = true;
    this.clearTimer();
    setImmediate(() => {
      waiting.turned = true;
      if (this.waiting === waiting) this.check();
    });
  }

  private clearTimer(): void {
    if (this.timer === undefined) return;
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}
