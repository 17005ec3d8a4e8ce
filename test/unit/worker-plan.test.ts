// How many workers a model gets, how each is isolated, and which GPU each is pinned to.
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/load-config.js";
import type { GpuDetection } from "../../src/engine/host/gpu-detect.js";
import { planWorkers } from "../../src/serving/fleet.js";

const model = (fields: Record<string, unknown> = {}) => parseConfig({ models: [{ id: "m", source: "preset:tiny", ...fields }] }).models[0]!;
const cpu: GpuDetection = { backend: "cpu", devices: [] };
const gpus = (n: number): GpuDetection => ({ backend: "cuda", devices: Array.from({ length: n }, (_, index) => ({ index, name: `RTX 3090 #${index}` })) });

describe("planWorkers", () => {
  it("workers: auto on a machine without GPU starts 2 thread workers", () => {
    expect(planWorkers(model(), cpu)).toEqual([
      { isolation: "thread", env: {} },
      { isolation: "thread", env: {} },
    ]);
  });

  it("workers: auto with several GPUs starts one process per GPU, each pinned to its card", () => {
    expect(planWorkers(model({ gpu: "cuda" }), gpus(3))).toEqual([
      { isolation: "process", env: { CUDA_VISIBLE_DEVICES: "0" } },
      { isolation: "process", env: { CUDA_VISIBLE_DEVICES: "1" } },
      { isolation: "process", env: { CUDA_VISIBLE_DEVICES: "2" } },
    ]);
  });

  it("one GPU: one thread worker (nothing to pin)", () => {
    expect(planWorkers(model({ gpu: "cuda" }), gpus(1))).toEqual([{ isolation: "thread", env: {} }]);
  });

  it("explicit workers and isolation override auto; workers wrap around the GPUs", () => {
    const plan = planWorkers(model({ gpu: "vulkan", workers: 3, isolation: "process" }), { backend: "vulkan", devices: gpus(2).devices });
    expect(plan.map((worker) => worker.env)).toEqual([{ GGML_VK_VISIBLE_DEVICES: "0" }, { GGML_VK_VISIBLE_DEVICES: "1" }, { GGML_VK_VISIBLE_DEVICES: "0" }]);
    expect(planWorkers(model({ workers: 1, isolation: "process" }), cpu)).toEqual([{ isolation: "process", env: {} }]);
  });
});
