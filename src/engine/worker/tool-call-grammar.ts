// The GBNF grammar of a tool call the request requires: the template's call syntax around
// each allowed function's name and its parameters' JSON-schema grammar, one call or (when
// parallel calls are allowed) several. The parameters' rules come from node-llama-cpp's
// JSON-schema converter; each function's rules are renamed apart so they can live in one grammar.
import type { ToolCallConstraint } from "../../contract/tools.js";

/**
 * What ends the generation: node-llama-cpp's JSON-schema grammars end in four newlines that
 * it takes as the stop (and trims); the same closing keeps its stop handling for this grammar.
 */
export const GRAMMAR_END = "\n\n\n\n";
const GRAMMAR_END_RULE = / "\\n\\n\\n\\n" \[\\n\]\*$/;

/** `parametersGrammar(i)`: the GBNF text node-llama-cpp made for function i's parameters. */
export function toolCallGbnf(constraint: ToolCallConstraint, parametersGrammars: readonly string[]): string {
  const { syntax, functions, parallel } = constraint;
  const rules: string[] = [];
  const calls = functions.map((tool, i) => {
    const space = `fn${i}-`;
    rules.push(...renameRules(withoutEnd(parametersGrammars[i]!), space));
    rules.push(
      `${space}call ::= ${literal(syntax.prefix)} ${literal(tool.name)} ${literal(syntax.paramsPrefix)} ${space}root ${literal(syntax.suffix.replaceAll("{{functionName}}", tool.name))}`,
    );
    return `${space}call`;
  });
  rules.push(`call ::= ${calls.join(" | ")}`);
  const end = `${literal(GRAMMAR_END)} [\\n]*`;
  if (!parallel) {
    rules.push(`root ::= call ${end}`);
  } else {
    const section = syntax.parallel ?? { sectionPrefix: "", betweenCalls: "", sectionSuffix: "" };
    rules.push(`root ::= ${literal(section.sectionPrefix)} call (${literal(section.betweenCalls)} call)* ${literal(section.sectionSuffix)} ${end}`);
  }
  return rules.join("\n");
}

function withoutEnd(grammar: string): string {
  return grammar
    .split("\n")
    .map((line) => (line.startsWith("root ::= ") ? line.replace(GRAMMAR_END_RULE, "") : line))
    .join("\n");
}

/** A GBNF string literal. */
export function literal(text: string): string {
  const escaped = text.replace(/[\\"\n\r\t]/g, (char) => ({ "\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t" })[char]!);
  return `"${escaped}"`;
}

/**
 * Prefixes every rule name the grammar defines, in its definitions and its references.
 * References are the bare names outside string literals and character classes.
 */
export function renameRules(grammar: string, prefix: string): string[] {
  const lines = grammar.split("\n").filter((line) => line.trim().length > 0);
  const defined = new Set(lines.map((line) => /^([a-zA-Z0-9_-]+) ::=/.exec(line)?.[1]).filter((name) => name !== undefined));
  return lines.map((line) => renameInLine(line, defined, prefix));
}

function renameInLine(line: string, defined: ReadonlySet<string>, prefix: string): string {
  let out = "";
  let i = 0;
  while (i < line.length) {
    const char = line[i]!;
    if (char === '"' || char === "[") {
      // A literal or a character class, copied as it is (backslash escapes included).
      const close = char === '"' ? '"' : "]";
      let j = i + 1;
      while (j < line.length && line[j] !== close) j += line[j] === "\\" ? 2 : 1;
      out += line.slice(i, j + 1);
      i = j + 1;
      continue;
    }
    const name = /^[a-zA-Z0-9_-]+/.exec(line.slice(i))?.[0];
    if (name !== undefined) {
      out += defined.has(name) ? prefix + name : name;
      i += name.length;
      continue;
    }
    out += char;
    i++;
  }
  return out;
}
