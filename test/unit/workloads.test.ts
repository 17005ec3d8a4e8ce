// The benchmark workload generators (bench/workloads/): deterministic for a seed, salted
// per run, and sharing exactly the prefixes they claim to share.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { MOONCAKE_BLOCK_TOKENS, mooncakeRequests, mooncakeTokens, readMooncakeTrace, type MooncakeRecord } from "../../bench/workloads/mooncake.js";
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
const shape = (request: WorkloadRequest) => ({ ...request, tokens: request.tokens.length });

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
