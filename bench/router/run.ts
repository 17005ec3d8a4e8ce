// `npm run bench:router`: what a Radixgate router in front of Radixgate hosts costs and
// gives, side by side in one run. The peer is the host itself, asked directly. Arms, one
// after the other, each with its own salted prompts (nothing cached from another arm):
//   direct     the client asks host A (1 worker x 2 slots, tiny model, 1 thread)
//   router-1   the client asks a router whose one remote engine is host A (kind radixgate)
//   router-2   the client asks a router in front of hosts A and B
// Workload per arm: agent sessions of 4 turns each, sequential (turn 1 cold, turns 2-4 warm:
// each re-sends the conversation), then a burst of 8 distinct one-shot prompts at once.
// Every request streams; TTFT is to the first content token, seen by the client.
// Every server is the production build in a process of its own (node dist/main.js serve).
//
//   npm run bench:router -- [--sessions 6] [--results router]
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { stringify as stringifyYaml } from "yaml";
import { gitCommit, machineDescription } from "../git-commit.js";
import { sseData } from "../sse.js";

const ROOT = join(import.meta.dirname, "../..");
const MODEL = "radixgate-tiny";

const { values } = parseArgs({ options: { sessions: { type: "string", default: "6" }, results: { type: "string", default: "router" } } });
const SESSIONS = Number(values.sessions);
if (!Number.isInteger(SESSIONS) || SESSIONS < 1) throw new RangeError("--sessions: a positive integer");
const log = (line: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} [bench:router] ${line}\n`);

let nextPort = 19080 + Math.floor(Math.random() * 800);

interface Server {
  url: string;
  child: ChildProcess;
}

async function startServer(config: Record<string, unknown>): Promise<Server> {
  const port = nextPort++;
  const dir = mkdtempSync(join(tmpdir(), "radixgate-router-bench-"));
  const path = join(dir, "config.yml");
  writeFileSync(path, stringifyYaml({ ...config, server: { host: "127.0.0.1", port, logLevel: "warn" } }));
  const child = spawn(process.execPath, [join(ROOT, "dist/main.js"), "serve", "--config", path], { cwd: ROOT, stdio: ["ignore", "ignore", "inherit"] });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 1200; i++) {
    if (child.exitCode !== null) throw new Error(`a server exited with ${child.exitCode} (config ${path})`);
    if (
      (await fetch(`${url}/ready`).then(
        (r) => r.status,
        () => 0,
      )) === 200
    )
      return { url, child };
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`a server at ${url} was not ready in 120 s`);
}

const host = () => startServer({ models: [{ id: MODEL, source: "preset:tiny", workers: 1, slots: 2, contextSize: 2048, threads: 1, isolation: "thread" }] });
const router = (hosts: Server[]) =>
  startServer({ models: [{ id: MODEL, source: "preset:tiny", workers: 0, remote: hosts.map((h) => ({ kind: "radixgate", url: h.url })) }] });

interface Sample {
  kind: "cold turn" | "warm turn" | "burst";
  ttftMs: number;
  totalMs: number;
}

async function streamed(
  url: string,
  messages: { role: string; content: string }[],
  maxTokens: number,
): Promise<{ ttftMs: number; totalMs: number; text: string }> {
  const sent = performance.now();
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL, messages, max_tokens: maxTokens, temperature: 0, stream: true }),
  });
  if (response.status !== 200) throw new Error(`${url} answered ${response.status}: ${await response.text()}`);
  let ttftMs: number | undefined;
  let text = "";
  for await (const data of sseData(response.body!)) {
    if (data === "[DONE]") break;
    const content = (JSON.parse(data) as { choices?: { delta?: { content?: string } }[] }).choices?.[0]?.delta?.content;
    if (content) {
      ttftMs ??= performance.now() - sent;
      text += content;
    }
  }
  return { ttftMs: ttftMs ?? Number.NaN, totalMs: performance.now() - sent, text };
}

async function workload(url: string, salt: string): Promise<{ samples: Sample[]; wallMs: number }> {
  const began = performance.now();
  const samples: Sample[] = [];
  for (let s = 0; s < SESSIONS; s++) {
    const messages = [{ role: "system", content: `[${salt} session ${s}] You are a careful agent working through a task. `.repeat(12) }];
    for (let turn = 0; turn < 4; turn++) {
      messages.push({ role: "user", content: `Step ${turn}: run the next tool and report.` });
      const answer = await streamed(url, messages, 16);
      samples.push({ kind: turn === 0 ? "cold turn" : "warm turn", ttftMs: answer.ttftMs, totalMs: answer.totalMs });
      messages.push({ role: "assistant", content: answer.text });
    }
  }
  const burst = await Promise.all(
    Array.from({ length: 8 }, (_, i) => streamed(url, [{ role: "user", content: `[${salt} burst ${i}] ${"Summarize the report. ".repeat(30)}` }], 16)),
  );
  for (const answer of burst) samples.push({ kind: "burst", ttftMs: answer.ttftMs, totalMs: answer.totalMs });
  return { samples, wallMs: performance.now() - began };
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const quantile = (xs: number[], q: number) => {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
};

if (spawnSync(process.execPath, [join(ROOT, "scripts/ensure-build.mjs")], { stdio: "inherit" }).status !== 0) throw new Error("the build failed (above)");
const commit = gitCommit();
const loadAtStart = loadavg();
const began = performance.now();
const servers: Server[] = [];
const results: { arm: string; samples: Sample[]; wallMs: number }[] = [];
try {
  log("starting hosts A and B");
  const [a, b] = [await host(), await host()];
  servers.push(a!, b!);
  const arms: [string, () => Promise<string>][] = [
    ["direct", async () => a!.url],
    [
      "router-1",
      async () => {
        const r = await router([a!]);
        servers.push(r);
        return r.url;
      },
    ],
    [
      "router-2",
      async () => {
        const r = await router([a!, b!]);
        servers.push(r);
        return r.url;
      },
    ],
  ];
  for (const [arm, target] of arms) {
    const url = await target();
    // One request first so every process has its code paths warm; not measured.
    await streamed(url, [{ role: "user", content: `warm-up ${arm}` }], 4);
    log(`${arm}: ${SESSIONS} sessions x 4 turns, then a burst of 8`);
    const run = await workload(url, `${arm}-${Date.now().toString(36)}`);
    results.push({ arm, ...run });
  }
} finally {
  for (const server of servers) server.child.kill("SIGTERM");
}

const kinds: Sample["kind"][] = ["cold turn", "warm turn", "burst"];
const row = (arm: string, kind: Sample["kind"]) => {
  const ttft = results
    .find((r) => r.arm === arm)!
    .samples.filter((s) => s.kind === kind)
    .map((s) => s.ttftMs);
  return { n: ttft.length, mean: mean(ttft), p50: quantile(ttft, 0.5), p99: quantile(ttft, 0.99) };
};
const fmt = (n: number) => n.toFixed(1);
const lines = [
  "# A router in front of Radixgate hosts, against asking a host directly",
  "",
  `Commit ${commit}. Date ${new Date().toISOString()}. Command: \`npm run bench:router -- ${process.argv.slice(2).join(" ")}\`. Wall ${((performance.now() - began) / 60_000).toFixed(1)} min.`,
  "",
  `Machine: ${machineDescription()}; load average ${loadAtStart.map((l) => l.toFixed(2)).join(" / ")} at the start, ${loadavg()
    .map((l) => l.toFixed(2))
    .join(
      " / ",
    )} at the end. Every server is the production build in a process of its own on this machine (hosts: ${MODEL}, preset:tiny, 1 worker x 2 slots, 1 thread, thread isolation; routers: no local worker, kind radixgate, policy preble); the client is this process.`,
  "",
  `Arms, one after the other, each with its own salted prompts: direct (host A asked directly), router-1 (a router whose one engine is host A), router-2 (a router in front of hosts A and B). Workload: ${SESSIONS} agent sessions of 4 turns (a ~130-token system prompt, each turn re-sends the conversation, 16 tokens out), sequential, then 8 distinct ~150-token one-shots at once. TTFT to the first content token, as the client sees it, in ms.`,
  "",
  "| arm | requests | cold turn TTFT mean / p50 / p99 | warm turns TTFT mean / p50 / p99 | burst TTFT mean / p99 | wall (s) |",
  "| --- | ---: | --- | --- | --- | ---: |",
  ...results.map((r) => {
    const [cold, warm, burst] = kinds.map((kind) => row(r.arm, kind));
    return `| ${r.arm} | ${r.samples.length} | ${fmt(cold!.mean)} / ${fmt(cold!.p50)} / ${fmt(cold!.p99)} | ${fmt(warm!.mean)} / ${fmt(warm!.p50)} / ${fmt(warm!.p99)} | ${fmt(burst!.mean)} / ${fmt(burst!.p99)} | ${(r.wallMs / 1000).toFixed(1)} |`;
  }),
  "",
  "| ratio to direct (mean TTFT) | cold turn | warm turns | burst |",
  "| --- | ---: | ---: | ---: |",
  ...results
    .filter((r) => r.arm !== "direct")
    .map((r) => `| ${r.arm} | ${kinds.map((kind) => `${(row(r.arm, kind).mean / row("direct", kind).mean).toFixed(2)}x`).join(" | ")} |`),
  "",
  "| added mean TTFT vs direct (ms) | cold turn | warm turns | burst |",
  "| --- | ---: | ---: | ---: |",
  ...results
    .filter((r) => r.arm !== "direct")
    .map((r) => `| ${r.arm} | ${kinds.map((kind) => fmt(row(r.arm, kind).mean - row("direct", kind).mean)).join(" | ")} |`),
  "",
];
mkdirSync(join(ROOT, "bench/results"), { recursive: true });
writeFileSync(join(ROOT, `bench/results/${values.results}.md`), `${lines.join("\n")}\n`);
writeFileSync(join(ROOT, `bench/results/${values.results}.json`), `${JSON.stringify({ commit, sessions: SESSIONS, results }, null, 2)}\n`);
console.log(lines.join("\n"));
log(`wrote bench/results/${values.results}.md and .json`);
process.exit(0);
