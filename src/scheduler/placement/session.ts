// Override 2: a request with a session id goes to the worker that served its session, while
// the session lives (sessionTtlMs), that worker is a candidate and is not overloaded.
import type { GlobalSchedulerSettings } from "../global-scheduler-settings.js";
import type { Placement, PlacementRequest, WorkerView } from "../types.js";
import { candidateNamed } from "./candidate.js";

type SessionSettings = Pick<GlobalSchedulerSettings, "sessionPinning" | "sessionTtlMs" | "maxSessions" | "sessionOverloadPerSlot">;

export class Sessions {
  /** Least recently seen first (a session is moved to the end each time it is seen): the
   *  cap and the TTL both drop from the front, so keeping it bounded is O(1) amortized. */
  private readonly byId = new Map<string, { workerId: string; lastSeen: number }>();

  constructor(private readonly settings: SessionSettings) {}

  get size(): number {
    return this.byId.size;
  }

  place(request: PlacementRequest, candidates: readonly WorkerView[], matched: number, now: number): Placement | undefined {
    if (!this.settings.sessionPinning || request.sessionId === undefined) return undefined;
    const session = this.byId.get(request.sessionId);
    if (!session || now - session.lastSeen > this.settings.sessionTtlMs) return undefined;
    const worker = candidateNamed(candidates, session.workerId);
    if (!worker || worker.inFlight >= this.settings.sessionOverloadPerSlot * worker.slots) return undefined;
    return { workerId: worker.id, reason: "session", matchedTokens: matched };
  }

  /** The request's session was just placed on the worker: it moves to the back of the map;
   *  from the front, sessions beyond the cap or idle past the TTL go (stops at the first one kept). */
  served(request: PlacementRequest, workerId: string, now: number): void {
    if (request.sessionId !== undefined) this.remember(request.sessionId, workerId, now);
  }

  /** The session is on `workerId` as of `now` (served here, or by another router as a shared store says). */
  remember(sessionId: string, workerId: string, now: number): void {
    if (!this.settings.sessionPinning) return;
    const sessions = this.byId;
    const session = sessions.get(sessionId);
    if (session) {
      sessions.delete(sessionId);
      session.workerId = workerId;
      session.lastSeen = now;
      sessions.set(sessionId, session);
    } else {
      sessions.set(sessionId, { workerId, lastSeen: now });
    }
    for (const [id, oldest] of sessions) {
      if (sessions.size <= this.settings.maxSessions && now - oldest.lastSeen <= this.settings.sessionTtlMs) break;
      sessions.delete(id);
    }
  }
}
