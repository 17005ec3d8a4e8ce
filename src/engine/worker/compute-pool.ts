// The CPU threads llama.cpp computes a context's graphs with. node-llama-cpp 3.21.1 gives
// llama.cpp no thread pool, and its prebuilt CPU binaries have no OpenMP, so with more than
// one thread every decode step creates its helper threads and joins them again; in a Node
// process that made two threads decode at half the speed of one (docs/engine.md, "Compute
// threads"). The native addon in native/llama-context attaches a pool that lives as long as
// the context instead. Without the addon (not built: scripts/build-native.mjs says why), or
// with RADIXGATE_NO_THREAD_POOL=1, a worker runs as before, and says so.
//
// Between two graphs the pool's helper threads may spin for the next one before they sleep
// (`threadPoll`, llama-server's `--poll`); by default they sleep at once (DEFAULT_THREAD_POLL
// says why).
import type { LlamaContext } from "node-llama-cpp";
import { once } from "../../common/once.js";
import type { ComputePoolKind } from "../wire/protocol.js";
import { contextAddon } from "./context-addon.js";

export interface ComputePool {
  readonly kind: ComputePoolKind;
  /** How hard a persistent pool's helpers spin for the next graph (0-100); absent for the others. */
  readonly poll?: number;
  /** Why the pool is per step when more than one thread was asked for. */
  readonly reason?: string;
  /** Frees the pool's threads: only after the context is disposed (it computes on them until then). */
  release(): void;
}

const NO_RELEASE = () => {};

/**
 * Gives the context a thread pool of `threads` for as long as it lives, its helpers spinning
 * for the next graph at `poll` (0-100). Call right after the context is created, before it
 * computes anything.
 */
export function attachComputePool(context: LlamaContext, threads: number, poll: number): ComputePool {
  if (threads <= 1) return { kind: "single-thread", release: NO_RELEASE };
  if (process.env.RADIXGATE_NO_THREAD_POOL === "1") return { kind: "per-step", reason: "RADIXGATE_NO_THREAD_POOL=1", release: NO_RELEASE };
  const found = contextAddon();
  if ("problem" in found) return { kind: "per-step", reason: found.problem, release: NO_RELEASE };
  // node-llama-cpp keeps its native context object here (a private field of 3.21.1's
  // LlamaContext; the addon checks that the object is node-llama-cpp's before using it).
  const addonContext = (context as unknown as { _ctx: unknown })._ctx;
  try {
    const handle = found.addon.attach(addonContext, threads, poll);
    return { kind: "persistent", poll: found.addon.pollOf(handle), release: once(() => found.addon.release(handle)) };
  } catch (error) {
    return { kind: "per-step", reason: (error as Error).message, release: NO_RELEASE };
  }
}
