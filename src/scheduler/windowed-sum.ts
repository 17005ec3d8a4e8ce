// A sum over a sliding time window, in a ring of buckets (exact to one bucket): cheap enough
// to update on every placement. Preble prices load over a window H of 3 minutes.
export class WindowedSum {
  private readonly sums: Float64Array;
  private readonly stamps: Float64Array;
  private readonly bucketMs: number;
  /** The last total read and the newest bucket it was read at (NaN: none since an add).
   *  The total only changes when a value is added or the window moves on by a bucket, and
   *  the scheduler reads every worker's total for every decision. */
  private cachedTotal = 0;
  private cachedAt = Number.NaN;

  constructor(
    readonly windowMs: number,
    buckets = 12,
  ) {
    this.bucketMs = windowMs / buckets;
    this.sums = new Float64Array(buckets);
    this.stamps = new Float64Array(buckets).fill(-1);
  }

  add(now: number, value: number): void {
    const bucket = Math.floor(now / this.bucketMs);
    const slot = bucket % this.sums.length;
    if (this.stamps[slot] !== bucket) {
      this.stamps[slot] = bucket;
      this.sums[slot] = 0;
    }
    this.sums[slot]! += value;
    this.cachedAt = Number.NaN;
  }

  total(now: number): number {
    const newest = Math.floor(now / this.bucketMs);
    if (newest === this.cachedAt) return this.cachedTotal;
    const oldest = newest - this.sums.length + 1;
    let sum = 0;
    for (let slot = 0; slot < this.sums.length; slot++) {
      const stamp = this.stamps[slot]!;
      if (stamp >= oldest && stamp <= newest) sum += this.sums[slot]!;
    }
    this.cachedTotal = sum;
    this.cachedAt = newest;
    return sum;
  }
}

/**
 * The median of the last `capacity` values (Preble: output length = median of the last 200).
 * A sorted copy is kept up to date on each push (binary search), so reading the median on
 * every placement costs nothing.
 */
export class RecentMedian {
  private readonly values: number[] = [];
  private readonly sorted: number[] = [];
  private next = 0;

  constructor(private readonly capacity = 200) {}

  get count(): number {
    return this.values.length;
  }

  push(value: number): void {
    if (this.values.length < this.capacity) {
      this.values.push(value);
    } else {
      const replaced = this.values[this.next]!;
      this.values[this.next] = value;
      this.sorted.splice(this.lowerBound(replaced), 1);
    }
    this.sorted.splice(this.lowerBound(value), 0, value);
    this.next = (this.next + 1) % this.capacity;
  }

  /** undefined until a value was pushed. */
  median(): number | undefined {
    if (this.sorted.length === 0) return undefined;
    return this.sorted[Math.floor(this.sorted.length / 2)]!;
  }

  private lowerBound(value: number): number {
    let lo = 0;
    let hi = this.sorted.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.sorted[mid]! < value) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}
