// The per-worker local scheduler with synthetic requests: slot choice, LRU, priority groups.
import { describe, expect, it } from "vitest";
import { LocalScheduler, type SlotGrant } from "../../src/scheduler/local-scheduler.js";
import { LOCAL_SCHEDULER_DEFAULTS } from "../../src/scheduler/local-scheduler-settings.js";
import { evaluationPriorityOf, prefillRankOfHit, shareBatch } from "../../src/scheduler/batch-priority.js";

function local(contents: number[][], options: { priorityGroups?: number; quotaPerGroup?: number; clock?: { now: number }; spilled?: number[] } = {}) {
  const clock = options.clock ?? { now: 0 };
  const spilled = options.spilled;
  const scheduler = new LocalScheduler(
    {
      slots: contents.length,
      priorityGroups: options.priorityGroups ?? LOCAL_SCHEDULER_DEFAULTS.priorityGroups,
      quotaPerGroup: options.quotaPerGroup ?? LOCAL_SCHEDULER_DEFAULTS.quotaPerGroup,
      now: () => clock.now,
    },
    {
      tokensOfSlot: (slot) => contents[slot] ?? [],
      ...(spilled
        ? { spilledPrefix: (tokens: readonly number[]) => (tokens.slice(0, spilled.length).every((t, i) => t === spilled[i]) ? spilled.length : 0) }
        : {}),
    },
  );
  return { scheduler, clock };
}

const range = (from: number, length: number) => Array.from({ length }, (_, i) => from + i);

describe("slots", () => {
  it("takes the idle slot sharing the longest prefix with the prompt", async () => {
    const { scheduler } = local([[1, 2, 3], [1, 2, 3, 4, 5], [9]]);
    expect(await scheduler.acquire("a", [1, 2, 3, 4, 7])).toMatchObject({ slot: 1, sharedPrefix: 4 });
  });

  it("takes the least recently used idle slot when nothing is shared", async () => {
    const clock = { now: 0 };
    const { scheduler } = local([[5], [6], [7]], { clock });
    for (const slot of [0, 1, 2]) {
      clock.now = [30, 10, 20][slot]!;
      const grant = await scheduler.acquire(`r${slot}`, [5 + slot]);
      expect(grant?.slot).toBe(slot);
      scheduler.release(slot);
    }
    expect((await scheduler.acquire("x", [42]))?.slot).toBe(1);
  });

  it("does not throw away a long cache for a few shared template tokens", async () => {
    const longConversation = range(1, 100); // starts like every chat prompt: tokens 1, 2, 3...
    const { scheduler, clock } = local([longConversation, [900]]);
    clock.now = 5;
    scheduler.release((await scheduler.acquire("old", [900, 901]))!.slot); // slot 1, used at t=5
    clock.now = 10;
    scheduler.release((await scheduler.acquire("recent", longConversation))!.slot); // slot 0, used at t=10
    // Shares 3 template-like tokens with slot 0: not similar, so the LRU slot 1 is taken.
    expect(await scheduler.acquire("new", [1, 2, 3, ...range(500, 60)])).toMatchObject({ slot: 1 });
  });

  it("keeps busy slots side by side before recency when nothing is shared", async () => {
    const clock = { now: 0 };
    const { scheduler } = local([[5], [6], [7], [8]], { clock });
    for (const [slot, usedAt] of [
      [0, 10],
      [2, 20],
      [1, 40],
      [3, 50],
    ] as const) {
      clock.now = usedAt;
      expect((await scheduler.acquire(`warm-${slot}`, [5 + slot]))?.slot).toBe(slot);
      scheduler.release(slot);
    }
    expect((await scheduler.acquire("first", [42]))?.slot).toBe(0); // least recently used
    // Slot 2 is the least recently used idle slot, but generating in 0 and 2 splits every
    // decode step in two micro-batches: slot 1 keeps the busy slots one run.
    expect((await scheduler.acquire("second", [43]))?.slot).toBe(1);
    expect((await scheduler.acquire("third", [44]))?.slot).toBe(2);
  });

  it("breaks a tie between equally shared prefixes toward a busy neighbour, never a longer prefix", async () => {
    const { scheduler } = local([
      [1, 2, 3, 9],
      [1, 2, 3, 8],
      [1, 2, 3, 7],
      [1, 2, 3, 6, 4],
    ]);
    expect((await scheduler.acquire("a", [1, 2, 3, 7]))?.slot).toBe(2);
    // Slots 0 and 1 share three tokens each: slot 1 sits next to the busy slot 2.
    expect(await scheduler.acquire("b", [1, 2, 3, 5])).toMatchObject({ slot: 1, sharedPrefix: 3 });
    scheduler.release(1);
    // Slot 0 shares four tokens and has no busy neighbour; slots 1 and 3 share three next to the
    // busy slot 2: the longer prefix wins.
    expect(await scheduler.acquire("c", [1, 2, 3, 9, 9])).toMatchObject({ slot: 0, sharedPrefix: 4 });
  });

  it("skips busy slots even when they share more", async () => {
    const { scheduler } = local([[1, 2, 3], [1]]);
    expect((await scheduler.acquire("a", [1, 2, 3]))?.slot).toBe(0);
    expect(await scheduler.acquire("b", [1, 2, 3])).toMatchObject({ slot: 1, sharedPrefix: 1 });
    expect(scheduler.busyCount).toBe(2);
  });

  it("takes a waiting request out of the queue on cancel", async () => {
    const { scheduler } = local([[]]);
    await scheduler.acquire("a", [1]);
    const waiting = scheduler.acquire("b", [2]);
    expect(scheduler.cancel("b")).toBe(true);
    expect(await waiting).toBeUndefined();
    expect(scheduler.cancel("a")).toBe(false); // running: not in the queue
    expect(scheduler.waitingCount).toBe(0);
  });
});

describe("priority groups (Preble: P = 10, k = 10)", () => {
  it("puts a request in group ceil(hit x P) - 1, 0 for no hit, counting spilled states", () => {
    const { scheduler } = local([range(0, 50)], { spilled: range(1000, 80) });
    expect(scheduler.groupOf(range(500, 100))).toBe(0); // no hit
    expect(scheduler.groupOf([...range(0, 50), ...range(900, 50)])).toBe(4); // hit 0.5
    expect(scheduler.groupOf([...range(0, 50), ...range(900, 1)])).toBe(9); // hit 50/51
    expect(scheduler.groupOf([...range(1000, 80), ...range(7, 20)])).toBe(7); // 0.8 from the spilled state
  });

  it("admits from the highest group first, FCFS inside it, within (group + 1) x k per pass", async () => {
    // One slot holding a long prefix; queue requests with several hit ratios behind a running one.
    const held = range(0, 100);
    const { scheduler } = local([held], { quotaPerGroup: 1 });
    const running = await scheduler.acquire("running", held);
    const order: string[] = [];
    const enqueue = (id: string, hitTokens: number) =>
      scheduler.acquire(id, [...held.slice(0, hitTokens), ...range(5000 + id.charCodeAt(0) * 100, 100 - hitTokens)]).then((grant) => {
        order.push(id);
        return grant;
      });
    // hit 0.0 -> group 0 (quota 1 per pass), hit 0.95 -> group 9 (quota 10), hit 0.5 -> group 4 (quota 5)
    const pending = [enqueue("a0", 0), enqueue("b0", 0), enqueue("c9", 95), enqueue("d4", 50), enqueue("e9", 95), enqueue("f4", 50)];
    let grant: SlotGrant | undefined = running;
    for (let i = 0; i < pending.length; i++) {
      scheduler.release(grant!.slot);
      grant = await Promise.race(pending.filter((_, j) => !order.includes(["a0", "b0", "c9", "d4", "e9", "f4"][j]!)));
    }
    scheduler.release(grant!.slot);
    await Promise.all(pending);
    // Group 9 first (FCFS: c9 then e9), then group 4 (d4, f4), then group 0 one per pass: a0, then b0.
    expect(order).toEqual(["c9", "e9", "d4", "f4", "a0", "b0"]);
  });

  it("caps a group at its quota per pass so lower groups are not starved", async () => {
    const held = range(0, 100);
    const { scheduler } = local([held], { priorityGroups: 2, quotaPerGroup: 1 });
    // P = 2: group 1 (hit > 0.5) may admit 2 per pass, group 0 admits 1.
    let grant = await scheduler.acquire("running", held);
    const order: string[] = [];
    const ids = ["h1", "h2", "h3", "m1"];
    const pending = ids.map((id) =>
      scheduler.acquire(id, id.startsWith("h") ? [...held.slice(0, 90), ...range(7000 + ids.indexOf(id) * 20, 10)] : range(9000, 100)).then((g) => {
        order.push(id);
        return g;
      }),
    );
    for (let i = 0; i < ids.length; i++) {
      scheduler.release(grant!.slot);
      grant = (await Promise.race(pending.filter((_, j) => !order.includes(ids[j]!))))!;
    }
    scheduler.release(grant!.slot);
    // Group 1's quota of 2 is spent by "running" and h1; then the miss gets its turn; a new
    // pass lets h2 and h3 in.
    expect(order).toEqual(["h1", "m1", "h2", "h3"]);
  });
});

describe("batch sharing", () => {
  const item = (length: number, evaluationPriority: number) => ({ tokens: { length }, evaluationPriority });

  it("gives every decoding sequence its token first, then the prefill budget by priority", () => {
    const low = item(800, 1);
    const high = item(300, 5);
    const decodeA = item(1, 1);
    const decodeB = item(1, 3);
    const shares = shareBatch([low, decodeA, high, decodeB], 512, 1024);
    expect(shares.map((share) => [share.item, share.processAmount])).toEqual([
      [decodeA, 1],
      [decodeB, 1],
      [high, 300],
      [low, 210],
    ]);
  });

  it("continues a started prefill before any other, started ones in arrival order, then the rest by priority", () => {
    const startedLow = item(800, 1);
    const startedMid = item(100, 3);
    const newHigh = item(300, 5);
    const decode = item(1, 1);
    const started = new Set([startedLow, startedMid]);
    const shares = shareBatch([newHigh, startedLow, decode, startedMid], 2048, 1024, (x) => started.has(x));
    expect(shares.map((share) => [share.item, share.processAmount])).toEqual([
      [decode, 1],
      [startedLow, 800],
      [startedMid, 100],
      [newHigh, 124],
    ]);
  });

  it("limits prefill to the chunk budget", () => {
    const shares = shareBatch([item(1, 1), item(900, 2)], 2048, 256);
    expect(shares.map((share) => share.processAmount)).toEqual([1, 256]);
  });

  it("maps P priority groups onto node-llama-cpp's 1..5", () => {
    expect([0, 1, 2, 5, 9].map((group) => evaluationPriorityOf(group, 10))).toEqual([1, 1, 2, 3, 5]);
  });

  it("ranks a prompt in the prefill order as a worker with the default ten groups does (the global scheduler's estimate of what is ahead)", () => {
    // Hit ratio -> group ceil(hit x 10) - 1 -> priority 1 + floor(group / 2): two groups per rank.
    const hits = [0, 0.1, 0.15, 0.2, 0.25, 0.4, 0.45, 0.6, 0.65, 0.8, 0.85, 1];
    expect(hits.map((hit) => prefillRankOfHit(hit * 1000, 1000))).toEqual([0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4]);
    expect(prefillRankOfHit(0, 0)).toBe(0);
  });
});
