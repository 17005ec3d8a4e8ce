// The Mooncake conversation trace (kvcache-ai/Mooncake FAST25-release, see
// bench/data/PROVENANCE.md) as prompts of token ids. Each record carries its arrival
// (`timestamp`, ms), `input_length`, `output_length` and `hash_ids`: one id per 512-token
// block of the prompt, equal id = the same block (and, since Mooncake chains the hashes, the
// same prefix up to it). Block id b becomes a deterministic block of 512 token ids keyed by
// (seed, salt, b), the last block cut to input_length, so two records share exactly the
// token prefix their leading hash ids share.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { appendTokens, exactTokens, mix32, VOCAB, type WorkloadRequest } from "./tokens.js";

export const MOONCAKE_CONVERSATION_TRACE = fileURLToPath(new URL("../data/mooncake_conversation_trace.jsonl", import.meta.url));

/** Tokens per hash id in the Mooncake traces. */
export const MOONCAKE_BLOCK_TOKENS = 512;

export interface MooncakeRecord {
  timestamp: number;
  input_length: number;
  output_length: number;
  hash_ids: number[];
}

export interface MooncakeOptions {
  seed: number;
  /** Per-run salt: changes every token id, not the shape. */
  salt: number;
  blockTokens?: number;
  vocab?: number;
}

const BLOCK = 0x6001;

/** Parses a Mooncake JSONL trace, checking every record against the format. */
export function readMooncakeTrace(path: string = MOONCAKE_CONVERSATION_TRACE, blockTokens = MOONCAKE_BLOCK_TOKENS): MooncakeRecord[] {
  const records: MooncakeRecord[] = [];
  const lines = readFileSync(path, "utf8").split("\n");
  for (const [i, line] of lines.entries()) {
    if (line.trim() === "") continue;
    const r = JSON.parse(line) as Partial<MooncakeRecord>;
    const ok =
      typeof r.timestamp === "number" &&
      Number.isInteger(r.input_length) &&
      Number.isInteger(r.output_length) &&
      Array.isArray(r.hash_ids) &&
      r.hash_ids.length > 0 &&
      r.hash_ids.every((id) => Number.isInteger(id)) &&
      r.input_length! > (r.hash_ids.length - 1) * blockTokens &&
      r.input_length! <= r.hash_ids.length * blockTokens;
    if (!ok)
      throw new Error(
        `${path}:${i + 1}: not a Mooncake record (timestamp, input_length, output_length, hash_ids with ceil(input_length / ${blockTokens}) ids)`,
      );
    records.push(r as MooncakeRecord);
  }
  return records;
}

/** The prompt of one record: its blocks' tokens, the last block cut to input_length. */
export function mooncakeTokens(record: MooncakeRecord, options: MooncakeOptions): number[] {
  const blockTokens = options.blockTokens ?? MOONCAKE_BLOCK_TOKENS;
  const vocab = options.vocab ?? VOCAB;
  const tokens: number[] = [];
  for (const id of record.hash_ids) {
    appendTokens(tokens, mix32(options.seed, options.salt, BLOCK, id), Math.min(blockTokens, record.input_length - tokens.length), vocab);
  }
  return exactTokens(tokens);
}

/** The records as requests, in trace order (arrivals relative to the first record). */
export function* mooncakeRequests(records: readonly MooncakeRecord[], options: MooncakeOptions): Generator<WorkloadRequest, void, undefined> {
  const start = records[0]?.timestamp ?? 0;
  for (const [index, record] of records.entries()) {
    yield {
      index,
      arrivalMs: record.timestamp - start,
      tokens: mooncakeTokens(record, options),
      outputTokens: record.output_length,
      group: record.hash_ids[0]!,
    };
  }
}
