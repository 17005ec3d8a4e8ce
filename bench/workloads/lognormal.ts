// Lognormal lengths with a given mean and standard deviation. A lognormal is positive and
// right-skewed, as token lengths are, and its two moments fix it:
//   sigma^2 = ln(1 + (std / mean)^2),   mu = ln(mean) - sigma^2 / 2.
// The normal draws come from Box-Muller over a seeded uniform stream (two uniforms a draw,
// the sine half unused), so one stream always gives the same lengths.

/** A mean and a standard deviation. */
export interface Moments {
  mean: number;
  std: number;
}

/** A sampler of the lognormal with `moments`, drawing from `uniform` (values in [0, 1)). */
export function lognormal(moments: Moments, uniform: () => number): () => number {
  if (!(moments.mean > 0) || !(moments.std >= 0)) throw new RangeError(`lognormal: mean > 0 and std >= 0, got ${moments.mean} and ${moments.std}`);
  const sigma2 = Math.log1p((moments.std / moments.mean) ** 2);
  const mu = Math.log(moments.mean) - sigma2 / 2;
  const sigma = Math.sqrt(sigma2);
  return () => {
    const radius = Math.sqrt(-2 * Math.log(1 - uniform()));
    return Math.exp(mu + sigma * radius * Math.cos(2 * Math.PI * uniform()));
  };
}
