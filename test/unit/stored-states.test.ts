// The scheduler's view of the workers' state stores: what each worker reports it saved and
// dropped, and preble placing a conversation whose history left every slot on the worker
// that can load it back. No model, no I/O.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { commonPrefixLength } from "../../src/common/tokens.js";
import { GlobalScheduler } from "../../src/scheduler/global-scheduler.js";
import { MAX_STORED_STATES, StoredStates, SUPERSEDED_TAIL, statesToDrop, supersedes } from "../../src/scheduler/placement/stored-states.js";
import { createPolicy } from "../../src/scheduler/registry.js";
import { TimeModel } from "../../src/scheduler/time-model.js";
import type { PlacementPolicy, PlacementRequest } from "../../src/scheduler/types.js";
import { CPU_LIKE_COEFFICIENTS } from "../helpers/time-models.js";

const tokens = (seed: number, length: number): number[] => Array.from({ length }, (_, i) => ((seed * 7919 + i * 104729) % 30_000) + 10);
const request = (prompt: number[]): PlacementRequest => ({ modelId: "m", tokens: prompt, messageCount: 3 });

describe("a newer stored state supersedes an older one", () => {
  it("when it holds all of the older one but a tail under a quarter of its length", () => {
    const prefix = tokens(1, 850);
    const older = [...prefix, ...tokens(2, 150)];
    // A sibling (the same prefix, its own question): the older one's tail is 15 %.
    expect(supersedes([...prefix, ...tokens(3, 150)], older)).toBe(true);
    // The same conversation a turn later.
    expect(supersedes([...older, ...tokens(4, 300)], older)).toBe(true);
    // Only the first 700 tokens in common: a tail of 30 % stays.
    expect(supersedes([...prefix.slice(0, 700), ...tokens(5, 300)], older)).toBe(false);
    // The bound: a tail of exactly a quarter stays.
    const shared = older.length * (1 - SUPERSEDED_TAIL);
    expect(supersedes([...older.slice(0, shared), ...tokens(6, 300)], older)).toBe(false);
    expect(supersedes([...older.slice(0, shared + 1), ...tokens(6, 300)], older)).toBe(true);
  });
});

describe("statesToDrop, the admission rule of both stores", () => {
  const state = (name: string, seed: number, length: number, lastUsedMs: number) => ({ name, tokens: tokens(seed, length), lastUsedMs });
  const names = (drops: readonly { name: string }[]) => drops.map((drop) => drop.name);

  it("drops what the new state supersedes first, then the least recently used, one by one, until the rest fits", () => {
    const prefix = tokens(7, 90);
    const sibling = { name: "sibling", tokens: [...prefix, ...tokens(8, 10)], lastUsedMs: 9 };
    const states = [state("a", 11, 10, 1), state("b", 12, 10, 2), sibling, state("c", 13, 10, 3)];
    const added = { name: "added", tokens: [...prefix, ...tokens(9, 10)], lastUsedMs: 10 };
    // 30 + 100 + 100 tokens against a budget of 115: the sibling goes (superseded), then a and b.
    const drops = statesToDrop(
      [...states, added],
      added,
      115,
      (s) => s.tokens.length,
      () => false,
    );
    expect(names(drops)).toEqual(["sibling", "a", "b"]);
  });

  it("never drops a state in use, and stays over the budget when only those are left", () => {
    const states = [state("a", 21, 50, 1), state("b", 22, 50, 2)];
    const added = state("added", 23, 50, 3);
    const drops = statesToDrop(
      [...states, added],
      added,
      60,
      (s) => s.tokens.length,
      (s) => s.name !== "added",
    );
    // a and b are being loaded: the new state itself is the one least recently used that may go.
    expect(names(drops)).toEqual(["added"]);
    expect(
      statesToDrop(
        [...states, added],
        added,
        60,
        (s) => s.tokens.length,
        () => true,
      ),
    ).toEqual([]);
  });
});

describe("StoredStates", () => {
  it("finds the longest prefix a stored state shares with the prompt, only when longer than what the slots give", () => {
    const stored = new StoredStates();
    const history = tokens(1, 500);
    stored.apply({ stored: [{ id: "a", tokens: history }], dropped: [] });
    stored.apply({ stored: [{ id: "b", tokens: history.slice(0, 200) }], dropped: [] });
    const nextTurn = [...history, ...tokens(2, 30)];
    expect(stored.longestPrefix(nextTurn, 0)).toBe(500);
    // A state longer than the prompt counts for what it shares.
    expect(stored.longestPrefix(history.slice(0, 300), 0)).toBe(300);
    // A slot that already gives as much: the store adds nothing.
    expect(stored.longestPrefix(nextTurn, 500)).toBe(0);
    expect(stored.longestPrefix(tokens(3, 100), 0)).toBe(0);
    stored.apply({ stored: [], dropped: ["a"] });
    expect(stored.longestPrefix(nextTurn, 0)).toBe(200);
    stored.clear();
    expect(stored.size).toBe(0);
    expect(stored.longestPrefix(nextTurn, 0)).toBe(0);
  });

  it("finds what comparing the prompt with every state finds, after any reports (each state compared from where the one before it left off)", () => {
    const ids = ["a", "b", "c", "d", "e"];
    // Few distinct tokens: states and prompts share prefixes of every length with each other.
    const sequence = fc.array(fc.integer({ min: 1, max: 3 }), { maxLength: 10 });
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            stored: fc.array(fc.record({ id: fc.constantFrom(...ids), tokens: sequence }), { maxLength: 3 }),
            dropped: fc.array(fc.constantFrom(...ids), { maxLength: 2 }),
          }),
          {
            maxLength: 8,
          },
        ),
        sequence,
        fc.integer({ min: 0, max: 6 }),
        (reports, prompt, atLeast) => {
          const stored = new StoredStates();
          const truth = new Map<string, number[]>();
          for (const report of reports) {
            stored.apply(report);
            for (const { id, tokens } of report.stored) {
              truth.delete(id);
              truth.set(id, tokens);
            }
            for (const id of report.dropped) truth.delete(id);
          }
          const longest = Math.max(0, ...[...truth.values()].map((tokens) => commonPrefixLength(tokens, prompt)));
          expect(stored.longestPrefix(prompt, atLeast)).toBe(longest > atLeast ? longest : 0);
          expect([...stored.entries()]).toEqual([...truth].map(([id, tokens]) => ({ id, tokens })));
        },
      ),
      { numRuns: 2000 },
    );
  });

  it("keeps at most MAX_STORED_STATES per worker, forgetting the oldest report first", () => {
    const stored = new StoredStates();
    const reports = Array.from({ length: MAX_STORED_STATES + 10 }, (_, i) => ({ id: `s${i}`, tokens: [i + 1, 7, 7] }));
    stored.apply({ stored: reports, dropped: [] });
    expect(stored.size).toBe(MAX_STORED_STATES);
    expect(stored.longestPrefix([1, 7, 7], 0)).toBe(0);
    expect(stored.longestPrefix([MAX_STORED_STATES + 10, 7, 7], 0)).toBe(3);
  });
});

describe("preble with the workers' state stores", () => {
  /** Two workers of one slot: an agent's first turn runs on w0, then another request takes w0's slot. */
  function spilledConversation() {
    const clock = { t: 0 };
    const scheduler = new GlobalScheduler(createPolicy("preble"), { now: () => clock.t, sessionPinning: false });
    for (const id of ["w0", "w1"])
      scheduler.addWorker({ id, modelId: "m", slots: 1, capacityTokens: 100_000, timeModel: new TimeModel(CPU_LIKE_COEFFICIENTS) });
    const serve = (prompt: number[], pinned?: string) => {
      clock.t += 100;
      const ticket = scheduler.place(request(prompt), pinned)!;
      ticket.started(0);
      ticket.finished({ ok: true, promptTokens: prompt.length, cachedTokens: 0, completionTokens: 16, ttftMs: 50 });
      return ticket;
    };
    const history = tokens(1, 800);
    serve(history, "w0");
    // The slot is reused: the worker saves the history to its store and says so with the start.
    scheduler.applyCacheEvent({ type: "store-changed", workerId: "w0", changes: { stored: [{ id: "h", tokens: history }], dropped: [] } });
    serve(tokens(9, 600), "w0");
    const nextTurn = [...history, ...tokens(2, 40)];
    return { scheduler, clock, history, nextTurn };
  }

  it("exploits the worker whose store holds the history, and books it as cached", () => {
    const { scheduler, nextTurn } = spilledConversation();
    // The tree sees the history on no slot: only the store has it.
    expect(scheduler.tree("m")!.match(nextTurn).longest).toBe(0);
    const ticket = scheduler.place(request(nextTurn))!;
    expect(ticket.workerId).toBe("w0");
    expect(ticket.placement.reason).toBe("exploit");
    expect(ticket.placement.matchedTokens).toBe(800);
    // Its prefill is the new message, not the history.
    expect(ticket.uncachedTokens).toBe(40);
    expect(scheduler.stateSizes().storedStates).toBe(1);
  });

  it("explores once the worker reports the state dropped (w1 carries no load)", () => {
    const { scheduler, nextTurn } = spilledConversation();
    scheduler.applyCacheEvent({ type: "store-changed", workerId: "w0", changes: { stored: [], dropped: ["h"] } });
    const ticket = scheduler.place(request(nextTurn))!;
    expect(ticket.placement.reason).toBe("explore");
    expect(ticket.workerId).toBe("w1");
    expect(ticket.uncachedTokens).toBe(nextTurn.length);
  });

  it("forgets a worker's store when the worker goes down (it restarts with an empty one)", () => {
    const { scheduler, nextTurn } = spilledConversation();
    scheduler.setAlive("w0", false);
    scheduler.setAlive("w0", true);
    expect(scheduler.stateSizes().storedStates).toBe(0);
    expect(scheduler.place(request(nextTurn))!.workerId).toBe("w1");
  });

  it("keeps E2: a stored prefix that covers less than what remains to compute is explored", () => {
    const { scheduler, history } = spilledConversation();
    // The store shares 800 tokens of a 2,400-token prompt: the rest outweighs the match (E2).
    const ticket = scheduler.place(request([...history, ...tokens(3, 1_600)]))!;
    expect(ticket.placement.reason).toBe("explore");
    expect(ticket.placement.matchedTokens).toBe(800);
  });
});

describe("the candidates' view of the stores", () => {
  /** w0's store holds an 800-token history; no slot holds anything. */
  function withStoredHistory(policy: PlacementPolicy) {
    const scheduler = new GlobalScheduler(policy, { now: () => 0, sessionPinning: false });
    for (const id of ["w0", "w1"])
      scheduler.addWorker({ id, modelId: "m", slots: 1, capacityTokens: 100_000, timeModel: new TimeModel(CPU_LIKE_COEFFICIENTS) });
    const history = tokens(1, 800);
    scheduler.applyCacheEvent({ type: "store-changed", workerId: "w0", changes: { stored: [{ id: "h", tokens: history }], dropped: [] } });
    return { scheduler, history };
  }

  it("books the chosen worker's stored prefix as cached for a policy that never reads the stores", () => {
    const { scheduler, history } = withStoredHistory(createPolicy("roundrobin"));
    const ticket = scheduler.place(request([...history, ...tokens(2, 40)]), "w0")!;
    expect(ticket.uncachedTokens).toBe(40);
  });

  it("finds what the store holds of each request's own prompt, decision after decision", () => {
    const seen: number[] = [];
    const spy: PlacementPolicy = {
      name: "spy",
      place: (_request, candidates) => {
        for (const candidate of candidates) seen.push(candidate.storedTokens);
        // w1: w0's tree stays empty, so what w0 would reuse is its store alone.
        return { workerId: candidates[1]!.id, reason: "spy", matchedTokens: 0 };
      },
    };
    const { scheduler, history } = withStoredHistory(spy);
    scheduler.place(request([...history, ...tokens(2, 40)]));
    scheduler.place(request(tokens(3, 100)));
    scheduler.place(request([...history.slice(0, 300), ...tokens(4, 10)]));
    // w0 then w1, per decision.
    expect(seen).toEqual([800, 0, 0, 0, 300, 0]);
  });
});
