// Token sequences as the whole project passes them: plain arrays of token ids, or an
// Int32Array, which is how the server carries a prompt from the tokenizer on (it crosses a
// thread as one block of memory, and the scheduler's tree can point into it instead of
// copying it). Neither kind is ever written once made: the tree keeps views of Int32Array
// prompts for as long as it holds their tokens.
export type TokenIds = readonly number[] | Int32Array;

/** Number of leading tokens `a` and `b` share. */
export function commonPrefixLength(a: TokenIds, b: TokenIds): number {
  return sharedTokenCount(a, 0, b, 0, Math.min(a.length, b.length));
}

/** Node's memcmp over bytes, called on typed arrays of the token arrays' memory. */
const compareBytes = Buffer.prototype.compare;
/** Runs shorter than this are compared by the loop alone; it is also the most a chunk that
 *  differs leaves to the loop. A memcmp call and its byte views cost about what the loop
 *  takes for 150 tokens (bench:shared-tokens). */
const LOOP_TOKENS = 256;
/** The first memcmp chunk, and the most tokens one memcmp compares. */
const MEMCMP_FIRST_CHUNK_TOKENS = 512;
const MEMCMP_MAX_CHUNK_TOKENS = 4096;

/**
 * How many tokens a[aFrom..] and b[bFrom..] share from their starts, at most `limit` (both
 * must have that many). A long shared prefix is what a placement, a slot choice and a state
 * lookup all compare, and on Int32Arrays (the server's prompts, the tree's segments) memcmp
 * does it several times faster than a loop over the elements. From LOOP_TOKENS on, memcmp
 * takes chunks that double from MEMCMP_FIRST_CHUNK_TOKENS; a chunk that differs is halved by
 * memcmp down to LOOP_TOKENS, and the loop finds the mismatch in what is left.
 */
export function sharedTokenCount(a: TokenIds, aFrom: number, b: TokenIds, bFrom: number, limit: number): number {
  if (limit < LOOP_TOKENS || !(a instanceof Int32Array) || !(b instanceof Int32Array)) return sharedTokensLoop(a, aFrom, b, bFrom, limit);
  const aBytes = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
  const bBytes = new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
  let done = 0;
  let chunk = MEMCMP_FIRST_CHUNK_TOKENS;
  while (done < limit) {
    let length = Math.min(chunk, limit - done);
    if (!bytesEqual(aBytes, aFrom + done, bBytes, bFrom + done, length)) {
      while (length > LOOP_TOKENS) {
        const half = length >> 1;
        if (bytesEqual(aBytes, aFrom + done, bBytes, bFrom + done, half)) {
          done += half;
          length -= half;
        } else {
          length = half;
        }
      }
      return done + sharedTokensLoop(a, aFrom + done, b, bFrom + done, length);
    }
    done += length;
    chunk = Math.min(2 * chunk, MEMCMP_MAX_CHUNK_TOKENS);
  }
  return limit;
}

/** Whether `length` tokens at token offsets `aAt` and `bAt` of the two byte views are equal. */
function bytesEqual(aBytes: Uint8Array, aAt: number, bBytes: Uint8Array, bAt: number, length: number): boolean {
  const size = Int32Array.BYTES_PER_ELEMENT;
  return compareBytes.call(aBytes, bBytes, bAt * size, (bAt + length) * size, aAt * size, (aAt + length) * size) === 0;
}

/** sharedTokenCount by a loop: eight tokens per loop test while eight are left (exported for
 *  bench/scheduler/shared-tokens.bench.ts, which measures sharedTokenCount against it). */
export function sharedTokensLoop(a: TokenIds, aFrom: number, b: TokenIds, bFrom: number, limit: number): number {
  const shift = bFrom - aFrom;
  const end = aFrom + limit;
  const last8 = end - 8;
  let i = aFrom;
  while (
    i <= last8 &&
    a[i] === b[i + shift] &&
    a[i + 1] === b[i + 1 + shift] &&
    a[i + 2] === b[i + 2 + shift] &&
    a[i + 3] === b[i + 3 + shift] &&
    a[i + 4] === b[i + 4 + shift] &&
    a[i + 5] === b[i + 5 + shift] &&
    a[i + 6] === b[i + 6 + shift] &&
    a[i + 7] === b[i + 7 + shift]
  ) {
    i += 8;
  }
  while (i < end && a[i] === b[i + shift]) i++;
  return i - aFrom;
}

/** A prompt as the server carries it: `tokens` in an Int32Array, after `bos` unless `bos` is
 *  null or already the first token. (An Int32Array crosses a thread as one block of memory;
 *  a plain array is cloned element by element.) */
export function promptWithBos(tokens: TokenIds, bos: number | null): Int32Array {
  const prepend = bos !== null && tokens[0] !== bos;
  const out = new Int32Array(tokens.length + (prepend ? 1 : 0));
  if (prepend) out[0] = bos;
  out.set(tokens, prepend ? 1 : 0);
  return out;
}

/** `tokens` then `more`, in one new Int32Array. */
export function joinedTokens(tokens: TokenIds, more: TokenIds): Int32Array {
  const joined = new Int32Array(tokens.length + more.length);
  joined.set(tokens);
  joined.set(more, tokens.length);
  return joined;
}

/** `tokens` as a plain array (what llama.cpp's bindings and JSON bodies take): the array
 *  itself when it is one. */
export function tokenArray(tokens: TokenIds): readonly number[] {
  if (!(tokens instanceof Int32Array)) return tokens;
  // A loop, not Array.from: ten times faster on a typed array.
  const out = new Array<number>(tokens.length);
  for (let i = 0; i < tokens.length; i++) out[i] = tokens[i]!;
  return out;
}
