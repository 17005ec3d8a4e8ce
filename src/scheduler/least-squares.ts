// Weighted least squares with every coefficient >= 0: the fits behind the time model
// (time-model.ts), which refits one part of a worker's model every few completed requests.
//
// The rows are kept column by column in reusable typed arrays (no array per row). Every sum
// the normal equations of any subset of the columns read is gathered once per fit, so
// dropping a column and solving again reads those sums instead of the rows. Each sum is
// accumulated row by row, in row order, starting from 0, the same additions a fresh loop
// over the rows for that subset would make: the solution does not depend on how often the
// active set changed, to the last bit.

/** The rows of one fit: x (up to four columns), the observed y and each row's weight. */
export class WeightedRows {
  x: Float64Array[];
  y: Float64Array;
  w: Float64Array;
  count = 0;

  constructor(
    /** Columns per row (at most 4). */
    readonly width: number,
    capacity = 32,
  ) {
    this.x = Array.from({ length: width }, () => new Float64Array(capacity));
    this.y = new Float64Array(capacity);
    this.w = new Float64Array(capacity);
  }

  clear(): void {
    this.count = 0;
  }

  /** Room for `count` rows (a caller may then write them to the arrays directly). */
  reserve(count: number): void {
    while (this.y.length < count) this.grow();
  }

  /** Appends a row: its y, its weight and its x values (the first `width` of x0..x3). */
  push(y: number, w: number, x0: number, x1: number, x2 = 0, x3 = 0): void {
    const i = this.count;
    if (i === this.y.length) this.grow();
    this.y[i] = y;
    this.w[i] = w;
    const x = this.x;
    x[0]![i] = x0;
    if (this.width > 1) x[1]![i] = x1;
    if (this.width > 2) x[2]![i] = x2;
    if (this.width > 3) x[3]![i] = x3;
    this.count = i + 1;
  }

  /** Keeps row `from` as row `to` (to <= from): compacts the rows a filter keeps. */
  moveRow(from: number, to: number): void {
    this.y[to] = this.y[from]!;
    this.w[to] = this.w[from]!;
    for (const column of this.x) column[to] = column[from]!;
  }

  grow(): void {
    const size = 2 * this.y.length;
    const copy = (a: Float64Array) => {
      const b = new Float64Array(size);
      b.set(a);
      return b;
    };
    this.x = this.x.map(copy);
    this.y = copy(this.y);
    this.w = copy(this.w);
  }
}

/** Every sum the normal equations read, over all rows (see the top of this file). Plain
 *  arrays: a few numbers per refit, where a typed array costs more to make than to fill. */
interface NormalSums {
  width: number;
  /** sum_i w_i x_ij^2, per column j (the column norms). */
  squares: number[];
  /** sum_i w_i x_ir x_ic, at [r * width + c]. */
  cross: number[];
  /** sum_i w_i x_ir y_i, per column r. */
  xy: number[];
}

/**
 * Every sum, one at a time over the rows in order. The products associate as (w * x_r) * x_c
 * and w * x^2, as they were written when each solve summed the rows itself.
 */
function normalSums(rows: WeightedRows): NormalSums {
  const width = rows.width;
  const squares = new Array<number>(width).fill(0);
  const cross = new Array<number>(width * width).fill(0);
  const xy = new Array<number>(width).fill(0);
  const { x, y, w, count } = rows;
  for (let r = 0; r < width; r++) {
    const xr = x[r]!;
    let sumSquares = 0;
    let sumXy = 0;
    for (let i = 0; i < count; i++) {
      sumSquares += w[i]! * xr[i]! ** 2;
      sumXy += w[i]! * xr[i]! * y[i]!;
    }
    squares[r] = sumSquares;
    xy[r] = sumXy;
    for (let c = 0; c < width; c++) {
      const xc = x[c]!;
      let sum = 0;
      for (let i = 0; i < count; i++) sum += w[i]! * xr[i]! * xc[i]!;
      cross[r * width + c] = sum;
    }
  }
  return { width, squares, cross, xy };
}

/**
 * Weighted least squares with every coefficient >= 0, over columns given in order of
 * preference. Solves the normal equations of the still-active columns (scaled to unit weighted
 * norm, so a column of extend*ctx ~ 1e7 and a column of ones are equally well conditioned) by
 * Gaussian elimination. The normal matrix is symmetric positive semi-definite, so elimination
 * runs without pivoting and a pivot that vanishes marks its column as a combination of the
 * columns before it: that column is dropped. A negative coefficient drops its column (the most
 * negative first) and the rest is refitted. Undefined when no column is left or no rows.
 */
export function nonNegativeLeastSquares(rows: WeightedRows): number[] | undefined {
  const columns = rows.width;
  if (rows.count === 0 || columns === 0) return undefined;
  const sums = normalSums(rows);
  return nonNegativeActiveSet(columns, (active) => solveNormalEquations(sums, active));
}

/** One solve over a subset of the columns: its coefficients (in `active`'s order) and each
 *  column's scale, or the column found to depend on the ones before it. */
export type SubsetSolution = { beta: number[]; scale: number[] } | { dependent: number };

/**
 * The active-set loop of a non-negative fit over `columns` columns: solves over the active
 * columns, drops a dependent column or the most negative coefficient (scaled), and solves
 * again until every coefficient is >= 0. Undefined when no column is left or a coefficient is
 * not finite.
 */
export function nonNegativeActiveSet(columns: number, solve: (active: readonly number[]) => SubsetSolution): number[] | undefined {
  let active: number[] = [];
  for (let j = 0; j < columns; j++) active.push(j);
  while (active.length > 0) {
    const solved = solve(active);
    if ("dependent" in solved) {
      active = active.filter((j) => j !== solved.dependent);
      continue;
    }
    let worst = -1;
    let worstValue = 0;
    for (let k = 0; k < active.length; k++) {
      const scaled = solved.beta[k]! * solved.scale[k]!;
      if (!Number.isFinite(scaled)) return undefined;
      if (scaled < worstValue) {
        worstValue = scaled;
        worst = active[k]!;
      }
    }
    if (worst >= 0) {
      active = active.filter((j) => j !== worst);
      continue;
    }
    const beta = new Array<number>(columns).fill(0);
    active.forEach((j, k) => {
      beta[j] = solved.beta[k]!;
    });
    return beta;
  }
  return undefined;
}

/** A pivot below this (relative to the unit-scaled diagonal) marks a dependent column. */
const DEPENDENT_PIVOT = 1e-9;

function solveNormalEquations(sums: NormalSums, active: readonly number[]): SubsetSolution {
  const n = active.length;
  const width = sums.width;
  const norm = active.map((j) => Math.sqrt(sums.squares[j]!));
  for (let k = 0; k < n; k++) if (!(norm[k]! > 0) || !Number.isFinite(norm[k]!)) return { dependent: active[k]! };
  // a[r][c] = sum_i w_i x_ir x_ic / (norm_r norm_c); b[r] = sum_i w_i x_ir y_i / norm_r
  const a = active.map((jr, r) => active.map((jc, c) => sums.cross[jr * width + jc]! / (norm[r]! * norm[c]!)));
  const b = active.map((jr, r) => sums.xy[jr]! / norm[r]!);
  return solveScaledSystem(a, b, norm, active);
}

/**
 * Solves the unit-scaled normal equations a z = b (a and b are overwritten) and unscales
 * z by `norm`: the coefficients of the `active` columns, or the first column whose pivot
 * vanishes (dependent on the columns before it).
 */
export function solveScaledSystem(a: number[][], b: number[], norm: number[], active: readonly number[]): SubsetSolution {
  const n = active.length;
  for (let k = 0; k < n; k++) {
    const pivot = a[k]![k]!;
    if (!(pivot > DEPENDENT_PIVOT)) return { dependent: active[k]! };
    for (let r = k + 1; r < n; r++) {
      const factor = a[r]![k]! / pivot;
      if (factor === 0) continue;
      for (let c = k; c < n; c++) a[r]![c]! -= factor * a[k]![c]!;
      b[r]! -= factor * b[k]!;
    }
  }
  const scaled = new Array<number>(n).fill(0);
  for (let k = n - 1; k >= 0; k--) {
    let sum = b[k]!;
    for (let c = k + 1; c < n; c++) sum -= a[k]![c]! * scaled[c]!;
    scaled[k] = sum / a[k]![k]!;
  }
  return { beta: scaled.map((v, k) => v / norm[k]!), scale: norm };
}

/** Relative residuals at or under this are never outliers: the floor of outlierLimit. */
const OUTLIER_FLOOR = 0.2;

/** The limit of outlier trimming over relative residuals: max(4 x the median one, 20%).
 *  The median is the middle one in sorted order (the upper one of an even count). */
export function outlierLimit(residuals: Float64Array): number {
  return Math.max(4 * middleValue(residuals), OUTLIER_FLOOR);
}

/** Whether every residual is within the limit's floor, so that none is an outlier whatever
 *  the median (a model that fits its observations: the median need not be found). */
export function allWithinOutlierFloor(residuals: Float64Array): boolean {
  for (let i = 0; i < residuals.length; i++) if (!(residuals[i]! <= OUTLIER_FLOOR)) return false;
  return true;
}

let selectScratch = new Float64Array(256);

/** values[floor(n / 2)] of the values sorted, found by selection (linear, not a sort); `values` is not changed. */
function middleValue(values: Float64Array): number {
  const n = values.length;
  if (selectScratch.length < n) selectScratch = new Float64Array(Math.max(n, 2 * selectScratch.length));
  const a = selectScratch;
  a.set(values);
  const k = n >> 1;
  let lo = 0;
  let hi = n - 1;
  while (lo < hi) {
    // Hoare partition around the middle element of [lo, hi].
    const pivot = a[(lo + hi) >> 1]!;
    let i = lo;
    let j = hi;
    while (i <= j) {
      while (a[i]! < pivot) i++;
      while (a[j]! > pivot) j--;
      if (i <= j) {
        const t = a[i]!;
        a[i] = a[j]!;
        a[j] = t;
        i++;
        j--;
      }
    }
    if (k <= j) hi = j;
    else if (k >= i) lo = i;
    else return a[k]!;
  }
  return a[k]!;
}
