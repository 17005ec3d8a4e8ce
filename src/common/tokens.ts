// Token sequences as the whole project passes them: plain arrays of token ids, or an
// Int32Array, which is how the server carries a prompt from the tokenizer on (it crosses a
// thread as one block of memory, and the scheduler's tree can point into it instead of
// copying it). Neither kind is ever written once made: the tree keeps views of Int32Array
// prompts for as long as it holds their tokens.
export type TokenIds = readonly number[] | Int32Array;

/** Number of leading tokens `a` and `b` share. */
export function commonPrefixLength(a: TokenIds, b: TokenIds): number {
  const limit = Math.min(a.length, b.length);
  let i = 0;
  while (i < limit && a[i] === b[i]) i++;
  return i;
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
