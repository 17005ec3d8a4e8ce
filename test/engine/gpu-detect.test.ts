// GPU detection through node-llama-cpp: on a machine without CUDA/Vulkan it answers "cpu"
// with no devices, without throwing and without trying a source build (which takes 16 s and
// more before it fails); and the per-GPU worker environment.
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { getLlamaGpuTypes } from "node-llama-cpp";
import { beforeAll, describe, expect, it } from "vitest";
import { detectGpus, visibleDevicesEnv } from "../../src/engine/host/gpu-detect.js";

/** Where `source download`/`source build` (and a build started by getLlama) put their binaries. */
const localBuildsDir = join(dirname(createRequire(import.meta.url).resolve("node-llama-cpp")), "..", "llama", "localBuilds");

/** GPU types node-llama-cpp finds usable here; `[false]` on a CPU-only machine. */
let supported: Awaited<ReturnType<typeof getLlamaGpuTypes>>;
let cpuOnly = true;

beforeAll(async () => {
  supported = await getLlamaGpuTypes("supported");
  cpuOnly = supported.every((type) => type === false);
});

describe("detectGpus", () => {
  it("answers cpu with no devices on a machine without GPUs, in seconds", async (context) => {
    if (!cpuOnly) context.skip();
    const started = performance.now();
    const detection = await detectGpus();
    expect(detection.backend).toBe("cpu");
    expect(detection.devices).toEqual([]);
    expect(detection.buildType).toBe("prebuilt");
    expect(performance.now() - started).toBeLessThan(10_000);
  });

  it("falls back to cpu when cuda or vulkan is asked for and missing, without a build", async (context) => {
    if (!cpuOnly) context.skip();
    const hadLocalBuilds = existsSync(localBuildsDir);
    for (const gpu of ["cuda", "vulkan"] as const) {
      const started = performance.now();
      const detection = await detectGpus({ gpu });
      expect(detection.backend).toBe("cpu");
      expect(detection.devices).toEqual([]);
      expect(detection.fallbackReason).toMatch(new RegExp(`no ${gpu} binary`));
      // A source build fails after 16 s at the earliest; loading-and-failing takes under 1 s.
      expect(performance.now() - started).toBeLessThan(10_000);
    }
    // No build was started: it would have created node-llama-cpp's localBuilds folder.
    if (!hadLocalBuilds) expect(existsSync(localBuildsDir)).toBe(false);
  });

  it("gpu: false answers cpu without loading anything", async () => {
    expect(await detectGpus({ gpu: false })).toEqual({ backend: "cpu", devices: [] });
  });

  it("on a machine with GPUs, lists devices with consecutive indices", async (context) => {
    if (cpuOnly) context.skip();
    const detection = await detectGpus();
    expect(["cuda", "vulkan", "metal", "cpu"]).toContain(detection.backend);
    detection.devices.forEach((device, i) => {
      expect(device.index).toBe(i);
      expect(device.name.length).toBeGreaterThan(0);
    });
  });
});

describe("visibleDevicesEnv", () => {
  it("pins a CUDA worker with CUDA_VISIBLE_DEVICES", () => {
    expect(visibleDevicesEnv("cuda", 0)).toEqual({ CUDA_VISIBLE_DEVICES: "0" });
    expect(visibleDevicesEnv("cuda", 3)).toEqual({ CUDA_VISIBLE_DEVICES: "3" });
  });

  it("pins a Vulkan worker with GGML_VK_VISIBLE_DEVICES", () => {
    expect(visibleDevicesEnv("vulkan", 1)).toEqual({ GGML_VK_VISIBLE_DEVICES: "1" });
  });

  it("sets nothing for metal and cpu", () => {
    expect(visibleDevicesEnv("metal", 0)).toEqual({});
    expect(visibleDevicesEnv("cpu", 0)).toEqual({});
  });

  it("refuses an index that is not a non-negative integer", () => {
    expect(() => visibleDevicesEnv("cuda", -1)).toThrow(RangeError);
    expect(() => visibleDevicesEnv("cuda", 1.5)).toThrow(RangeError);
  });
});
