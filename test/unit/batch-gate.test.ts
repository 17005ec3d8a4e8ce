// When a worker's next llama.cpp batch goes out (BatchGate, node-llama-cpp's dispatchSchedule),
// with node-llama-cpp's queue played by a Set, its calls played as our patch makes them (the
// schedule again each time another sequence queues while the dispatch is held), and fake
// timers moving the gate's clock.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { BatchGate, HARD_MAX_WAIT_MS } from "../../src/engine/worker/batch-gate.js";

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

function setup(maxWaitMs = 2) {
  const gate = new BatchGate(maxWaitMs, () => Date.now());
  const queued = new Set<number>();
  let dispatched = 0;
  /** The sequences queued when each batch went out. */
  const batches: number[][] = [];
  const record = () => {
    dispatched++;
    batches.push([...queued].sort());
  };
  // One dispatch per held batch, as node-llama-cpp makes it; a new one after each dispatch.
  let dispatch = () => {
    record();
    dispatch = record;
  };
  const schedule = () => gate.schedule(dispatch, queued);
  /** A sequence queues its next tokens: node-llama-cpp (patched) calls the schedule again. */
  const queue = (slot: number) => {
    queued.add(slot);
    schedule();
  };
  return { gate, queued, schedule, queue, batches, dispatched: () => dispatched };
}

describe("BatchGate", () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("dispatches at once when every generating sequence has queued", async () => {
    const { gate, queued, schedule, dispatched } = setup();
    gate.begin(0);
    gate.begin(1);
    queued.add(0).add(1);
    schedule();
    await turn();
    expect(dispatched()).toBe(1);
  });

  it("holds the batch until the last generating sequence queues", async () => {
    const { gate, queue, dispatched } = setup();
    gate.begin(0);
    gate.begin(1);
    gate.batchStarted(); // the first batch (node-llama-cpp's set is empty now)
    queue(0);
    await turn();
    expect(dispatched()).toBe(0);
    queue(1);
    await turn();
    expect(dispatched()).toBe(1);
  });

  it("stops waiting for a sequence that ends", async () => {
    const { gate, queue, dispatched } = setup();
    gate.begin(0);
    gate.begin(1);
    queue(0);
    gate.end(1);
    await turn();
    expect(dispatched()).toBe(1);
  });

  it("waits at most maxWaitMs for a sequence that was not in the last batch", async () => {
    const { gate, queue, dispatched } = setup(2);
    gate.begin(0);
    gate.begin(1); // e.g. loading a state: not in the last batch
    queue(0);
    vi.advanceTimersByTime(1);
    await turn();
    expect(dispatched()).toBe(0);
    vi.advanceTimersByTime(1);
    await turn();
    expect(dispatched()).toBe(1);
  });

  it("counts as the last batch's only the sequences of the batch that started last", async () => {
    const { gate, queued, queue, dispatched } = setup(2);
    gate.begin(0);
    gate.begin(1);
    queue(0);
    queue(1);
    await turn();
    expect(dispatched()).toBe(1);
    gate.batchStarted(); // {0, 1}
    queued.clear();
    gate.end(1); // slot 1's request ends
    queue(0);
    await turn();
    expect(dispatched()).toBe(2);
    gate.batchStarted(); // {0} alone
    queued.clear();
    gate.begin(1); // a new request in slot 1, loading: it was in an earlier batch, not the last
    queue(0);
    vi.advanceTimersByTime(2);
    await turn();
    expect(dispatched()).toBe(3);
  });

  it("keeps waiting for a sequence of the batch being decoded, so the sequences stay in step", async () => {
    const { gate, queued, queue, schedule, dispatched } = setup(2);
    gate.begin(0);
    gate.begin(1);
    queued.add(0).add(1);
    schedule(); // batch 1 takes both
    await turn();
    expect(dispatched()).toBe(1);
    gate.batchStarted();
    queued.clear();
    // Sequence 0 is back first; 1 is still sampling its token from batch 1.
    queue(0);
    vi.advanceTimersByTime(50);
    await turn();
    expect(dispatched()).toBe(1);
    queue(1);
    await turn();
    expect(dispatched()).toBe(2);
  });

  it("counts the wait from when the batch was first held, however often it is told again", async () => {
    const { gate, queue, dispatched } = setup(2);
    gate.begin(0);
    gate.begin(1);
    gate.begin(2); // not in the last batch: waited for 2 ms at most
    queue(0);
    vi.advanceTimersByTime(1);
    queue(1); // told again: the 2 ms still run from the first call
    await turn();
    expect(dispatched()).toBe(0);
    vi.advanceTimersByTime(1);
    await turn();
    expect(dispatched()).toBe(1);
  });

  it("never waits past the hard limit, whatever a sequence does", async () => {
    const { gate, queued, queue, schedule, dispatched } = setup(2);
    gate.begin(0);
    gate.begin(1);
    queued.add(0).add(1);
    schedule();
    await turn();
    gate.batchStarted();
    queued.clear();
    queue(0);
    vi.advanceTimersByTime(HARD_MAX_WAIT_MS - 1);
    await turn();
    expect(dispatched()).toBe(1);
    vi.advanceTimersByTime(1);
    await turn();
    expect(dispatched()).toBe(2);
  });

  it("reads the messages that came in before the batch goes out: a request sent during a step joins the next batch", async () => {
    const { gate, queue, batches } = setup();
    gate.begin(0);
    // The host's request, sent while the worker's thread was decoding sequence 0's step: it
    // waits in the thread's message queue. Read, it takes slot 1 and queues its prompt.
    const { port1: host, port2: worker } = new MessageChannel();
    let batchesWhenRead = -1;
    worker.on("message", () => {
      batchesWhenRead = batches.length;
      gate.begin(1);
      queue(1);
    });
    host.postMessage({ type: "generate" });
    // The step ends: sequence 0 samples and queues its next token in promise callbacks,
    // before the event loop turns.
    await Promise.resolve();
    queue(0);
    await turn();
    await turn();
    worker.close();
    expect(batchesWhenRead).toBe(0);
    expect(batches).toEqual([[0, 1]]);
  });

  it("does not look again while nothing changes: no busy loop while a batch is decoded", async () => {
    vi.useRealTimers();
    const { gate, queued, queue, schedule, dispatched } = setup(2);
    gate.begin(0);
    queued.add(0);
    schedule(); // a batch with sequence 0's token
    await turn();
    gate.batchStarted();
    queued.clear();
    gate.begin(1);
    // Sequence 1's new prompt queued while the batch with sequence 0 still runs.
    queue(1);
    for (let i = 0; i < 50; i++) await turn();
    // A gate that polled the queue would have looked again on every turn.
    expect(gate.wakeups).toBe(0);
    await turn();
    expect(dispatched()).toBe(1);
    queue(0);
    await turn();
    expect(dispatched()).toBe(2);
    expect(gate.wakeups).toBe(0);
  });

  it("wakes on its own only when a wait limit passes", async () => {
    const { gate, queue, dispatched } = setup(2);
    gate.begin(0);
    gate.begin(1); // not in the last batch: waited for 2 ms at most
    queue(0);
    vi.advanceTimersByTime(2);
    await turn();
    expect(dispatched()).toBe(1);
    expect(gate.wakeups).toBe(1);
  });

  it("dispatches at once without the queue's view (node-llama-cpp unpatched)", async () => {
    const gate = new BatchGate();
    gate.begin(0);
    gate.begin(1);
    let dispatched = 0;
    gate.schedule(() => dispatched++);
    await turn();
    expect(dispatched).toBe(1);
  });
});
