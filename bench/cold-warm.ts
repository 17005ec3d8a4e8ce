// Cold vs warm TTFT of one long prompt on one idle worker of the `bench` model
// (the cache probed directly: the same long prompt twice on an idle worker).
//
//   npm run bench:cold-warm [-- --lengths 1000,4000 --repeats 3]
//
// For each prompt length and repeat: a salted prompt (unique first line, so nothing is
// cached), sent cold, then the same prompt again (warm), then the next turn of that
// conversation (warm turn). TTFT is measured by the client: request sent -> first content
// chunk of the stream. Results go to bench/results/cold-warm.{json,md}.
import { randomUUID } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import OpenAI from "openai";
import { parseConfig } from "../src/config/load-config.js";
import { createRadixgate } from "../src/radixgate.js";
import { gitCommit, machineDescription } from "./git-commit.js";
import { timedRequest, type Message } from "./live/live-bench.js";

const { values } = parseArgs({
  options: {
    lengths: { type: "string", default: "1000,4000" },
    repeats: { type: "string", default: "3" },
    threads: { type: "string", default: "1" },
  },
});
const lengths = values.lengths.split(",").map(Number);
const repeats = Number(values.repeats);
const threads = Number(values.threads);
const MODEL = "radixgate-bench";

const config = parseConfig({
  server: { port: 0, logLevel: "warn" },
  models: [{ id: MODEL, source: "preset:bench", workers: 1, slots: 2, contextSize: Math.max(...lengths) + 1024, threads }],
});
const radixgate = await createRadixgate({ config, path: "bench", dir: process.cwd() });
const client = new OpenAI({ baseURL: `${await radixgate.listen()}/v1`, apiKey: "unused", maxRetries: 0 });

async function ttft(messages: Message[]): Promise<{ ms: number; promptTokens: number; cachedTokens: number; text: string }> {
  const sample = await timedRequest(client, messages, 8, {}, MODEL);
  return { ms: sample.ttftMs, promptTokens: sample.promptTokens, cachedTokens: sample.cachedTokens, text: sample.text };
}

/** About `tokens` prompt tokens of plain words (measured: these words average 1.6 tokens each). */
function document(tokens: number): string {
  const words = ["the", "file", "list", "shows", "each", "tool", "and", "its", "size", "in", "bytes", "for", "this", "run"];
  return Array.from({ length: Math.round(tokens / 1.6) }, (_, i) => words[(i * 7 + (i >> 3)) % words.length]).join(" ");
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const rows: { length: number; promptTokens: number; coldMs: number[]; warmMs: number[]; warmTurnMs: number[]; warmCached: number[]; turnCached: number[] }[] =
  [];

try {
  for (const length of lengths) {
    const row = {
      length,
      promptTokens: 0,
      coldMs: [] as number[],
      warmMs: [] as number[],
      warmTurnMs: [] as number[],
      warmCached: [] as number[],
      turnCached: [] as number[],
    };
    for (let r = 0; r < repeats; r++) {
      const first: Message[] = [
        { role: "system", content: `run ${randomUUID()}\n${document(length)}` },
        { role: "user", content: "Which file is largest?" },
      ];
      const cold = await ttft(first);
      const warm = await ttft(first);
      const turn = await ttft([...first, { role: "assistant", content: warm.text }, { role: "user", content: "And the smallest?" }]);
      row.promptTokens = cold.promptTokens;
      row.coldMs.push(cold.ms);
      row.warmMs.push(warm.ms);
      row.warmTurnMs.push(turn.ms);
      row.warmCached.push(warm.cachedTokens);
      row.turnCached.push(turn.cachedTokens);
      process.stderr.write(
        `length ${length} repeat ${r + 1}/${repeats}: cold ${cold.ms.toFixed(0)} ms, warm ${warm.ms.toFixed(0)} ms, next turn ${turn.ms.toFixed(0)} ms\n`,
      );
    }
    rows.push(row);
  }
} finally {
  // Always close: a process that exits with llama.cpp threads alive aborts natively.
  await radixgate.close();
}

const commit = gitCommit();
const machine = machineDescription();
const command = `npm run bench:cold-warm -- --lengths ${lengths.join(",")} --repeats ${repeats} --threads ${threads}`;
const result = {
  date: new Date().toISOString(),
  commit,
  machine,
  command,
  model: "preset:bench (25.2M parameters, seed 1)",
  workers: 1,
  threadsPerWorker: threads,
  repeats,
  rows: rows.map((row) => ({
    ...row,
    medianColdMs: median(row.coldMs),
    medianWarmMs: median(row.warmMs),
    medianWarmTurnMs: median(row.warmTurnMs),
    coldOverWarm: median(row.coldMs) / median(row.warmMs),
  })),
};
mkdirSync("bench/results", { recursive: true });
writeFileSync("bench/results/cold-warm.json", `${JSON.stringify(result, null, 2)}\n`);
const table = [
  "| prompt tokens | cold TTFT (median ms) | warm, same prompt | warm, next turn | cold / warm | cached tokens (warm / next turn) | n |",
  "| --- | --- | --- | --- | --- | --- | --- |",
  ...result.rows.map(
    (row) =>
      `| ${row.promptTokens} | ${row.medianColdMs.toFixed(0)} | ${row.medianWarmMs.toFixed(0)} | ${row.medianWarmTurnMs.toFixed(0)} | ${row.coldOverWarm.toFixed(1)}x | ${median(row.warmCached)} / ${median(row.turnCached)} | ${repeats} |`,
  ),
];
writeFileSync(
  "bench/results/cold-warm.md",
  `# Cold vs warm TTFT, one idle worker\n\n${table.join("\n")}\n\nMachine: ${machine}. Commit ${commit}, ${result.date}.\n` +
    `Command: \`${command}\`. TTFT = request sent to first content chunk (client side, streaming), ` +
    `max_tokens 8, temperature 0; each repeat uses a newly salted prompt.\n`,
);
console.log(table.join("\n"));
