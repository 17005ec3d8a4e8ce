// The soak's request mix: what a busy gateway sees in a day, in miniature.
//   agent turn  a session (x-session-id) replaying a real agent transcript turn by turn:
//               every turn re-sends the growing conversation (streamed)
//   one-shot    a prompt nobody else sends, answered in one body
//   stream      the same, streamed
//   abort       a stream the client gives up on: before its first token, or just after it
//   bad         a request the server must refuse with a 4xx in OpenAI's error shape
// Transcripts are the ToolBench and SWE-agent ones bench/workloads/agent-loops.ts reads, cut
// down so that a conversation of a few turns fits a 2048-token slot with room for the answer.
// Without them on this machine, sessions are made of seeded filler text of the same shape.
import { mulberry32 } from "../../src/common/random.js";
import { loadAgentTranscripts, type Transcript } from "../workloads/agent-loops.js";

export type RequestKind = "agent-turn" | "one-shot" | "stream" | "abort" | "bad";

export const REQUEST_KINDS: readonly RequestKind[] = ["agent-turn", "one-shot", "stream", "abort", "bad"];

/** Share of each kind in the mix (they need not sum to 1). */
export type MixWeights = Record<RequestKind, number>;

export const DEFAULT_WEIGHTS: MixWeights = { "agent-turn": 0.4, "one-shot": 0.23, stream: 0.25, abort: 0.1, bad: 0.02 };

export interface ChatMessage {
  role: "system" | "user" | "assistant";
  content: string;
}

/** When an abort request's client gives up. */
export interface AbortPlan {
  /** `early`: `delayMs` after sending (it may land before or after the first token); `after-first-token`: `delayMs` after it. */
  when: "early" | "after-first-token";
  delayMs: number;
}

export interface RequestSpec {
  kind: RequestKind;
  /** What the request is, in a word: the agent session's turn, a bad request's fault. */
  label: string;
  /** The body as sent: JSON text, or deliberately broken text for a bad request. */
  body: string;
  headers: Record<string, string>;
  stream: boolean;
  abort?: AbortPlan;
  /** A bad request's expected answer (status and OpenAI error code). */
  expected?: { status: number; code: string };
  /** Called once the request has its answer, whatever it was (frees an agent session for its next turn). */
  onSettled?: () => void;
}

export interface MixOptions {
  model: string;
  seed: number;
  /** Unique per run and phase: no prompt is cached from an earlier run. */
  salt: string;
  weights?: MixWeights;
  maxTokens?: { min: number; max: number };
}

/** Longest message content kept from a transcript, and longest conversation (characters). */
const SYSTEM_CHARS = 400;
const MESSAGE_CHARS = 220;
const CONVERSATION_CHARS = 1500;
const TURNS = { min: 2, max: 5 };
/** Idle sessions kept waiting for their next turn; beyond it a new arrival starts a fresh session only if none is idle. */
const SESSION_POOL = 12;

/** One replayed agent conversation: its turns' message lists, each a prefix of the next. */
class AgentSession {
  private turn = 0;
  busy = false;

  constructor(
    readonly id: string,
    private readonly turns: ChatMessage[][],
  ) {}

  get finished(): boolean {
    return this.turn >= this.turns.length;
  }

  nextTurn(): { messages: ChatMessage[]; turn: number } {
    const messages = this.turns[this.turn]!;
    return { messages, turn: ++this.turn };
  }
}

function clip(text: string, chars: number): string {
  return text.length <= chars ? text : `${text.slice(0, chars)}…`;
}

function chatRole(role: string): ChatMessage["role"] {
  // Tool and function results travel as user messages: the server refuses role "tool".
  return role === "system" || role === "assistant" ? role : "user";
}

const FILLER = [
  "the",
  "tool",
  "returned",
  "a",
  "list",
  "of",
  "files",
  "and",
  "their",
  "sizes",
  "next",
  "open",
  "read",
  "line",
  "error",
  "test",
  "passes",
  "fix",
  "run",
  "agent",
];

function fillerText(random: () => number, words: number): string {
  return Array.from({ length: words }, () => FILLER[Math.floor(random() * FILLER.length)]).join(" ");
}

export class RequestMix {
  private readonly random: () => number;
  private readonly weights: MixWeights;
  private readonly maxTokens: { min: number; max: number };
  private readonly transcripts: readonly Transcript[];
  private readonly sessions: AgentSession[] = [];
  private sessionCount = 0;
  private oneShotCount = 0;

  constructor(private readonly options: MixOptions) {
    this.random = mulberry32(options.seed);
    this.weights = options.weights ?? DEFAULT_WEIGHTS;
    this.maxTokens = options.maxTokens ?? { min: 16, max: 64 };
    let transcripts: Transcript[] = [];
    try {
      transcripts = loadAgentTranscripts().filter((transcript) => transcript.calls.length >= TURNS.min);
    } catch {
      // The transcripts could not be read: filler sessions below.
    }
    this.transcripts = transcripts;
  }

  /** Where agent turns come from, for the report. */
  get transcriptSource(): string {
    return this.transcripts.length > 0
      ? `${this.transcripts.length} ToolBench and SWE-agent transcripts (bench/data)`
      : "seeded filler text (bench/data could not be read)";
  }

  /** The next request of the mix, drawn by weight. */
  next(): RequestSpec {
    const kind = this.drawKind();
    switch (kind) {
      case "agent-turn":
        return this.agentTurn();
      case "one-shot":
        return this.oneShot(false);
      case "stream":
        return this.oneShot(true);
      case "abort":
        return this.abort();
      case "bad":
        return this.bad();
    }
  }

  private drawKind(): RequestKind {
    const total = REQUEST_KINDS.reduce((sum, kind) => sum + this.weights[kind], 0);
    let x = this.random() * total;
    for (const kind of REQUEST_KINDS) {
      x -= this.weights[kind];
      if (x < 0) return kind;
    }
    return "one-shot";
  }

  private drawMaxTokens(): number {
    const { min, max } = this.maxTokens;
    return min + Math.floor(this.random() * (max - min + 1));
  }

  private chatBody(messages: ChatMessage[], stream: boolean, maxTokens: number): string {
    return JSON.stringify({
      model: this.options.model,
      messages,
      max_tokens: maxTokens,
      temperature: 0,
      ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
    });
  }

  /** An idle session's next turn, or the first turn of a new session. */
  private agentTurn(): RequestSpec {
    const idle = this.sessions.filter((session) => !session.busy && !session.finished);
    const session = idle.length > 0 ? idle[Math.floor(this.random() * idle.length)]! : this.startSession();
    session.busy = true;
    const { messages, turn } = session.nextTurn();
    return {
      kind: "agent-turn",
      label: `turn ${turn}`,
      body: this.chatBody(messages, true, Math.min(48, this.drawMaxTokens())),
      headers: { "content-type": "application/json", "x-session-id": session.id },
      stream: true,
      onSettled: () => {
        session.busy = false;
        const index = this.sessions.indexOf(session);
        if (session.finished && index >= 0) this.sessions.splice(index, 1);
      },
    };
  }

  private startSession(): AgentSession {
    const index = this.sessionCount++;
    const id = `soak-${this.options.salt}-s${index}`;
    const wanted = TURNS.min + Math.floor(this.random() * (TURNS.max - TURNS.min + 1));
    const turns = this.transcripts.length > 0 ? this.transcriptTurns(id, wanted) : this.fillerTurns(id, wanted);
    const session = new AgentSession(id, turns);
    // Keep the pool bounded: drop the oldest idle session when it is full.
    if (this.sessions.length >= SESSION_POOL) {
      const oldestIdle = this.sessions.findIndex((s) => !s.busy);
      if (oldestIdle >= 0) this.sessions.splice(oldestIdle, 1);
    }
    this.sessions.push(session);
    return session;
  }

  /**
   * A transcript's first calls as chat turns. Sessions of one transcript share its system
   * prompt (and SWE-agent's demonstration) but are told apart in their first own user
   * message, as real sessions of one agent are.
   */
  private transcriptTurns(sessionId: string, wanted: number): ChatMessage[][] {
    const transcript = this.transcripts[Math.floor(this.random() * this.transcripts.length)]!;
    const turns: ChatMessage[][] = [];
    for (const call of transcript.calls.slice(0, wanted)) {
      const marker = call.messages.findIndex((message) => message.role === "user" && !message.isDemo);
      const messages = call.messages.map((message, i): ChatMessage => {
        const content = clip(message.content, message.role === "system" ? SYSTEM_CHARS : MESSAGE_CHARS);
        return { role: chatRole(message.role), content: i === marker ? `Session ${sessionId}.\n${content}` : content };
      });
      if (messages.reduce((sum, message) => sum + message.content.length, 0) > CONVERSATION_CHARS) break;
      turns.push(messages);
    }
    // A transcript whose first call is already too long still gives one (shortened) turn.
    if (turns.length === 0)
      turns.push([{ role: "user", content: `Session ${sessionId}.\n${clip(transcript.calls[0]!.messages.at(-1)!.content, MESSAGE_CHARS)}` }]);
    return turns;
  }

  private fillerTurns(sessionId: string, wanted: number): ChatMessage[][] {
    const history: ChatMessage[] = [
      { role: "system", content: `You are a coding agent.\n${fillerText(this.random, 60)}` },
      { role: "user", content: `Session ${sessionId}.\n${fillerText(this.random, 30)}` },
    ];
    const turns: ChatMessage[][] = [];
    for (let i = 0; i < wanted; i++) {
      if (i > 0)
        history.push({ role: "assistant", content: fillerText(this.random, 20) }, { role: "user", content: `tool result: ${fillerText(this.random, 30)}` });
      turns.push([...history]);
    }
    return turns;
  }

  /** A prompt of its own: a transcript's user text (or filler) behind a unique first line. */
  private oneShotPrompt(): string {
    const index = this.oneShotCount++;
    let text: string;
    if (this.transcripts.length > 0) {
      const transcript = this.transcripts[Math.floor(this.random() * this.transcripts.length)]!;
      const call = transcript.calls[Math.floor(this.random() * transcript.calls.length)]!;
      text = clip(call.messages.at(-1)!.content, 100 + Math.floor(this.random() * 500));
    } else {
      text = fillerText(this.random, 20 + Math.floor(this.random() * 80));
    }
    return `Request ${this.options.salt}-q${index}.\n${text}`;
  }

  private oneShot(stream: boolean): RequestSpec {
    return {
      kind: stream ? "stream" : "one-shot",
      label: stream ? "stream" : "one-shot",
      body: this.chatBody([{ role: "user", content: this.oneShotPrompt() }], stream, this.drawMaxTokens()),
      headers: { "content-type": "application/json" },
      stream,
    };
  }

  private abort(): RequestSpec {
    const early = this.random() < 0.5;
    const abort: AbortPlan = early
      ? { when: "early", delayMs: 1 + Math.floor(this.random() * 20) }
      : { when: "after-first-token", delayMs: Math.floor(this.random() * 30) };
    return {
      kind: "abort",
      label: abort.when,
      // Long enough to still be generating when the client leaves.
      body: this.chatBody([{ role: "user", content: this.oneShotPrompt() }], true, this.maxTokens.max),
      headers: { "content-type": "application/json" },
      stream: true,
      abort,
    };
  }

  private bad(): RequestSpec {
    const model = this.options.model;
    const faults: { label: string; body: string; expected: { status: number; code: string } }[] = [
      { label: "invalid JSON", body: `{"model": "${model}", "messages": [{"role": "user", "content": "hi"}`, expected: { status: 400, code: "invalid_json" } },
      { label: "messages not an array", body: JSON.stringify({ model, messages: "hi", max_tokens: 16 }), expected: { status: 400, code: "invalid_request" } },
      {
        label: "max_tokens a string",
        body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }], max_tokens: "16" }),
        expected: { status: 400, code: "invalid_request" },
      },
      {
        label: "unknown model",
        body: JSON.stringify({ model: "no-such-model", messages: [{ role: "user", content: "hi" }], max_tokens: 16 }),
        expected: { status: 404, code: "model_not_found" },
      },
    ];
    const fault = faults[Math.floor(this.random() * faults.length)]!;
    return { kind: "bad", label: fault.label, body: fault.body, headers: { "content-type": "application/json" }, stream: false, expected: fault.expected };
  }
}
