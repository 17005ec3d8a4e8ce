// `npm run bench:peer`: Radixgate side by side with llama-server, in one run, on the same
// GGUF (the generated `bench` model), the same total slots and threads and the same salted
// prompts. Arms, one after the other, each a fresh server process:
//   llama-server   one process, all slots (-np SLOTS -t THREADS)
//   radixgate-1w   one worker: SLOTS slots, THREADS threads
//   radixgate-2w   two workers: SLOTS/2 slots and THREADS/2 threads each (default policy)
//   radixgate-ls-1w  one worker of the llama-server engine (Radixgate in front of the same
//                  llama-server build): what Radixgate's own layer costs over llama.cpp's slot loop
//   radixgate-1w-native, radixgate-2w-native  radixgate-1w and -2w on node-llama-cpp built on
//                  this machine, when `npm run build:engine-native` has run
// All servers run for the whole benchmark and the arms take turns, workload by workload.
// Workloads: decode throughput (1, 2, 4 long completions at once, also at 1 thread for
// llama-server and one worker), one sequential agent (cold and warm TTFT), concurrent
// agents, a burst of distinct prompts, and a steady Poisson mix of agent turns and one-shot
// prompts (where a stall shows in p99). Around each decode measurement, the server's CPU
// time from /proc (process-cpu.ts): per output token, its main thread's share, idle cores.
// Results: bench/results/peer.{md,json}.
//
//   npm run bench:peer -- [--mix-seconds 120] [--llama-server <binary>] [--results peer] [--quick]
import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import { ensureModel } from "../../src/presets/make-model.js";
import { runIdentity } from "../git-commit.js";
import { NATIVE_BUILD_ENV, nativeBuildPresent } from "../../src/engine/host/native-build.js";
import { findOrBuildLlamaServer, startLlamaServer } from "./llama-server.js";
import { type ProcessCpu, processCpu, settle } from "./process-cpu.js";
import { percentile } from "../soak/stats.js";
import { presetInWeights, weightTypeArgument } from "../weights.js";
import { agents, burst, decodeThroughput, poissonMix, resent, type Sample, type Target, type WorkloadOptions } from "./workloads.js";

const { values } = parseArgs({
  options: {
    "mix-seconds": { type: "string", default: "120" },
    "mix-rate": { type: "string", default: "0.5" },
    slots: { type: "string", default: "4" },
    threads: { type: "string", default: "2" },
    seed: { type: "string", default: "1" },
    "llama-server": { type: "string" },
    quick: { type: "boolean", default: false },
    results: { type: "string", default: "peer" },
    weights: { type: "string", default: "F32" },
  },
});
const RESULTS = values.results;
if (!/^[a-z0-9-]+$/.test(RESULTS)) throw new RangeError("--results: a file name stem of lowercase letters, digits and dashes (bench/results/<stem>.md)");
const WEIGHTS = weightTypeArgument(values.weights);
const SLOTS = Number(values.slots);
const THREADS = Number(values.threads);
const quick = values.quick;
const MIX_SECONDS = quick ? 20 : Number(values["mix-seconds"]);
const MIX_RATE = Number(values["mix-rate"]);
const SEED = Number(values.seed);
if (!(SLOTS >= 2 && SLOTS % 2 === 0) || !(THREADS >= 1) || !(MIX_SECONDS > 0) || !(MIX_RATE > 0)) {
  throw new RangeError("usage: --slots <even >= 2> --threads <>= 1> --mix-seconds <> 0> --mix-rate <requests/s > 0>");
}
const CONTEXT_PER_SLOT = 4096;
const BATCH = 512;
const DECODE_TOKENS = quick ? 48 : 150;
const AGENT_TURNS = quick ? 3 : 6;
const CONCURRENT_AGENTS = SLOTS;
const BURST = 2 * SLOTS;
const DECODE_REPEATS = quick ? 1 : 3;
const WORKLOAD_REPEATS = quick ? 1 : 2;
// A burst's mean TTFT is set by the order its prompts' batches happen to fall in, and one
// burst moves by a fifth from one repeat to the next on the same server: more repeats than
// the other workloads, so that its ratio says more than the run's luck (each is ~7 s).
const BURST_REPEATS = quick ? 1 : 6;
const WORKLOAD: Omit<WorkloadOptions, "salt"> = { seed: SEED, contextWords: quick ? 120 : 500, maxTokens: 32 };

const log = (line: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`);
const ROOT = fileURLToPath(new URL("../..", import.meta.url));

interface ArmSpec {
  name: string;
  kind: "llama-server" | "radixgate";
  /** Radixgate's engine: node-llama-cpp (embedded, default) or llama-server processes it drives. */
  engine?: "node-llama-cpp" | "llama-server";
  workers: number;
  slotsPerWorker: number;
  threadsPerWorker: number;
  /** Extra environment for the server (a Radixgate arm without its compute thread pool). */
  env?: Record<string, string>;
}

interface Running {
  target: Target;
  /** The server's process id (its CPU time is read around each decode measurement). */
  pid: number | undefined;
  /** The llama.cpp binary of each embedded worker, as the server's /health reports it. */
  binaries?: string[];
  close(): Promise<void>;
}

let nextPort = 18080 + Math.floor(Math.random() * 1000);

async function startRadixgate(arm: ArmSpec, modelPath: string, binary: string): Promise<Running> {
  const dir = mkdtempSync(join(tmpdir(), "radixgate-peer-"));
  const port = nextPort++;
  const config = join(dir, "config.yml");
  writeFileSync(
    config,
    [
      "server:",
      "  host: 127.0.0.1",
      `  port: ${port}`,
      "  logLevel: warn",
      "models:",
      "  - id: bench",
      `    source: ${modelPath}`,
      `    workers: ${arm.workers}`,
      `    slots: ${arm.slotsPerWorker}`,
      `    contextSize: ${CONTEXT_PER_SLOT}`,
      `    batchSize: ${BATCH}`,
      `    threads: ${arm.threadsPerWorker}`,
      "    isolation: thread",
      `    engine: ${arm.engine ?? "node-llama-cpp"}`,
      ...(arm.engine === "llama-server" ? ["    llamaServer:", `      binary: ${binary}`] : []),
      "",
    ].join("\n"),
  );
  // As `npm start` runs it: the production build in its own process, libuv's pool raised
  // for the thread workers, glibc's malloc arenas capped.
  if (spawnSync(process.execPath, [join(ROOT, "scripts/ensure-build.mjs")], { stdio: "inherit" }).status !== 0) throw new Error("the build failed (above)");
  if (spawnSync(process.execPath, [join(ROOT, "scripts/build-native.mjs"), "--strict"], { stdio: "inherit" }).status !== 0)
    throw new Error("the compute thread pool did not build (above)");
  const child = spawn(process.execPath, [join(ROOT, "dist/main.js"), "serve", "--config", config], {
    cwd: ROOT,
    env: { ...process.env, UV_THREADPOOL_SIZE: process.env.UV_THREADPOOL_SIZE ?? "16", MALLOC_ARENA_MAX: process.env.MALLOC_ARENA_MAX ?? "2", ...arm.env },
    stdio: ["ignore", "ignore", "inherit"],
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const baseURL = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`radixgate exited with ${child.exitCode}`);
    const ready = await fetch(`${baseURL}/ready`).then(
      (response) => response.status === 200,
      () => false,
    );
    if (ready) break;
    if (i > 1200) throw new Error("radixgate was not ready within 4 minutes");
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  const health = (await (await fetch(`${baseURL}/health`)).json()) as { workers: { llama: { binary: string } | null }[] };
  return {
    target: { baseURL, model: "bench" },
    pid: child.pid,
    binaries: health.workers.map((worker) => worker.llama?.binary ?? "unknown"),
    close: async () => {
      child.kill("SIGTERM");
      await exited;
    },
  };
}

async function start(arm: ArmSpec, modelPath: string, binary: string): Promise<Running> {
  if (arm.kind === "radixgate") return startRadixgate(arm, modelPath, binary);
  const server = await startLlamaServer({
    binary,
    model: modelPath,
    slots: arm.slotsPerWorker,
    threads: arm.threadsPerWorker,
    contextPerSlot: CONTEXT_PER_SLOT,
    batchSize: BATCH,
  });
  return { target: { baseURL: server.baseURL, model: "bench" }, pid: server.pid, close: () => server.close() };
}

const meanOf = (values: readonly number[]) => (values.length === 0 ? Number.NaN : values.reduce((a, b) => a + b, 0) / values.length);

interface Summary {
  n: number;
  ttftMeanMs: number;
  ttftP50Ms: number;
  ttftP99Ms: number;
  outputTokensPerS: number;
  wallS: number;
  /** Mean prompt tokens per request the server computed (not taken from its KV cache). */
  computedPromptTokensMean: number;
}

function summarize(samples: readonly Sample[], wallS: number): Summary {
  const ttft = samples.map((sample) => sample.ttftMs);
  const tokens = samples.reduce((sum, sample) => sum + sample.completionTokens, 0);
  return {
    n: samples.length,
    ttftMeanMs: meanOf(ttft),
    ttftP50Ms: percentile(ttft, 50),
    ttftP99Ms: percentile(ttft, 99),
    outputTokensPerS: tokens / wallS,
    wallS,
    computedPromptTokensMean: meanOf(samples.map((sample) => sample.promptTokens - sample.cachedTokens)),
  };
}

interface ArmResult {
  arm: string;
  spec: ArmSpec;
  /** Per concurrency: output tokens/s of each repeat, and their median (streamed, as clients read them). */
  decode: Record<string, { tokensPerS: number; repeats: number[] }>;
  /** The same, not streamed: the engine's decoding without per-token delivery to the client. */
  decodeWhole: Record<string, { tokensPerS: number; repeats: number[] }>;
  /** Per "streamed x1", "whole x4", ...: each repeat's server CPU per output token (whole tree, and its main thread) and idle share of the cores. */
  decodeCpu: Record<string, DecodeCpu[]>;
  workloads: Record<string, Summary>;
  samples: Record<string, Sample[]>;
  /** A Radixgate arm's workers' llama.cpp binaries (from its /health). */
  binaries?: string[];
}

const median = (values: readonly number[]) => percentile(values, 50);

interface DecodeCpu {
  serverMsPerToken: number;
  mainThreadMsPerToken: number;
  /** 1 - (server + benchmark client CPU) / (wall x cores): the share of the cores neither used (other processes count as idle). */
  idleShare: number;
}

/** What a decode measurement cost the server's CPU, per output token; undefined without /proc. */
function decodeCpuOf(before: ProcessCpu | undefined, after: ProcessCpu | undefined, clientS: number, tokens: number, wallS: number): DecodeCpu | undefined {
  if (!before || !after || tokens === 0) return undefined;
  const serverS = after.treeS - before.treeS;
  return {
    serverMsPerToken: (serverS * 1000) / tokens,
    mainThreadMsPerToken: ((after.mainThreadS - before.mainThreadS) * 1000) / tokens,
    idleShare: Math.max(0, 1 - (serverS + clientS) / (wallS * cpus().length)),
  };
}

const started = Date.now();
let settledMs = 0;
const cpuAtStart = process.cpuUsage();
const loadAtStart = loadavg()[0]!;
const modelPath = await presetInWeights(await ensureModel("bench"), WEIGHTS, log);
const binary = await findOrBuildLlamaServer(values["llama-server"], log);
const salt = `peer run ${new Date().toISOString()} ${Math.random().toString(16).slice(2)}`;
const half = (n: number) => Math.max(1, Math.floor(n / 2));
const NATIVE_BUILD = nativeBuildPresent();
const arms: ArmSpec[] = [
  { name: "llama-server", kind: "llama-server", workers: 1, slotsPerWorker: SLOTS, threadsPerWorker: THREADS },
  { name: "radixgate-1w", kind: "radixgate", workers: 1, slotsPerWorker: SLOTS, threadsPerWorker: THREADS },
  { name: "radixgate-2w", kind: "radixgate", workers: 2, slotsPerWorker: SLOTS / 2, threadsPerWorker: half(THREADS) },
  // The same scheduler in front of llama.cpp's own slot loop: one llama-server worker.
  { name: "radixgate-ls-1w", kind: "radixgate", engine: "llama-server", workers: 1, slotsPerWorker: SLOTS, threadsPerWorker: THREADS },
  // node-llama-cpp compiled on this machine, when that build is there (npm run build:engine-native):
  // one worker, and two as radixgate-2w splits them.
  ...(NATIVE_BUILD
    ? [
        {
          name: "radixgate-1w-native",
          kind: "radixgate",
          workers: 1,
          slotsPerWorker: SLOTS,
          threadsPerWorker: THREADS,
          env: NATIVE_BUILD_ENV,
        } satisfies ArmSpec,
        {
          name: "radixgate-2w-native",
          kind: "radixgate",
          workers: 2,
          slotsPerWorker: SLOTS / 2,
          threadsPerWorker: half(THREADS),
          env: NATIVE_BUILD_ENV,
        } satisfies ArmSpec,
      ]
    : []),
];
// Decode throughput only: at one llama.cpp thread (the like-for-like single-thread point),
// one worker with llama.cpp's helper threads made for every step, as node-llama-cpp runs
// them without the compute thread pool (docs/engine.md, "Compute threads"), one that
// hands every batch to node-llama-cpp's async decode instead of decoding its generation
// steps on the worker's thread, and one that generates every token through node-llama-cpp's
// LlamaCompletion instead of the generation loop.
const decodeOnlyArms: ArmSpec[] =
  THREADS === 1
    ? []
    : [
        { name: "llama-server (1 thread)", kind: "llama-server", workers: 1, slotsPerWorker: SLOTS, threadsPerWorker: 1 },
        { name: "radixgate-1w (1 thread)", kind: "radixgate", workers: 1, slotsPerWorker: SLOTS, threadsPerWorker: 1 },
        ...(NATIVE_BUILD
          ? [
              {
                name: "radixgate-1w-native (1 thread)",
                kind: "radixgate",
                workers: 1,
                slotsPerWorker: SLOTS,
                threadsPerWorker: 1,
                env: NATIVE_BUILD_ENV,
              } satisfies ArmSpec,
            ]
          : []),
        {
          name: "radixgate-1w (no thread pool)",
          kind: "radixgate",
          workers: 1,
          slotsPerWorker: SLOTS,
          threadsPerWorker: THREADS,
          env: { RADIXGATE_NO_THREAD_POOL: "1" },
        },
        // Every batch through node-llama-cpp's own thread hand-offs (docs/engine.md, "Decoding on the worker's thread").
        {
          name: "radixgate-1w (no inline decode)",
          kind: "radixgate",
          workers: 1,
          slotsPerWorker: SLOTS,
          threadsPerWorker: THREADS,
          env: { RADIXGATE_NO_INLINE_DECODE: "1" },
        },
        // Every token through node-llama-cpp's LlamaCompletion (docs/engine.md, "Several steps per call").
        {
          name: "radixgate-1w (no generation loop)",
          kind: "radixgate",
          workers: 1,
          slotsPerWorker: SLOTS,
          threadsPerWorker: THREADS,
          env: { RADIXGATE_NO_NATIVE_GENERATION: "1" },
        },
      ];
const allArms = [...arms, ...decodeOnlyArms];
// Every server runs for the whole benchmark (an idle one uses no CPU), so the arms take turns
// request by request and the machine's drift falls on all of them alike.
const running = new Map<string, Running>();
const results = new Map<string, ArmResult>(
  allArms.map((arm) => [arm.name, { arm: arm.name, spec: arm, decode: {}, decodeWhole: {}, decodeCpu: {}, workloads: {}, samples: {} }]),
);
try {
  for (const arm of allArms) {
    log(`${arm.name}: starting`);
    const server = await start(arm, modelPath, binary);
    running.set(arm.name, server);
    if (server.binaries) results.get(arm.name)!.binaries = server.binaries;
    // Warm-up: the first evaluations after loading pay one-off costs.
    await decodeThroughput(server.target, { ...WORKLOAD, salt: `${salt} warm-up` }, 1, 8);
  }
  // Before each measurement the machine goes quiet (process-cpu.ts, settle): no arm's
  // threads still spinning from the last one. The waits are summed in the report.
  const quiet = async () => {
    settledMs += await settle([...running.values()].map((server) => server.pid));
  };
  const concurrencies = [1, 2, 4].filter((n) => n <= SLOTS);
  for (let repeat = 0; repeat < DECODE_REPEATS; repeat++) {
    for (const count of concurrencies) {
      for (const stream of [true, false]) {
        for (const arm of allArms) {
          const options = { ...WORKLOAD, salt: `${salt} decode ${repeat} ${stream ? "streamed" : "whole"}` };
          const server = running.get(arm.name)!;
          await quiet();
          const cpuBefore = processCpu(server.pid);
          const clientBefore = process.cpuUsage();
          const decode = await decodeThroughput(server.target, options, count, DECODE_TOKENS, stream);
          const client = process.cpuUsage(clientBefore);
          const cpu = decodeCpuOf(cpuBefore, processCpu(server.pid), (client.user + client.system) / 1e6, decode.tokens, decode.wallS);
          const result = results.get(arm.name)!;
          if (cpu) (result.decodeCpu[`${stream ? "streamed" : "whole"} x${count}`] ??= []).push(cpu);
          const entry = ((stream ? result.decode : result.decodeWhole)[`${count}`] ??= { tokensPerS: Number.NaN, repeats: [] });
          entry.repeats.push(decode.tokensPerS);
          entry.tokensPerS = median(entry.repeats);
          log(
            `${arm.name}: decode x${count}${stream ? "" : " not streamed"} (repeat ${repeat + 1}/${DECODE_REPEATS}): ${decode.tokensPerS.toFixed(1)} tokens/s`,
          );
        }
      }
    }
  }
  const record = (arm: ArmSpec, name: string, samples: Sample[], wallS: number) => {
    const result = results.get(arm.name)!;
    (result.samples[name] ??= []).push(...samples);
    const previous = result.workloads[name];
    // Over repeats: the samples pooled, the wall time summed.
    result.workloads[name] = summarize(result.samples[name]!, (previous?.wallS ?? 0) + wallS);
    const s = result.workloads[name]!;
    log(
      `${arm.name}: ${name}: n=${s.n} TTFT mean ${s.ttftMeanMs.toFixed(0)} p50 ${s.ttftP50Ms.toFixed(0)} p99 ${s.ttftP99Ms.toFixed(0)} ms, ${s.outputTokensPerS.toFixed(1)} tokens/s, ${s.wallS.toFixed(1)} s`,
    );
  };
  for (let repeat = 0; repeat < WORKLOAD_REPEATS; repeat++) {
    // A fresh salt per repeat: every repeat starts cold on every arm.
    const options: WorkloadOptions = { ...WORKLOAD, salt: `${salt} workloads ${repeat}` };
    for (const arm of arms) {
      const target = running.get(arm.name)!.target;
      await quiet();
      const sequential = await agents(target, options, 1, AGENT_TURNS, "seq");
      record(
        arm,
        "agent: cold turn",
        sequential.samples.filter((sample) => sample.kind === "agent-cold"),
        sequential.wallS,
      );
      record(
        arm,
        "agent: warm turns",
        sequential.samples.filter((sample) => sample.kind === "agent-warm"),
        sequential.wallS,
      );
    }
    for (const arm of arms) {
      await quiet();
      const concurrent = await agents(running.get(arm.name)!.target, options, CONCURRENT_AGENTS, AGENT_TURNS, "conc");
      record(arm, `${CONCURRENT_AGENTS} agents: all turns`, concurrent.samples, concurrent.wallS);
      record(
        arm,
        `${CONCURRENT_AGENTS} agents: warm turns`,
        concurrent.samples.filter((sample) => sample.kind === "agent-warm"),
        concurrent.wallS,
      );
    }
  }
  for (let repeat = 0; repeat < BURST_REPEATS; repeat++) {
    const options: WorkloadOptions = { ...WORKLOAD, salt: `${salt} burst ${repeat}` };
    for (const arm of arms) {
      await quiet();
      const distinct = await burst(running.get(arm.name)!.target, options, BURST);
      record(arm, `burst of ${BURST}`, distinct.samples, distinct.wallS);
    }
  }
  // The mix runs for minutes, one arm after the other, so the box drifts between the first
  // arm's and the last's (in one run the llama-server engine, the peer's own, read 1.27x):
  // two halves with the same arrivals, fresh prompts in the second, the arms in turn and then
  // in reverse, so that a drift over the whole mix falls on every arm alike.
  const mixHalves = [arms, [...arms].reverse()];
  for (const [half, order] of mixHalves.entries()) {
    for (const arm of order) {
      await quiet();
      const mix = await poissonMix(running.get(arm.name)!.target, { ...WORKLOAD, salt: `${salt} mix ${half}` }, MIX_RATE, MIX_SECONDS / 2, SLOTS, 0.5);
      record(arm, `Poisson mix ${MIX_SECONDS} s`, mix.samples, mix.wallS);
      record(
        arm,
        "Poisson mix: agent turns",
        mix.samples.filter((sample) => sample.kind !== "one-shot"),
        mix.wallS,
      );
      record(
        arm,
        "Poisson mix: one-shots",
        mix.samples.filter((sample) => sample.kind === "one-shot"),
        mix.wallS,
      );
    }
  }
} finally {
  for (const server of running.values()) await server.close();
}

const wallS = (Date.now() - started) / 1000;
const report = {
  ...runIdentity(["src", "bench", "patches", "package.json", "package-lock.json"]),
  command: `npm run bench:peer -- --slots ${SLOTS} --threads ${THREADS} --mix-seconds ${MIX_SECONDS} --mix-rate ${MIX_RATE} --seed ${SEED}${quick ? " --quick" : ""}${WEIGHTS === "F32" ? "" : ` --weights ${WEIGHTS}`}${RESULTS === "peer" ? "" : ` --results ${RESULTS}`}`,
  // What each Radixgate arm's workers really loaded (their /health): prebuilt or localBuild.
  armBinaries: Object.fromEntries([...results.values()].filter((r) => r.binaries).map((r) => [r.arm, [...new Set(r.binaries)].join(", ")])),
  llamaServer: binary,
  model: `preset:bench (25.2M parameters, seed 1), ${WEIGHTS === "F32" ? "F32 weights as written" : `${WEIGHTS} weights (llama-quantize of the same build as llama-server)`}, CPU`,
  settings: {
    slots: SLOTS,
    threads: THREADS,
    contextPerSlot: CONTEXT_PER_SLOT,
    batchSize: BATCH,
    decodeTokens: DECODE_TOKENS,
    agentTurns: AGENT_TURNS,
    concurrentAgents: CONCURRENT_AGENTS,
    burst: BURST,
    burstRepeats: BURST_REPEATS,
    workloadRepeats: WORKLOAD_REPEATS,
    mixSeconds: MIX_SECONDS,
    mixRatePerS: MIX_RATE,
    ...WORKLOAD,
  },
  machineLoad: {
    loadAverage1mAtStart: loadAtStart,
    loadAverage1mAtEnd: loadavg()[0]!,
    benchClientCpuSeconds: (process.cpuUsage(cpuAtStart).user + process.cpuUsage(cpuAtStart).system) / 1e6,
    requestsResentOnClosedConnections: resent.count,
    settledS: settledMs / 1000,
    wallS,
  },
  results: [...results.values()],
};
mkdirSync(join(ROOT, "bench/results"), { recursive: true });
writeFileSync(join(ROOT, `bench/results/${RESULTS}.json`), `${JSON.stringify(report, null, 2)}\n`);
writeFileSync(join(ROOT, `bench/results/${RESULTS}.md`), markdown());
console.log(markdown());

function markdown(): string {
  const all = [...results.values()];
  const peer = all[0]!;
  const fmt = (x: number) => (Number.isFinite(x) ? (x >= 100 ? x.toFixed(0) : x.toFixed(1)) : "-");
  const ratio = (ours: number, theirs: number) => (Number.isFinite(ours) && Number.isFinite(theirs) && theirs > 0 ? `${(ours / theirs).toFixed(2)}x` : "-");
  const lines: string[] = [];
  lines.push(`# Radixgate vs llama-server, side by side`, "");
  lines.push(`Commit ${report.commit}, ${report.date}. Machine: ${report.machine}, Node ${report.node}. Command: \`${report.command}\`.`);
  lines.push(
    `Radixgate's llama.cpp binaries (prebuilt: node-llama-cpp's npm binary; localBuild: compiled on this machine, the -native arms by npm run build:engine-native), ` +
      `as the arms' /health reported: ${Object.entries(report.armBinaries)
        .map(([arm, binary]) => `${arm} ${binary}`)
        .join(
          ", ",
        )}. Its workers with more than one thread compute on a persistent thread pool, and decode their generation steps on the worker's own thread (both native/llama-context), unless an arm says otherwise. Same GGUF (${report.model}), ${SLOTS} slots and ${THREADS} llama.cpp threads in all on every arm, ${CONTEXT_PER_SLOT} tokens per slot, batch ${BATCH}, greedy, ` +
      `max_tokens ${WORKLOAD.maxTokens} (decode: ${DECODE_TOKENS}), the same salted prompts (each arm a fresh server process). llama-server: ${binary}, ` +
      `built from the llama.cpp that node-llama-cpp bundles. Every server runs for the whole benchmark and the arms take turns workload by workload (decode: ` +
      `median of ${DECODE_REPEATS} repeats; agents: ${WORKLOAD_REPEATS} repeats pooled, burst: ${BURST_REPEATS}, each repeat with a fresh salt; the Poisson mix: two halves of ${MIX_SECONDS / 2} s with the same arrivals, the arms in turn and then in reverse). ` +
      `Load average (1 min) ${report.machineLoad.loadAverage1mAtStart.toFixed(1)} at start, ${report.machineLoad.loadAverage1mAtEnd.toFixed(1)} at end; ` +
      `the benchmark client used ${report.machineLoad.benchClientCpuSeconds.toFixed(0)} CPU s; ${wallS.toFixed(0)} s in all; ` +
      `${resent.count} requests sent again because a server had closed the idle keep-alive connection under them (timed from the second send). ` +
      `Before each measurement the servers' processes went quiet (no CPU for 100 ms: a server's compute threads may spin on after its last answer, on the cores the next arm needs): ${report.machineLoad.settledS.toFixed(0)} s of waiting in all.`,
    "",
  );
  const decodeTable = (title: string, of: (r: ArmResult) => ArmResult["decode"]) => {
    lines.push(title, "");
    const counts = Object.keys(of(peer));
    lines.push(`| arm | ${counts.map((c) => `${c} at once`).join(" | ")} | ${counts.map((c) => `${c}: vs llama-server`).join(" | ")} |`);
    lines.push(`| --- | ${counts.map(() => "---").join(" | ")} | ${counts.map(() => "---").join(" | ")} |`);
    for (const r of all) {
      const reference = r.spec.threadsPerWorker * r.spec.workers === 1 && THREADS !== 1 ? results.get("llama-server (1 thread)")! : peer;
      const ours = of(r);
      const theirs = of(reference);
      lines.push(
        `| ${r.arm} | ${counts.map((c) => fmt(ours[c]?.tokensPerS ?? Number.NaN)).join(" | ")} | ${counts.map((c) => ratio(ours[c]?.tokensPerS ?? Number.NaN, theirs[c]?.tokensPerS ?? Number.NaN)).join(" | ")} |`,
      );
    }
    lines.push("");
  };
  decodeTable("## Decode throughput (output tokens/s, concurrent long completions, streamed)", (r) => r.decode);
  decodeTable("## Decode throughput, not streamed (the same completions, each answer whole at its end)", (r) => r.decodeWhole);
  lines.push(
    "Ratios compare arms of the same thread count (the 1-thread arms with llama-server at 1 thread). Target for one worker: >= 0.9x at 1, 2 and 4. " +
      "Streamed, each token is an event the server sends and the client reads while llama.cpp computes on the same cores; not streamed, only the engine's decoding and one answer per request count.",
    "",
  );
  const cpuKeys = Object.keys(peer.decodeCpu);
  if (cpuKeys.length > 0) {
    lines.push("## Decode: the server's CPU per output token, and idle cores", "");
    lines.push(
      "Read from /proc around each decode measurement above (medians over its repeats): the CPU ms each output token cost the server's whole process tree " +
        "(its threads, and a llama-server worker's process), of which its main thread (Radixgate's event loop: HTTP, scheduling, per-token delivery; llama-server's: its main loop), " +
        `and the share of the ${cpus().length} cores that neither the server nor the benchmark client used meanwhile (other processes count as idle; see the load average above). ` +
        "llama.cpp's compute threads count in the server's CPU. CPU time comes in 10 ms ticks: a main thread's few ticks over a run are known to about 0.07 ms per token at one sequence.",
      "",
    );
    lines.push(`| arm | ${cpuKeys.join(" | ")} |`);
    lines.push(`| --- | ${cpuKeys.map(() => "---").join(" | ")} |`);
    for (const r of all) {
      const cell = (key: string) => {
        const repeats = r.decodeCpu[key] ?? [];
        if (repeats.length === 0) return "-";
        const server = median(repeats.map((x) => x.serverMsPerToken));
        const main = median(repeats.map((x) => x.mainThreadMsPerToken));
        const idle = median(repeats.map((x) => x.idleShare));
        return `${server.toFixed(2)} ms (main ${main.toFixed(2)}), idle ${(idle * 100).toFixed(0)} %`;
      };
      lines.push(`| ${r.arm} | ${cpuKeys.map(cell).join(" | ")} |`);
    }
    lines.push("");
  }
  lines.push("## Workloads (TTFT in ms, client-side, streamed)", "");
  lines.push(
    "| workload | arm | n | TTFT mean | p50 | p99 | output tokens/s | wall s | prompt tokens computed | mean vs llama-server | p99 vs llama-server | wall vs llama-server |",
  );
  lines.push("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
  for (const name of Object.keys(peer.workloads)) {
    const theirs = peer.workloads[name]!;
    for (const r of all.filter((x) => x.workloads[name])) {
      const s = r.workloads[name]!;
      lines.push(
        `| ${name} | ${r.arm} | ${s.n} | ${fmt(s.ttftMeanMs)} | ${fmt(s.ttftP50Ms)} | ${fmt(s.ttftP99Ms)} | ${fmt(s.outputTokensPerS)} | ${fmt(s.wallS)} | ${fmt(s.computedPromptTokensMean)} | ` +
          `${r === peer ? "1" : ratio(s.ttftMeanMs, theirs.ttftMeanMs)} | ${r === peer ? "1" : ratio(s.ttftP99Ms, theirs.ttftP99Ms)} | ${r === peer ? "1" : ratio(s.wallS, theirs.wallS)} |`,
      );
    }
  }
  lines.push(
    "",
    "Prompt tokens computed: the mean per request of its prompt tokens the server did not take from its KV cache (prompt_tokens - usage.prompt_tokens_details.cached_tokens). " +
      "Below 1 is better for Radixgate (TTFT, wall). Targets: one worker within 1.05x of llama-server on every workload (mean and p99 TTFT, throughput); " +
      "two workers level or better on the burst and better on the concurrent and mixed workloads.",
    "",
  );
  return `${lines.join("\n")}\n`;
}
