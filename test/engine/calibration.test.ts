// Calibration of a real llama.cpp worker on the tiny model: the profile task, the fit and the cache.
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { workerInit } from "../helpers/worker-init.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { calibrate, calibrationCachePath, calibrationIdentity, type CalibrationIdentity } from "../../src/engine/host/calibration.js";
import { WorkerHandle } from "../../src/engine/host/worker-handle.js";
import { defaultProfileSizes } from "../../src/engine/wire/profile-plan.js";
import type { WorkerInit } from "../../src/engine/wire/protocol.js";
import { TimeModel } from "../../src/scheduler/time-model.js";
import { ensureModel } from "../../src/presets/make-model.js";

let worker: WorkerHandle;
let init: WorkerInit;
let identity: CalibrationIdentity;
let cacheDir: string;

/** Counts the profile tasks the worker runs, so a cache hit is observable. */
let profiles = 0;

beforeAll(async () => {
  const modelPath = await ensureModel("tiny");
  init = workerInit(modelPath);
  worker = new WorkerHandle(init);
  const loaded = await worker.start();
  identity = await calibrationIdentity(init, loaded);
  cacheDir = await mkdtemp(join(tmpdir(), "radixgate-calibration-"));
  const profile = worker.profile.bind(worker);
  worker.profile = (options) => {
    profiles++;
    return profile(options);
  };
});

afterAll(async () => {
  await worker?.close();
  if (cacheDir) await rm(cacheDir, { recursive: true, force: true });
});

describe("calibrate", () => {
  it("profiles a real worker quickly and fits positive, finite coefficients", async () => {
    const started = performance.now();
    const result = await calibrate(worker, identity, cacheDir);
    const wallMs = performance.now() - started;
    expect(result.fromCache).toBe(false);
    expect(profiles).toBe(1);
    const profile = result.profile!;
    expect(profile.otherBusySlots).toBe(0);
    expect(profile.totalMs).toBeLessThan(2000);
    expect(wallMs).toBeLessThan(2000);

    // Cold prompts of each default size, then prompts on top of the cached largest one.
    const sizes = defaultProfileSizes(1024);
    expect(sizes).toEqual([32, 128, 512]);
    expect(profile.prefill.filter((s) => s.context === s.extend).map((s) => s.extend)).toEqual(sizes);
    expect(profile.prefill.some((s) => s.context > s.extend)).toBe(true);
    expect(profile.decode.length).toBe(2);
    expect(profile.copy.length).toBe(2);
    for (const s of [...profile.prefill, ...profile.copy]) expect(s.ms).toBeGreaterThan(0);
    for (const s of profile.decode) expect(s.msPerToken).toBeGreaterThan(0);
    // KV state: layers x kv_heads x head_dim x 2 x 2 bytes per token (tiny: 2 x 2 x 16 x 4 = 256),
    // plus a few bytes of bookkeeping per token (measured: 16, the token id and its cell).
    const [small, large] = profile.copy;
    const bytesPerToken = (large!.bytes - small!.bytes) / (large!.tokens - small!.tokens);
    expect(bytesPerToken).toBeGreaterThanOrEqual(256);
    expect(bytesPerToken).toBeLessThanOrEqual(256 + 32);

    const c = result.coefficients;
    for (const [key, value] of Object.entries(c)) {
      expect(Number.isFinite(value), key).toBe(true);
      expect(value, key).toBeGreaterThanOrEqual(0);
    }
    expect(c.base + c.perExtend + c.perContext + c.perExtendContext).toBeGreaterThan(0);
    expect(c.decodeBase + c.decodePerContext).toBeGreaterThan(0);
    expect(c.copyBase + c.copyPerToken).toBeGreaterThan(0);

    const model = new TimeModel(c);
    let previous = 0;
    for (const extend of [16, 64, 256, 512, 900]) {
      const ms = model.prefillMs(extend, extend);
      expect(ms).toBeGreaterThan(previous);
      previous = ms;
    }
    expect(model.prefillMs(512, 512)).toBeGreaterThan(model.prefillMs(32, 32));
  });

  it("leaves the worker serving, with the profiled slot empty", async () => {
    const tokens = [1, ...Array.from({ length: 40 }, (_, i) => 300 + (i % 50))];
    const first = await worker.generate("after-profile", tokens, { maxTokens: 4, temperature: 0, stop: [] });
    expect(first.completionTokens).toBe(4);
    expect(first.cachedTokens).toBeLessThan(2);
  });

  it("reuses the cached result for the same identity without profiling", async () => {
    const before = profiles;
    const first = await calibrate(worker, identity, cacheDir);
    const second = await calibrate(worker, { ...identity }, cacheDir);
    expect(profiles).toBe(before);
    expect(first.fromCache).toBe(true);
    expect(second.fromCache).toBe(true);
    expect(first.profile).toBeUndefined();
    expect(first.coefficients).toEqual(second.coefficients);
    expect(first.samples.prefill.length).toBeGreaterThan(0);
    expect(await readdir(cacheDir)).toEqual([calibrationCachePath(identity, cacheDir).slice(cacheDir.length + 1)]);
  });

  it("profiles again for another identity, or when the cache file is unreadable", async () => {
    const before = profiles;
    const other = { ...identity, threads: 2 };
    expect(calibrationCachePath(other, cacheDir)).not.toBe(calibrationCachePath(identity, cacheDir));
    expect((await calibrate(worker, other, cacheDir, { sizes: [16, 64], measureCopy: false })).fromCache).toBe(false);
    expect(profiles).toBe(before + 1);

    await writeFile(calibrationCachePath(identity, cacheDir), "{ not json");
    const redone = await calibrate(worker, identity, cacheDir, { sizes: [16, 64], measureCopy: false });
    expect(redone.fromCache).toBe(false);
    expect(profiles).toBe(before + 2);
    expect((await calibrate(worker, identity, cacheDir)).fromCache).toBe(true);
  });
});
