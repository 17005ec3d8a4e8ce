// Scratch arrays the scheduler refills for every decision.

/**
 * Empties `array` for reuse. Popping its few elements stays in compiled code, where setting
 * `length = 0` is a call into the engine's runtime (a few times slower, and the scheduler's
 * walks empty several such arrays per placement).
 */
export function emptyArray(array: unknown[]): void {
  while (array.length > 0) array.pop();
}
