// When a worker's next llama.cpp batch goes out (BatchGate, node-llama-cpp's dispatchSchedule),
// with node-llama-cpp's queue played by a Set and a controllable clock.
import { describe, expect, it } from "vitest";
import { BatchGate, HARD_MAX_WAIT_MS } from "../../src/engine/worker/batch-gate.js";

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

function setup(maxWaitMs = 2) {
  const clock = { now: 0 };
  const gate = new BatchGate(maxWaitMs, () => clock.now);
  const queued = new Set<number>();
  let dispatched = 0;
  const schedule = () => gate.schedule(() => dispatched++, queued);
  return { gate, queued, clock, schedule, dispatched: () => dispatched };
}

describe("BatchGate", () => {
  it("dispatches at once when every generating sequence has queued", () => {
    const { gate, queued, schedule, dispatched } = setup();
    gate.begin(0);
    gate.begin(1);
    queued.add(0).add(1);
    schedule();
    expect(dispatched()).toBe(1);
  });

  it("holds the batch until the last generating sequence queues", async () => {
    const { gate, queued, schedule, dispatched } = setup();
    gate.begin(0);
    gate.begin(1);
    queued.add(0);
    schedule();
    await turn();
    await turn();
    expect(dispatched()).toBe(0);
    queued.add(1);
    await turn();
    expect(dispatched()).toBe(1);
  });

  it("stops waiting for a sequence that ends", async () => {
    const { gate, queued, schedule, dispatched } = setup();
    gate.begin(0);
    gate.begin(1);
    queued.add(0);
    schedule();
    gate.end(1);
    expect(dispatched()).toBe(1);
  });

  it("waits at most maxWaitMs for a sequence that was not in the last batch", async () => {
    const { gate, queued, clock, schedule, dispatched } = setup(2);
    gate.begin(0);
    gate.begin(1); // e.g. loading a state: not in the last batch
    queued.add(0);
    schedule();
    await turn();
    expect(dispatched()).toBe(0);
    clock.now = 2;
    await turn();
    expect(dispatched()).toBe(1);
  });

  it("keeps waiting for a sequence of the batch being decoded, so the sequences stay in step", async () => {
    const { gate, queued, clock, schedule, dispatched } = setup(2);
    gate.begin(0);
    gate.begin(1);
    queued.add(0).add(1);
    schedule(); // batch 1 takes both
    expect(dispatched()).toBe(1);
    gate.batchStarted();
    queued.clear();
    // Sequence 0 is back first; 1 is still sampling its token from batch 1.
    queued.add(0);
    schedule();
    clock.now = 50;
    await turn();
    expect(dispatched()).toBe(1);
    queued.add(1);
    await turn();
    expect(dispatched()).toBe(2);
  });

  it("never waits past the hard limit, whatever a sequence does", async () => {
    const { gate, queued, clock, schedule, dispatched } = setup(2);
    gate.begin(0);
    gate.begin(1);
    queued.add(0).add(1);
    schedule();
    gate.batchStarted();
    queued.clear();
    queued.add(0);
    schedule();
    clock.now = HARD_MAX_WAIT_MS;
    await turn();
    expect(dispatched()).toBe(2);
  });

  it("dispatches at once without the queue's view (node-llama-cpp unpatched)", () => {
    const gate = new BatchGate();
    gate.begin(0);
    gate.begin(1);
    let dispatched = 0;
    gate.schedule(() => dispatched++);
    expect(dispatched).toBe(1);
  });
});
