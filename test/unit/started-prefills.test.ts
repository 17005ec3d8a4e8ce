// The worker's memory of which queued prompts have started their prefill, across batches
// whose items node-llama-cpp makes anew, with the evaluated part of a prompt cut off.
import { describe, expect, it } from "vitest";
import { shareBatch } from "../../src/scheduler/batch-priority.js";
import { StartedPrefills } from "../../src/engine/worker/started-prefills.js";

interface Queued {
  name: string;
  tokens: number[];
  evaluationPriority: number;
}

/** One of node-llama-cpp's batches: fresh items over its queue, then each share's part cut off the queued prompt. */
function batch(queue: Queued[], started: StartedPrefills, size: number, chunk: number): string[] {
  const items = queue.map((q) => ({ tokens: q.tokens, evaluationPriority: q.evaluationPriority, q }));
  const shares = shareBatch(items, size, chunk, (item) => started.has(item));
  started.batchShared(items, shares);
  for (const { item, processAmount } of shares) item.q.tokens = item.q.tokens.slice(processAmount);
  for (let i = queue.length - 1; i >= 0; i--) if (queue[i]!.tokens.length === 0) queue.splice(i, 1);
  return shares.map(({ item, processAmount }) => `${item.q.name}:${processAmount}`);
}

const prompt = (from: number, length: number) => Array.from({ length }, (_, i) => from + i);

describe("started prefills", () => {
  it("knows a prompt part of which a batch evaluated, though the next batch's item is new and shorter", () => {
    const started = new StartedPrefills();
    const queue: Queued[] = [{ name: "cold", tokens: prompt(1000, 50), evaluationPriority: 1 }];
    expect(batch(queue, started, 64, 16)).toEqual(["cold:16"]);
    queue.push({ name: "cached", tokens: prompt(5000, 20), evaluationPriority: 5 });
    expect(started.has({ tokens: queue[0]!.tokens, evaluationPriority: 1 })).toBe(true);
    expect(started.has({ tokens: queue[1]!.tokens, evaluationPriority: 5 })).toBe(false);
    // The cold prompt continues to its end; the higher priority waits until then.
    expect(batch(queue, started, 64, 16)).toEqual(["cold:16"]);
    expect(batch(queue, started, 64, 16)).toEqual(["cold:16"]);
    expect(batch(queue, started, 64, 16)).toEqual(["cold:2", "cached:14"]);
    expect(batch(queue, started, 64, 16)).toEqual(["cached:6"]);
    expect(queue).toEqual([]);
  });

  it("keeps a started prompt that a batch gave nothing started", () => {
    const started = new StartedPrefills();
    const queue: Queued[] = [
      { name: "a", tokens: prompt(0, 30), evaluationPriority: 2 },
      { name: "b", tokens: prompt(100, 30), evaluationPriority: 2 },
    ];
    expect(batch(queue, started, 64, 40)).toEqual(["a:30", "b:10"]);
    // A batch with no room for prefill (every token decode): b is still started after it.
    const decoders = Array.from({ length: 4 }, (_, i) => ({ tokens: [9000 + i], evaluationPriority: 1 }));
    const items = [...decoders, { tokens: queue[0]!.tokens, evaluationPriority: 2 }];
    started.batchShared(
      items,
      shareBatch(items, 4, 40, (item) => started.has(item)),
    );
    queue.push({ name: "c", tokens: prompt(200, 30), evaluationPriority: 5 });
    expect(batch(queue, started, 64, 16)).toEqual(["b:16"]);
  });

  it("forgets a prompt once it is evaluated, or when it is gone from the queue", () => {
    const started = new StartedPrefills();
    const queue: Queued[] = [{ name: "a", tokens: prompt(0, 30), evaluationPriority: 1 }];
    batch(queue, started, 64, 16);
    const rest = queue[0]!.tokens;
    // Cancelled: the next batch has other prompts only.
    batch([{ name: "b", tokens: prompt(500, 4), evaluationPriority: 1 }], started, 64, 16);
    expect(started.has({ tokens: rest, evaluationPriority: 1 })).toBe(false);
  });
});
