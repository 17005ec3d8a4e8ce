// Prints which llama.cpp backend and device a Radixgate worker really gets on this machine.
//
//   npx tsx native/check-backends.ts                      # what gpu: auto gives
//   npx tsx native/check-backends.ts --config config.yml  # each models[].gpu setting of that file
//   ... --expect-local-build                              # also fail when a GPU worker is on a prebuilt binary
//
// For every GPU that node-llama-cpp detects it starts a short child process with that GPU's
// pinning variable (CUDA_VISIBLE_DEVICES / GGML_VK_VISIBLE_DEVICES, as a per-GPU worker gets
// it), calls getLlama there exactly as a worker does (`build: "never"`), prints the backend,
// the binary (prebuilt or local build, its CMake options), the devices it sees and their VRAM,
// disposes and exits. It checks that each child sees exactly one device, the expected one,
// with the expected backend. Without GPUs it runs one child and prints the CPU backend and
// its thread counts. Exit code 0 when every check passed, 1 otherwise.
//
// The child is this same file started with `--child <json>`.
import { spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { getLlama, getLlamaGpuTypes, getModuleVersion, LlamaLogLevel, type Llama } from "node-llama-cpp";
import { loadConfigFile, resolveConfigPath } from "../src/config/load-config.js";
import { detectGpus, visibleDevicesEnv, type GpuBackend, type GpuRequest } from "../src/engine/host/gpu-detect.js";

const thisFile = fileURLToPath(import.meta.url);
const repoRoot = resolve(dirname(thisFile), "..");
const REPORT_MARKER = "@@radixgate-check-backends@@ ";
const CHILD_TIMEOUT_MS = 180_000;
const PINNING_VARS = ["CUDA_VISIBLE_DEVICES", "GGML_VK_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"] as const;

interface ChildSpec {
  gpu: GpuRequest;
  threads?: number;
}

interface ChildReport {
  pid: number;
  env: Partial<Record<(typeof PINNING_VARS)[number], string>>;
  error?: string;
  backend?: GpuBackend;
  buildType?: "localBuild" | "prebuilt";
  cmakeOptions?: Record<string, string>;
  llamaCpp?: string;
  deviceNames?: string[];
  vram?: { total: number; used: number; free: number };
  cpuMathCores?: number;
  maxThreads?: number;
  supportsGpuOffloading?: boolean;
}

// ---------------------------------------------------------------- child

async function runChild(spec: ChildSpec): Promise<void> {
  const report: ChildReport = { pid: process.pid, env: {} };
  for (const name of PINNING_VARS) {
    const value = process.env[name];
    if (value !== undefined) report.env[name] = value;
  }
  let llama: Llama | undefined;
  try {
    // The same call as a worker (src/engine/worker-engine.ts): never compile at start.
    llama = await getLlama({ gpu: spec.gpu, build: "never", maxThreads: spec.threads, logLevel: LlamaLogLevel.warn });
    report.backend = llama.gpu === false ? "cpu" : llama.gpu;
    report.buildType = llama.buildType;
    report.cmakeOptions = { ...llama.cmakeOptions };
    report.llamaCpp = `${llama.llamaCppRelease.repo} ${llama.llamaCppRelease.release}`;
    report.deviceNames = await llama.getGpuDeviceNames();
    const { total, used, free } = await llama.getVramState();
    report.vram = { total, used, free };
    report.cpuMathCores = llama.cpuMathCores;
    report.maxThreads = llama.maxThreads;
    report.supportsGpuOffloading = llama.supportsGpuOffloading;
  } catch (error) {
    const name = error instanceof Error ? error.constructor.name : "Error";
    const message = error instanceof Error ? error.message : String(error);
    report.error = message === name || message === "" ? name : `${name}: ${message}`;
    process.exitCode = 1;
  } finally {
    // A process that exits with llama.cpp objects alive can abort natively.
    await llama?.dispose();
  }
  process.stdout.write(`${REPORT_MARKER + JSON.stringify(report)}\n`);
}

// ---------------------------------------------------------------- parent

interface Plan {
  gpu: GpuRequest;
  threads?: number;
  models: string[];
}

interface ChildResult {
  report?: ChildReport;
  code: number | null;
  stderr: string;
}

function spawnChild(spec: ChildSpec, extraEnv: Record<string, string>): Promise<ChildResult> {
  return new Promise((resolvePromise) => {
    const child = spawn(process.execPath, ["--import", "tsx", thisFile, "--child", JSON.stringify(spec)], {
      cwd: repoRoot,
      env: { ...process.env, ...extraEnv },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => {
      stderr += `\n(check-backends: child ${child.pid} still running after ${CHILD_TIMEOUT_MS / 1000} s, killed)`;
      child.kill("SIGKILL");
    }, CHILD_TIMEOUT_MS);
    child.on("close", (code) => {
      clearTimeout(timer);
      const line = stdout.split("\n").find((l) => l.startsWith(REPORT_MARKER));
      const report = line === undefined ? undefined : (JSON.parse(line.slice(REPORT_MARKER.length)) as ChildReport);
      resolvePromise({ ...(report === undefined ? {} : { report }), code, stderr });
    });
  });
}

function gib(bytes: number): string {
  return `${(bytes / 1024 ** 3).toFixed(1)} GiB`;
}

function formatEnv(env: Record<string, string>): string {
  const entries = Object.entries(env);
  return entries.length === 0 ? "no pinning variable" : entries.map(([k, v]) => `${k}=${v}`).join(" ");
}

function formatBinary(report: ChildReport): string {
  const cmake = Object.entries(report.cmakeOptions ?? {}).map(([k, v]) => `${k}=${v}`);
  return `${report.buildType ?? "?"} binary, llama.cpp ${report.llamaCpp ?? "?"}${cmake.length > 0 ? `, cmake ${cmake.join(" ")}` : ""}`;
}

function indent(text: string, prefix = "      "): string {
  return text
    .trim()
    .split("\n")
    .map((line) => prefix + line)
    .join("\n");
}

/** The local builds node-llama-cpp would consider (`source download`/`source build` output). */
function describeLocalBuilds(): string {
  const llamaDir = join(dirname(createRequire(import.meta.url).resolve("node-llama-cpp")), "..", "llama");
  const buildsDir = join(llamaDir, "localBuilds");
  const builds = existsSync(buildsDir) ? readdirSync(buildsDir).filter((name) => !name.startsWith(".")) : [];
  if (builds.length === 0) return "none (prebuilt binaries only)";
  let last: string | undefined;
  try {
    last = (JSON.parse(readFileSync(join(llamaDir, "lastBuild.json"), "utf8")) as { folderName?: string }).folderName;
  } catch {
    last = undefined;
  }
  return `${builds.map((name) => (name === last ? `${name} (last build)` : name)).join(", ")} in ${buildsDir}`;
}

function plansFromArgs(argv: readonly string[]): { plans: Plan[]; source: string } {
  const flag = argv.indexOf("--config");
  const configPath = flag >= 0 ? argv[flag + 1] : argv.find((arg) => arg.startsWith("--config="))?.slice("--config=".length);
  if (configPath === undefined) return { plans: [{ gpu: "auto", models: [] }], source: "no --config: asking for gpu auto" };
  const loaded = loadConfigFile(resolveConfigPath(configPath, process.env));
  const plans: Plan[] = [];
  for (const model of loaded.config.models) {
    const existing = plans.find((plan) => plan.gpu === model.gpu && plan.threads === model.threads);
    if (existing) existing.models.push(model.id);
    else plans.push({ gpu: model.gpu, threads: model.threads, models: [model.id] });
  }
  return { plans, source: `config ${loaded.path}` };
}

async function checkPlan(plan: Plan, expectLocalBuild: boolean): Promise<boolean> {
  const who = plan.models.length > 0 ? ` (models: ${plan.models.join(", ")})` : "";
  const threads = plan.threads === undefined ? "llama.cpp default" : String(plan.threads);
  console.log(`\n== gpu: ${String(plan.gpu)}, threads: ${threads}${who}`);

  const detection = await detectGpus({ gpu: plan.gpu });
  const binary = detection.buildType === undefined ? "" : `, ${detection.buildType} binary`;
  console.log(`detected in this process: backend ${detection.backend}, ${detection.devices.length} GPU device(s)${binary}`);
  if (detection.fallbackReason) console.log(`  no GPU backend: ${detection.fallbackReason}`);
  for (const device of detection.devices) {
    const split = detection.vramSource === "even-split" ? " (total / device count)" : "";
    const vram = device.vramBytes === undefined ? "VRAM unknown" : `${gib(device.vramBytes)}${split}`;
    console.log(`  #${device.index} ${device.name}, ${vram}`);
  }

  const spec: ChildSpec = { gpu: plan.gpu, ...(plan.threads === undefined ? {} : { threads: plan.threads }) };
  let ok = true;

  if (detection.devices.length === 0) {
    const result = await spawnChild(spec, {});
    const report = result.report;
    if (!report || report.error !== undefined) {
      console.log(`worker: FAILS TO START with gpu: ${String(plan.gpu)}: ${report?.error ?? `child exited with code ${result.code}`}`);
      if (result.stderr.trim()) console.log(indent(result.stderr));
      return false;
    }
    console.log(`worker (pid ${report.pid}, ${formatEnv(report.env)}): backend ${report.backend}, ${formatBinary(report)}`);
    const cpus = os.cpus();
    console.log(
      `  CPU: ${cpus[0]?.model.trim() ?? "unknown"}, ${cpus.length} logical cores, ${report.cpuMathCores} math cores; ` +
        `llama maxThreads ${report.maxThreads}; UV_THREADPOOL_SIZE ${process.env.UV_THREADPOOL_SIZE ?? "4 (default)"}`,
    );
    console.log(`  GPU devices seen: ${report.deviceNames?.length ? report.deviceNames.join(", ") : "none"}`);
    if (report.backend !== "cpu") {
      console.log(`  MISMATCH: the worker got ${report.backend} although this process found no GPU device`);
      ok = false;
    }
    if (expectLocalBuild && report.buildType !== "localBuild") {
      console.log(`  MISMATCH: runs the ${report.buildType} binary, expected the local build`);
      ok = false;
    }
    return ok;
  }

  for (const device of detection.devices) {
    const env = visibleDevicesEnv(detection.backend, device.index);
    const result = await spawnChild(spec, env);
    const report = result.report;
    const label = `worker for #${device.index} (${formatEnv(env)})`;
    if (!report || report.error !== undefined) {
      console.log(`${label}: FAILS TO START: ${report?.error ?? `child exited with code ${result.code}`}`);
      if (result.stderr.trim()) console.log(indent(result.stderr));
      ok = false;
      continue;
    }
    const names = report.deviceNames ?? [];
    const vram = report.vram ? `VRAM ${gib(report.vram.total)} total, ${gib(report.vram.free)} free` : "VRAM unknown";
    console.log(`${label}: backend ${report.backend}, devices [${names.join(", ")}], ${vram}`);
    console.log(`  ${formatBinary(report)}; pid ${report.pid}, maxThreads ${report.maxThreads}`);
    const problems: string[] = [];
    if (report.backend !== detection.backend) problems.push(`backend ${report.backend}, expected ${detection.backend}`);
    if (detection.backend !== "metal" && names.length !== 1) problems.push(`sees ${names.length} devices, expected exactly 1`);
    if (names.length === 1 && names[0] !== device.name) problems.push(`sees "${names[0]}", expected "${device.name}"`);
    if (expectLocalBuild && report.buildType !== "localBuild") problems.push(`runs the ${report.buildType} binary, expected the local build`);
    if (problems.length > 0) {
      console.log(`  MISMATCH: ${problems.join("; ")}`);
      ok = false;
    } else {
      console.log("  OK");
    }
  }
  return ok;
}

async function main(argv: readonly string[]): Promise<number> {
  if (argv.includes("--help") || argv.includes("-h")) {
    console.log("usage: npx tsx native/check-backends.ts [--config config.yml] [--expect-local-build]");
    return 0;
  }
  const { plans, source } = plansFromArgs(argv);
  console.log(`radixgate check-backends: node-llama-cpp ${await getModuleVersion()}, node ${process.version}, ${process.platform}-${process.arch}`);
  console.log(`GPU types node-llama-cpp finds usable: ${(await getLlamaGpuTypes("supported")).map((t) => (t === false ? "cpu" : t)).join(", ")}`);
  console.log(`local builds: ${describeLocalBuilds()}`);
  // The pinning variables and the ones that decide which local build getLlama picks.
  const inherited = Object.keys(process.env)
    .filter((name) => (PINNING_VARS as readonly string[]).includes(name) || name.startsWith("NODE_LLAMA_CPP_"))
    .sort()
    .map((name) => `${name}=${process.env[name]}`);
  if (inherited.length > 0) console.log(`inherited: ${inherited.join(" ")}`);
  console.log(`source: ${source}`);
  let ok = true;
  const expectLocalBuild = argv.includes("--expect-local-build");
  for (const plan of plans) ok = (await checkPlan(plan, expectLocalBuild)) && ok;
  console.log(ok ? "\nall checks passed" : "\nSOME CHECKS FAILED");
  return ok ? 0 : 1;
}

const args = process.argv.slice(2);
if (args[0] === "--child") {
  await runChild(JSON.parse(args[1] ?? "{}") as ChildSpec);
} else {
  process.exitCode = await main(args);
}
