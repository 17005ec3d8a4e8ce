// The spilled-state store without llama.cpp: states are plain files here.
import { mkdtempSync, writeFileSync } from "node:fs";
import { access, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { StateMismatchError, StateStore, stateId } from "../../src/engine/worker/state-store.js";

const identity = { modelFingerprint: "100:abc", contextSize: 1024, slots: 2 };

function store(budgetBytes: number, clock = { now: 0 }) {
  const dir = mkdtempSync(join(tmpdir(), "radixgate-store-"));
  return { store: new StateStore(join(dir, "w0"), identity, budgetBytes, () => clock.now), clock, dir };
}

const save = (bytes: number) => (file: string) => writeFile(file, Buffer.alloc(bytes));

describe("StateStore", () => {
  it("finds the entry sharing the longest prefix, and knows what it covers", async () => {
    const { store: s } = store(1000);
    await s.spill([1, 2, 3, 4], save(10));
    await s.spill([1, 2, 9], save(10));
    expect(s.bestPrefix([1, 2, 3, 4, 5])?.length).toBe(4);
    expect(s.bestPrefix([1, 2, 9, 9])?.length).toBe(3);
    expect(s.bestPrefix([7])).toBeUndefined();
    expect(s.covers([1, 2, 3])).toBe(true);
    expect(s.covers([1, 2, 3, 4, 5])).toBe(false);
  });

  it("never evicts a state while it is being loaded, and evicts it once released", async () => {
    const { store: s, clock } = store(25);
    clock.now = 1;
    const loading = (await s.spill([1], save(10)))!;
    const release = s.pin(loading);
    clock.now = 2;
    await s.spill([2], save(10));
    // [1] is pinned: over budget, the next least recently used goes instead.
    clock.now = 3;
    await s.spill([3], save(10));
    await access(loading.file);
    expect(s.bestPrefix([1])?.entry).toBe(loading);
    expect(s.bestPrefix([2])).toBeUndefined();
    release();
    release(); // twice is harmless
    clock.now = 4;
    // Pinning marked it used at 1 -> now touched at 1 still the oldest: the next spill evicts it.
    await s.spill([4], save(10));
    expect(s.bestPrefix([1])).toBeUndefined();
    await expect(access(loading.file)).rejects.toThrow();
  });

  it("a save cut short (its folder full) leaves no part of a file behind and keeps nothing", async () => {
    const { store: s } = store(1000);
    const written: string[] = [];
    // As a state save fails when the folder fills: part of the file is written, then ENOSPC.
    const fullAfter = (bytes: number) => async (file: string) => {
      written.push(file);
      await writeFile(file, Buffer.alloc(bytes));
      throw Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" });
    };
    await expect(s.spill([1, 2, 3], fullAfter(10))).rejects.toThrow(/ENOSPC/);
    expect(written).toHaveLength(1);
    await expect(access(written[0]!)).rejects.toThrow();
    await expect(access(`${written[0]!}.json`)).rejects.toThrow();
    expect(s.size).toBe(0);
    expect(s.bytes).toBe(0);
    expect(s.takeChanges()).toBeUndefined();
    // The next save that fits is kept.
    expect(await s.spill([4, 5], save(10))).toBeDefined();
    expect(s.size).toBe(1);
  });

  it("reports every state it keeps and drops, once, for the host's scheduler", async () => {
    const { store: s, clock } = store(25);
    expect(s.takeChanges()).toBeUndefined();
    clock.now = 1;
    const first = (await s.spill([1, 2], save(10)))!;
    clock.now = 2;
    const second = (await s.spill([3, 4], save(10)))!;
    expect(s.takeChanges()).toEqual({
      stored: [
        { id: stateId(first), tokens: [1, 2] },
        { id: stateId(second), tokens: [3, 4] },
      ],
      dropped: [],
    });
    // Taken: nothing again until the store changes.
    expect(s.takeChanges()).toBeUndefined();
    clock.now = 3;
    // Over budget: the least recently used state goes, and that is reported too.
    const third = (await s.spill([5], save(10)))!;
    await s.remove(second);
    expect(s.takeChanges()).toEqual({ stored: [{ id: stateId(third), tokens: [5] }], dropped: [stateId(first), stateId(second)] });
    // A state bigger than the whole budget is never kept, so never reported.
    await s.spill([6], save(30));
    expect(s.takeChanges()).toBeUndefined();
    // Ids are the state files' names: distinct for every state.
    expect(new Set([first, second, third].map(stateId)).size).toBe(3);
  });

  it("drops a state that a newer one holds all but a short tail of, its file too, and reports it; keeps one that differs more, and one being loaded", async () => {
    const { store: s } = store(10_000);
    const shared = Array.from({ length: 90 }, (_, i) => 1000 + i);
    const question = (k: number) => Array.from({ length: 10 }, (_, i) => 10 * k + i);
    // One prefix, a question each: the second holds 90 of the first's 100 tokens.
    const first = (await s.spill([...shared, ...question(1)], save(10)))!;
    const second = (await s.spill([...shared, ...question(2)], save(10)))!;
    expect(s.size).toBe(1);
    await expect(access(first.file)).rejects.toThrow();
    // The same conversation a turn later: it holds all of the state before it.
    const later = (await s.spill([...shared, ...question(2), ...question(3)], save(10)))!;
    expect(s.size).toBe(1);
    expect(s.takeChanges()).toEqual({
      stored: [
        { id: stateId(first), tokens: first.tokens },
        { id: stateId(second), tokens: second.tokens },
        { id: stateId(later), tokens: later.tokens },
      ],
      dropped: [stateId(first), stateId(second)],
    });
    // Another conversation, sharing only the first 30 tokens: both are kept.
    const other = (await s.spill([...shared.slice(0, 30), ...question(4)], save(10)))!;
    expect(s.size).toBe(2);
    // Being loaded: stays until its load ends, whatever supersedes it.
    const release = s.pin(other);
    await s.spill([...shared.slice(0, 30), ...question(4), 7], save(10));
    expect(s.size).toBe(3);
    await access(other.file);
    release();
  });

  it("drops an entry whose file turned out unusable", async () => {
    const { store: s } = store(100);
    const entry = (await s.spill([5, 6], save(10)))!;
    await s.remove(entry);
    expect(s.size).toBe(0);
    expect(s.bytes).toBe(0);
    await expect(access(entry.file)).rejects.toThrow();
  });

  it("keeps within its byte budget by dropping the least recently used state", async () => {
    const { store: s, clock } = store(25);
    clock.now = 1;
    const a = await s.spill([1], save(10));
    clock.now = 2;
    await s.spill([2], save(10));
    clock.now = 3;
    s.touch(a!); // [1] is now the most recent
    await s.spill([3], save(10)); // 30 > 25: [2] goes
    expect(s.bytes).toBe(20);
    expect(s.bestPrefix([2])).toBeUndefined();
    expect(s.bestPrefix([1])?.length).toBe(1);
    expect(await s.spill([4], save(100))).toBeUndefined(); // bigger than the whole budget: not kept
    expect(s.size).toBe(2);
  });

  it("counts only recently used states when asked for a window", async () => {
    const { store: s, clock } = store(1000);
    clock.now = 1_000;
    await s.spill([5, 6], save(1));
    clock.now = 200_000;
    expect(s.bestPrefix([5, 6], 180_000)).toBeUndefined();
    expect(s.bestPrefix([5, 6])?.length).toBe(2);
  });

  it("adopts a state made for the same model and context, and refuses any other", async () => {
    const { store: source } = store(1000);
    const entry = await source.spill([1, 2, 3], save(8));
    const { store: target, dir } = store(1000);
    const exported = await source.export(entry!, join(dir, "copies"));
    expect((await target.adopt(exported))?.tokens).toEqual([1, 2, 3]);

    const other = new StateStore(join(dir, "other"), { ...identity, modelFingerprint: "100:def" }, 1000);
    await expect(other.adopt(exported)).rejects.toThrow(StateMismatchError);
    await expect(other.adopt(exported)).rejects.toThrow(/modelFingerprint "100:abc" != "100:def"/);
    const smaller = new StateStore(join(dir, "small"), { ...identity, contextSize: 512 }, 1000);
    await expect(smaller.adopt(exported)).rejects.toThrow(/contextSize 1024 != 512/);
    const orphan = join(dir, "orphan.state");
    writeFileSync(orphan, "x");
    await expect(target.adopt(orphan)).rejects.toThrow(/identity file is missing/);
  });
});
