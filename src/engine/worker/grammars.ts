// Grammars for response_format: llama.cpp's JSON grammar, or one built from a JSON schema,
// compiled once per worker and shared by every slot (a grammar is read-only; each generation
// keeps its own state).
import type { Llama, LlamaGrammar } from "node-llama-cpp";
import type { ResponseFormat } from "../../contract/sampling.js";

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

export async function grammarFor(llama: Llama, format: ResponseFormat | undefined): Promise<LlamaGrammar | undefined> {
  if (format === undefined) return undefined;
  let cache = grammarCache.get(llama);
  if (!cache) {
    cache = new Map();
    grammarCache.set(llama, cache);
  }
  const key = format.type === "json_object" ? "json_object" : `json_schema:${JSON.stringify(format.schema)}`;
  let grammar = cache.get(key);
  if (grammar) {
    cache.delete(key);
  } else {
    grammar = format.type === "json_object" ? llama.getGrammarFor("json") : jsonSchemaGrammar(llama, format.schema);
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
  // The host checked the schema against the subset node-llama-cpp's converter understands;
  // its generic type cannot describe a schema known only at run time.
  const converted = await llama.createGrammarForJsonSchema(schema as never);
  const integerRule = /^integer-number-rule ::= .*$/m;
  if (!integerRule.test(converted.grammar)) return converted;
  return llama.createGrammar({
    grammar: converted.grammar.replace(integerRule, 'integer-number-rule ::= "-"? ("0" | [1-9] [0-9]{0,15})'),
    stopGenerationTriggers: converted.stopGenerationTriggers,
    trimWhitespaceSuffix: converted.trimWhitespaceSuffix,
  });
}
