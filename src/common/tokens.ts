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
/** From this many tokens on, two Int32Arrays are compared with memcmp: below it, making the
 *  two byte views costs what the native compare saves (measured: level at 200 tokens, 3x
 *  faster at 1,400). */
const MEMCMP_MIN_TOKENS = 256;
/** Tokens memcmp compares at a time: the loop then finds a mismatch within that many. */
const MEMCMP_CHUNK_TOKENS = 512;

/**
 * How many tokens a[aFrom..] and b[bFrom..] share from their starts, at most `limit` (both
 * must have that many). A long shared prefix is what a placement, a slot choice and a state
 * lookup all compare, and on Int32Arrays (the server's prompts, the tree's segments) memcmp
 * does it a few times faster than a loop over the elements.
 */
export function sharedTokenCount(a: TokenIds, aFrom: number, b: TokenIds, bFrom: number, limit: number): number {
  if (limit < MEMCMP_MIN_TOKENS || !(a instanceof Int32Array) || !(b instanceof Int32Array)) return sharedTokensLoop(a, aFrom, b, bFrom, limit);
  const aBytes = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
  const bBytes = new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
  const bytes = Int32Array.BYTES_PER_ELEMENT;
  for (let done = 0; done < limit; done += MEMCMP_CHUNK_TOKENS) {
    const length = Math.min(MEMCMP_CHUNK_TOKENS, limit - done);
    const aStart = (aFrom + done) * bytes;
    const bStart = (bFrom + done) * bytes;
    if (compareBytes.call(aBytes, bBytes, bStart, bStart + length * bytes, aStart, aStart + length * bytes) !== 0) {
      return done + sharedTokensLoop(a, aFrom + done, b, bFrom + done, length);
    }
  }
  return limit;
}

/** sharedTokenCount by a loop: eight tokens per loop test while eight are left. */
function sharedTokensLoop(a: TokenIds, aFrom: number, b: TokenIds, bFrom: number, limit: number): number {
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

/** `tokens` as a plain array (what llama.cpp's bindings and JSON bodies take): the array
 *  itself when it is one. */
export function tokenArray(tokens: TokenIds): readonly number[] {
  if (!(tokens instanceof Int32Array)) return tokens;
  // A loop, not Array.from: ten times faster on a typed array.
  const out = new Array<number>(tokens.length);
  for (let i = 0; i < tokens.length; i++) out[i] = tokens[i]!;
  return out;
}
