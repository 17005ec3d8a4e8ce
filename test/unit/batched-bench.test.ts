// bench:engine-loop's reference: llama.cpp's own decode loop (llama-batched-bench), its table
// read back, and the tool built beside llama-server and run for real on the tiny model.
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseBatchedBench, runBatchedBench } from "../../bench/batched-bench.js";
import { findOrBuildLlamaCppTool } from "../../src/engine/llama-server/binary.js";
import { ensureModel } from "../../src/presets/make-model.js";

// As the tool prints it (a run on the `bench` model with 2 threads), log lines around it.
const OUTPUT = `
llama_batched_bench: n_kv_max = 16384, n_batch = 512, n_ubatch = 512, flash_attn = -1, is_pp_shared = 0, is_tg_separate = 0, n_gpu_layers = -1, n_threads = 2, n_threads_batch = 2

|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |
|-------|--------|------|--------|----------|----------|----------|----------|----------|----------|
|    20 |    150 |    1 |    170 |    0.012 |  1617.86 |    0.502 |   299.08 |    0.514 |   330.81 |
|    20 |    150 |    2 |    340 |    0.019 |  2153.32 |    0.722 |   415.55 |    0.741 |   459.15 |
|    20 |    150 |    4 |    680 |    0.033 |  2431.17 |    0.853 |   703.00 |    0.886 |   767.16 |

llama_perf_context_print:        load time =      93.17 ms
`;

describe("llama-batched-bench as bench:engine-loop's reference", () => {
  it("reads each result row's sequences and decode figures, and nothing else", () => {
    expect(parseBatchedBench(OUTPUT)).toEqual([
      { promptTokens: 20, generatedTokens: 150, sequences: 1, decodeS: 0.502, decodeTokensPerS: 299.08 },
      { promptTokens: 20, generatedTokens: 150, sequences: 2, decodeS: 0.722, decodeTokensPerS: 415.55 },
      { promptTokens: 20, generatedTokens: 150, sequences: 4, decodeS: 0.853, decodeTokensPerS: 703 },
    ]);
    expect(parseBatchedBench("| PP | TG |\n|---|---|\nno table here")).toEqual([]);
    // A run too short for the tool's clock prints inf (or nan) for its speeds: still a row.
    const fast = parseBatchedBench("|     8 |     16 |    1 |     24 |    0.000 |      inf |    0.000 |      inf |    0.000 |     -nan |");
    expect(fast).toEqual([{ promptTokens: 8, generatedTokens: 16, sequences: 1, decodeS: 0, decodeTokensPerS: Number.POSITIVE_INFINITY }]);
  });

  it("runs again when a run exits before printing all its rows, and fails after the third", () => {
    const dir = mkdtempSync(join(tmpdir(), "radixgate-batched-bench-"));
    try {
      // A stand-in tool: prints only the header on its first call, the header and one row after.
      const counter = join(dir, "calls");
      const tool = join(dir, "tool.sh");
      const header = "|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |";
      const row = "|     8 |     16 |    1 |     24 |    0.001 |  8000.00 |    0.002 |  8000.00 |    0.003 |  8000.00 |";
      writeFileSync(tool, `#!/bin/sh\necho x >> "${counter}"\necho '${header}'\n[ "$(wc -l < "${counter}")" -ge 2 ] && echo '${row}'\nexit 0\n`);
      chmodSync(tool, 0o755);
      const options = { binary: tool, model: "m", threads: 1, contextPerSequence: 64, batchSize: 8, promptTokens: 8, generatedTokens: 16 };
      expect(runBatchedBench({ ...options, sequences: [1] }).map((r) => r.sequences)).toEqual([1]);
      // Two rows asked for, one printed every time: three runs, then the error.
      writeFileSync(counter, "");
      expect(() => runBatchedBench({ ...options, sequences: [1, 2] })).toThrow(/1 result rows \(attempt 3\)/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("is built beside llama-server and decodes the tiny model in 1 and 2 sequences", async () => {
    const binary = await findOrBuildLlamaCppTool("llama-batched-bench", () => {});
    expect(binary).toMatch(/radixgate\/llama-server\/[0-9a-f]{16}\/src\/build\/bin\/llama-batched-bench$/);
    const rows = runBatchedBench({
      binary,
      model: await ensureModel("tiny"),
      threads: 1,
      contextPerSequence: 256,
      batchSize: 64,
      promptTokens: 32,
      generatedTokens: 64,
      sequences: [1, 2],
    });
    expect(rows.map((row) => [row.sequences, row.promptTokens, row.generatedTokens])).toEqual([
      [1, 32, 64],
      [2, 32, 64],
    ]);
    for (const row of rows) expect(row.decodeTokensPerS).toBeGreaterThan(0);
  }, 600_000);
});
