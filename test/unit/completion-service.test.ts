// CompletionService's bookkeeping with the scheduler, with stand-in workers whose failures
// can be chosen exactly: what the tree believes a slot holds after a request that started
// and then did not finish.
import { describe, expect, it } from "vitest";
import type { PromptPreparer } from "../../src/engine/host/prompt-preparer.js";
import type { GenerateHooks } from "../../src/engine/host/worker-handle.js";
import type { GenerationResult } from "../../src/contract/generation.js";
import type { SamplingParams } from "../../src/contract/sampling.js";
import { GlobalScheduler } from "../../src/scheduler/global-scheduler.js";
import { createPolicy } from "../../src/scheduler/registry.js";
import { TimeModel } from "../../src/scheduler/time-model.js";
import { ModelOutputError, ResponseFormatError, WorkerDiedError, WorkerTaskError } from "../../src/engine/host/worker-errors.js";
import { CircuitBreakers } from "../../src/serving/circuit-breaker.js";
import { completeChoices } from "../../src/http/choices.js";
import { CompletionService, type ChatHooks } from "../../src/serving/completion-service.js";
import type { Fleet } from "../../src/serving/fleet.js";
import type { RequestRecord } from "../../src/serving/observer.js";
import { CPU_LIKE_COEFFICIENTS } from "../helpers/time-models.js";

const MODEL = "m";
const PROMPT = Array.from({ length: 200 }, (_, i) => 10 + i);

/** A worker that starts the request in slot 0 (30 tokens already cached there), then does `finish`. */
function standInWorker(finish: (tokens: readonly number[], hooks: GenerateHooks) => GenerationResult) {
  return {
    async generate(_requestId: string, tokens: readonly number[], _sampling: SamplingParams, hooks: GenerateHooks = {}): Promise<GenerationResult> {
      hooks.onStarted?.({ type: "started", slot: 0, cachedTokens: 30, queueMs: 0, restoredTokens: 0 });
      await Promise.resolve();
      return finish(tokens, hooks);
    },
  };
}

type Finish = (tokens: readonly number[], hooks: GenerateHooks) => GenerationResult;

function service(...finishes: Finish[]) {
  return serviceWith({}, ...finishes);
}

/** `requestTimeoutMs`: the host's deadline (0: none); `breakers`: the workers' circuit breakers. */
function serviceWith({ requestTimeoutMs = 0, breakers }: { requestTimeoutMs?: number; breakers?: CircuitBreakers }, ...finishes: Finish[]) {
  const scheduler = new GlobalScheduler(createPolicy("roundrobin"), { now: () => 0 });
  const workers = finishes.map((finish, i) => {
    scheduler.addWorker({
      id: `w${i}`,
      modelId: MODEL,
      slots: 1,
      capacityTokens: 4096,
      timeModel: new TimeModel(CPU_LIKE_COEFFICIENTS),
    });
    return { engine: standInWorker(finish), modelId: MODEL, restarts: 0, alive: true };
  });
  const fleet = {
    models: new Map([[MODEL, { config: {}, path: "", contextSize: 4096, createdAt: 0 }]]),
    workers,
    get: (id: string) => workers[Number(id.slice(1))],
    workerIds: () => workers.map((_, i) => `w${i}`),
  } as unknown as Fleet;
  const preparations = { count: 0 };
  const preparer = {
    vocab: async () => {
      // A token prompt is checked against the vocabulary once per preparation.
      preparations.count++;
      return { size: 1000, bos: null, longestTokenBytes: 8 };
    },
  } as unknown as PromptPreparer;
  /** Inter-token gaps the service observed, and the records of the requests it finished. */
  const gaps: number[] = [];
  const records: RequestRecord[] = [];
  const completions = new CompletionService({
    fleet,
    preparer,
    scheduler,
    limits: { defaultMaxTokens: 8, requestTimeoutMs, maxConcurrentRequests: 10, maxQueueWaitMs: 0 },
    observer: { interTokenGap: (ms) => gaps.push(ms), requestFinished: (record) => records.push(record) },
    ...(breakers ? { breakers } : {}),
  });
  const run = (hooks: ChatHooks = {}, sampling: SamplingParams["responseFormat"] = undefined) =>
    completions.complete(
      {
        requestId: "r1",
        modelId: MODEL,
        prompt: { kind: "tokens", tokens: PROMPT, param: "prompt" },
        sampling: { temperature: 0, stop: [], ...(sampling ? { responseFormat: sampling } : {}) },
        streamed: true,
      },
      hooks,
    );
  // What the tree believes w0 holds (its slots and nothing in flight once the request ended).
  const held = () => scheduler.views().find((worker) => worker.id === "w0")!.kvTokens;
  // The prefill the scheduler counts as still ahead on w0, in all and by rank.
  const pending = () => {
    const view = scheduler.views().find((worker) => worker.id === "w0")!;
    return { total: view.pendingPrefillTokens, byRank: [...Array.from(view.pendingPrefillByRank)] };
  };
  return { run, held, pending, completions, preparations, gaps, records };
}

function result(overrides: Partial<GenerationResult>): GenerationResult {
  return {
    text: "",
    finishReason: "stop",
    promptTokens: PROMPT.length,
    cachedTokens: 30,
    restoredTokens: 0,
    evictedTokens: 0,
    spilledTokens: 0,
    completionTokens: 1,
    slot: 0,
    heldPromptTokens: PROMPT.length,
    queueMs: 0,
    prefillMs: 1,
    totalMs: 2,
    ...overrides,
  };
}

describe("the prefill the scheduler counts as pending on the worker", () => {
  it("from the placement to the request's first text: not released when a slot takes it, released once the text comes", async () => {
    const seen: { total: number; byRank: number[] }[] = [];
    let pending = (): { total: number; byRank: number[] } => ({ total: -1, byRank: [] });
    const stand = service((_tokens, hooks) => {
      seen.push(pending()); // started in its slot, no text yet
      hooks.onText?.("first");
      seen.push(pending()); // its first text is out
      return result({});
    });
    pending = stand.pending;
    await stand.run();
    // A cold prompt (nothing cached in the tree): all of it pending, at the lowest rank.
    expect(seen[0]).toEqual({ total: PROMPT.length, byRank: [PROMPT.length, 0, 0, 0, 0] });
    expect(seen[1]).toEqual({ total: 0, byRank: [0, 0, 0, 0, 0] });
    expect(stand.pending()).toEqual({ total: 0, byRank: [0, 0, 0, 0, 0] });
  });

  it("is released when the request ends without a first text", async () => {
    const stand = service(() => {
      throw new Error("sampler failed");
    });
    await expect(stand.run()).rejects.toMatchObject({ code: "worker_failed" });
    expect(stand.pending()).toEqual({ total: 0, byRank: [0, 0, 0, 0, 0] });
  });
});

describe("the request's record", () => {
  it("carries the worker's queue and prefill times beside the host's TTFT", async () => {
    const { run, records } = service(() => result({ queueMs: 7, prefillMs: 42, completionTokens: 5, finishReason: "length" }));
    await run();
    expect(records).toHaveLength(1);
    expect(records[0]).toMatchObject({
      outcome: "ok",
      workerId: "w0",
      finishReason: "length",
      promptTokens: PROMPT.length,
      cachedTokens: 30,
      completionTokens: 5,
      queueMs: 7,
      prefillMs: 42,
    });
  });
});

describe("the slot report after a request ends", () => {
  it("keeps the whole prompt when the worker finished it", async () => {
    const { run, held } = service(() => result({}));
    await run();
    expect(held()).toBe(PROMPT.length);
  });

  it("is cut back to what the worker says the slot holds when the request was cancelled early", async () => {
    const { run, held } = service(() => result({ finishReason: "cancelled", heldPromptTokens: 120, completionTokens: 0 }));
    await run();
    expect(held()).toBe(120);
  });

  it("is cut back to the part that was cached before when the worker failed the request after starting it", async () => {
    const { run, held } = service(() => {
      throw new Error("sampler failed");
    });
    await expect(run()).rejects.toMatchObject({ code: "worker_failed" });
    expect(held()).toBe(30);
  });
});

describe("a request whose worker dies after starting it, before its first token", () => {
  it("is placed again on the other worker and reports its start to the client once", async () => {
    const { run } = service(
      () => {
        throw new WorkerDiedError("killed");
      },
      () => result({}),
    );
    const starts: string[] = [];
    const outcome = await run({ onStarted: (start) => starts.push(start.workerId) });
    expect(outcome.workerId).toBe("w1");
    // A stream's headers went out at the first start: a second would write them again.
    expect(starts).toEqual(["w0"]);
  });
});

describe("a worker's failure, as the client's error (by the error's type)", () => {
  it("is a 400 naming the schema when the worker could not build the response format's grammar", async () => {
    const { run } = service(() => {
      throw new ResponseFormatError("Unrecognized literal type: object");
    });
    await expect(run({}, { type: "json_schema", schema: { enum: [{ a: 1 }] } })).rejects.toMatchObject({
      code: "invalid_request",
      status: 400,
      param: "response_format.json_schema.schema",
      message: "`response_format.json_schema.schema` cannot be turned into a grammar: Unrecognized literal type: object",
    });
  });

  it("is a 500 naming the worker and the request for any other failure, and the request is not placed again", async () => {
    const { run } = service(
      () => {
        throw new WorkerTaskError("sampler failed");
      },
      () => result({}),
    );
    await expect(run()).rejects.toMatchObject({ code: "worker_failed", message: "Worker w0 failed while generating (request r1): sampler failed" });
  });

  it("is a 500 naming the death, not placed again, when the worker died after part of a stream reached the client", async () => {
    const { run } = service(
      (_tokens, hooks) => {
        hooks.onText?.("partial");
        throw new WorkerDiedError("worker process killed by SIGKILL");
      },
      () => result({}),
    );
    await expect(run()).rejects.toMatchObject({
      code: "worker_failed",
      message: "Worker w0 stopped while generating this request (request r1: worker process killed by SIGKILL); it is being restarted. Retry the request.",
    });
  });
});

describe("n choices of one request", () => {
  it("prepare the prompt once and run it once per choice", async () => {
    const done = () => result({ text: "x", completionTokens: 1, heldPromptTokens: PROMPT.length });
    const { completions, preparations } = service(done, done);
    const job = {
      requestId: "r-n",
      modelId: MODEL,
      prompt: { kind: "tokens" as const, tokens: PROMPT, param: "prompt" },
      sampling: { temperature: 1, seed: 4, stop: [] },
    };
    const outcomes = await completeChoices(completions, job, 3);
    expect(outcomes).toHaveLength(3);
    expect(preparations.count).toBe(1);
    // Another request with the same text is its own preparation.
    await completions.complete({ ...job, requestId: "r-other", prompt: { ...job.prompt } });
    expect(preparations.count).toBe(2);
  });
});

describe("the text pieces a worker is asked for", () => {
  for (const requestTimeoutMs of [0, 60_000]) {
    it(`every piece for a caller that reads them, only the first for one that does not, whose kept gaps are observed (deadline ${requestTimeoutMs} ms)`, async () => {
      const asked: (string | undefined)[] = [];
      const answer: Finish = (_tokens, hooks) => {
        asked.push(hooks.pieces);
        hooks.onText?.("a");
        if (hooks.pieces === "first") return result({ text: "abc", completionTokens: 3, textGapsMs: [4, 6] });
        hooks.onText?.("b");
        hooks.onText?.("c");
        return result({ text: "abc", completionTokens: 3 });
      };
      const { run, gaps } = serviceWith({ requestTimeoutMs }, answer);
      const pieces: string[] = [];
      await run({ onText: (text) => pieces.push(text) });
      expect(pieces).toEqual(["a", "b", "c"]);
      // Timed at the host between the pieces it got (two gaps, whatever their length).
      expect(gaps).toHaveLength(2);
      const whole = await run();
      expect(asked).toEqual(["all", "first"]);
      expect(whole.text).toBe("abc");
      expect(gaps.slice(2)).toEqual([4, 6]);
    });
  }
});

describe("an engine that refuses its own model's output", () => {
  it("fails the request with model_output_rejected and does not count against the worker's circuit; another failure does", async () => {
    const breakers = new CircuitBreakers({ failures: 1, openMs: 60_000 }, { setPlaceable: () => {} });
    try {
      const refused = serviceWith({ breakers }, () => {
        throw new ModelOutputError("llama-server: The model produced output that does not match the expected Content-only format");
      });
      for (let i = 0; i < 3; i++) {
        await expect(refused.run()).rejects.toMatchObject({ code: "model_output_rejected", status: 500, message: expect.stringContaining("request r1") });
      }
      expect(breakers.state("w0")).toBe("closed");
      const failing = serviceWith({ breakers }, () => {
        throw new WorkerTaskError("sampler failed");
      });
      await expect(failing.run()).rejects.toMatchObject({ code: "worker_failed" });
      expect(breakers.state("w0")).toBe("open");
    } finally {
      breakers.close();
    }
  });
});
