// A worker with more than one llama.cpp thread computes on a thread pool that lives as long
// as its context (native/llama-context), in both isolation modes: its decode steps create no
// threads. Without the pool llama.cpp creates and joins its helper threads for every graph,
// so a generation of N tokens starts N threads or more: the kernel's count of threads and
// processes ever started (/proc/stat "processes") tells the two apart without timing. The
// pool's helpers spin for the next graph at the worker's `threadPoll` (they sleep at once
// unless it is set), which the worker reports as the pool has it.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";
import { describe, expect, it } from "vitest";
import type { Isolation } from "../../src/engine/host/worker-handle.js";
import { DEFAULT_THREAD_POLL } from "../../src/engine/wire/protocol.js";
import { CONTEXT_ADDON_DIR, type ContextAddon } from "../../src/engine/worker/context-addon.js";
import { useTinyModel, useWorker } from "../helpers/tiny-worker.js";
import { workerInit } from "../helpers/worker-init.js";

/** Threads and processes started on this machine since boot. */
function threadsStarted(): number {
  const line = readFileSync("/proc/stat", "utf8")
    .split("\n")
    .find((entry) => entry.startsWith("processes "));
  return Number(line!.split(/\s+/)[1]);
}

const tiny = useTinyModel();

describe.each<Isolation>(["thread", "process"])("a worker with 2 llama.cpp threads in %s isolation", (isolation) => {
  const worker = useWorker(() => workerInit(tiny.path(), { workerId: `pool-${isolation}`, slots: 2, threads: 2 }), isolation);
  const spinner = useWorker(() => workerInit(tiny.path(), { workerId: `pool-spin-${isolation}`, slots: 1, threads: 2, threadPoll: 50 }), isolation);

  it("reports a persistent pool and decodes 300 tokens without starting a thread per step", async () => {
    expect(worker().info?.computePool, worker().info?.computePoolProblem).toBe("persistent");
    expect(worker().info?.threadPoll).toBe(DEFAULT_THREAD_POLL);
    const tokens = await tiny.prompt("count slowly");
    const before = threadsStarted();
    const result = await worker().generate("pool", tokens, { temperature: 0, stop: [], maxTokens: 300 }, {});
    const started = threadsStarted() - before;
    expect(result.completionTokens).toBe(300);
    // One graph per decode step: a per-step pool would have started 300 threads at least.
    expect(started).toBeLessThan(30);
  });

  it("gives the pool the polling level asked for (threadPoll 50 spins between graphs), which decodes the same tokens", async () => {
    expect(spinner().info?.computePool, spinner().info?.computePoolProblem).toBe("persistent");
    expect(spinner().info?.threadPoll).toBe(50);
    const tokens = await tiny.prompt("count slowly");
    const sampling = { temperature: 0, stop: [], maxTokens: 40 };
    const [spinning, sleeping] = await Promise.all([spinner().generate("poll-50", tokens, sampling, {}), worker().generate("poll-0", tokens, sampling, {})]);
    expect(spinning.completionTokens).toBe(40);
    expect(spinning.text).toBe(sleeping.text);
  });
});

describe("the pool addon", () => {
  const manifest = JSON.parse(readFileSync(join(CONTEXT_ADDON_DIR, "current.json"), "utf8")) as { file: string };
  const addon = createRequire(import.meta.url)(join(CONTEXT_ADDON_DIR, manifest.file)) as ContextAddon;

  it("refuses what is not a node-llama-cpp context, naming why, and a handle it did not make", () => {
    expect(() => addon.attach({}, 2)).toThrow(/not a node-llama-cpp context: the object wraps nothing/);
    expect(() => addon.attach(undefined, 2)).toThrow(/not a node-llama-cpp context/);
    expect(() => addon.attach({}, 0)).toThrow(/threads must be a positive integer/);
    expect(() => addon.attach({}, 2, 101)).toThrow(/poll must be an integer from 0 to 100/);
    expect(() => addon.attach({}, 2, -1)).toThrow(/poll must be an integer from 0 to 100/);
    expect(() => addon.attach({}, 2, "high" as unknown as number)).toThrow(/poll must be an integer from 0 to 100/);
    expect(() => addon.release({})).toThrow(/not a pool handle/);
    expect(() => addon.pollOf({})).toThrow(/not a pool handle/);
  });

  it("refuses another object of node-llama-cpp's own addon (a model) instead of reading it as a context", async () => {
    const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
    const model = await llama.loadModel({ modelPath: tiny.path() });
    try {
      expect(() => addon.attach((model as unknown as { _model: unknown })._model, 2)).toThrow(/another class of its addon/);
    } finally {
      await model.dispose();
    }
  });
});
