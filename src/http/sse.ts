// Server-sent events on a hijacked fastify reply: `data: <json>\n\n` per event, `data: [DONE]` last.
import type { FastifyReply } from "fastify";

export class SseStream {
  private opened = false;

  constructor(private readonly reply: FastifyReply) {}

  get isOpen(): boolean {
    return this.opened;
  }

  /** Writes the status line and headers; from here on errors travel as events, not statuses. */
  open(headers: Record<string, string>): void {
    if (this.opened) return;
    this.opened = true;
    this.reply.hijack();
    this.reply.raw.writeHead(200, {
      ...headers,
      "x-request-id": this.reply.request.id,
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      connection: "keep-alive",
      "x-accel-buffering": "no",
    });
  }

  /** False once the client is gone: nothing more can be written. */
  get writable(): boolean {
    return !this.reply.raw.writableEnded && !this.reply.raw.destroyed;
  }

  send(event: unknown): void {
    if (this.writable) this.reply.raw.write(`data: ${JSON.stringify(event)}\n\n`);
  }

  close(): void {
    if (!this.writable) return;
    this.reply.raw.write("data: [DONE]\n\n");
    this.reply.raw.end();
  }
}
