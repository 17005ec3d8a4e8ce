// Tool calls and results rendered by node-llama-cpp's chat wrappers, the call syntax read from
// a wrapper, and the grammar of a required call compiled by llama.cpp.
import { ChatMLChatWrapper, getLlama, LlamaLogLevel, QwenChatWrapper } from "node-llama-cpp";
import { describe, expect, it } from "vitest";
import type { ChatTurn } from "../../src/contract/chat.js";
import { availableFunctionsOf, chatHistoryOf, toolCallSyntaxOf } from "../../src/engine/worker/chat-history.js";
import { renameRules, toolCallGbnf } from "../../src/engine/worker/tool-call-grammar.js";
import { GENERIC_TOOL_SYNTAX } from "../helpers/tool-syntax.js";

const WEATHER = { name: "get_weather", description: "Weather now.", parameters: { type: "object", properties: { city: { type: "string" } } } };

function render(turns: ChatTurn[]): string {
  const wrapper = new ChatMLChatWrapper();
  const { contextText } = wrapper.generateContextState({ chatHistory: chatHistoryOf(turns, wrapper), availableFunctions: availableFunctionsOf([WEATHER]) });
  return contextText.toString();
}

const asked: ChatTurn[] = [
  { role: "user", content: "Weather in Oslo?" },
  { role: "assistant", content: "", toolCalls: [{ id: "c1", name: "get_weather", arguments: '{"city":"Oslo"}' }] },
  { role: "tool", toolCallId: "c1", content: '{"temperature":21}' },
];

describe("chat history with tool calls", () => {
  it("documents the tools, writes the call as the model wrote it, its result after it, and continues the same assistant turn", () => {
    const text = render(asked);
    expect(text).toContain("function get_weather(");
    expect(text.endsWith('<|im_start|>assistant\n||call: get_weather({"city":"Oslo"})\n||result: {"temperature": 21}\n')).toBe(true);
  });

  it("puts the answer after the results in the same turn, and opens a new one for the next reply", () => {
    const text = render([...asked, { role: "assistant", content: "It is 21 degrees." }, { role: "user", content: "Thanks" }]);
    expect(text).toContain('||result: {"temperature": 21}\nIt is 21 degrees.<|im_end|>\n<|im_start|>user\nThanks<|im_end|>\n<|im_start|>assistant\n');
    expect(text.match(/<\|im_start\|>assistant/g)).toHaveLength(2);
  });

  it("shows a result that is not JSON as text", () => {
    expect(render([asked[0]!, asked[1]!, { role: "tool", toolCallId: "c1", content: "sunny" }])).toContain('||result: "sunny"');
  });
});

describe("call syntax of a chat template", () => {
  it("is node-llama-cpp's default for ChatML, with no sections", () => {
    expect(toolCallSyntaxOf(new ChatMLChatWrapper())).toEqual(GENERIC_TOOL_SYNTAX);
  });

  it("is Qwen's JSON in <tool_call> tags, written as one section", () => {
    const syntax = toolCallSyntaxOf(new QwenChatWrapper());
    expect(syntax.prefix).toContain("<tool_call>");
    expect(syntax.parallel?.sectionSuffix).toContain("<|im_end|>");
    expect(syntax.resultPrefix).toBe("\n<tool_response>");
  });
});

describe("the grammar of a required call", () => {
  it("renames rule names, not the text of literals or classes", () => {
    const rules = renameRules('root ::= "root" rule0 [a-z]\nrule0 ::= "rule0 ::= x"', "fn0-");
    expect(rules).toEqual(['fn0-root ::= "root" fn0-rule0 [a-z]', 'fn0-rule0 ::= "rule0 ::= x"']);
  });

  it("compiles in llama.cpp for one call and for several", async () => {
    const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
    const syntax = toolCallSyntaxOf(new QwenChatWrapper());
    const parameters = await Promise.all(
      [WEATHER, { name: "get_time", parameters: { type: "object", properties: { zone: { type: "integer" } } } }].map(
        async (tool) => (await llama.createGrammarForJsonSchema(tool.parameters as never)).grammar,
      ),
    );
    for (const parallel of [false, true]) {
      const gbnf = toolCallGbnf({ syntax, functions: [WEATHER, { name: "get_time", parameters: {} }], parallel }, parameters);
      expect(gbnf).toContain("fn1-root");
      // llama.cpp refuses a grammar with an undefined or duplicate rule.
      await expect(llama.createGrammar({ grammar: gbnf })).resolves.toBeDefined();
    }
    await llama.dispose();
  });
});
