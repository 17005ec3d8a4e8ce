// Reading tool calls out of generated text, whole and streamed in arbitrary pieces, in the
// call syntaxes of two chat templates: node-llama-cpp's default (which the ChatML test model
// gets) and Qwen's, which writes calls as JSON sections.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { ToolCallSyntax } from "../../src/contract/tools.js";
import { ToolCallScanner, collect, parseToolCalls, type ToolCallEvent } from "../../src/http/tool-call-parser.js";
import { GENERIC_TOOL_SYNTAX } from "../helpers/tool-syntax.js";

const DEFAULT = GENERIC_TOOL_SYNTAX;

const QWEN: ToolCallSyntax = {
  prefix: '<tool_call>\n{"name": "',
  alternatePrefixes: [],
  paramsPrefix: '", "arguments": ',
  suffix: "}\n</tool_call>",
  emptyParams: "{}",
  parallel: { sectionPrefix: "", betweenCalls: "\n", sectionSuffix: "<|im_end|>\n" },
  resultPrefix: "\n<tool_response>",
};

const NAMES = new Set(["get_weather", "get_time"]);

function counter(): () => string {
  let next = 0;
  return () => `call_${next++}`;
}

/** The text fed in the given pieces, then the end. */
function scan(syntax: ToolCallSyntax, pieces: readonly string[]): ToolCallEvent[] {
  const scanner = new ToolCallScanner(syntax, NAMES, counter());
  return [...pieces.flatMap((piece) => scanner.push(piece)), ...scanner.finish()];
}

/** Splits a text at the given cut points. */
function split(text: string, cuts: readonly number[]): string[] {
  const points = [...new Set(cuts.map((cut) => cut % (text.length + 1)))].sort((a, b) => a - b);
  const pieces: string[] = [];
  let from = 0;
  for (const point of points) {
    pieces.push(text.slice(from, point));
    from = point;
  }
  pieces.push(text.slice(from));
  return pieces;
}

describe("tool-call parser", () => {
  it("splits content before a call from the call, its name and its JSON arguments", () => {
    const text = 'Let me look.\n||call: get_weather({"city": "Oslo", "note": "a ) and a } inside"})';
    expect(parseToolCalls(text, DEFAULT, NAMES, counter())).toEqual({
      content: "Let me look.",
      calls: [{ id: "call_0", name: "get_weather", arguments: '{"city": "Oslo", "note": "a ) and a } inside"}' }],
    });
  });

  it("reads a call with no arguments as {}", () => {
    expect(parseToolCalls("||call: get_time()", DEFAULT, NAMES, counter()).calls).toEqual([{ id: "call_0", name: "get_time", arguments: "{}" }]);
  });

  it("reads several calls of a template that writes them in one section, dropping the separators", () => {
    const text =
      '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Lima"}}\n</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": {"zone": 3}}\n</tool_call>';
    expect(parseToolCalls(text, QWEN, NAMES, counter())).toEqual({
      content: null,
      calls: [
        { id: "call_0", name: "get_weather", arguments: '{"city": "Lima"}' },
        { id: "call_1", name: "get_time", arguments: '{"zone": 3}' },
      ],
    });
  });

  it("leaves text alone when the name after the prefix is not a tool's, or the prefix never completes", () => {
    expect(parseToolCalls("say ||call: launch_rockets(1) now", DEFAULT, NAMES, counter())).toEqual({ content: "say ||call: launch_rockets(1) now", calls: [] });
    expect(parseToolCalls("a pipe || and more", DEFAULT, NAMES, counter())).toEqual({ content: "a pipe || and more", calls: [] });
    expect(parseToolCalls("ends with ||ca", DEFAULT, NAMES, counter())).toEqual({ content: "ends with ||ca", calls: [] });
  });

  it("keeps a call cut off by the token limit, with the arguments it got", () => {
    expect(parseToolCalls('||call: get_weather({"city": "Pa', DEFAULT, NAMES, counter()).calls).toEqual([
      { id: "call_0", name: "get_weather", arguments: '{"city": "Pa' },
    ]);
  });

  it("never streams call syntax as content, and gives the same content and calls however the text is cut", () => {
    const texts = [
      'Checking.||call: get_weather({"city": "Oslo"})',
      'x ||call:get_time({"zone": [1, {"a": "}"}]})\n||call: get_weather({})',
      "plain text with | pipes || but no call",
      '<tool_call>\n{"name": "get_time", "arguments": {"zone": 1}}\n</tool_call>',
    ];
    for (const [i, text] of texts.entries()) {
      const syntax = i === 3 ? QWEN : DEFAULT;
      const whole = collect(scan(syntax, [text]));
      fc.assert(
        fc.property(fc.array(fc.nat(), { maxLength: 12 }), (cuts) => {
          const events = scan(syntax, split(text, cuts));
          expect(collect(events)).toEqual(whole);
          const streamedContent = events.flatMap((event) => (event.type === "text" ? [event.text] : [])).join("");
          expect(streamedContent).not.toContain("||call");
          expect(streamedContent).not.toContain("<tool_call>");
        }),
        { numRuns: 200 },
      );
    }
  });
});
