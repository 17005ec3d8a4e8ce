// Spilled KV states and prefix copies between workers, on real llama.cpp (tiny model).
import { mkdtemp, readdir, rm, truncate } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WorkerHandle, type Isolation } from "../../src/engine/host/worker-handle.js";
import { PromptPreparer } from "../../src/engine/host/prompt-preparer.js";
import { ensureModel, makeModel } from "../../src/presets/make-model.js";
import { workerInit } from "../helpers/worker-init.js";

let dir: string;
let preparer: PromptPreparer;
let single: WorkerHandle; // one slot: every other conversation evicts the last one
let source: WorkerHandle;
let target: WorkerHandle;
let otherModel: WorkerHandle;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "radixgate-spill-"));
  const modelPath = await ensureModel("tiny");
  const otherPath = (await makeModel({ preset: "tiny", seed: 2, outPath: join(dir, "tiny-seed2.gguf") })).path;
  preparer = new PromptPreparer([{ id: "tiny", path: modelPath }], 1);
  const spill = { budgetBytes: 64 * 1024 * 1024, minTokens: 16, recentMs: 600_000, dir };
  single = new WorkerHandle(workerInit(modelPath, { workerId: "single", slots: 1, spill }));
  source = new WorkerHandle(workerInit(modelPath, { workerId: "a", spill }));
  target = new WorkerHandle(workerInit(modelPath, { workerId: "b", spill }));
  otherModel = new WorkerHandle(workerInit(otherPath, { workerId: "other", spill }));
  await Promise.all([single.start(), source.start(), target.start(), otherModel.start()]);
});

afterAll(async () => {
  await Promise.allSettled([single, source, target, otherModel, preparer].map((thing) => thing?.close()));
  await rm(dir, { recursive: true, force: true });
});

const greedy = { temperature: 0, stop: [] as string[], maxTokens: 8 };

async function prompt(text: string): Promise<Int32Array> {
  return (
    await preparer.chat({
      modelId: "tiny",
      messages: [
        { role: "system", content: text },
        { role: "user", content: "go" },
      ],
    })
  ).tokens;
}

describe("spill and reload", () => {
  it("saves an evicted prefix and loads it back instead of recomputing it", async () => {
    const first = await prompt(`first conversation ${"with a long shared system prompt ".repeat(20)}`);
    const second = await prompt(`second conversation ${"about something else entirely ".repeat(20)}`);
    const cold = await single.generate("1", first, greedy);
    expect(cold.restoredTokens).toBe(0);
    // The only slot now serves another conversation: the first one's KV is spilled, not lost.
    const other = await single.generate("2", second, greedy);
    expect(other.slot).toBe(cold.slot);
    const again = await single.generate("3", first, greedy);
    expect(again.restoredTokens).toBeGreaterThan(first.length / 2);
    expect(again.cachedTokens).toBe(first.length - 1); // only the last prompt token is evaluated
    expect(again.text).toBe(cold.text);
  });
});

describe("copy across workers", () => {
  it("gives the target worker the same greedy continuation, with the prefix reported cached", async () => {
    const tokens = await prompt(`a hot prefix ${"that many requests share ".repeat(25)}`);
    const onSource = await source.generate("s", tokens, greedy);
    const exported = await source.exportPrefix(tokens);
    expect(exported).not.toBeNull();
    expect(exported!.tokens).toBeGreaterThanOrEqual(tokens.length - 1);
    const imported = await target.importState(exported!.file);
    expect(imported.tokens).toBe(exported!.tokens);
    const onTarget = await target.generate("t", tokens, greedy);
    expect(onTarget.restoredTokens).toBeGreaterThan(0);
    expect(onTarget.cachedTokens).toBe(tokens.length - 1);
    expect(onTarget.text).toBe(onSource.text);
  });

  it("refuses a state made from another model file, and keeps serving", async () => {
    const tokens = await prompt(`refused ${"state from elsewhere ".repeat(20)}`);
    await source.generate("r", tokens, greedy);
    const exported = await source.exportPrefix(tokens);
    await expect(otherModel.importState(exported!.file)).rejects.toThrow(/refused to load KV state .*modelFingerprint/);
    const after = await otherModel.generate("o", tokens, greedy);
    expect(after.restoredTokens).toBe(0);
    expect(after.cachedTokens).toBeLessThan(5);
  });

  it("exports nothing for a prefix the worker does not hold", async () => {
    expect(await source.exportPrefix(await prompt("never seen by this worker"))).toBeNull();
  });
});

/** Every state file under `root` (the workers' stores are folders in it). */
async function stateFiles(root: string): Promise<string[]> {
  const entries = await readdir(root, { recursive: true, withFileTypes: true });
  return entries.filter((entry) => entry.isFile() && entry.name.endsWith(".state")).map((entry) => join(entry.parentPath, entry.name));
}

describe.each<Isolation>(["thread", "process"])("a stored state that cannot be loaded (%s isolation)", (isolation) => {
  let worker: WorkerHandle;
  let storeRoot: string;
  let first: Int32Array;
  let second: Int32Array;
  let firstCold: string;
  let secondCold: string;

  beforeAll(async () => {
    storeRoot = await mkdtemp(join(tmpdir(), "radixgate-broken-"));
    const modelPath = await ensureModel("tiny");
    worker = new WorkerHandle(
      workerInit(modelPath, {
        workerId: `broken-${isolation}`,
        slots: 1,
        spill: { budgetBytes: 64 * 1024 * 1024, minTokens: 16, recentMs: 600_000, dir: storeRoot },
      }),
      { isolation },
    );
    await worker.start();
    first = await prompt(`broken first ${"a conversation long enough to spill ".repeat(15)}`);
    second = await prompt(`broken second ${"another conversation that evicts it ".repeat(15)}`);
    firstCold = (await worker.generate("cold-1", first, greedy)).text;
    secondCold = (await worker.generate("cold-2", second, greedy)).text;
  });

  afterAll(async () => {
    await worker?.close();
    await rm(storeRoot, { recursive: true, force: true });
  });

  /** The first conversation again: its state fails to load, it is computed, and the slot then really holds it. */
  async function expectRecomputedThenReused(label: string): Promise<void> {
    const again = await worker.generate(`after-${label}`, first, greedy);
    expect(again.restoredTokens).toBe(0);
    expect(again.restoreFailed).toMatch(/loading KV state .* failed/);
    expect(again.text).toBe(firstCold);
    // The next turn reuses the slot's content and decodes: the slot is consistent.
    const reused = await worker.generate(`reuse-after-${label}`, first, greedy);
    expect(reused.cachedTokens).toBe(first.length - 1);
    expect(reused.text).toBe(firstCold);
  }

  it("recomputes when the state file was deleted, and the slot stays consistent", async () => {
    // The slot holds the second conversation; the first one's KV is in a file of the store.
    expect((await stateFiles(storeRoot)).length).toBeGreaterThan(0);
    for (const file of await stateFiles(storeRoot)) await rm(file);
    await expectRecomputedThenReused("delete");
  });

  it("recomputes when the state file was cut short, and the slot stays consistent", async () => {
    // Evict the first conversation again (the second is loaded back, the first spilled)...
    expect((await worker.generate("evict", second, greedy)).text).toBe(secondCold);
    const files = await stateFiles(storeRoot);
    expect(files.length).toBeGreaterThan(0);
    // ...then damage every stored state.
    for (const file of files) await truncate(file, 64);
    await expectRecomputedThenReused("truncate");
  });
});
