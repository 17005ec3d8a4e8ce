// Spilled KV states and prefix copies between workers, on real llama.cpp (tiny model).
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WorkerHandle } from "../../src/engine/host/worker-handle.js";
import { PromptPreparer } from "../../src/engine/host/prompt-preparer.js";
import { ensureModel, makeModel } from "../../models/make-model.js";
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

async function prompt(text: string): Promise<number[]> {
  return (await preparer.chat({ modelId: "tiny", messages: [{ role: "system", content: text }, { role: "user", content: "go" }] })).tokens;
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
