// A chat conversation as the HTTP side hands it on and the prompt thread renders it. Types only.

/** A chat message after HTTP validation: roles folded to what chat templates know. */
export interface ChatTurn {
  role: "system" | "user" | "assistant";
  content: string;
}
