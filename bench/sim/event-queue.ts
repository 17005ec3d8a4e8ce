// The simulation's event queue: a generic binary min-heap, and the queue of timed events built
// on it, ordered by (time, sequence) so that events of one instant run in the order they were
// scheduled.

/** Binary min-heap under `less`. Equal items come out in no set order: where order matters, `less` breaks ties. */
export class BinaryHeap<T> {
  private readonly items: T[] = [];

  constructor(private readonly less: (a: T, b: T) => boolean) {}

  get size(): number {
    return this.items.length;
  }

  peek(): T | undefined {
    return this.items[0];
  }

  push(item: T): void {
    const a = this.items;
    let i = a.length;
    a.push(item);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.less(item, a[parent]!)) break;
      a[i] = a[parent]!;
      i = parent;
    }
    a[i] = item;
  }

  pop(): T | undefined {
    const a = this.items;
    const top = a[0];
    const last = a.pop();
    if (last === undefined || a.length === 0) return top;
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= a.length) break;
      const right = left + 1;
      const child = right < a.length && this.less(a[right]!, a[left]!) ? right : left;
      if (!this.less(a[child]!, last)) break;
      a[i] = a[child]!;
      i = child;
    }
    a[i] = last;
    return top;
  }
}

interface SimEvent {
  t: number;
  seq: number;
  run: () => void;
}

function before(a: SimEvent, b: SimEvent): boolean {
  return a.t < b.t || (a.t === b.t && a.seq < b.seq);
}

/** Timed events; of one instant, the one scheduled first runs first. */
export class EventQueue {
  private readonly heap = new BinaryHeap<SimEvent>(before);
  private seq = 0;

  get size(): number {
    return this.heap.size;
  }

  /** The time of the next event; the queue must not be empty. */
  peekTime(): number {
    return this.heap.peek()!.t;
  }

  push(t: number, run: () => void): void {
    this.heap.push({ t, seq: this.seq++, run });
  }

  /** The next event; the queue must not be empty. */
  pop(): SimEvent {
    return this.heap.pop()!;
  }
}
