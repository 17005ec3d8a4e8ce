// GET /v1/radixgate/events?model=ID — this host's cache and load, for routers in front of it
// (serving/cache-feed.ts says what is sent). Server-sent events, one JSON object per `data:`
// line, a comment line every few seconds so that a router notices a silent connection. A
// router that cannot keep up (more than a few MiB unread) is cut off: it reconnects and
// starts again from a fresh snapshot, which is cheaper than buffering without bound.
import type { FastifyInstance } from "fastify";
import type { CacheFeed } from "../../serving/cache-feed.js";
import { ServingError } from "../../serving/errors.js";
import type { Fleet } from "../../serving/fleet.js";

export const EVENTS_PATH = "/v1/radixgate/events";
/** Between keep-alive comments; a router gives a connection up after a few of these in silence. */
export const EVENTS_HEARTBEAT_MS = 2000;
const MAX_UNREAD_BYTES = 8 * 2 ** 20;

export function eventsRoute(app: FastifyInstance, fleet: Fleet, feed: CacheFeed): void {
  const open = new Set<() => void>();
  // Event streams never end on their own: close them before the server waits for its connections.
  app.addHook("preClose", async () => {
    for (const end of [...open]) end();
  });
  app.get<{ Querystring: { model?: string } }>(
    EVENTS_PATH,
    { schema: { querystring: { type: "object", properties: { model: { type: "string" } }, required: ["model"] } } },
    async (request, reply) => {
      const modelId = request.query.model!;
      if (!fleet.models.has(modelId)) {
        throw new ServingError("model_not_found", `The model "${modelId}" is not served here. Served models: ${[...fleet.models.keys()].join(", ")}.`, "model");
      }
      reply.hijack();
      const raw = reply.raw;
      raw.writeHead(200, {
        "x-request-id": request.id,
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-cache",
        connection: "keep-alive",
        "x-accel-buffering": "no",
      });
      let unsubscribe: () => void = () => undefined;
      const write = (text: string) => {
        if (raw.writableEnded || raw.destroyed) return;
        if (raw.writableLength > MAX_UNREAD_BYTES) {
          request.log.warn({ unreadBytes: raw.writableLength }, "event stream reader fell behind; closing it (it reconnects from a snapshot)");
          return end();
        }
        raw.write(text);
      };
      const heartbeat = setInterval(() => write(": alive\n\n"), EVENTS_HEARTBEAT_MS);
      const end = () => {
        clearInterval(heartbeat);
        unsubscribe();
        open.delete(end);
        if (!raw.writableEnded) raw.end();
      };
      open.add(end);
      raw.on("close", end);
      unsubscribe = feed.subscribe(modelId, (event) => write(`data: ${JSON.stringify(event)}\n\n`));
      return reply;
    },
  );
}
