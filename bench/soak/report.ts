// bench/results/<stem>.md: the header (commit, machine, durations), the targets per
// isolation, then each isolation's figures, kills, reloads, memory, lag and log lines.
import type { Outcome } from "./client.js";
import type { IsolationResult } from "./soak.js";
import type { Counted, LoadSummary } from "./summary.js";
import { growth } from "./stats.js";
import { RELOAD_KEY } from "./server.js";

export interface RunHeader {
  commit: string;
  treeClean: boolean;
  date: string;
  command: string;
  node: string;
  /** The malloc the server ran with: jemalloc when preloaded, else glibc's (with its arena cap). */
  allocator: string;
  machine: { cores: number; cpu: string; memoryGiB: number; loadAverageAtStart: number[]; loadAverageAtEnd: number[] };
  server: { model: string; workers: number; slots: number; contextSize: number; threads: number; policy: string; logLevel: string };
  durations: {
    soakMinutes: number;
    capacitySeconds: number;
    capacityConcurrency: number;
    search: { stepSeconds: number; startFraction: number; bisectionSteps: number; ttftP99BoundMs: number };
    loadFraction: number;
    killEveryS: number;
    reloadEveryS: number;
    warmUpS: number;
    hangBoundS: number;
    wallMinutes: number;
  };
  mix: Record<string, number>;
  agentTurnsFrom: string;
  loadGenerator: string;
  gcExposed: boolean;
}

const fmt = (n: number | undefined, digits = 0) => (n !== undefined && Number.isFinite(n) ? n.toFixed(digits) : "-");
const pct = (fraction: number) => (Number.isFinite(fraction) ? `${fraction >= 0 ? "+" : ""}${(fraction * 100).toFixed(1)} %` : "-");
const list = (counted: readonly Counted[]) => (counted.length === 0 ? "none" : counted.map((c) => `${c.key} x${c.count}`).join("; "));
const mark = (ok: boolean) => (ok ? "yes" : "**NO**");

interface Check {
  name: string;
  target: string;
  value: (r: IsolationResult) => string;
  ok: (r: IsolationResult) => boolean;
}

const CHECKS: Check[] = [
  {
    name: "failures without a first token",
    target: "0",
    value: (r) => {
      const s = r.soak.summary;
      return s.failedWithoutFirstToken === 0 ? "0" : `${s.failedWithoutFirstToken} (${list(s.failedWithoutFirstTokenByReason)})`;
    },
    ok: (r) => r.soak.summary.failedWithoutFirstToken === 0,
  },
  { name: "hangs (no answer within the bound)", target: "0", value: (r) => String(r.soak.summary.hangs), ok: (r) => r.soak.summary.hangs === 0 },
  {
    name: "bad requests answered 4xx in OpenAI's shape",
    target: "all",
    value: (r) => `${r.soak.summary.bad.refusedInShape} / ${r.soak.summary.bad.sent}`,
    ok: (r) => r.soak.summary.bad.misanswered === 0,
  },
  {
    name: "RSS growth, warm-up to end",
    target: "< 10 %",
    value: (r) => pct(growth(r.memory.warmUp?.rssMiB ?? Number.NaN, r.memory.end?.rssMiB ?? Number.NaN)),
    ok: (r) => growth(r.memory.warmUp?.rssMiB ?? Number.NaN, r.memory.end?.rssMiB ?? Number.NaN) < 0.1,
  },
  {
    name: "heapUsed growth, warm-up to end",
    target: "< 10 %",
    value: (r) => pct(growth(r.memory.warmUp?.heapUsedMiB ?? Number.NaN, r.memory.end?.heapUsedMiB ?? Number.NaN)),
    ok: (r) => growth(r.memory.warmUp?.heapUsedMiB ?? Number.NaN, r.memory.end?.heapUsedMiB ?? Number.NaN) < 0.1,
  },
  { name: "event-loop lag p99 (server process)", target: "< 50 ms", value: (r) => `${fmt(r.eventLoop.p99Ms, 1)} ms`, ok: (r) => r.eventLoop.p99Ms < 50 },
  {
    name: "workers killed / restarts seen in /health",
    target: "equal",
    value: (r) => `${r.kills.filter((k) => !k.skipped).length} / ${r.health.restarts}`,
    ok: (r) => r.kills.filter((k) => !k.skipped).length === r.health.restarts,
  },
  {
    name: "config reloads applied (and seen in /health)",
    target: "all",
    value: (r) => `${r.reloads.filter((x) => x.ok && x.visibleInHealth).length} / ${r.reloads.length}`,
    ok: (r) => r.reloads.every((x) => x.ok && x.visibleInHealth),
  },
];

function requestsTable(summary: LoadSummary): string[] {
  const row = (label: string, o: Partial<Record<Outcome, number>>) =>
    `| ${label} | ${Object.values(o).reduce((a, b) => a + (b ?? 0), 0)} | ${o.completed ?? 0} | ${o.failed ?? 0} | ${o.aborted ?? 0} | ${o.hang ?? 0} | ${o.refused ?? 0} | ${o.misanswered ?? 0} |`;
  const all: Partial<Record<Outcome, number>> = {};
  for (const counts of Object.values(summary.outcomesByKind))
    for (const [outcome, n] of Object.entries(counts)) all[outcome as Outcome] = (all[outcome as Outcome] ?? 0) + n;
  return [
    "| requests | sent | completed | failed | abandoned by the client | hangs | bad, refused in shape | bad, otherwise |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ...Object.entries(summary.outcomesByKind).map(([kind, counts]) => row(kind, counts)),
    row("all", all),
  ];
}

function isolationSection(r: IsolationResult): string[] {
  const s = r.soak.summary;
  const memoryRow = (label: string, m: IsolationResult["memory"]["warmUp"]) =>
    `| ${label} | ${fmt(m?.atS, 0)} | ${fmt(m?.rssMiB, 1)} | ${fmt(m?.heapUsedMiB, 1)} | ${m?.workerProcessesRssMiB !== undefined ? fmt(m.workerProcessesRssMiB, 1) : "-"} |`;
  return [
    `## ${r.isolation} isolation`,
    "",
    `Server up in ${fmt(r.startupS, 1)} s. Closed loop: ${fmt(r.capacity.closedLoop.requestsPerS, 1)} requests/s (${r.capacity.closedLoop.answered} good requests completed in the second half of ${r.capacity.closedLoop.seconds} s at concurrency ${r.capacity.closedLoop.concurrency}; ` +
      `${r.capacity.closedLoop.summary.failed} failed: ${list(r.capacity.closedLoop.summary.failureReasons)}). ` +
      `Sustained: ${fmt(r.capacity.sustained.requestsPerS, 1)} requests/s${r.capacity.sustained.requestsPerS > 0 ? "" : " (**no step kept up**)"}. Soak rate: ${fmt(r.ratePerS, 2)} requests/s planned, ${fmt(r.soak.sentPerS, 2)} sent; ` +
      `the last answer came ${fmt(r.soak.wallS, 1)} s after the soak started (${r.soak.plannedS} s of arrivals).`,
    "",
    `| search step | rate (requests/s) | kept up | sent | failed | turned back (429/503) | hangs | TTFT p99 (ms) | last answer at (s) |`,
    "| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ...r.capacity.sustained.steps.map(
      (step, i) =>
        `| ${i + 1} | ${fmt(step.ratePerS, 1)} | ${step.kept ? "yes" : "no"} | ${step.sent} | ${step.failed} | ${step.retried} | ${step.hangs} | ${fmt(step.ttftP99Ms)} | ${fmt(step.wallS, 1)} |`,
    ),
    "",
    ...requestsTable(s),
    "",
    `- Failed (good requests, by status and code): ${list(s.failureReasonsByKind)}.`,
    `- Failed without a first token: **${s.failedWithoutFirstToken}** (${list(s.failedWithoutFirstTokenReasons)}); failed after some content: ${s.failedAfterContent}.`,
    `- Sent again after a 429 or 503 with Retry-After (at most twice, as OpenAI's SDK does): ${s.retried.requests} requests, ${s.retried.completed} of them then completed.`,
    `- Hangs: **${s.hangs}**.`,
    `- Aborts: ${s.aborts.sent} sent; the client left before the first token ${s.aborts.abortedBeforeFirstToken}, after it ${s.aborts.abortedAfterFirstToken}; finished before the client left ${s.aborts.finishedBeforeTheClientLeft}; failed ${s.aborts.failed}.`,
    `- Bad requests: ${s.bad.sent} sent, ${s.bad.refusedInShape} answered 4xx in OpenAI's shape (${s.bad.asExpected} with the expected status and code), ${s.bad.misanswered} otherwise. Answers: ${list(s.bad.answers)}.`,
    `- TTFT of streams (agent turns and plain streams): p50 ${fmt(s.ttft.p50Ms)} ms, p99 ${fmt(s.ttft.p99Ms)} ms over ${s.ttft.n}; agent turns p50 ${fmt(s.ttft.agentTurnP50Ms)} ms, plain streams p50 ${fmt(s.ttft.streamP50Ms)} ms.`,
    `- Agent turns after the first: ${fmt(s.agentFollowUpCachedFraction * 100, 1)} % of prompt tokens cached on average; largest prompt ${s.maxPromptTokens} tokens. Served by: ${list(s.servedBy)}.`,
    `- /health during the soak: ${r.health.restarts} worker restarts, ${r.health.failovers} failovers, ${r.health.unhealthyPolls} polls not 200 (of ${r.health.samples.length}); at the end: ${r.health.atEnd.workers.map((w) => `${w.id} ${w.alive ? "alive" : "DOWN"}, ${w.restarts} restarts`).join("; ")}.`,
    "",
    "| minute | sent | completed | failed | streams with a first token | TTFT p50 (ms) | TTFT p99 (ms) | event-loop lag p99 / max (ms) |",
    "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ...s.perMinute.map((m) => {
      const lag = r.eventLoop.perMinute.find((l) => l.minute === m.minute);
      return `| ${m.minute} | ${m.sent} | ${m.completed} | ${m.failed} | ${m.ttftN} | ${fmt(m.ttftP50Ms)} | ${fmt(m.ttftP99Ms)} | ${lag ? `${fmt(lag.p99Ms, 1)} / ${fmt(lag.maxMs, 1)}` : "-"} |`;
    }),
    "",
    `Event-loop lag of the server's process over the soak: p50 ${fmt(r.eventLoop.p50Ms, 1)} ms, p99 ${fmt(r.eventLoop.p99Ms, 1)} ms, max ${fmt(r.eventLoop.maxMs, 1)} ms. ` +
      `Load generator (its own process): lag p99 ${fmt(r.soak.generator.eventLoopLagP99Ms, 1)} ms, arrivals late p99 ${fmt(r.soak.generator.arrivalLatenessP99Ms, 1)} ms (max ${fmt(r.soak.generator.arrivalLatenessMaxMs, 1)} ms).`,
    "",
    "| kill at (s) | worker | how | down after (ms) | back after (ms) | note |",
    "| ---: | --- | --- | ---: | ---: | --- |",
    ...(r.kills.length === 0
      ? ["| - | none: the soak was shorter than the kill interval | | | | |"]
      : r.kills.map(
          (k) =>
            `| ${fmt(k.atS, 1)} | ${k.worker} | ${k.method}${k.pid !== undefined ? ` pid ${k.pid}` : ""} | ${fmt(k.downAfterMs)} | ${fmt(k.backAfterMs)} | ${k.skipped ?? k.note ?? ""} |`,
        )),
    "",
    `| reload at (s) | ${RELOAD_KEY} | ok | took (ms) | in /health | restart needed | error |`,
    "| ---: | ---: | --- | ---: | --- | --- | --- |",
    ...(r.reloads.length === 0
      ? ["| - | none | | | | | |"]
      : r.reloads.map(
          (x) =>
            `| ${fmt(x.atS, 1)} | ${x.quotaPerGroup} | ${x.ok ? "yes" : "**no**"} | ${fmt(x.durationMs, 1)} | ${x.visibleInHealth ? "yes" : "**no**"} | ${x.restartNeeded.join(", ")} | ${x.error ?? ""} |`,
        )),
    "",
    "| memory (MiB) | at (s) | server RSS | server heapUsed | worker processes' RSS |",
    "| --- | ---: | ---: | ---: | ---: |",
    memoryRow("warm-up", r.memory.warmUp),
    memoryRow("end", r.memory.end),
    ...(r.memory.curve ?? []).map((m) => memoryRow("curve", m)),
    "",
    r.log.tapped
      ? r.log.lines.length === 0
        ? "Server log (warn and above): nothing."
        : `Server log (warn and above), by message: ${r.log.lines.map((l) => `${l.level} "${l.msg}" x${l.count}`).join("; ")}.`
      : "Server log: not counted (its stream was not found); it went to the terminal.",
    "",
  ];
}

export function renderReport(header: RunHeader, results: readonly IsolationResult[]): string {
  const d = header.durations;
  return [
    `# Soak: a steady mix at ${(d.loadFraction * 100).toFixed(0)} % of capacity, workers killed, config reloaded`,
    "",
    `Commit ${header.commit} (tree ${header.treeClean ? "clean" : "not clean"} under src/ and bench/). Date ${header.date}. Command: \`${header.command}\`.`,
    "",
    `Machine: ${header.machine.cores} x ${header.machine.cpu}, ${header.machine.memoryGiB} GiB; load average (1/5/15 min) ${header.machine.loadAverageAtStart.map((l) => l.toFixed(2)).join(" / ")} at the start, ` +
      `${header.machine.loadAverageAtEnd.map((l) => l.toFixed(2)).join(" / ")} at the end. Node ${header.node}; malloc: ${header.allocator}. Wall time ${d.wallMinutes.toFixed(1)} min.`,
    "",
    `Server: in-process \`createRadixgate\` from a config.yml in a temp folder; model ${header.server.model}, ${header.server.workers} workers x ${header.server.slots} slots, ` +
      `contextSize ${header.server.contextSize}, threads ${header.server.threads}, policy ${header.server.policy}, log level ${header.server.logLevel}. ${header.loadGenerator}`,
    "",
    `Per isolation, one after the other: first a ${d.capacitySeconds} s closed loop at concurrency ${d.capacityConcurrency} (its rate = good requests, i.e. agent turns, one-shots and streams, completed per second in its second half, divided by their share of the mix: aborts and bad requests cost next to nothing). ` +
      `It bounds the search for the capacity, the sustained rate: the highest Poisson arrival rate at which a ${d.search.stepSeconds} s step had no failure, no hang, no request turned back with 429 or 503 and a stream TTFT p99 within ${d.search.ttftP99BoundMs} ms ` +
      `(first ${(d.search.startFraction * 100).toFixed(0)} % of the closed loop's rate, doubling or halving to a bracket, never above the closed loop's rate, then ${d.search.bisectionSteps} bisection steps; each step with fresh prompts and sessions). A closed loop never queues and runs each session's turns back to back, so it overstates what random arrivals can get. ` +
      `Then ${d.soakMinutes} min of Poisson arrivals at ${(d.loadFraction * 100).toFixed(0)} % of the sustained rate. A worker is killed every ${d.killEveryS} s (w0, w1, ...: a thread by \`engine.crash()\`, ` +
      `a process by SIGKILL) and config.yml is rewritten and reloaded every ${d.reloadEveryS} s (${RELOAD_KEY} alternating). Memory is sampled ${d.warmUpS} s into the soak and 2 s before its end, ` +
      `${header.gcExposed ? "each after global.gc()" : "without a forced GC (run node with --expose-gc for one)"}. A request unanswered after ${d.hangBoundS} s is a hang.`,
    "",
    `Mix: ${Object.entries(header.mix)
      .map(([kind, w]) => `${kind} ${(w * 100).toFixed(0)} %`)
      .join(", ")}; max_tokens 16-64 (agent turns up to 48), temperature 0. ` +
      `Agent turns: sessions (x-session-id) of 2-5 turns replaying ${header.agentTurnsFrom}, messages cut to fit a slot; every turn re-sends the growing conversation. ` +
      "Aborts: streams the client abandons 1-20 ms after sending, or 0-30 ms after the first token. Bad requests: invalid JSON, messages not an array, max_tokens a string, an unknown model. " +
      "A failure without a first token is a good request that failed before any content reached the client; requests the client abandoned are not failures.",
    "",
    `| check | target | ${results.map((r) => r.isolation).join(" | ")} |`,
    `| --- | --- | ${results.map(() => "---").join(" | ")} |`,
    ...CHECKS.map((c) => `| ${c.name} | ${c.target} | ${results.map((r) => `${c.value(r)} (${mark(c.ok(r))})`).join(" | ")} |`),
    `| closed loop / sustained / soak rate (requests/s) | | ${results.map((r) => `${fmt(r.capacity.closedLoop.requestsPerS, 1)} / ${fmt(r.capacity.sustained.requestsPerS, 1)} / ${fmt(r.ratePerS, 1)}`).join(" | ")} |`,
    `| sent / completed / failed | | ${results.map((r) => `${r.soak.summary.sent} / ${r.soak.summary.completed} / ${r.soak.summary.failed}`).join(" | ")} |`,
    `| TTFT p50 / p99 (ms) | | ${results.map((r) => `${fmt(r.soak.summary.ttft.p50Ms)} / ${fmt(r.soak.summary.ttft.p99Ms)}`).join(" | ")} |`,
    `| failovers (/health) | | ${results.map((r) => String(r.health.failovers)).join(" | ")} |`,
    "",
    ...results.flatMap(isolationSection),
  ].join("\n");
}
