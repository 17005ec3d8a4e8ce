// The Azure LLM inference traces of 2023 (Azure/AzurePublicDataset, see
// bench/data/PROVENANCE.md): one row per request with its arrival (TIMESTAMP), prompt
// length (ContextTokens) and output length (GeneratedTokens), for a conversation service and
// a code service. The traces carry no content, so prefix sharing is ADDED by a stated rule:
//
//   Each request uses one of `systemPrompts` (64) system prompts, picked with Zipf(a = 1.1)
//   popularity (the exponent Preble uses for ToolBench's tools); the first
//   floor(sharedFraction x ContextTokens) tokens of its prompt (sharedFraction = 0.5) are the
//   start of that system prompt's token stream, the rest are unique to the request. Two
//   requests of one system prompt therefore share exactly the shorter of their shared
//   parts. Lengths and arrivals are the trace's own.
//
// Deterministic: structure from `seed`, token ids from (seed, salt).
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { appendTokens, exactTokens, mix32, structureStream, VOCAB, type WorkloadRequest } from "./tokens.js";
import { sampleCdf, zipfCdf } from "./toolbench-zipf.js";

export const AZURE_CONV_TRACE = fileURLToPath(new URL("../data/AzureLLMInferenceTrace_conv.csv", import.meta.url));
export const AZURE_CODE_TRACE = fileURLToPath(new URL("../data/AzureLLMInferenceTrace_code.csv", import.meta.url));

export interface AzureRecord {
  /** Arrival, ms since the Unix epoch (the trace's wall-clock time, read as UTC). */
  timestampMs: number;
  contextTokens: number;
  generatedTokens: number;
}

export interface AzureOptions {
  seed: number;
  /** Per-run salt: changes every token id, not the shape. */
  salt: number;
  /** Distinct system prompts. */
  systemPrompts?: number;
  /** Zipf exponent of their popularity. */
  zipfA?: number;
  /** Part of each prompt taken from its system prompt, in [0, 1]. */
  sharedFraction?: number;
  vocab?: number;
}

export const AZURE_DEFAULTS = { systemPrompts: 64, zipfA: 1.1, sharedFraction: 0.5, vocab: VOCAB } as const;

const STRUCTURE = 0xa001;
const SYSTEM = 0xa002;
const UNIQUE = 0xa003;

/** `2023-11-16 18:15:46.6805900` -> ms (UTC), keeping the sub-millisecond digits. */
function parseTimestamp(text: string): number {
  const match = /^(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2})(\.\d+)?$/.exec(text.trim());
  if (!match) return Number.NaN;
  return Date.parse(`${match[1]}T${match[2]}Z`) + (match[3] ? Number(match[3]) * 1000 : 0);
}

/** Parses an Azure trace CSV (header TIMESTAMP,ContextTokens,GeneratedTokens), checking every row. */
export function readAzureTrace(path: string = AZURE_CONV_TRACE): AzureRecord[] {
  const lines = readFileSync(path, "utf8").split("\n");
  if (lines[0]?.trim() !== "TIMESTAMP,ContextTokens,GeneratedTokens") throw new Error(`${path}: not an Azure LLM inference trace (header)`);
  const records: AzureRecord[] = [];
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!.trim();
    if (line === "") continue;
    const [time, context, generated] = line.split(",");
    const record = { timestampMs: parseTimestamp(time ?? ""), contextTokens: Number(context), generatedTokens: Number(generated) };
    if (
      !Number.isFinite(record.timestampMs) ||
      !Number.isInteger(record.contextTokens) ||
      record.contextTokens < 1 ||
      !Number.isInteger(record.generatedTokens) ||
      record.generatedTokens < 0
    ) {
      throw new Error(`${path}:${i + 1}: not a TIMESTAMP,ContextTokens,GeneratedTokens row`);
    }
    records.push(record);
  }
  return records;
}

/** The records as requests, in trace order (arrivals relative to the first record). */
export function azureRequests(records: readonly AzureRecord[], options: AzureOptions): WorkloadRequest[] {
  const o = { ...AZURE_DEFAULTS, ...options };
  if (!(o.systemPrompts >= 1) || !(o.sharedFraction >= 0 && o.sharedFraction <= 1))
    throw new RangeError("azureRequests: systemPrompts >= 1 and sharedFraction in [0, 1]");
  const cdf = zipfCdf(o.systemPrompts, o.zipfA);
  const next = structureStream(o.seed, STRUCTURE);
  const start = records[0]?.timestampMs ?? 0;
  return records.map((record, index) => {
    const group = sampleCdf(cdf, next());
    const shared = Math.floor(o.sharedFraction * record.contextTokens);
    const tokens: number[] = [];
    appendTokens(tokens, mix32(o.seed, o.salt, SYSTEM, group), shared, o.vocab);
    appendTokens(tokens, mix32(o.seed, o.salt, UNIQUE, index), record.contextTokens - shared, o.vocab);
    return {
      index,
      arrivalMs: record.timestampMs - start,
      tokens: exactTokens(tokens),
      outputTokens: Math.max(1, record.generatedTokens),
      group,
      messageCount: shared > 0 ? 2 : 1,
    };
  });
}
