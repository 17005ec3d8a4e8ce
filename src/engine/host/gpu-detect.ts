// Which llama.cpp backend this machine really gives a worker, and which GPUs it sees, through
// node-llama-cpp itself (the `getLlama` call a worker makes; a worker also refuses the prebuilt
// fallback when its environment asks for a local build, worker/llama-binary.ts, and then says
// so when it loads), plus the environment that pins a per-GPU worker process to one device.
//
// Facts about node-llama-cpp 3.21.1 this relies on (read in its dist/ and llama/addon/):
// - `getLlama({build: "never"})` uses a local build (`source download`/`source build`) that
//   matches the options, else a prebuilt binary that loads, else throws NoBinaryFoundError.
//   It never compiles, so asking for "cuda" on a machine without CUDA fails in well under a
//   second instead of starting a source build.
// - `gpu: "metal"` on Linux/Windows is turned into "auto" by node-llama-cpp: the backend
//   reported here is what actually loaded (`llama.gpu`), which is what a worker started with
//   the same setting gets too.
// - `llama.getGpuDeviceNames()` lists the GPU (and integrated GPU) devices in ggml's order.
// - There is no per-device VRAM API: `llama.getVramState()` sums `total`/`used` over all
//   GPU devices. With one device that is its VRAM; with several, `vramBytes` is the total
//   divided by the device count (`vramSource: "even-split"`), exact only when the cards
//   are alike. A per-GPU worker process (CUDA_VISIBLE_DEVICES) sees its own card's VRAM
//   exactly; `native/check-backends.ts` prints it.
// - A process that exits with a Llama alive can abort natively: every Llama made here is
//   disposed before the promise settles.
// - Detection loads the backend in the calling process. With CUDA, reading VRAM runs
//   cudaSetDevice + cudaMemGetInfo on every device (llama.cpp ggml-cuda.cu), which creates a
//   CUDA context per GPU that outlives dispose() (until the process exits). A host that must
//   not hold GPU memory should call this in a short child process (as check-backends does).
import { getLlama, LlamaLogLevel, NoBinaryFoundError, type Llama } from "node-llama-cpp";

export type GpuBackend = "cuda" | "vulkan" | "metal" | "cpu";

/** The config's `gpu` values: `false` is CPU only. */
export type GpuRequest = "auto" | "cuda" | "vulkan" | "metal" | false;

export interface GpuDevice {
  /** Index in ggml's device order: the value for `visibleDevicesEnv(backend, index)`. */
  index: number;
  name: string;
  /** Total VRAM of the device; see `GpuDetection.vramSource` for how exact it is. */
  vramBytes?: number;
}

export interface GpuDetection {
  backend: GpuBackend;
  devices: GpuDevice[];
  /**
   * "device": one device, its own VRAM. "even-split": several devices, the summed VRAM
   * divided by their count (node-llama-cpp 3.21.1 has no per-device VRAM). Absent with no device.
   */
  vramSource?: "device" | "even-split";
  /** "localBuild" (a `source download`/`source build` binary) or "prebuilt"; absent when nothing loaded. */
  buildType?: "localBuild" | "prebuilt";
  /** Custom CMake options of the binary that loaded (e.g. CMAKE_CUDA_ARCHITECTURES of a local build). */
  cmakeOptions?: Record<string, string>;
  /** Why the answer is "cpu" although a GPU backend was asked for. */
  fallbackReason?: string;
}

export interface DetectGpusOptions {
  /** Backend to ask node-llama-cpp for; default "auto". `false` answers "cpu" without loading anything. */
  gpu?: GpuRequest;
}

export async function detectGpus(options: DetectGpusOptions = {}): Promise<GpuDetection> {
  const gpu = options.gpu ?? "auto";
  if (gpu === false) return { backend: "cpu", devices: [] };
  let llama: Llama;
  try {
    llama = await getLlama({
      gpu,
      // Never compile here: no binary for the backend means "no such backend on this machine".
      build: "never",
      // No "falling back to ..." lines from node-llama-cpp: the fallback is reported in the result.
      progressLogs: false,
      logLevel: LlamaLogLevel.error,
      // Only devices and memory are read: no thread pool worth sizing.
      maxThreads: 1,
    });
  } catch (error) {
    const reason =
      error instanceof NoBinaryFoundError
        ? `node-llama-cpp found no ${gpu === "auto" ? "" : `${gpu} `}binary that loads on this machine (local build or prebuilt)`
        : `node-llama-cpp failed to load the ${gpu} backend: ${error instanceof Error ? error.message : String(error)}`;
    return { backend: "cpu", devices: [], fallbackReason: reason };
  }
  try {
    const backend: GpuBackend = llama.gpu === false ? "cpu" : llama.gpu;
    const loaded = {
      buildType: llama.buildType,
      ...(Object.keys(llama.cmakeOptions).length > 0 ? { cmakeOptions: { ...llama.cmakeOptions } } : {}),
    };
    if (backend === "cpu") {
      return {
        backend,
        devices: [],
        ...loaded,
        ...(gpu === "auto" ? {} : { fallbackReason: `asked for ${gpu}, node-llama-cpp loaded the CPU backend` }),
      };
    }
    const names = await llama.getGpuDeviceNames();
    const vram = await llama.getVramState();
    const perDevice = names.length > 0 && vram.total > 0 ? Math.floor(vram.total / names.length) : undefined;
    const devices: GpuDevice[] = names.map((name, index) => ({
      index,
      name,
      ...(perDevice === undefined ? {} : { vramBytes: perDevice }),
    }));
    return {
      backend,
      devices,
      ...(perDevice === undefined ? {} : { vramSource: names.length === 1 ? "device" : "even-split" }),
      ...loaded,
    };
  } finally {
    await llama.dispose();
  }
}

/**
 * The environment a per-GPU worker process gets so that llama.cpp sees only device `index`
 * (inside the process that device becomes device 0). CUDA: CUDA_VISIBLE_DEVICES (indices
 * follow CUDA_DEVICE_ORDER: if you set it, set it for the whole Radixgate process so that
 * detection and workers count alike). Vulkan: GGML_VK_VISIBLE_DEVICES, which ggml-vulkan
 * reads as an index into the Vulkan physical-device list; that equals the detection index
 * unless the list holds devices ggml skips (a CPU "llvmpipe" device listed before a GPU, a
 * second driver for the same card): check-backends shows it. Metal and CPU: nothing to pin.
 */
export function visibleDevicesEnv(backend: GpuBackend, index: number): Record<string, string> {
  if (!Number.isInteger(index) || index < 0) throw new RangeError(`device index must be an integer >= 0, got ${index}`);
  switch (backend) {
    case "cuda":
      return { CUDA_VISIBLE_DEVICES: String(index) };
    case "vulkan":
      return { GGML_VK_VISIBLE_DEVICES: String(index) };
    case "metal":
    case "cpu":
      return {};
  }
}
