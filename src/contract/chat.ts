// A chat conversation as the HTTP side hands it on and the prompt thread renders it. Types only.
import type { ToolCall } from "./tools.js";

/** A chat message after HTTP validation: roles folded to what chat templates know. */
export type ChatTurn =
  | { role: "system" | "user"; content: string }
  /** `toolCalls`: the calls this answer made, each answered by a later `tool` turn. */
  | { role: "assistant"; content: string; toolCalls?: ToolCall[] }
  /** The result of the assistant's call `toolCallId`. */
  | { role: "tool"; content: string; toolCallId: string };
