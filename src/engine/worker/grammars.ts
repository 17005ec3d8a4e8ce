// Grammars for response_format: llama.cpp's JSON grammar, or one built from a JSON schema,
// compiled once per worker and shared by every slot (a grammar is read-only; each generation
// keeps its own state).
import type { Llama, LlamaGrammar } from "node-llama-cpp";
import type { SamplingParams } from "../../contract/sampling.js";
import { GRAMMAR_END, toolCallGbnf } from "./tool-call-grammar.js";

/**
 * Compiled grammars, per Llama instance (a reloaded engine starts empty) and per response
 * format (the schema's JSON text), least recently used out past GRAMMAR_CACHE_SIZE. A
 * grammar is read-only: generations in every slot share it, each with its own state.
 */
const grammarCache = new WeakMap<Llama, Map<string, Promise<LlamaGrammar>>>();
const GRAMMAR_CACHE_SIZE = 64;

/** node-llama-cpp refused to build the grammar of a response format: the client's request is at fault. */
export class GrammarRefusedError extends Error {
  override name = "GrammarRefusedError";
}

/** The grammar of a required tool call, else of the response format; undefined for free text. */
export async function grammarFor(
  llama: Llama,
  { responseFormat: format, toolCalls }: Pick<SamplingParams, "responseFormat" | "toolCalls">,
): Promise<LlamaGrammar | undefined> {
  const wanted = toolCalls
    ? { key: `tool_calls:${JSON.stringify(toolCalls)}`, build: () => toolCallGrammar(llama, toolCalls) }
    : format?.type === "json_object"
      ? { key: "json_object", build: () => llama.getGrammarFor("json") }
      : format?.type === "json_schema"
        ? { key: `json_schema:${JSON.stringify(format.schema)}`, build: () => jsonSchemaGrammar(llama, format.schema) }
        : undefined;
  if (!wanted) return undefined;
  let cache = grammarCache.get(llama);
  if (!cache) {
    cache = new Map();
    grammarCache.set(llama, cache);
  }
  const { key } = wanted;
  let grammar = cache.get(key);
  if (grammar) {
    cache.delete(key);
  } else {
    grammar = wanted.build();
    const built = grammar;
    // A refused schema is not remembered.
    built.catch(() => {
      if (cache.get(key) === built) cache.delete(key);
    });
  }
  cache.set(key, grammar);
  if (cache.size > GRAMMAR_CACHE_SIZE) cache.delete(cache.keys().next().value!);
  return grammar;
}

/**
 * node-llama-cpp's grammar for a JSON schema, with one fix: its `integer` rule allows an
 * exponent, signed too (`1e-5`, or `2E9439000074390707`, which a JSON parser reads as
 * Infinity); JSON Schema's integer is a whole number, so the rule keeps sign and digits only.
 */
async function jsonSchemaGrammar(llama: Llama, schema: Record<string, unknown>): Promise<LlamaGrammar> {
  const converted = await llama.createGrammarForJsonSchema(schema as never);
  const grammar = wholeIntegers(converted.grammar);
  if (grammar === converted.grammar) return converted;
  return llama.createGrammar({ grammar, stopGenerationTriggers: converted.stopGenerationTriggers, trimWhitespaceSuffix: converted.trimWhitespaceSuffix });
}

/** The GBNF text of a JSON schema's grammar, integers whole. */
async function jsonSchemaGbnf(llama: Llama, schema: Record<string, unknown>): Promise<string> {
  // The host checked the schema against the subset node-llama-cpp's converter understands;
  // its generic type cannot describe a schema known only at run time.
  return wholeIntegers((await llama.createGrammarForJsonSchema(schema as never)).grammar);
}

function wholeIntegers(grammar: string): string {
  return grammar.replace(/^integer-number-rule ::= .*$/m, 'integer-number-rule ::= "-"? ("0" | [1-9] [0-9]{0,15})');
}

/** A required tool call: stops, like a JSON-schema grammar, on the newlines after its end. */
async function toolCallGrammar(llama: Llama, constraint: NonNullable<SamplingParams["toolCalls"]>): Promise<LlamaGrammar> {
  const { gbnf, stop } = await toolCallGrammarText(llama, constraint);
  return llama.createGrammar({ grammar: gbnf, stopGenerationTriggers: [stop], trimWhitespaceSuffix: true });
}

/** The same grammar as text, with the string that ends it: what the llama-server engine sends. */
export async function toolCallGrammarText(llama: Llama, constraint: NonNullable<SamplingParams["toolCalls"]>): Promise<{ gbnf: string; stop: string }> {
  const parameters = await Promise.all(constraint.functions.map((tool) => jsonSchemaGbnf(llama, tool.parameters)));
  return { gbnf: toolCallGbnf(constraint, parameters), stop: GRAMMAR_END };
}
