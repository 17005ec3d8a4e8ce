// Finding any of several patterns in text that arrives in pieces: where the first one starts,
// and how much of the text's end could still grow into one (and so must be held back until
// more text shows whether it does). Stop sequences and tool-call prefixes both read this way.

/** The earliest occurrence of any pattern (the longest pattern where two start together). */
export function firstMatch(text: string, patterns: readonly string[]): { at: number; pattern: string } | undefined {
  let best: { at: number; pattern: string } | undefined;
  for (const pattern of patterns) {
    if (pattern.length === 0) continue;
    const at = text.indexOf(pattern);
    if (at < 0) continue;
    if (!best || at < best.at || (at === best.at && pattern.length > best.pattern.length)) best = { at, pattern };
  }
  return best;
}

/** Length of the longest end of `text` that is a proper start of some pattern. */
export function partialMatchTail(text: string, patterns: readonly string[]): number {
  const longest = Math.max(0, ...patterns.map((pattern) => pattern.length));
  for (let length = Math.min(text.length, longest - 1); length > 0; length--) {
    const tail = text.slice(text.length - length);
    if (patterns.some((pattern) => pattern.startsWith(tail))) return length;
  }
  return 0;
}
