// Deterministic token ids for synthetic and trace-driven workloads. Every block of tokens is
// a pure function of (seed, salt, what it stands for), so a generator can rebuild any prompt
// without keeping its tokens, and two runs with different salts share no prefix (a
// fresh salt per run keeps one run's cache from serving the next) while keeping the same shape (the structure of a
// workload comes from the seed alone).
import { mulberry32 } from "../../src/common/random.js";

/** Mistral-7B's vocabulary: token ids are drawn from [0, VOCAB). */
export const VOCAB = 32_000;

/** A request of a workload, in arrival order. */
export interface WorkloadRequest {
  /** 0-based position in the workload. */
  index: number;
  /** Arrival time, ms from the start of the workload. */
  arrivalMs: number;
  /** The prompt, as the scheduler sees it. */
  tokens: number[];
  /** Output tokens the request will produce (drives decode time and the output median). */
  outputTokens: number;
  /** What the prompt shares with others: the prefix index (ToolBench) or the first hash id (Mooncake). */
  group: number;
  /** Chat messages the request carries (more than one marks a continuation for the `shape` policy); 1 when absent. */
  messageCount?: number;
  /** The client's max_tokens (the scheduler's expected output until it has observed some); absent: the server default. */
  maxTokens?: number;
  /**
   * Sequential turns (agent loops): the client sends this request `thinkMs` after the
   * response to request `after` (an index) completed, so its arrival depends on the serving;
   * `arrivalMs` is then only the earliest it could come (its session's start).
   */
  after?: number;
  /** Tool / think time between the previous turn's response and this request, ms. */
  thinkMs?: number;
  /** The agent session the request belongs to. */
  session?: number;
  /**
   * The answer's tokens as the next turn sends them back (agent loops): a worker's slot holds
   * them after the prompt once the request ends, and reports them. Absent: only the count is known.
   */
  answerTokens?: number[];
}

/** murmur3's 32-bit finaliser folded over the parts: a well-mixed 32-bit key. */
export function mix32(...parts: readonly number[]): number {
  let h = 0x9e3779b9;
  for (const part of parts) {
    h = Math.imul(h ^ (part >>> 0), 0x85ebca6b);
    h ^= h >>> 13;
    h = Math.imul(h, 0xc2b2ae35);
    h ^= h >>> 16;
    // Fold in the high bits of parts beyond 32 bits (hash ids and salts may exceed 2^32).
    h = Math.imul(h ^ Math.floor(part / 4294967296), 0x27d4eb2f);
    h ^= h >>> 15;
  }
  return h >>> 0;
}

/** Appends `length` token ids drawn from a stream keyed by `key` to `out` (and returns it). */
export function appendTokens(out: number[], key: number, length: number, vocab = VOCAB): number[] {
  const next = mulberry32(key);
  for (let i = 0; i < length; i++) out.push(Math.floor(next() * vocab));
  return out;
}

/**
 * An exact-capacity copy of `tokens`. An array grown by push keeps up to half its length
 * as spare capacity, and the scheduler keeps prompts (its slot mirror), so a grown array
 * would inflate the heap it is measured with; a copy is exactly 8 bytes per token id.
 */
export function exactTokens(tokens: number[]): number[] {
  return tokens.slice();
}

/** A standard uniform stream for the structure of a workload (choices, lengths, arrivals). */
export function structureStream(seed: number, stream: number): () => number {
  return mulberry32(mix32(seed, stream));
}

/** Inter-arrival time of a Poisson process of `ratePerS` requests per second, ms. */
export function exponentialMs(uniform: number, ratePerS: number): number {
  return (-Math.log(1 - uniform) / ratePerS) * 1000;
}
