// The simulation's event queue, on the project's binary heap, ordered by (time, sequence) so
// that events of one instant run in the order they were scheduled.
import { BinaryHeap } from "../../src/common/binary-heap.js";

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
