// The prefill a worker still has ahead of new requests, as the scheduler counts it: a placed
// prompt's uncached tokens weigh on its worker until its first token comes out (not until a
// slot takes it: a slot evaluating a long prompt is busy), then no more while it decodes.
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, TINY_MODEL, type TestServer } from "../helpers/server.js";
import { until } from "../helpers/until.js";

for (const isolation of ["thread", "process"] as const) {
  describe(`pending prefill (${isolation} workers)`, () => {
    let server: TestServer;

    beforeAll(async () => {
      server = await startTestServer({ workers: 1, slots: 2, isolation });
    });

    afterAll(async () => {
      await server?.close();
    });

    const view = async () => server.radixgate.scheduler.views()[0]!;
    const chat = (stream: boolean) =>
      fetch(`${server.baseURL}/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          model: TINY_MODEL,
          messages: [{ role: "user", content: `tell a long story ${randomUUID()} ${"about the files and their sizes ".repeat(20)}` }],
          max_tokens: 400,
          temperature: 0,
          stream,
        }),
      });

    for (const stream of [true, false]) {
      it(`${stream ? "streamed" : "not streamed"}: its prompt stops counting as pending prefill once its first token is out, while it still decodes`, async () => {
        const response = chat(stream);
        const placed = await until(view, (worker) => worker.inFlight === 1);
        expect(placed.inFlight).toBe(1);
        // Decoding, its prompt no longer counts; it still does not when it ends.
        const decoding = await until(view, (worker) => worker.inFlight === 0 || worker.pendingPrefillTokens === 0);
        expect(decoding).toMatchObject({ inFlight: 1, pendingPrefillTokens: 0 });
        const body = await (await response).text();
        expect(body.length).toBeGreaterThan(0);
        expect(await until(view, (worker) => worker.inFlight === 0)).toMatchObject({ inFlight: 0, pendingPrefillTokens: 0 });
      });
    }
  });
}
