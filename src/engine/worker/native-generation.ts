// Several generation steps per call into native code, for the requests that need nothing of
// node-llama-cpp's per-token machinery.
//
// Through node-llama-cpp 3.21.1, every generated token of every sequence passes through a
// chain of JavaScript promises on the worker's thread (its batch formed, the sampler's
// configuration resolved and applied again, the token handed back through an async generator
// to LlamaCompletion, which detokenizes it and checks its stop triggers) before the next step
// can start. On quantized weights a one-sequence step decodes in about a millisecond on a CPU
// and that JavaScript took a fifth of a millisecond more (docs/engine.md, "Several steps per
// call"). A request without a grammar, token probabilities or penalties is generated here
// once its first token is out: the addon's loop (generate.cpp) decodes the pending token of
// every such sequence of the worker in one batch and samples each sequence's next token with
// its own llama.cpp sampler chain, step after step, for up to `maxMs`, and hands back the
// tokens of all of those steps together. Between calls the event loop turns (the worker reads
// its messages: a new request, a cancellation) and node-llama-cpp's own batches, a prompt's,
// take the context lock in turn.
//
// How long a call runs is a trade: each call costs a turn of the event loop and the JavaScript
// that hands its tokens over (about half a millisecond for four sequences on a CPU), while a
// request that arrives during a call waits for its end. A call runs CALL_MS, unless the worker
// is quiet: in a thread worker whose every generation is in the loop, none on its way in, a
// call runs up to QUIET_CALL_MS, because the addon ends the call after the step during which
// a message from the host began to wait: in a thread worker the host raises the worker's
// attention word after each message it posts (host/runners.ts); in a process worker the
// addon polls the IPC channel's file descriptor, readable while a message is unread.
//
// The loop runs under node-llama-cpp's context lock ([context, "context"], the lock its
// batches and token erases take), so it never decodes while another batch is decoded or its
// logits sampled. node-llama-cpp's record of each sequence (its token list and next position,
// private fields of 3.21.1's LlamaContextSequence) is advanced by what the loop decoded, so
// its later erases, comparisons and state saves see the KV as it is.
//
// RADIXGATE_NO_NATIVE_GENERATION=1 keeps every request on LlamaCompletion. To drop this when
// node-llama-cpp generates without per-token JavaScript: delete this file, its use in
// slot-engine.ts and generate.cpp from the addon.
import { isLockActive, withLock } from "lifecycle-utils";
import type { LlamaContext, LlamaContextSequence, LlamaModel, Token } from "node-llama-cpp";
import { once } from "../../common/once.js";
import type { BatchStats } from "../../scheduler/batch-priority.js";
import { type ContextAddon, contextAddon } from "./context-addon.js";
import { extraStopTokensOf } from "./token-speller.js";

/** Fields per sequence in the state array the addon reads and writes (generate.cpp). */
const STATE_FIELDS = 6;
const PENDING = 1;
const POSITION = 2;
const BUDGET = 3;
const ENDED = 4;
const PRODUCED = 5;
/** `ended`: an end-of-generation (or extra stop) token was sampled; the budget was spent. */
const ENDED_STOP_TOKEN = 1;

/** The longest one call into the loop runs before the worker's thread turns to its messages:
 *  a request that arrives meanwhile waits at most this (plus a step) for its prompt to start. */
export const CALL_MS = 4;
/** The longest a call runs while the worker is quiet (a message ends it after the step in
 *  progress). Four sequences of the Q8_0 bench model on the 2-core test machine took about 5
 *  ms a step: 4 ms calls ran one step each and lost a tenth of the step's time to the turn
 *  between calls (docs/engine.md, "Quiet calls"). */
export const QUIET_CALL_MS = 25;
/** The longest the loop waits for an arriving request's prompt to go into a batch (it takes a
 *  few event-loop turns; a request held up longer, by a state load say, is not waited for). */
export const JOIN_WAIT_MS = 20;
/** Steps per call at most (the out array's width). */
export const CALL_STEPS = 64;

/** How a native generation ended: its end-of-generation token, its budget, or the caller. */
export type NativeStop = "eogToken" | "maxTokens" | "abort";

export interface NativeRun {
  /** The sequence (llama.cpp's sequence id is `sequenceId`), holding the prompt, its first generated token not decoded. */
  sequence: LlamaContextSequence;
  sequenceId: number;
  firstToken: Token;
  /** Tokens it may still sample after the first (max tokens and the room left in its cells). */
  budget: number;
  temperature: number;
  topP: number;
  seed: number;
  /** Called with the tokens of each call (the end-of-generation token, when sampled, left out). */
  onTokens: (tokens: readonly Token[]) => void;
  /** Checked before each call and after each delivery (a stop sequence found in the text): true stops it ("abort"). */
  cancelled: () => boolean;
  /** What announce() returned for it, if it was announced: released after the run's first
   *  call, so that call runs one step and its second token goes out at once (a first token
   *  alone often spells nothing a client shows: a space, part of a character). */
  joined?: () => void;
}

interface ActiveRun {
  run: NativeRun;
  chain: unknown;
  /** The sampled token not decoded yet (its position is the sequence's next token index). */
  pending: number;
  budget: number;
  finish: (stop: NativeStop) => void;
  fail: (error: Error) => void;
}

/** node-llama-cpp's private record of a sequence's tokens (LlamaContextSequence of 3.21.1). */
interface SequenceRecord {
  _contextTokens: Token[];
  _nextTokenIndex: number;
}

/** How a worker's loop learns that a message from the host waits, so that a long call can end. */
export interface WorkerAttention {
  /** Thread workers: raised (1) by the host after each message it posts (WorkerInit.attention). */
  word?: Int32Array;
  /** Process workers: the IPC channel's file descriptor, readable while a message is unread. */
  channelFd?: number;
}

export interface NativeGenerationStats {
  /** Calls into the loop, the steps they ran, the tokens they sampled. */
  calls: number;
  steps: number;
  tokens: number;
  /** Calls run while the worker was quiet (up to QUIET_CALL_MS), and of those the ones a waiting message ended (before their time, their steps and any run's end). */
  quietCalls: number;
  interruptedCalls: number;
}

export class NativeGeneration {
  readonly stats: NativeGenerationStats = { calls: 0, steps: 0, tokens: 0, quietCalls: 0, interruptedCalls: 0 };
  private readonly active: ActiveRun[] = [];
  private pumping = false;
  /** Requests on their way into the loop (their prompt and first token in node-llama-cpp's batches). */
  private joining = 0;
  /** Of those, the slots whose prompt has not gone into a batch yet. */
  private readonly undispatched = new Set<number>();
  /** The worker's generations that are not in the loop: queued, preparing, or on LlamaCompletion (see hold()). */
  private held = 0;
  private wake: (() => void) | undefined;
  private readonly out: Int32Array;

  private constructor(
    private readonly context: LlamaContext,
    private readonly addon: ContextAddon & Required<Pick<ContextAddon, "generator" | "samplerChain" | "generate">>,
    private readonly generator: unknown,
    private readonly batches: BatchStats,
    /** Tokens that end a completion besides the vocabulary's end-of-generation tokens. */
    readonly extraStopTokens: ReadonlySet<number>,
    /** How the worker learns that a message waits (WorkerAttention); none: short calls only. */
    private readonly attention: WorkerAttention,
  ) {
    this.out = new Int32Array(context.totalSequences * CALL_STEPS);
    this.stopTokens = Int32Array.from(extraStopTokens);
  }

  private readonly stopTokens: Int32Array;

  /** The loop for this context, or why there is none (the requests then stay on LlamaCompletion). */
  static create(context: LlamaContext, model: LlamaModel, batches: BatchStats, attention: WorkerAttention = {}): NativeGeneration | { problem: string } {
    if (process.env.RADIXGATE_NO_NATIVE_GENERATION === "1") return { problem: "RADIXGATE_NO_NATIVE_GENERATION=1" };
    const found = contextAddon();
    if ("problem" in found) return { problem: found.problem };
    const { addon } = found;
    if (addon.generator === undefined || addon.samplerChain === undefined || addon.generate === undefined)
      return { problem: "the llama-context addon predates the generation loop: run npm run build:native" };
    try {
      // node-llama-cpp keeps its native context object here (a private field of 3.21.1's LlamaContext).
      const generator = addon.generator((context as unknown as { _ctx: unknown })._ctx, context.totalSequences);
      return new NativeGeneration(context, addon as NativeGeneration["addon"], generator, batches, extraStopTokensOf(model), attention);
    } catch (error) {
      return { problem: (error as Error).message };
    }
  }

  /**
   * Call when a request that will run in the loop, in `slot`, starts its prompt; give the
   * result to run() as `joined` (the loop releases it after the run's first call), and call it
   * yourself if the request never gets there (a second call does nothing). Until its prompt
   * goes into one of node-llama-cpp's batches the loop waits (at most JOIN_WAIT_MS): each call
   * would otherwise take a step's time from every turn of the event loop the request needs on
   * its way there (reading it, its slot, its prompt queued, the batch gate's turn). After that, while it is still on its way (its prompt
   * and first token in node-llama-cpp's batches), each call runs one step, so that the
   * prompt's batches wait a step at most, and its own first call in the loop is one step too.
   */
  announce(slot: number): () => void {
    this.joining++;
    this.undispatched.add(slot);
    return once(() => {
      this.joining--;
      this.dispatched([slot]);
    });
  }

  /**
   * Call when the worker takes a generation, before its first await; call the result when it
   * announces itself (it runs in the loop from then on) or ends. While any generation is held
   * the worker is not quiet: its calls stay short, so a request waiting for a slot takes one
   * soon after a run ends, and the requests on LlamaCompletion, whose every token needs a
   * node-llama-cpp batch between the loop's calls, keep their pace.
   */
  hold(): () => void {
    this.held++;
    return once(() => this.held--);
  }

  /** Call when node-llama-cpp starts a batch, with the sequences in it. */
  batchStarted(slots: Iterable<number>): void {
    this.dispatched(slots);
  }

  private dispatched(slots: Iterable<number>): void {
    for (const slot of slots) this.undispatched.delete(slot);
    if (this.undispatched.size === 0) this.wake?.();
  }

  /** Resolves once every announced request's prompt went into a batch, or after `ms` (then they count as gone in). */
  private untilDispatched(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.undispatched.clear();
        this.wake?.();
      }, ms);
      this.wake = () => {
        clearTimeout(timer);
        this.wake = undefined;
        resolve();
      };
    });
  }

  /** Generates until the run's end-of-generation token, its budget or its caller stops it. */
  run(run: NativeRun): Promise<NativeStop> {
    return new Promise<NativeStop>((resolve, reject) => {
      let chain: unknown;
      try {
        chain = this.addon.samplerChain(this.generator, run.temperature, run.topP, 40, run.seed >>> 0);
      } catch (error) {
        reject(error);
        return;
      }
      if (run.budget <= 0) {
        resolve("maxTokens");
        return;
      }
      this.active.push({
        run,
        chain,
        pending: run.firstToken,
        budget: run.budget,
        finish: resolve,
        fail: reject,
      });
      if (!this.pumping) void this.pump();
    });
  }

  private async pump(): Promise<void> {
    this.pumping = true;
    try {
      while (this.active.length > 0) {
        // The worker reads its messages (a new request, a cancellation) between calls. A
        // message posted before the word was lowered is read by the end of the second turn
        // (the first may end before the event loop polls again); one posted after it raises
        // the word again and ends the next call early.
        if (this.attention.word !== undefined) {
          Atomics.store(this.attention.word, 0, 0);
          await nextTurn();
        }
        await nextTurn();
        if (this.undispatched.size > 0) await this.untilDispatched(JOIN_WAIT_MS);
        // The call is synchronous: with the lock free nothing can take it before the call ends.
        if (isLockActive([this.context, "context"])) await withLock([this.context, "context"], () => this.call());
        else this.call();
      }
    } finally {
      this.pumping = false;
    }
  }

  /** One call into the loop for every active run, then each run's tokens handed over. */
  private call(): void {
    for (let i = this.active.length - 1; i >= 0; i--) {
      const active = this.active[i]!;
      if (!active.run.cancelled()) continue;
      this.active.splice(i, 1);
      active.finish("abort");
    }
    const runs = this.active.slice();
    if (runs.length === 0) return;
    const state = new Int32Array(runs.length * STATE_FIELDS);
    runs.forEach((active, i) => {
      const at = i * STATE_FIELDS;
      state[at] = active.run.sequenceId;
      state[at + PENDING] = active.pending;
      state[at + POSITION] = active.run.sequence.nextTokenIndex;
      state[at + BUDGET] = active.budget;
    });
    // Also the out array's stride: sequence i's tokens are at out[i * maxSteps ...].
    const maxSteps = this.joining > 0 ? 1 : CALL_STEPS;
    const quiet = (this.attention.word !== undefined || this.attention.channelFd !== undefined) && this.held === 0 && this.joining === 0;
    let decodeFailure: Error | undefined;
    let steps = 0;
    const started = performance.now();
    try {
      steps = this.addon.generate(
        this.generator,
        runs.map((active) => active.chain),
        state,
        this.out,
        maxSteps,
        quiet ? QUIET_CALL_MS : CALL_MS,
        this.stopTokens,
        this.attention.word,
        this.attention.channelFd ?? -1,
      );
    } catch (error) {
      decodeFailure = error as Error;
    }
    this.stats.calls++;
    this.stats.steps += steps;
    if (quiet) {
      this.stats.quietCalls++;
      // Ended early by none of its other reasons: a message was waiting.
      const someEnded = runs.some((_, i) => state[i * STATE_FIELDS + ENDED] !== 0);
      if (decodeFailure === undefined && steps < maxSteps && !someEnded && performance.now() - started < QUIET_CALL_MS) this.stats.interruptedCalls++;
    }
    // The worker's batch counters cover every decode step, the loop's too.
    this.batches.steps += steps;
    // Runs through their first call have joined.
    for (const active of runs) active.run.joined?.();
    runs.forEach((active, i) => {
      const at = i * STATE_FIELDS;
      const produced = state[at + PRODUCED]!;
      const sampled = Array.from(this.out.subarray(i * maxSteps, i * maxSteps + produced)) as Token[];
      this.stats.tokens += produced;
      this.batches.decodeTokens += produced;
      // Each step decoded the run's pending token (into the KV) and sampled the next.
      if (produced > 0) {
        const decoded = [active.pending as Token, ...sampled.slice(0, -1)];
        const record = active.run.sequence as unknown as SequenceRecord;
        record._contextTokens.push(...decoded);
        record._nextTokenIndex += decoded.length;
      }
      active.pending = state[at + PENDING]!;
      active.budget = state[at + BUDGET]!;
      const ended = state[at + ENDED]!;
      const endedOnStopToken = ended === ENDED_STOP_TOKEN;
      const text = endedOnStopToken ? sampled.slice(0, -1) : sampled;
      let failure = decodeFailure;
      if (failure === undefined && text.length > 0) {
        try {
          active.run.onTokens(text);
        } catch (error) {
          failure = error as Error;
        }
      }
      const stop: NativeStop | undefined = endedOnStopToken ? "eogToken" : ended !== 0 ? "maxTokens" : active.run.cancelled() ? "abort" : undefined;
      if (failure === undefined && stop === undefined) return;
      this.active.splice(this.active.indexOf(active), 1);
      if (failure !== undefined) active.fail(failure);
      else active.finish(stop!);
    });
  }
}

/** Resolves in the event loop's next check phase: timers, I/O and messages have had their turn. */
function nextTurn(): Promise<void> {
  return new Promise<void>((resolve) => setImmediate(resolve));
}
