// Reads tool calls out of the model's text as it streams, in the call syntax of its chat
// template (prefix, function name, params prefix, JSON arguments, suffix). Text that could
// still turn out to be the start of a call is held back, so a client never receives call
// syntax as content. Text before the first call is the message's content; text between or
// after calls (separators, a section's end) is not shown.
import { randomBytes } from "node:crypto";
import { firstMatch, partialMatchTail } from "../common/text-patterns.js";
import type { ToolCall, ToolCallSyntax } from "../contract/tools.js";

export type ToolCallEvent =
  | { type: "text"; text: string }
  /** A call begins: its function is known, its arguments follow. */
  | { type: "call"; index: number; id: string; name: string }
  /** More of call `index`'s arguments (JSON text). */
  | { type: "arguments"; index: number; text: string };

/** OpenAI's shape of a call id. */
export function newToolCallId(): string {
  return `call_${randomBytes(12).toString("base64url")}`;
}

type State = "text" | "name" | "arguments" | "suffix";

export class ToolCallScanner {
  private pending = "";
  private state: State = "text";
  /** The prefix and name read so far: given back as text when it turns out not to be a call. */
  private callText = "";
  private calls = 0;
  private name = "";
  /** JSON nesting of the arguments read so far; undefined before their first character. */
  private depth: number | undefined;
  private inString = false;
  private escaped = false;
  private readonly prefixes: string[];

  constructor(
    private readonly syntax: ToolCallSyntax,
    private readonly names: ReadonlySet<string>,
    private readonly newId: () => string = newToolCallId,
  ) {
    this.prefixes = [syntax.prefix, ...syntax.alternatePrefixes];
  }

  /** Calls begun so far (a call cut off by the token limit included). */
  get callCount(): number {
    return this.calls + (this.state === "arguments" || this.state === "suffix" ? 1 : 0);
  }

  push(text: string): ToolCallEvent[] {
    this.pending += text;
    const events: ToolCallEvent[] = [];
    while (this.step(events, false)) {}
    return events;
  }

  /** The generation ended: what was held back is text unless a call had begun. */
  finish(): ToolCallEvent[] {
    const events: ToolCallEvent[] = [];
    while (this.step(events, true)) {}
    if (this.state === "name") this.text(events, this.callText + this.pending);
    else if (this.state === "text") this.text(events, this.pending);
    this.pending = "";
    this.state = "text";
    return events;
  }

  /** One move of the state machine; false when it needs more text. */
  private step(events: ToolCallEvent[], ending: boolean): boolean {
    switch (this.state) {
      case "text":
        return this.readText(events, ending);
      case "name":
        return this.readName(events);
      case "arguments":
        return this.readArguments(events);
      case "suffix":
        return this.readSuffix(ending);
    }
  }

  private readText(events: ToolCallEvent[], ending: boolean): boolean {
    const hit = firstMatch(this.pending, this.prefixes);
    if (hit) {
      this.text(events, this.pending.slice(0, hit.at));
      this.callText = hit.pattern;
      this.pending = this.pending.slice(hit.at + hit.pattern.length);
      this.state = "name";
      return true;
    }
    const held = ending ? 0 : partialMatchTail(this.pending, this.prefixes);
    this.text(events, this.pending.slice(0, this.pending.length - held));
    this.pending = this.pending.slice(this.pending.length - held);
    return false;
  }

  private readName(events: ToolCallEvent[]): boolean {
    const { paramsPrefix } = this.syntax;
    const end = paramsPrefix.length > 0 ? this.pending.indexOf(paramsPrefix) : (/[^a-zA-Z0-9_-]/.exec(this.pending)?.index ?? -1);
    if (end < 0) {
      // A name is one line of at most 64 characters: anything else was not a call.
      if (this.pending.length <= 64 + paramsPrefix.length && !this.pending.includes("\n")) return false;
      return this.notACall(events, this.pending.length);
    }
    const name = this.pending.slice(0, end).trim();
    if (!this.names.has(name)) return this.notACall(events, end + paramsPrefix.length);
    this.name = name;
    this.pending = this.pending.slice(end + paramsPrefix.length);
    events.push({ type: "call", index: this.calls, id: this.newId(), name });
    this.depth = undefined;
    this.inString = false;
    this.escaped = false;
    this.state = "arguments";
    return true;
  }

  /** What looked like a call's start is text after all; reading goes on after it. */
  private notACall(events: ToolCallEvent[], length: number): boolean {
    this.text(events, this.callText + this.pending.slice(0, length));
    this.pending = this.pending.slice(length);
    this.state = "text";
    return true;
  }

  private readArguments(events: ToolCallEvent[]): boolean {
    if (this.depth === undefined) {
      const start = this.pending.search(/\S/);
      if (start < 0) {
        this.pending = "";
        return false;
      }
      this.pending = this.pending.slice(start);
      if (this.pending[0] !== "{" && this.pending[0] !== "[") {
        // No JSON object: a call without parameters, if the suffix follows.
        events.push({ type: "arguments", index: this.calls, text: "{}" });
        this.state = "suffix";
        return true;
      }
      this.depth = 0;
    }
    let i = 0;
    for (; i < this.pending.length; i++) {
      const char = this.pending[i]!;
      if (this.inString) {
        if (this.escaped) this.escaped = false;
        else if (char === "\\") this.escaped = true;
        else if (char === '"') this.inString = false;
      } else if (char === '"') this.inString = true;
      else if (char === "{" || char === "[") this.depth++;
      else if (char === "}" || char === "]") {
        this.depth--;
        if (this.depth === 0) {
          i++;
          break;
        }
      }
    }
    if (i > 0) events.push({ type: "arguments", index: this.calls, text: this.pending.slice(0, i) });
    this.pending = this.pending.slice(i);
    if (this.depth !== 0) return false;
    this.state = "suffix";
    return true;
  }

  private readSuffix(ending: boolean): boolean {
    const suffix = this.syntax.suffix.replaceAll("{{functionName}}", this.name);
    const rest = this.pending.trimStart();
    if (!ending && rest.length < suffix.length && suffix.startsWith(rest)) return false;
    // The call is complete; its suffix is skipped when it is there.
    this.pending = rest.startsWith(suffix) ? rest.slice(suffix.length) : this.pending;
    this.calls++;
    this.state = "text";
    return true;
  }

  private text(events: ToolCallEvent[], text: string): void {
    if (text.length > 0 && this.calls === 0) events.push({ type: "text", text });
  }
}

/** The whole answer at once: its content (null when empty and there are calls) and its calls. */
export function parseToolCalls(
  text: string,
  syntax: ToolCallSyntax,
  names: ReadonlySet<string>,
  newId: () => string = newToolCallId,
): { content: string | null; calls: ToolCall[] } {
  const scanner = new ToolCallScanner(syntax, names, newId);
  return collect([...scanner.push(text), ...scanner.finish()]);
}

/** Joins scanner events into content and calls. */
export function collect(events: readonly ToolCallEvent[]): { content: string | null; calls: ToolCall[] } {
  let content = "";
  const calls: ToolCall[] = [];
  for (const event of events) {
    if (event.type === "text") content += event.text;
    else if (event.type === "call") calls.push({ id: event.id, name: event.name, arguments: "" });
    else calls[event.index]!.arguments += event.text;
  }
  if (calls.length === 0) return { content, calls };
  const trimmed = content.trimEnd();
  return { content: trimmed.length > 0 ? trimmed : null, calls };
}
