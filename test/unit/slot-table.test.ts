import { describe, expect, it } from "vitest";
import { SlotTable } from "../../src/engine/slot-table.js";

function table(contents: number[][], clock = { now: 0 }) {
  const slots = new SlotTable(contents.length, (slot) => contents[slot] ?? [], () => clock.now);
  return { slots, clock };
}

describe("SlotTable", () => {
  it("takes the idle slot sharing the longest prefix with the prompt", async () => {
    const { slots } = table([[1, 2, 3], [1, 2, 3, 4, 5], [9]]);
    expect(await slots.acquire([1, 2, 3, 4, 7])).toEqual({ slot: 1, sharedPrefix: 4 });
  });

  it("takes the least recently used idle slot when nothing is shared", async () => {
    const clock = { now: 0 };
    const { slots } = table([[5], [6], [7]], clock);
    for (const slot of [0, 1, 2]) {
      clock.now = [30, 10, 20][slot]!;
      const pick = await slots.acquire([5, 6, 7].slice(slot, slot + 1));
      expect(pick.slot).toBe(slot);
      slots.release(slot);
    }
    expect((await slots.acquire([42])).slot).toBe(1);
  });

  it("skips busy slots even when they share more", async () => {
    const { slots } = table([[1, 2, 3], [1]]);
    expect((await slots.acquire([1, 2, 3])).slot).toBe(0);
    expect(await slots.acquire([1, 2, 3])).toEqual({ slot: 1, sharedPrefix: 1 });
    expect(slots.busyCount).toBe(2);
  });

  it("queues requests first-come first-served when every slot is busy", async () => {
    const { slots } = table([[]]);
    const first = await slots.acquire([1]);
    const order: string[] = [];
    const second = slots.acquire([2]).then((pick) => (order.push("second"), pick));
    const third = slots.acquire([3]).then((pick) => (order.push("third"), pick));
    expect(slots.waitingCount).toBe(2);
    slots.release(first.slot);
    await second;
    expect(order).toEqual(["second"]);
    slots.release(0);
    await third;
    expect(order).toEqual(["second", "third"]);
    expect(slots.waitingCount).toBe(0);
  });
});
