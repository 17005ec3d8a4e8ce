// The benchmark workload generators (bench/workloads/): deterministic for a seed, salted
// per run, and sharing exactly the prefixes they claim to share.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { agentLoopRequests, loadAgentTranscripts } from "../../bench/workloads/agent-loops.js";
import { AZURE_CODE_TRACE, azureRequests, readAzureTrace } from "../../bench/workloads/azure.js";
import { StandInTokenizer } from "../../bench/workloads/chat-tokens.js";
import { coldBurstRequests } from "../../bench/workloads/cold-burst.js";
import { MOONCAKE_BLOCK_TOKENS, mooncakeRequests, mooncakeTokens, readMooncakeTrace, type MooncakeRecord } from "../../bench/workloads/mooncake.js";
import { LLMD_PRECISE, SGLANG_GSP, sharedPrefixRequests } from "../../bench/workloads/shared-prefix.js";
import type { WorkloadRequest } from "../../bench/workloads/tokens.js";
import { toolbenchZipf, zipfCdf } from "../../bench/workloads/toolbench-zipf.js";
import { commonPrefixLength } from "../../src/common/tokens.js";

function take(requests: Iterator<WorkloadRequest>, count: number): WorkloadRequest[] {
  const out: WorkloadRequest[] = [];
  for (let i = 0; i < count; i++) {
    const next = requests.next();
    if (next.done) break;
    out.push(next.value);
  }
  return out;
}

/** Everything but the token ids: what a seed alone decides. */
/** A request with its token ids replaced by their counts: what two salts share. */
const shape = (request: WorkloadRequest) => ({ ...request, tokens: request.tokens.length, answerTokens: request.answerTokens?.length });

describe("toolbenchZipf", () => {
  const small = { prefixes: 20, prefixTokens: 100, suffixTokens: 10 };

  it("is deterministic for a seed and salt", () => {
    const a = take(toolbenchZipf({ seed: 3, salt: 11, ...small }), 200);
    const b = take(toolbenchZipf({ seed: 3, salt: 11, ...small }), 200);
    expect(a).toEqual(b);
    expect(take(toolbenchZipf({ seed: 4, salt: 11, ...small }), 200).map(shape)).not.toEqual(a.map(shape));
  });

  it("two salts give the same shape with different first tokens", () => {
    const a = take(toolbenchZipf({ seed: 3, salt: 1, ...small }), 50);
    const b = take(toolbenchZipf({ seed: 3, salt: 2, ...small }), 50);
    expect(a.map(shape)).toEqual(b.map(shape));
    for (let i = 0; i < a.length; i++) expect(a[i]!.tokens[0]).not.toBe(b[i]!.tokens[0]);
  });

  it("requests of one prefix share exactly that prefix, then a unique suffix", () => {
    const requests = take(toolbenchZipf({ seed: 5, salt: 9, ...small }), 300);
    const byGroup = new Map<number, WorkloadRequest[]>();
    for (const request of requests) byGroup.set(request.group, [...(byGroup.get(request.group) ?? []), request]);
    const [first, second] = byGroup.get(0)!;
    const prefixLength = commonPrefixLength(first!.tokens, second!.tokens);
    expect(prefixLength).toBeGreaterThanOrEqual(90);
    expect(prefixLength).toBeLessThanOrEqual(110 + 2); // a suffix may repeat a token by chance
    for (const request of byGroup.get(0)!) expect(request.tokens.slice(0, 90)).toEqual(first!.tokens.slice(0, 90));
    const other = byGroup.get(1)![0]!;
    expect(commonPrefixLength(first!.tokens, other.tokens)).toBeLessThan(3);
  });

  it("follows Zipf(1.1) over prefixes and Poisson arrivals", () => {
    const requests = take(toolbenchZipf({ seed: 7, salt: 1, prefixes: 1000, prefixTokens: 4, suffixTokens: 2, ratePerS: 50 }), 20_000);
    const top = requests.filter((request) => request.group === 0).length / requests.length;
    expect(top).toBeCloseTo(zipfCdf(1000, 1.1)[0]!, 1.5);
    const meanGapMs = requests.at(-1)!.arrivalMs / (requests.length - 1);
    expect(meanGapMs).toBeGreaterThan(19);
    expect(meanGapMs).toBeLessThan(21);
  });
});

describe("mooncake", () => {
  const records: MooncakeRecord[] = [
    { timestamp: 100, input_length: 1300, output_length: 5, hash_ids: [0, 1, 2] },
    { timestamp: 250, input_length: 1100, output_length: 7, hash_ids: [0, 1, 3] },
    { timestamp: 400, input_length: 600, output_length: 9, hash_ids: [4, 5] },
  ];
  const dir = mkdtempSync(join(tmpdir(), "radixgate-workloads-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("turns hash ids into blocks: equal leading ids share exactly those tokens", () => {
    const [a, b, c] = take(mooncakeRequests(records, { seed: 1, salt: 2 }), 3);
    expect(a!.tokens.length).toBe(1300);
    expect(b!.tokens.length).toBe(1100);
    expect(commonPrefixLength(a!.tokens, b!.tokens)).toBeGreaterThanOrEqual(2 * MOONCAKE_BLOCK_TOKENS);
    expect(commonPrefixLength(a!.tokens, b!.tokens)).toBeLessThan(2 * MOONCAKE_BLOCK_TOKENS + 3);
    expect(commonPrefixLength(a!.tokens, c!.tokens)).toBeLessThan(3);
    expect([a!.arrivalMs, b!.arrivalMs, c!.arrivalMs]).toEqual([0, 150, 300]);
    expect(b!.outputTokens).toBe(7);
  });

  it("is deterministic for a seed and salt; two salts give different first tokens", () => {
    expect(mooncakeTokens(records[0]!, { seed: 1, salt: 2 })).toEqual(mooncakeTokens(records[0]!, { seed: 1, salt: 2 }));
    for (const record of records) {
      expect(mooncakeTokens(record, { seed: 1, salt: 2 })[0]).not.toBe(mooncakeTokens(record, { seed: 1, salt: 3 })[0]);
    }
  });

  it("reads a trace and rejects a record whose hash ids do not cover its length", () => {
    const good = join(dir, "good.jsonl");
    writeFileSync(good, `${records.map((record) => JSON.stringify(record)).join("\n")}\n`);
    expect(readMooncakeTrace(good)).toEqual(records);
    const bad = join(dir, "bad.jsonl");
    writeFileSync(bad, `${JSON.stringify({ timestamp: 0, input_length: 2000, output_length: 1, hash_ids: [0, 1] })}\n`);
    expect(() => readMooncakeTrace(bad)).toThrow(/bad\.jsonl:1/);
  });
});

// ---------------------------------------------------------------------------------------------
// The simulator's further workloads: agent loops from real transcripts, Azure traces with a
// stated sharing rule, the SGLang / llm-d shapes and a cold burst.

const firstTokensDiffer = (a: readonly WorkloadRequest[], b: readonly WorkloadRequest[]) => {
  expect(a.length).toBe(b.length);
  for (let i = 0; i < a.length; i++) expect(commonPrefixLength(a[i]!.tokens, b[i]!.tokens)).toBe(0);
};

describe("stand-in tokenizer", () => {
  it("gives equal ids for equal text and a real-BPE-like 2.5-6 characters per token", () => {
    const tokenizer = new StandInTokenizer(1, 2);
    const text = 'The `SyntaxError` in missing_colon.py is likely due to a missing colon: {"query": "latest iPhone 14"}\n';
    expect(tokenizer.encode(text)).toEqual(new StandInTokenizer(1, 2).encode(text));
    expect(tokenizer.encode(text + text)).toEqual([...tokenizer.encode(text), ...tokenizer.encode(text)]);
    const transcripts = loadAgentTranscripts();
    let chars = 0;
    let tokens = 0;
    for (const transcript of transcripts) {
      for (const message of transcript.calls.at(-1)!.messages) {
        chars += message.content.length;
        tokens += tokenizer.encode(message.content).length;
      }
    }
    expect(chars / tokens).toBeGreaterThan(2.5);
    expect(chars / tokens).toBeLessThan(6);
  });

  it("renders a prompt whose generation header starts the answer the next call re-sends", () => {
    const tokenizer = new StandInTokenizer(4, 5);
    const messages = [
      { role: "system", content: "You are a tool user." },
      { role: "user", content: "Find the file." },
    ];
    const first = tokenizer.prompt(messages);
    const second = tokenizer.prompt([...messages, { role: "assistant", content: "find_file x.py" }, { role: "tool", content: "Found 1 match" }]);
    expect(second.slice(0, first.length)).toEqual(first);
  });
});

describe("agent loops (ToolBench + SWE-agent transcripts)", () => {
  it("reads every transcript with calls (ToolBench: 13 of 15 files have train_messages; SWE-agent: 22)", () => {
    const transcripts = loadAgentTranscripts();
    expect(transcripts.filter((t) => t.source === "toolbench")).toHaveLength(13);
    expect(transcripts.filter((t) => t.source === "swe-agent")).toHaveLength(22);
    for (const transcript of transcripts) expect(transcript.calls.length).toBeGreaterThan(0);
  });

  it("is deterministic for a seed and salt; salted runs share no first token, seeds change the shape", () => {
    const a = agentLoopRequests({ seed: 2, salt: 1, sessions: 20 });
    expect(agentLoopRequests({ seed: 2, salt: 1, sessions: 20 })).toEqual(a);
    const b = agentLoopRequests({ seed: 2, salt: 3, sessions: 20 });
    expect(a.map(shape)).toEqual(b.map(shape));
    firstTokensDiffer(a, b);
    expect(agentLoopRequests({ seed: 9, salt: 1, sessions: 20 }).map(shape)).not.toEqual(a.map(shape));
  });

  it("each turn of a session re-sends the previous turn and its answer as a strict token prefix (where the transcript re-sends its history)", () => {
    const requests = agentLoopRequests({ seed: 5, salt: 6, sessions: 80 });
    let strict = 0;
    let rewritten = 0;
    for (const request of requests) {
      expect(request.answerTokens?.length).toBe(request.outputTokens);
      if (request.after === undefined) continue;
      const previous = requests[request.after]!;
      expect(previous.session).toBe(request.session);
      const turn = [...previous.tokens, ...previous.answerTokens!];
      const shared = commonPrefixLength(turn, request.tokens);
      if (shared === turn.length && request.tokens.length > shared) strict++;
      else rewritten++;
    }
    // Only ToolBench's DFS retries rewrite history (a dropped "not the first time" message).
    expect(strict).toBeGreaterThan(10 * rewritten);
    for (const source of ["swe-agent"] as const) {
      const transcripts = loadAgentTranscripts().filter((t) => t.source === source);
      const own = agentLoopRequests({ seed: 5, salt: 6, sessions: 30, transcripts });
      for (const request of own) {
        if (request.after === undefined) continue;
        const previous = own[request.after]!;
        const turn = [...previous.tokens, ...previous.answerTokens!];
        expect(commonPrefixLength(turn, request.tokens)).toBe(turn.length);
        expect(request.tokens.length).toBeGreaterThan(turn.length);
      }
    }
  });

  it("two sessions of one transcript share its system prompt, then differ from the session marker on", () => {
    const transcript = loadAgentTranscripts().find((t) => t.source === "swe-agent")!;
    const requests = agentLoopRequests({ seed: 1, salt: 1, sessions: 2, transcripts: [transcript] });
    const firstOf = (session: number) => requests.find((r) => r.session === session && r.after === undefined)!;
    const shared = commonPrefixLength(firstOf(0).tokens, firstOf(1).tokens);
    const system = new StandInTokenizer(1, 1).message(transcript.calls[0]!.messages[0]!).length;
    expect(shared).toBeGreaterThanOrEqual(system);
    expect(shared).toBeLessThan(firstOf(0).tokens.length);
    // Turns after the first come after the previous one, with a think time.
    for (const request of requests) if (request.after !== undefined) expect(request.thinkMs).toBeGreaterThanOrEqual(100);
    expect(requests.every((r) => (r.messageCount ?? 0) >= 2)).toBe(true);
  });
});

describe("azure traces with added prefix sharing", () => {
  const dir = mkdtempSync(join(tmpdir(), "radixgate-azure-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const csv = join(dir, "trace.csv");
  writeFileSync(
    csv,
    "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,400,44\n2023-11-16 18:15:50.9951690,1000,0\n2023-11-16 18:15:51.2224670,90,16\n",
  );

  it("reads arrivals and lengths, and rejects a malformed row", () => {
    const records = readAzureTrace(csv);
    expect(records.map((r) => [r.contextTokens, r.generatedTokens])).toEqual([
      [400, 44],
      [1000, 0],
      [90, 16],
    ]);
    const requests = azureRequests(records, { seed: 1, salt: 1 });
    expect(requests.map((r) => Math.round(r.arrivalMs))).toEqual([0, 4315, 4542]);
    expect(requests.map((r) => r.tokens.length)).toEqual([400, 1000, 90]);
    expect(requests[1]!.outputTokens).toBe(1);
    const bad = join(dir, "bad.csv");
    writeFileSync(bad, "TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,12,3\n");
    expect(() => readAzureTrace(bad)).toThrow(/bad\.csv:2/);
  });

  it("shares the stated prefix: requests of one system prompt share exactly half of the shorter context", () => {
    const requests = azureRequests(readAzureTrace().slice(0, 400), { seed: 2, salt: 3 });
    const byGroup = new Map<number, WorkloadRequest[]>();
    for (const request of requests) byGroup.set(request.group, [...(byGroup.get(request.group) ?? []), request]);
    const [x, y] = byGroup.get(0)!;
    const expected = Math.min(Math.floor(x!.tokens.length / 2), Math.floor(y!.tokens.length / 2));
    expect(commonPrefixLength(x!.tokens, y!.tokens)).toBeGreaterThanOrEqual(expected);
    expect(commonPrefixLength(x!.tokens, y!.tokens)).toBeLessThan(expected + 3);
    expect(commonPrefixLength(byGroup.get(0)![0]!.tokens, byGroup.get(1)![0]!.tokens)).toBeLessThan(3);
    // Zipf(1.1) over 64 prompts: the most popular one is the most frequent.
    const counts = [...byGroup.entries()].sort((a, b) => b[1].length - a[1].length);
    expect(counts[0]![0]).toBe(0);
  });

  it("is deterministic for a seed and salt; salted runs share no first token", () => {
    const records = readAzureTrace(AZURE_CODE_TRACE).slice(0, 100);
    const a = azureRequests(records, { seed: 1, salt: 1 });
    expect(azureRequests(records, { seed: 1, salt: 1 })).toEqual(a);
    const b = azureRequests(records, { seed: 1, salt: 2 });
    expect(a.map(shape)).toEqual(b.map(shape));
    firstTokensDiffer(a, b);
  });
});

describe("SGLang generated-shared-prefix and llm-d precise-routing shapes", () => {
  for (const [name, shapeOf] of [
    ["sglang-gsp", SGLANG_GSP],
    ["llmd", LLMD_PRECISE],
  ] as const) {
    it(`${name}: ${shapeOf.groups} groups x ${shapeOf.perGroup}, every prompt its group's system prompt plus a unique question`, () => {
      const requests = sharedPrefixRequests({ seed: 1, salt: 2, shape: shapeOf, ratePerS: 10 });
      expect(requests).toHaveLength(shapeOf.groups * shapeOf.perGroup);
      for (const request of requests) {
        expect(request.tokens).toHaveLength(shapeOf.systemTokens + shapeOf.questionTokens);
        expect(request.outputTokens).toBe(shapeOf.outputTokens);
      }
      const sizes = new Map<number, number>();
      for (const request of requests) sizes.set(request.group, (sizes.get(request.group) ?? 0) + 1);
      expect([...sizes.values()].every((count) => count === shapeOf.perGroup)).toBe(true);
      const [x, y] = requests.filter((r) => r.group === 3);
      expect(commonPrefixLength(x!.tokens, y!.tokens)).toBeGreaterThanOrEqual(shapeOf.systemTokens);
      expect(commonPrefixLength(x!.tokens, y!.tokens)).toBeLessThan(shapeOf.systemTokens + 3);
      // Shuffled: not group by group.
      expect(requests.slice(0, shapeOf.perGroup).every((r) => r.group === requests[0]!.group)).toBe(false);
      const meanGapMs = requests.at(-1)!.arrivalMs / (requests.length - 1);
      expect(meanGapMs).toBeGreaterThan(90);
      expect(meanGapMs).toBeLessThan(110);
    });
  }

  it("is deterministic for a seed and salt; salted runs share no first token", () => {
    const a = sharedPrefixRequests({ seed: 4, salt: 1, shape: SGLANG_GSP });
    expect(sharedPrefixRequests({ seed: 4, salt: 1, shape: SGLANG_GSP })).toEqual(a);
    const b = sharedPrefixRequests({ seed: 4, salt: 2, shape: SGLANG_GSP });
    expect(a.map(shape)).toEqual(b.map(shape));
    // Requests of one group share their first token within a run, never across runs.
    firstTokensDiffer(a, b);
  });
});

describe("cold burst", () => {
  it("is distinct one-shot prompts, all at once, deterministic; salted runs share no first token", () => {
    const a = coldBurstRequests({ seed: 1, salt: 1, count: 64 });
    expect(coldBurstRequests({ seed: 1, salt: 1, count: 64 })).toEqual(a);
    expect(a.every((r) => r.arrivalMs === 0 && r.messageCount === 1 && r.tokens.length >= 1024 && r.tokens.length <= 3072)).toBe(true);
    for (let i = 1; i < a.length; i++) expect(commonPrefixLength(a[0]!.tokens, a[i]!.tokens)).toBeLessThan(3);
    firstTokensDiffer(a, coldBurstRequests({ seed: 1, salt: 2, count: 64 }));
  });
});
