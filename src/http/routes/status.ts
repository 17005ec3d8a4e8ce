// GET / — the live status page (one self-contained HTML document, no CDN), and GET /status —
// the JSON it polls every two seconds. The page is open; /status takes the API key like the
// API does (it shows the first words of cached prompts): the page sends the key it finds in
// its URL fragment, `/#key=<key>`, which never reaches a server log.
import type { FastifyInstance } from "fastify";
import type { StatusReport } from "../../serving/status.js";
import { STATUS_PAGE } from "../status-page.js";

export function statusRoutes(app: FastifyInstance, status: () => Promise<StatusReport>): void {
  app.get("/", async (_request, reply) => reply.type("text/html; charset=utf-8").header("cache-control", "no-store").send(STATUS_PAGE));
  app.get("/status", async (_request, reply) => reply.header("cache-control", "no-store").send(await status()));
}
