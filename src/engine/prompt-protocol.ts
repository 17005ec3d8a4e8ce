// Messages between the host and the prompt-preparation thread. Types only.
export interface PromptModel {
  id: string;
  path: string;
}

/** A chat message after HTTP validation: roles folded to what chat templates know. */
export interface ChatTurn {
  role: "system" | "user" | "assistant";
  content: string;
}

export interface ChatPromptTask {
  kind: "chat";
  modelId: string;
  messages: ChatTurn[];
}

/** Frees the tokenizers: a thread must never be terminated while llama.cpp objects live in it. */
export interface DisposePromptTask {
  kind: "dispose";
}

export type PromptTask = ChatPromptTask | DisposePromptTask;

export interface PreparedPrompt {
  /** Exactly what a worker evaluates (BOS included when the model wants one). */
  tokens: number[];
  /** Which chat template rendered it (node-llama-cpp's wrapper name), for logs. */
  chatTemplate: string;
}
