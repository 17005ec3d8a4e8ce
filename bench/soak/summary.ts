// What the records of a soak phase add up to: outcomes and their reasons, the requests that
// failed without a first token, hangs, bad requests, aborts, and TTFT minute by minute.
import type { Outcome, RequestRecord } from "./client.js";
import { REQUEST_KINDS, type RequestKind } from "./mix.js";
import { percentile, tally } from "./stats.js";

export interface Counted {
  key: string;
  count: number;
}

export interface MinuteSummary {
  minute: number;
  sent: number;
  completed: number;
  failed: number;
  /** Streams (agent turns and plain streams) that got a first token. */
  ttftN: number;
  ttftP50Ms: number;
  ttftP99Ms: number;
}

export interface LoadSummary {
  sent: number;
  byKind: Record<RequestKind, number>;
  outcomes: Counted[];
  outcomesByKind: Record<RequestKind, Partial<Record<Outcome, number>>>;
  completed: number;
  /** Good requests (not bad, not given up by the client) that did not complete, by "status code". */
  failed: number;
  failureReasons: Counted[];
  failureReasonsByKind: Counted[];
  /** Failed requests that had received no content token: the server had no excuse to fail them. */
  failedWithoutFirstToken: number;
  failedWithoutFirstTokenReasons: Counted[];
  failedWithoutFirstTokenByReason: Counted[];
  failedAfterContent: number;
  /** Good requests the client sent again after a 429 or 503 (Retry-After), and how many of those then completed. */
  retried: { requests: number; completed: number };
  hangs: number;
  aborts: { sent: number; abortedBeforeFirstToken: number; abortedAfterFirstToken: number; finishedBeforeTheClientLeft: number; failed: number };
  bad: { sent: number; refusedInShape: number; asExpected: number; misanswered: number; answers: Counted[] };
  ttft: { n: number; p50Ms: number; p99Ms: number; agentTurnP50Ms: number; streamP50Ms: number };
  /** Agent turns after the first: prompt tokens the serving worker already held. */
  agentFollowUpCachedFraction: number;
  maxPromptTokens: number;
  servedBy: Counted[];
  perMinute: MinuteSummary[];
}

/** "status code" of a failure, e.g. "500 worker_failed", "200 stream_cut", "- client_error". */
export function reasonOf(record: RequestRecord): string {
  return `${record.status ?? "-"} ${record.code ?? "?"}`;
}

export function summarize(records: readonly RequestRecord[]): LoadSummary {
  const byKind = Object.fromEntries(REQUEST_KINDS.map((kind) => [kind, records.filter((r) => r.kind === kind).length])) as Record<RequestKind, number>;
  const failed = records.filter((r) => r.outcome === "failed");
  const withoutToken = failed.filter((r) => !r.gotContent);
  const aborts = records.filter((r) => r.kind === "abort");
  const bad = records.filter((r) => r.kind === "bad");
  const streamed = records.filter((r) => (r.kind === "agent-turn" || r.kind === "stream") && r.firstTokenMs !== undefined);
  const ttftOf = (rs: readonly RequestRecord[]) => rs.map((r) => r.firstTokenMs!);
  const followUps = records.filter((r) => r.kind === "agent-turn" && r.label !== "turn 1" && r.outcome === "completed" && (r.promptTokens ?? 0) > 0);
  const minutes = records.reduce((most, r) => Math.max(most, Math.floor(r.sentAtMs / 60_000) + 1), 0);
  return {
    sent: records.length,
    byKind,
    outcomes: tally(records, (r) => r.outcome),
    outcomesByKind: Object.fromEntries(
      REQUEST_KINDS.map((kind) => [
        kind,
        Object.fromEntries(
          tally(
            records.filter((r) => r.kind === kind),
            (r) => r.outcome,
          ).map((c) => [c.key, c.count]),
        ),
      ]),
    ) as LoadSummary["outcomesByKind"],
    completed: records.filter((r) => r.outcome === "completed").length,
    failed: failed.length,
    failureReasons: tally(failed, reasonOf),
    failureReasonsByKind: tally(failed, (r) => `${r.kind}: ${reasonOf(r)}`),
    failedWithoutFirstToken: withoutToken.length,
    failedWithoutFirstTokenReasons: tally(withoutToken, (r) => `${r.kind}: ${reasonOf(r)}`),
    failedWithoutFirstTokenByReason: tally(withoutToken, reasonOf),
    failedAfterContent: failed.length - withoutToken.length,
    retried: {
      requests: records.filter((r) => (r.retries ?? 0) > 0).length,
      completed: records.filter((r) => (r.retries ?? 0) > 0 && r.outcome === "completed").length,
    },
    hangs: records.filter((r) => r.outcome === "hang").length,
    aborts: {
      sent: aborts.length,
      abortedBeforeFirstToken: aborts.filter((r) => r.outcome === "aborted" && r.abortedBeforeFirstToken).length,
      abortedAfterFirstToken: aborts.filter((r) => r.outcome === "aborted" && !r.abortedBeforeFirstToken).length,
      finishedBeforeTheClientLeft: aborts.filter((r) => r.outcome === "completed").length,
      failed: aborts.filter((r) => r.outcome === "failed").length,
    },
    bad: {
      sent: bad.length,
      refusedInShape: bad.filter((r) => r.outcome === "refused").length,
      asExpected: bad.filter((r) => r.outcome === "refused" && r.expected === `${r.status} ${r.code}`).length,
      misanswered: bad.filter((r) => r.outcome === "misanswered").length,
      answers: tally(bad, (r) => `${r.label} -> ${r.status ?? "-"} ${r.code ?? "?"}${r.outcome === "refused" ? "" : " (not OpenAI's shape)"}`),
    },
    ttft: {
      n: streamed.length,
      p50Ms: percentile(ttftOf(streamed), 50),
      p99Ms: percentile(ttftOf(streamed), 99),
      agentTurnP50Ms: percentile(ttftOf(streamed.filter((r) => r.kind === "agent-turn")), 50),
      streamP50Ms: percentile(ttftOf(streamed.filter((r) => r.kind === "stream")), 50),
    },
    agentFollowUpCachedFraction:
      followUps.length === 0 ? Number.NaN : followUps.reduce((sum, r) => sum + (r.cachedTokens ?? 0) / r.promptTokens!, 0) / followUps.length,
    maxPromptTokens: records.reduce((most, r) => Math.max(most, r.promptTokens ?? 0), 0),
    servedBy: tally(
      records.filter((r) => r.worker !== undefined),
      (r) => r.worker!,
    ),
    perMinute: Array.from({ length: minutes }, (_, i) => {
      const inMinute = records.filter((r) => Math.floor(r.sentAtMs / 60_000) === i);
      const ttfts = ttftOf(streamed.filter((r) => Math.floor(r.sentAtMs / 60_000) === i));
      return {
        minute: i + 1,
        sent: inMinute.length,
        completed: inMinute.filter((r) => r.outcome === "completed").length,
        failed: inMinute.filter((r) => r.outcome === "failed").length,
        ttftN: ttfts.length,
        ttftP50Ms: percentile(ttfts, 50),
        ttftP99Ms: percentile(ttfts, 99),
      };
    }),
  };
}
