// Agent loops replayed from real multi-call transcripts (bench/data, see PROVENANCE.md
// there): each session sends its turns one after another, as an agent does, and many
// sessions interleave.
//
// Transcripts
// - ToolBench answers (`answer_generation.train_messages`): one full message list per LLM
//   call; call k's prompt is its list without the final assistant message, which is the
//   call's answer. (Two files have no train_messages and are skipped.) ToolBench's DFS
//   sometimes retries a step with an extra "This is not the first time you try this task"
//   message that later calls drop: those calls share only the history before it, as the
//   data says.
// - SWE-agent trajectories (`history`): call k's prompt is the history up to the k-th
//   assistant message, which is its answer.
// An assistant message's function_call / tool_calls are rendered after its content (they
// are part of what the model generated and what the next call re-sends).
//
// Sessions: session i replays a transcript drawn uniformly (seeded), starting at a Poisson
// arrival; turn k+1 is sent `thinkMs` (uniform in [min, max]: tool execution time, the range
// of SWE-agent's recorded execution_time) after turn k's response completes (`after`).
// Every call re-sends the growing history, so turns of one session share exact token
// prefixes (chat-tokens.ts). Two sessions replaying the same transcript must not be the
// same conversation: "Session <i>." is prepended to the first user message that is not a
// demonstration, so they share the system prompt (and SWE-agent's demonstration), as real
// sessions of one agent do, and nothing after it.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type ChatMessage, StandInTokenizer } from "./chat-tokens.js";
import { exactTokens, exponentialMs, structureStream, VOCAB, type WorkloadRequest } from "./tokens.js";

export const TOOLBENCH_ANSWERS = fileURLToPath(new URL("../data/toolbench_data_example/data_example/answer/", import.meta.url));
export const SWE_AGENT_TRAJECTORIES = fileURLToPath(new URL("../data/swe_agent_trajectories/", import.meta.url));

/** A message of a transcript, with what the stand-in tokenizer needs to place the session marker. */
export interface TranscriptMessage extends ChatMessage {
  /** SWE-agent's demonstration messages (shared by every session of one agent config). */
  isDemo?: boolean;
}

export interface TranscriptCall {
  /** What the call sends. */
  messages: TranscriptMessage[];
  /** The assistant's answer (its content as the template renders it). */
  answer: string;
}

export interface Transcript {
  /** Source and file, relative to the data folder. */
  id: string;
  source: "toolbench" | "swe-agent";
  calls: TranscriptCall[];
}

function filesUnder(dir: string, extension: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...filesUnder(path, extension));
    else if (entry.name.endsWith(extension)) out.push(path);
  }
  // Sorted: the same transcript list (and so the same sessions) on every machine.
  return out.sort();
}

interface RawMessage {
  role?: string;
  content?: unknown;
  name?: string;
  function_call?: unknown;
  tool_calls?: unknown;
  is_demo?: boolean;
}

/** The text a message contributes: content, then a generated call (function_call / tool_calls). */
function messageText(raw: RawMessage): string {
  let text = typeof raw.content === "string" ? raw.content : raw.content == null ? "" : JSON.stringify(raw.content);
  if (raw.function_call !== undefined) text += `${text === "" ? "" : "\n"}${JSON.stringify(raw.function_call)}`;
  if (Array.isArray(raw.tool_calls) && raw.tool_calls.length > 0) text += `${text === "" ? "" : "\n"}${JSON.stringify(raw.tool_calls)}`;
  if (raw.role === "function" && raw.name) text = `${raw.name}: ${text}`;
  return text;
}

function toMessage(raw: RawMessage): TranscriptMessage {
  return { role: raw.role ?? "user", content: messageText(raw), ...(raw.is_demo ? { isDemo: true } : {}) };
}

/** ToolBench answer files with train_messages, one transcript each. */
export function loadToolbenchTranscripts(dir: string = TOOLBENCH_ANSWERS): Transcript[] {
  const transcripts: Transcript[] = [];
  for (const file of filesUnder(dir, ".json")) {
    const json = JSON.parse(readFileSync(file, "utf8")) as { answer_generation?: { train_messages?: RawMessage[][] } };
    const calls = json.answer_generation?.train_messages;
    if (!Array.isArray(calls) || calls.length === 0) continue;
    const parsed: TranscriptCall[] = [];
    for (const call of calls) {
      const last = call[call.length - 1];
      if (last?.role !== "assistant") throw new Error(`${file}: a train_messages call does not end with the assistant's answer`);
      parsed.push({ messages: call.slice(0, -1).map(toMessage), answer: messageText(last) });
    }
    transcripts.push({ id: `toolbench/${file.slice(dir.length)}`, source: "toolbench", calls: parsed });
  }
  return transcripts;
}

/** SWE-agent .traj files with a history, one transcript each (call k = history up to its k-th assistant message). */
export function loadSweAgentTranscripts(dir: string = SWE_AGENT_TRAJECTORIES): Transcript[] {
  const transcripts: Transcript[] = [];
  for (const file of filesUnder(dir, ".traj")) {
    const json = JSON.parse(readFileSync(file, "utf8")) as { history?: RawMessage[] };
    const history = json.history;
    if (!Array.isArray(history)) continue;
    const messages = history.map(toMessage);
    const calls: TranscriptCall[] = [];
    history.forEach((raw, i) => {
      if (raw.role === "assistant" && i > 0) calls.push({ messages: messages.slice(0, i), answer: messages[i]!.content });
    });
    if (calls.length > 0) transcripts.push({ id: `swe-agent/${file.slice(dir.length)}`, source: "swe-agent", calls });
  }
  return transcripts;
}

let cachedTranscripts: Transcript[] | undefined;

/** Both sources, ToolBench first (read once per process). */
export function loadAgentTranscripts(): Transcript[] {
  cachedTranscripts ??= [...loadToolbenchTranscripts(), ...loadSweAgentTranscripts()];
  return cachedTranscripts;
}

export interface AgentLoopOptions {
  seed: number;
  /** Per-run salt: changes every token id, not the shape. */
  salt: number;
  /** Sessions to replay. */
  sessions?: number;
  /** Poisson session starts per second. */
  sessionRatePerS?: number;
  /** Tool time between a response and the next call, uniform in [min, max] ms. */
  thinkMs?: { min: number; max: number };
  /** The transcripts to draw from; default: every ToolBench and SWE-agent transcript. */
  transcripts?: readonly Transcript[];
  vocab?: number;
}

export const AGENT_LOOP_DEFAULTS = {
  sessions: 60,
  sessionRatePerS: 1,
  thinkMs: { min: 100, max: 2000 },
  vocab: VOCAB,
} as const;

const SESSIONS = 0x9001;

/** Index in `messages` of the message that carries the session marker: the first user message that is not a demonstration. */
function markerIndex(messages: readonly TranscriptMessage[]): number {
  return messages.findIndex((message) => message.role === "user" && !message.isDemo);
}

/**
 * The requests of `sessions` sessions, session by session (turns consecutive), each turn
 * after the previous one. Finite: every session replays its transcript to the end.
 */
export function agentLoopRequests(options: AgentLoopOptions): WorkloadRequest[] {
  const o = { ...AGENT_LOOP_DEFAULTS, ...options };
  const transcripts = o.transcripts ?? loadAgentTranscripts();
  if (transcripts.length === 0) throw new Error("agentLoopRequests: no transcripts");
  if (!(o.sessions >= 1) || !(o.sessionRatePerS > 0) || !(o.thinkMs.min >= 0) || !(o.thinkMs.max >= o.thinkMs.min)) {
    throw new RangeError("agentLoopRequests: sessions >= 1, sessionRatePerS > 0 and 0 <= thinkMs.min <= thinkMs.max");
  }
  const tokenizer = new StandInTokenizer(o.seed, o.salt, o.vocab);
  const next = structureStream(o.seed, SESSIONS);
  // Per transcript, each distinct message's tokens (by position and text), so a history
  // re-sent by every call is tokenized once; the marked message is per session.
  const messageTokens = new Map<Transcript, Map<string, number[]>>();
  const tokensOf = (transcript: Transcript, message: TranscriptMessage): number[] => {
    let byText = messageTokens.get(transcript);
    if (!byText) messageTokens.set(transcript, (byText = new Map()));
    const key = `${message.role}\u0000${message.content}`;
    let tokens = byText.get(key);
    if (!tokens) byText.set(key, (tokens = tokenizer.message(message)));
    return tokens;
  };
  const requests: WorkloadRequest[] = [];
  let startMs = 0;
  for (let session = 0; session < o.sessions; session++) {
    const transcript = transcripts[Math.floor(next() * transcripts.length)]!;
    if (session > 0) startMs += exponentialMs(next(), o.sessionRatePerS);
    const marked = new Map<string, number[]>();
    let previous: number | undefined;
    for (const call of transcript.calls) {
      const thinkMs = o.thinkMs.min + next() * (o.thinkMs.max - o.thinkMs.min);
      const marker = markerIndex(call.messages);
      const tokens: number[] = [];
      call.messages.forEach((message, i) => {
        if (i !== marker) {
          for (const id of tokensOf(transcript, message)) tokens.push(id);
          return;
        }
        let own = marked.get(message.content);
        if (!own) marked.set(message.content, (own = tokenizer.message({ role: message.role, content: `Session ${session}.\n${message.content}` })));
        for (const id of own) tokens.push(id);
      });
      tokenizer.header("assistant", tokens);
      const answer = tokenizer.answer(call.answer);
      const index = requests.length;
      requests.push({
        index,
        arrivalMs: startMs,
        tokens: exactTokens(tokens),
        outputTokens: Math.max(1, answer.length),
        answerTokens: answer,
        group: session,
        messageCount: call.messages.length,
        session,
        ...(previous !== undefined ? { after: previous, thinkMs } : {}),
      });
      previous = index;
    }
  }
  return requests;
}
