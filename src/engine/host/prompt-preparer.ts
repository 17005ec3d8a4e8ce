// Host side of prompt preparation: a small piscina pool whose threads render chat templates
// and tokenize (CPU-heavy for long prompts), so the event loop stays free.
import { Piscina } from "piscina";
import type { ToolCallConstraint } from "../../contract/tools.js";
import type {
  ChatPromptTask,
  PreparedPrompt,
  PromptModel,
  PromptTask,
  TextPromptTask,
  TokenizedText,
  ToolCallGrammar,
  VocabInfo,
} from "../wire/prompt-protocol.js";
import { threadEntry } from "./entry.js";

export class PromptPreparer {
  private readonly pool: Piscina;
  /** A vocabulary never changes while its model is served: asked once per model. */
  private readonly vocabs = new Map<string, Promise<VocabInfo>>();

  constructor(
    models: PromptModel[],
    private readonly threads: number,
  ) {
    this.pool = new Piscina({
      ...threadEntry(import.meta.url, "../worker/prompt-thread", models),
      minThreads: threads,
      maxThreads: threads,
      // Threads keep the tokenizers loaded.
      idleTimeout: Number.POSITIVE_INFINITY,
    });
  }

  /** Loads every tokenizer up front so the first request does not pay for it. */
  async warmUp(modelId: string): Promise<void> {
    await this.chat({ modelId, messages: [{ role: "user", content: "" }] });
  }

  chat(request: Omit<ChatPromptTask, "kind">): Promise<PreparedPrompt> {
    return this.pool.run({ kind: "chat", ...request } satisfies PromptTask) as Promise<PreparedPrompt>;
  }

  /** A raw prompt (legacy completions) as the exact tokens a worker evaluates, BOS included. */
  text(request: Omit<TextPromptTask, "kind">): Promise<TokenizedText> {
    return this.pool.run({ kind: "text", ...request } satisfies PromptTask) as Promise<TokenizedText>;
  }

  /** The model's vocabulary size and the BOS token it evaluates first: token-array prompts are checked against it. */
  vocab(modelId: string): Promise<VocabInfo> {
    let info = this.vocabs.get(modelId);
    if (!info) {
      info = this.pool.run({ kind: "vocab", modelId } satisfies PromptTask) as Promise<VocabInfo>;
      // A failure is not remembered: the next request asks again.
      info.catch(() => this.vocabs.delete(modelId));
      this.vocabs.set(modelId, info);
    }
    return info;
  }

  /** The GBNF text of a required tool call, for an engine that takes grammars as text (llama-server). */
  toolCallGrammar(constraint: ToolCallConstraint): Promise<ToolCallGrammar> {
    return this.pool.run({ kind: "tool-call-grammar", constraint } satisfies PromptTask) as Promise<ToolCallGrammar>;
  }

  /**
   * Frees the tokenizers in every thread, then stops the threads. Terminating a thread that
   * still holds llama.cpp objects aborts the process (a native Napi::Error at teardown).
   */
  async close(): Promise<void> {
    try {
      await Promise.all(Array.from({ length: this.threads }, () => this.pool.run({ kind: "dispose" } satisfies PromptTask)));
    } finally {
      await this.pool.destroy();
    }
  }
}
