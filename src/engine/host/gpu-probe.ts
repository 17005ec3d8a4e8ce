// Which GPUs this machine has, asked in a short child process: llama.cpp's VRAM query opens
// a CUDA context on every card, which would stay in the host's memory for its whole life.
// Run directly, this file prints the detection as JSON (that is what the child does).
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { processEntry } from "./entry.js";
import { detectGpus, type GpuDetection, type GpuRequest } from "./gpu-detect.js";

const run = promisify(execFile);
const self = processEntry(import.meta.url, "gpu-probe");

export async function probeGpus(gpu: GpuRequest): Promise<GpuDetection> {
  if (gpu === false) return { backend: "cpu", devices: [] };
  const { stdout } = await run(process.execPath, [...self.execArgv, self.filename, "--gpu", String(gpu)], { timeout: 60_000 });
  return JSON.parse(stdout.trim().split("\n").at(-1)!) as GpuDetection;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const flag = process.argv.indexOf("--gpu");
  const gpu = (flag >= 0 ? process.argv[flag + 1] : "auto") as Exclude<GpuRequest, false>;
  console.log(JSON.stringify(await detectGpus({ gpu })));
}
