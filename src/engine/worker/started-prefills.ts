// Which of node-llama-cpp's queued prompts have started their prefill, for the batch rule that
// continues a started prefill first (batch-priority.ts). node-llama-cpp hands the batch rule
// new item objects at every batch, and after a batch that evaluated part of a prompt it keeps
// only the rest (`tokens.slice(processAmount)`): nothing on an item says it started. So after
// each batch this remembers what each part-evaluated prompt will look like at the next one:
// the tokens it has left, the first of them, and its priority. Two prompts that look alike in
// all three are both taken as started: the one that has not started only moves ahead of the
// prompts that have not either.
import type { BatchShare } from "../../scheduler/batch-priority.js";

export interface QueuedPrompt {
  readonly tokens: ArrayLike<number>;
  readonly evaluationPriority: number;
}

function keyOf(left: number, next: number, priority: number): string {
  return `${left}:${next}:${priority}`;
}

export class StartedPrefills {
  private expected = new Set<string>();

  /** Whether `item` is the rest of a prompt part of which an earlier batch evaluated. */
  has(item: QueuedPrompt): boolean {
    return item.tokens.length > 1 && this.expected.has(keyOf(item.tokens.length, item.tokens[0]!, item.evaluationPriority));
  }

  /** After a batch is shared out: its part-evaluated prompts, and the started ones it gave nothing, are started at the next. */
  batchShared<T extends QueuedPrompt>(items: readonly T[], shares: readonly BatchShare<T>[]): void {
    const next = new Set<string>();
    for (const { item, processAmount } of shares) {
      const left = item.tokens.length - processAmount;
      if (item.tokens.length > 1 && left > 0) next.add(keyOf(left, item.tokens[processAmount]!, item.evaluationPriority));
    }
    // Started ones given nothing this batch (their tokens unchanged): only ever after the prefill budget ran out.
    if (this.expected.size > 0) {
      for (const item of items)
        if (this.has(item) && !shares.some((share) => share.item === item)) next.add(keyOf(item.tokens.length, item.tokens[0]!, item.evaluationPriority));
    }
    this.expected = next;
  }
}
