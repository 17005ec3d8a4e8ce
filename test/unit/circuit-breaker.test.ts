// The circuit breaker per worker: opens after N failures in a row, lets the worker be tried
// again after the opening, closes on a success, reopens for twice as long on a failure.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { CircuitBreakers, MAX_OPEN_MS } from "../../src/serving/circuit-breaker.js";

describe("CircuitBreakers", () => {
  let placeable: Map<string, boolean>;
  let breakers: CircuitBreakers;
  const opened: [string, number][] = [];

  beforeEach(() => {
    vi.useFakeTimers();
    placeable = new Map();
    opened.length = 0;
    breakers = new CircuitBreakers(
      { failures: 3, openMs: 1000 },
      { setPlaceable: (id, ok) => placeable.set(id, ok), opened: (id, forMs) => opened.push([id, forMs]) },
    );
  });
  afterEach(() => {
    breakers.close();
    vi.useRealTimers();
  });

  it("opens after the failures in a row, not before, and a success in between starts the count again", () => {
    breakers.failed("w0", "boom");
    breakers.failed("w0", "boom");
    breakers.succeeded("w0");
    breakers.failed("w0", "boom");
    breakers.failed("w0", "boom");
    expect(breakers.state("w0")).toBe("closed");
    breakers.failed("w0", "boom 3");
    expect(breakers.state("w0")).toBe("open");
    expect(breakers.reason("w0")).toBe("boom 3");
    expect(placeable.get("w0")).toBe(false);
    expect(breakers.state("w1")).toBe("closed");
  });

  it("lets the worker be tried after the opening; a success closes it, a failure reopens it for twice as long, capped", () => {
    for (let i = 0; i < 3; i++) breakers.failed("w0", "x");
    vi.advanceTimersByTime(999);
    expect(breakers.state("w0")).toBe("open");
    vi.advanceTimersByTime(1);
    expect(breakers.state("w0")).toBe("half-open");
    expect(placeable.get("w0")).toBe(true);
    breakers.failed("w0", "again");
    expect(breakers.state("w0")).toBe("open");
    for (let i = 0; i < 10; i++) {
      vi.advanceTimersByTime(MAX_OPEN_MS);
      breakers.failed("w0", "again");
    }
    expect(opened.map(([, ms]) => ms)).toEqual([1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000, 60000, 60000, 60000, 60000]);
    vi.advanceTimersByTime(MAX_OPEN_MS);
    breakers.succeeded("w0");
    expect(breakers.state("w0")).toBe("closed");
    expect(breakers.reason("w0")).toBeUndefined();
    // Closed again: the next trouble starts from the first opening's length.
    for (let i = 0; i < 3; i++) breakers.failed("w0", "x");
    expect(opened.at(-1)).toEqual(["w0", 1000]);
  });

  it("forgets a worker's circuit when it died (the fleet restarts it), and 0 failures means never", () => {
    for (let i = 0; i < 3; i++) breakers.failed("w0", "x");
    breakers.reset("w0");
    expect(breakers.state("w0")).toBe("closed");
    vi.advanceTimersByTime(5000);
    expect(placeable.get("w0")).toBe(false); // the reset does not make it placeable: the fleet's return does
    const off = new CircuitBreakers({ failures: 0, openMs: 1000 }, { setPlaceable: () => expect.unreachable() });
    for (let i = 0; i < 100; i++) off.failed("w0", "x");
    expect(off.state("w0")).toBe("closed");
  });
});
