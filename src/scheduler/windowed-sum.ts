// Sums over a sliding time window, kept in a ring of buckets (exact to one bucket): cheap
// enough to update on every placement. Preble prices load over a window H of 3 minutes.
// `BucketWindow` is the ring arithmetic, shared by `WindowedSum` (one sum in its own ring)
// and the radix tree's nodes (two sums in one ring each; see docs/scheduler-tree.md).

/**
 * A ring of sums over a window: [bucket stamps x B | sum 0 x B | sum 1 x B | ...]
 * (B = buckets). A plain array of doubles, not a Float64Array: every node of the radix tree
 * gets one on its first request, and a typed array's separate backing store costs far more
 * to allocate (and to collect) than the few hundred bytes it holds. The arithmetic is the
 * same float64 arithmetic either way.
 */
export type WindowRing = number[];

/**
 * A window of `windowMs` cut into `buckets` buckets, and the arithmetic over a ring of sums
 * in it (WindowRing). A stamp says which bucket its place holds now; a place taken over by
 * a newer bucket starts from zero in every sum.
 */
export class BucketWindow {
  readonly bucketMs: number;
  /** An empty ring per number of sums, copied by `allocate` (a copy is one block move). */
  private readonly empty: WindowRing[] = [];

  constructor(
    readonly windowMs: number,
    readonly buckets = 12,
  ) {
    this.bucketMs = windowMs / buckets;
  }

  /** A ring of `sums` sums, all empty. */
  allocate(sums: number): WindowRing {
    let empty = this.empty[sums];
    if (empty === undefined) {
      empty = [];
      for (let i = 0; i < this.buckets; i++) empty.push(Number.NaN);
      for (let i = this.buckets; i < (sums + 1) * this.buckets; i++) empty.push(0);
      this.empty[sums] = empty;
    }
    return empty.slice();
  }

  /** The bucket `now` falls in: the newest one of the window that ends at `now`. */
  bucketAt(now: number): number {
    return Math.floor(now / this.bucketMs);
  }

  /** Adds `value` to sum number `sum` of the ring, in the bucket of `now`. */
  add(ring: WindowRing, now: number, sum: number, value: number): void {
    const slot = this.slotFor(ring, now);
    ring[(sum + 1) * this.buckets + slot]! += value;
  }

  /** add(ring, now, sumA, valueA), then add(ring, now, sumB, valueB) unless valueB is 0,
   *  finding the bucket once. */
  addPair(ring: WindowRing, now: number, sumA: number, valueA: number, sumB: number, valueB: number): void {
    const slot = this.slotFor(ring, now);
    ring[(sumA + 1) * this.buckets + slot]! += valueA;
    if (valueB !== 0) ring[(sumB + 1) * this.buckets + slot]! += valueB;
  }

  /** A fresh ring holds `valueA` in sum `sumA` and `valueB` in sum `sumB`, in bucket `bucket`
   *  (what add and addPair would leave there, adding them to its zeros). */
  seed(ring: WindowRing, bucket: number, sumA: number, valueA: number, sumB: number, valueB: number): void {
    const buckets = this.buckets;
    const slot = ((bucket % buckets) + buckets) % buckets;
    ring[slot] = bucket;
    ring[(sumA + 1) * buckets + slot] = valueA;
    ring[(sumB + 1) * buckets + slot] = valueB;
  }

  /** Whether bucket `bucket` is in the window whose newest bucket is `newest` (NaN: never). */
  holds(newest: number, bucket: number): boolean {
    return bucket >= newest - this.buckets + 1 && bucket <= newest;
  }

  /** The ring's place for the bucket of `now`, emptied first if an older bucket held it. */
  private slotFor(ring: WindowRing, now: number): number {
    const buckets = this.buckets;
    const bucket = this.bucketAt(now);
    const slot = ((bucket % buckets) + buckets) % buckets;
    if (ring[slot] !== bucket) {
      ring[slot] = bucket;
      for (let i = buckets + slot; i < ring.length; i += buckets) ring[i] = 0;
    }
    return slot;
  }

  /** Sum number `sum` of the ring over the window whose newest bucket is `newest`. */
  total(ring: WindowRing, newest: number, sum: number): number {
    const buckets = this.buckets;
    const oldest = newest - buckets + 1;
    const offset = (sum + 1) * buckets;
    let total = 0;
    for (let slot = 0; slot < buckets; slot++) {
      const stamp = ring[slot]!;
      if (stamp >= oldest && stamp <= newest) total += ring[offset + slot]!;
    }
    return total;
  }
}

/** One sum over a sliding window. */
export class WindowedSum {
  private readonly window: BucketWindow;
  private readonly ring: WindowRing;
  /** The last total read and the newest bucket it was read at (NaN: none since an add).
   *  The total only changes when a value is added or the window moves on by a bucket, and
   *  the scheduler reads every worker's total for every decision. */
  private cachedTotal = 0;
  private cachedAt = Number.NaN;

  constructor(
    readonly windowMs: number,
    buckets = 12,
  ) {
    this.window = new BucketWindow(windowMs, buckets);
    this.ring = this.window.allocate(1);
  }

  add(now: number, value: number): void {
    this.window.add(this.ring, now, 0, value);
    this.cachedAt = Number.NaN;
  }

  total(now: number): number {
    const newest = this.window.bucketAt(now);
    if (newest === this.cachedAt) return this.cachedTotal;
    this.cachedTotal = this.window.total(this.ring, newest, 0);
    this.cachedAt = newest;
    return this.cachedTotal;
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
      this.sorted.splice(this.lowerBound(value), 0, value);
    } else {
      const replaced = this.values[this.next]!;
      this.values[this.next] = value;
      this.replaceSorted(this.lowerBound(replaced), value);
    }
    this.next = (this.next + 1) % this.capacity;
  }

  /**
   * sorted.splice(at, 1), then `value` inserted at its lower bound (one completion replaces
   * the oldest once the window is full), in one move of the values between the two places
   * instead of two moves of everything after them: the same array in the end.
   */
  private replaceSorted(at: number, value: number): void {
    const sorted = this.sorted;
    const to = this.lowerBound(value); // with the replaced value still in: at or after it moves one down
    if (to <= at) {
      for (let i = at; i > to; i--) sorted[i] = sorted[i - 1]!;
      sorted[to] = value;
    } else {
      for (let i = at; i < to - 1; i++) sorted[i] = sorted[i + 1]!;
      sorted[to - 1] = value;
    }
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
