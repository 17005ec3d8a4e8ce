// sharedTokenCount: the shared prefix of two token runs, by memcmp on long Int32Array runs and
// by a loop otherwise; both must give the first mismatch exactly, wherever it falls.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { commonPrefixLength, sharedTokenCount, type TokenIds } from "../../src/common/tokens.js";

/** The shared prefix the slow, obvious way. */
function naive(a: TokenIds, aFrom: number, b: TokenIds, bFrom: number, limit: number): number {
  let i = 0;
  while (i < limit && a[aFrom + i] === b[bFrom + i]) i++;
  return i;
}

/** Two Int32Array views into larger buffers (so byteOffset is not 0), the same `length`
 *  tokens at `aFrom` and `bFrom`, then `b` changed at `mismatch` (none when >= length). */
function pair(length: number, aFrom: number, bFrom: number, mismatch: number, change: number) {
  const aBuffer = new Int32Array(aFrom + length + 7);
  const bBuffer = new Int32Array(bFrom + length + 5);
  for (let i = 0; i < length; i++) {
    const token = (Math.imul(i + 1, 2654435761) >> 3) - 7; // negative ids too
    aBuffer[3 + aFrom + i] = token;
    bBuffer[2 + bFrom + i] = token;
  }
  if (mismatch < length) bBuffer[2 + bFrom + mismatch]! ^= change;
  return { a: aBuffer.subarray(3), b: bBuffer.subarray(2) };
}

describe("sharedTokenCount", () => {
  it("finds the first mismatch at every chunk edge of the memcmp path, and none when the runs are equal", () => {
    const length = 2000;
    // Chunks of 512, 1024 and 2048 tokens; a chunk that differs is halved down to 256 tokens.
    for (const mismatch of [0, 1, 7, 8, 255, 256, 257, 383, 384, 511, 512, 513, 767, 768, 1023, 1024, 1025, 1535, 1536, 1537, 1999, 2000]) {
      for (const change of [1, 0x100, 0x10000, 0x40000000]) {
        const { a, b } = pair(length, 5, 9, mismatch, change);
        expect(sharedTokenCount(a, 5, b, 9, length)).toBe(mismatch);
        // The same runs as plain arrays take the loop: same answer.
        expect(sharedTokenCount(Array.from(a), 5, Array.from(b), 9, length)).toBe(mismatch);
      }
    }
  });

  it("agrees with a token-by-token comparison on random runs, offsets and limits", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 3000 }),
        fc.integer({ min: 0, max: 40 }),
        fc.integer({ min: 0, max: 40 }),
        fc.integer({ min: 0, max: 3100 }),
        fc.integer({ min: 1, max: 0x7fffffff }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (length, aFrom, bFrom, mismatch, change, limitShare) => {
          const { a, b } = pair(length, aFrom, bFrom, mismatch, change);
          const limit = Math.floor(limitShare * length);
          expect(sharedTokenCount(a, aFrom, b, bFrom, limit)).toBe(naive(a, aFrom, b, bFrom, limit));
        },
      ),
      { numRuns: 300, seed: 20261206 },
    );
  });

  it("gives commonPrefixLength: the shorter run's length when one is a prefix of the other", () => {
    const long = Int32Array.from({ length: 1500 }, (_, i) => i * 3);
    expect(commonPrefixLength(long, long.subarray(0, 1200))).toBe(1200);
    expect(commonPrefixLength(long.subarray(0, 700), long)).toBe(700);
    expect(commonPrefixLength([], long)).toBe(0);
    const other = long.slice();
    other[900] = -1;
    expect(commonPrefixLength(long, other)).toBe(900);
    expect(commonPrefixLength(Array.from(long), other)).toBe(900);
  });
});
