// A request's ticket, placed -> started -> finished (or lost with its worker), as the global
// scheduler's tree and loads see it. No model, no I/O.
import { describe, expect, it } from "vitest";
import { GlobalScheduler } from "../../src/scheduler/global-scheduler.js";
import { createPolicy } from "../../src/scheduler/registry.js";
import { TimeModel, TIME_MODEL_PRESETS } from "../../src/scheduler/time-model.js";
import type { PlacementRequest } from "../../src/scheduler/types.js";

const prompt = (seed: number, n = 100): number[] => Array.from({ length: n }, (_, i) => 1000 * seed + i);

function setUp(workers = ["w0", "w1"]) {
  const scheduler = new GlobalScheduler(createPolicy("least-load"), { now: () => 0, maxQueuePerWorker: 10 });
  for (const id of workers)
    scheduler.addWorker({ id, modelId: "m", slots: 2, capacityTokens: 100_000, timeModel: new TimeModel(TIME_MODEL_PRESETS["a6000-mistral-7b"]!) });
  const held = (workerId: string, tokens: number[]) => scheduler.tree("m")!.match(tokens).perWorker.get(workerId) ?? 0;
  const inFlight = (workerId: string) => scheduler.views().find((view) => view.id === workerId)!.inFlight;
  return { scheduler, held, inFlight };
}

const outcome = (tokens: number[]) => ({ ok: true, promptTokens: tokens.length, cachedTokens: 0, completionTokens: 4, ttftMs: 10 });

describe("PlacementTicket", () => {
  it("started: the slot holds the prompt; finished: the load is released and the slot keeps it", () => {
    const { scheduler, held, inFlight } = setUp(["w0"]);
    const request: PlacementRequest = { modelId: "m", tokens: prompt(1), messageCount: 1 };
    const ticket = scheduler.place(request)!;
    expect(inFlight("w0")).toBe(1);
    ticket.started(0);
    expect(held("w0", request.tokens as number[])).toBe(100);
    ticket.finished(outcome(request.tokens as number[]));
    expect(inFlight("w0")).toBe(0);
    expect(held("w0", request.tokens as number[])).toBe(100);
  });

  it("finished with fewer prompt tokens held (cancelled in its prefill): the slot's report is cut back", () => {
    const { scheduler, held } = setUp(["w0"]);
    const tokens = prompt(2);
    const ticket = scheduler.place({ modelId: "m", tokens, messageCount: 1 })!;
    ticket.started(1);
    ticket.finished({ ...outcome(tokens), ok: false, heldPromptTokens: 30 });
    expect(held("w0", tokens)).toBe(30);
  });

  it("finished with the answer's tokens held: the slot's report grows by them, so the next turn matches through the answer", () => {
    const { scheduler, held } = setUp(["w0"]);
    const tokens = prompt(8);
    const answer = prompt(9, 40);
    const ticket = scheduler.place({ modelId: "m", tokens, messageCount: 1 })!;
    ticket.started(0);
    ticket.finished({ ...outcome(tokens), heldAnswerTokens: answer });
    // The next turn: the prompt, the answer sent back, a new message.
    const nextTurn = [...tokens, ...answer, ...prompt(10, 20)];
    expect(held("w0", nextTurn)).toBe(140);
    // Without the answer's tokens only the prompt would match (what the tree knew before).
    const other = prompt(11);
    const second = scheduler.place({ modelId: "m", tokens: other, messageCount: 1 })!;
    second.started(1);
    second.finished(outcome(other));
    expect(held("w0", [...other, ...answer])).toBe(100);
  });

  it("finished with part of the prompt lost: the answer's tokens are not added", () => {
    const { scheduler, held } = setUp(["w0"]);
    const tokens = prompt(12);
    const ticket = scheduler.place({ modelId: "m", tokens, messageCount: 1 })!;
    ticket.started(0);
    ticket.finished({ ...outcome(tokens), heldPromptTokens: 60, heldAnswerTokens: prompt(13, 10) });
    expect(held("w0", [...tokens, ...prompt(13, 10)])).toBe(60);
  });

  it("finished twice releases the load once", () => {
    const { scheduler, inFlight } = setUp(["w0"]);
    const first = scheduler.place({ modelId: "m", tokens: prompt(3), messageCount: 1 })!;
    scheduler.place({ modelId: "m", tokens: prompt(4), messageCount: 1 });
    expect(inFlight("w0")).toBe(2);
    first.finished(outcome(prompt(3)));
    first.finished(outcome(prompt(3)));
    expect(inFlight("w0")).toBe(1);
  });

  it("firstToken: the prompt's prefill weighs on its worker until its first token, not until a slot takes it; released once", () => {
    const { scheduler } = setUp(["w0"]);
    const pending = () => scheduler.views().find((view) => view.id === "w0")!.pendingPrefillTokens;
    const first = scheduler.place({ modelId: "m", tokens: prompt(6), messageCount: 1 })!;
    expect(pending()).toBe(100);
    first.started(0);
    expect(pending()).toBe(100);
    first.firstToken();
    expect(pending()).toBe(0);
    const second = scheduler.place({ modelId: "m", tokens: prompt(7, 60), messageCount: 1 })!;
    first.firstToken();
    first.finished(outcome(prompt(6)));
    expect(pending()).toBe(60);
    // Ended in its prefill (no first token): finishing releases it.
    second.started(1);
    second.finished({ ...outcome(prompt(7, 60)), ok: false, heldPromptTokens: 0 });
    expect(pending()).toBe(0);
  });

  it("keeps the pending prefill at the prompt's rank (its hit ratio on the worker) and releases it from there", () => {
    const { scheduler } = setUp(["w0"]);
    const byRank = () => Array.from(scheduler.views().find((view) => view.id === "w0")!.pendingPrefillByRank);
    const prefix = prompt(8);
    const first = scheduler.place({ modelId: "m", tokens: prefix, messageCount: 1 })!;
    first.started(0);
    first.firstToken();
    first.finished(outcome(prefix));
    // Half of it cached on w0: group ceil(0.5 x 10) - 1 = 4 of the default ten, two groups a rank: rank 2, its 100 new tokens there.
    const half = scheduler.place({ modelId: "m", tokens: [...prefix, ...prompt(9)], messageCount: 1 })!;
    expect(byRank()).toEqual([0, 0, 100, 0, 0]);
    half.started(1);
    half.firstToken();
    expect(byRank()).toEqual([0, 0, 0, 0, 0]);
  });

  it("workerDied: the worker is demoted and forgotten at once, and finishing the request reports no slot", () => {
    const { scheduler, held } = setUp();
    const tokens = prompt(5);
    const ticket = scheduler.place({ modelId: "m", tokens, messageCount: 1 })!;
    const dead = ticket.workerId;
    ticket.started(0);
    ticket.workerDied();
    expect(scheduler.views().find((view) => view.id === dead)!.alive).toBe(false);
    expect(held(dead, tokens)).toBe(0);
    ticket.finished({ ...outcome(tokens), ok: false, heldPromptTokens: 10 });
    expect(held(dead, tokens)).toBe(0);
    // The same prompt again goes to the live worker.
    expect(scheduler.place({ modelId: "m", tokens, messageCount: 1 })!.workerId).not.toBe(dead);
  });
});
