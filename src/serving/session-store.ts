// Sessions shared between routers. A router sticks a session (x-session-id, or the request's
// `user`) to the engine that served it last; with several routers in front of the same
// engines, each would only know the sessions it placed itself. No engine reports sessions,
// so routers that should share them keep them in Redis (`scheduler.sessionStore`, off by
// default): before placing a request of a session it does not know, a router asks the store
// which engine served it last; after placing one, it records the engine there. Engines are
// named by URL (what every router calls them; worker ids are each router's own numbering),
// so only remote engines are shared. The store helps and never blocks: a lookup that fails
// or takes longer than LOOKUP_TIMEOUT_MS is a miss, a record that fails is dropped, and the
// router places as it would alone.
import { Redis } from "ioredis";
import type { ServingLog } from "./serving-log.js";

/** What the routers share about sessions. */
export interface SharedSessions {
  /** The URL of the engine that served the session last; undefined when unknown, expired or the store is unreachable. */
  lookup(sessionId: string): Promise<string | undefined>;
  /** The engine at `engineUrl` served the session now; the store forgets it after the session TTL idle. Never throws. */
  record(sessionId: string, engineUrl: string): void;
  /** Lookups answered from the store, missed, and failed (unreachable, too slow): for /health and the metrics. */
  readonly counts: { hits: number; misses: number; failures: number };
  close(): Promise<void>;
}

/** A lookup waits this long at most: a session's stickiness is worth less than the request's latency. */
export const LOOKUP_TIMEOUT_MS = 100;
const KEY_PREFIX = "radixgate:session:";

/** Sessions in the Redis at `url` (redis://[:password@]host:port[/db]), kept for `ttlMs` idle. */
export function redisSessions(url: string, ttlMs: number, log: ServingLog): SharedSessions {
  const client = new Redis(url, {
    // Commands fail at once while it is unreachable (nothing queues up behind a dead store),
    // and it reconnects in the background, every 2 s at most.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: (times) => Math.min(times * 200, 2000),
    connectTimeout: 2000,
    lazyConnect: false,
  });
  let reachable = true;
  const note = (error: Error | undefined) => {
    if ((error === undefined) === reachable) return;
    reachable = error === undefined;
    if (error)
      log.warn({ err: error.message, store: redactedUrl(url) }, "the session store is unreachable: each router places sessions on its own until it is back");
    else log.info({ store: redactedUrl(url) }, "the session store is back");
  };
  client.on("error", (error: Error) => note(error));
  client.on("ready", () => note(undefined));
  const counts = { hits: 0, misses: 0, failures: 0 };
  return {
    counts,
    async lookup(sessionId) {
      let timer: NodeJS.Timeout | undefined;
      const tooSlow = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer in ${LOOKUP_TIMEOUT_MS} ms`)), LOOKUP_TIMEOUT_MS);
      });
      try {
        const url = await Promise.race([client.get(KEY_PREFIX + sessionId), tooSlow]);
        if (url === null) counts.misses++;
        else counts.hits++;
        return url ?? undefined;
      } catch (error) {
        counts.failures++;
        note(error as Error);
        return undefined;
      } finally {
        clearTimeout(timer);
      }
    },
    record(sessionId, engineUrl) {
      client.set(KEY_PREFIX + sessionId, engineUrl, "PX", ttlMs).catch((error: Error) => {
        counts.failures++;
        note(error);
      });
    },
    async close() {
      client.disconnect();
    },
  };
}

/** The URL without its password, for logs. */
function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = "***";
    return parsed.toString();
  } catch {
    return "(unparsable URL)";
  }
}
