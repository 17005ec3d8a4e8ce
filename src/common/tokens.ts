// Token sequences as the whole project sees them: plain arrays of token ids.
export type TokenIds = readonly number[];

/** Number of leading tokens `a` and `b` share. */
export function commonPrefixLength(a: TokenIds, b: TokenIds): number {
  const limit = Math.min(a.length, b.length);
  let i = 0;
  while (i < limit && a[i] === b[i]) i++;
  return i;
}
