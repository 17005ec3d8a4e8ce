// The routing rules users would otherwise run, as published: NVIDIA Dynamo's KV router cost
// and llm-d's weighted scorers, through the real global scheduler (its tree, loads and tickets).
import { describe, expect, it } from "vitest";
import { GlobalScheduler } from "../../src/scheduler/global-scheduler.js";
import { DynamoPolicy } from "../../src/scheduler/policies/dynamo.js";
import { LlmDPolicy } from "../../src/scheduler/policies/llm-d.js";
import { createPolicy, POLICY_DEFAULTS } from "../../src/scheduler/registry.js";
import { TimeModel } from "../../src/scheduler/time-model.js";
import type { PlacementPolicy, PlacementRequest, WorkerView } from "../../src/scheduler/types.js";
import { CPU_LIKE_COEFFICIENTS } from "../helpers/time-models.js";

const prompt = (seed: number, length: number) => Array.from({ length }, (_, i) => 1 + ((seed * 7919 + i * 31) % 5000));
const request = (tokens: number[]): PlacementRequest => ({ modelId: "m", tokens, messageCount: 1 });

function scheduler(policy: PlacementPolicy, capacityTokens = 10_000) {
  const global = new GlobalScheduler(policy, { now: () => 0, sessionPinning: false });
  for (const id of ["w0", "w1"]) global.addWorker({ id, modelId: "m", slots: 2, capacityTokens, timeModel: new TimeModel(CPU_LIKE_COEFFICIENTS) });
  return global;
}

const view = (overrides: Partial<WorkerView>): WorkerView => ({
  id: "w",
  modelId: "m",
  alive: true,
  inFlight: 0,
  slots: 2,
  matchedTokens: 0,
  storedTokens: 0,
  kvTokens: 0,
  kvCapacityTokens: 1000,
  activeTokens: 0,
  pendingPrefillTokens: 0,
  pendingPrefillByRank: [0, 0, 0, 0, 0],
  windowedPrefillMs: 0,
  timeModel: new TimeModel(CPU_LIKE_COEFFICIENTS),
  ...overrides,
  reusableTokens: overrides.reusableTokens ?? overrides.matchedTokens ?? 0,
});

describe("dynamo", () => {
  it("prices a request as weight x prefill blocks + decode blocks, Dynamo's defaults 1.0 and 16 tokens", () => {
    expect(POLICY_DEFAULTS.dynamo).toEqual({ overlapScoreWeight: 1, blockSize: 16 });
    const policy = new DynamoPolicy(POLICY_DEFAULTS.dynamo);
    const asked = request(prompt(1, 320));
    // 320 tokens, 160 held: 10 new blocks; 64 pending prefill tokens (4 blocks), 480 active tokens (30 blocks).
    expect(policy.logit(asked, view({ matchedTokens: 160, pendingPrefillTokens: 64, activeTokens: 480 }))).toBe(1 * (4 + 10) + (30 + 10));
    expect(new DynamoPolicy({ overlapScoreWeight: 2, blockSize: 16 }).logit(asked, view({ matchedTokens: 160 }))).toBe(2 * 10 + 10);
  });

  it("follows the cached prefix while the holder is not loaded, and leaves it once its queued prefill costs more", () => {
    const global = scheduler(createPolicy("dynamo"));
    const shared = prompt(2, 640);
    const first = global.place(request(shared))!;
    first.started(0);
    first.finished({ ok: true, promptTokens: 640, cachedTokens: 0, completionTokens: 4, ttftMs: 5 });
    const holder = first.workerId;
    // The same prefix again: the holder prices 1 new block, the other worker 40 + 40.
    const again = global.place(request([...shared, ...prompt(3, 16)]))!;
    expect(again.workerId).toBe(holder);
    expect(again.placement.reason).toBe("kv-overlap");
    again.started(1);
    again.firstToken();
    // Long cold prompts pending on the holder (their first token has not come): its prefill term grows until the other worker is cheaper.
    const waitingOnHolder = Array.from({ length: 3 }, (_, i) => global.place(request([...shared, ...prompt(10 + i, 2000)]), holder)!);
    const next = global.place(request([...shared, ...prompt(20, 16)]))!;
    expect(next.workerId).not.toBe(holder);
    // A slot taking them does not end their prefill; their first token does: the holder is then cheap again on prefill, dear on decode.
    const pending = () => global.views().find((worker) => worker.id === holder)!.pendingPrefillTokens;
    for (const ticket of waitingOnHolder) ticket.started(0);
    expect(pending()).toBe(3 * 2000);
    for (const ticket of waitingOnHolder) ticket.firstToken();
    expect(pending()).toBe(0);
  });
});

describe("llm-d", () => {
  it("scores prefix 2.0, free KV 1.0 and the normalised queue 1.0, the highest sum wins", () => {
    expect(POLICY_DEFAULTS.llmD).toEqual({ prefixWeight: 2, kvUtilizationWeight: 1, queueWeight: 1 });
    const policy = new LlmDPolicy(POLICY_DEFAULTS.llmD);
    const asked = request(prompt(4, 100));
    const scores = policy.scores(asked, [
      view({ id: "a", matchedTokens: 50, kvTokens: 750, inFlight: 6 }), // prefix 0.5, free 0.25, queue 4 of 0..4 -> 0
      view({ id: "b", matchedTokens: 0, kvTokens: 0, inFlight: 2 }), // prefix 0, free 1, queue 0 -> 1
      view({ id: "c", matchedTokens: 100, kvTokens: 500, inFlight: 4 }), // prefix 1, free 0.5, queue 2 -> 0.5
    ]);
    expect(scores).toEqual([2 * 0.5 + 0.25 + 0, 0 + 1 + 1, 2 * 1 + 0.5 + 0.5]);
    expect(policy.place(asked, [view({ id: "a" }), view({ id: "b", matchedTokens: 100 })], { match: { longest: 100 } } as never)?.workerId).toBe("b");
  });

  it("sends a conversation back to its cache, and a cold prompt to the emptier worker", () => {
    const global = scheduler(createPolicy("llm-d"), 2000);
    const conversation = prompt(5, 600);
    const first = global.place(request(conversation))!;
    first.started(0);
    first.finished({ ok: true, promptTokens: 600, cachedTokens: 0, completionTokens: 4, ttftMs: 5 });
    expect(global.place(request([...conversation, ...prompt(6, 40)]))!.workerId).toBe(first.workerId);
    // A cold prompt: no prefix anywhere, equal queues; the holder's KV is fuller, so the other worker wins.
    expect(global.place(request(prompt(7, 50)))!.workerId).not.toBe(first.workerId);
  });
});
