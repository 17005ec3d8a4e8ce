/** Probes every 25 ms until `accept` holds (at most `tries` times) and returns the last value: bounded, never a timing assertion. */
export async function until<T>(probe: () => Promise<T>, accept: (value: T) => boolean, tries = 400): Promise<T> {
  let value = await probe();
  for (let i = 0; i < tries && !accept(value); i++) {
    await new Promise((resolve) => setTimeout(resolve, 25));
    value = await probe();
  }
  return value;
}
