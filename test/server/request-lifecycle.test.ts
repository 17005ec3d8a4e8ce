// A request's life from the server's side: it is cancelled by a key the server made (never
// by a client's x-request-id), a cancel or deadline at any stage ends that request only and
// with the right answer, a prompt that cannot fit is refused before it is tokenized, and a
// shutdown that cuts requests waits for their generations to stop before freeing workers.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { healthOf, startTestServer, TINY_MODEL, type TestServer } from "../helpers/server.js";
import { until } from "../helpers/until.js";

async function metricsOf(server: TestServer): Promise<string> {
  return (await fetch(server.baseURL.replace(/\/v1$/, "/metrics"))).text();
}

function chat(server: TestServer, body: Record<string, unknown>, headers: Record<string, string> = {}, signal?: AbortSignal): Promise<Response> {
  return fetch(`${server.baseURL}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ model: TINY_MODEL, temperature: 0, ...body }),
    signal,
  });
}

/** A JSON schema whose grammar takes the worker a moment to build: many required properties. */
function wideSchema(seed: number): Record<string, unknown> {
  const properties = Object.fromEntries(Array.from({ length: 60 }, (_, i) => [`field_${seed}_${i}`, { type: "string", enum: [`a${i}`, `b${i}`, `c${i}`] }]));
  return { type: "object", properties, required: Object.keys(properties), additionalProperties: false };
}

describe("cancellation", () => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startTestServer({ workers: 1, slots: 1 });
  });

  afterAll(async () => {
    await server?.close();
  });

  it("a disconnect cancels only its own request, even when another client sent the same x-request-id", async () => {
    const sameId = { "x-request-id": "shared-id" };
    const holder = new AbortController();
    // Holds the only slot, so the next two wait in the worker's queue.
    const running = chat(server, { messages: [{ role: "user", content: "hold the slot" }], max_tokens: 1900, stream: true }, sameId, holder.signal);
    await until(
      () => healthOf(server),
      (h) => h.workers[0]!.in_flight >= 1,
    );
    const bystander = chat(server, { messages: [{ role: "user", content: "bystander" }], max_tokens: 40 }, sameId);
    const leaver = new AbortController();
    const leaving = chat(server, { messages: [{ role: "user", content: "leaves" }], max_tokens: 40, stream: true }, sameId, leaver.signal).catch(
      () => undefined,
    );
    await until(
      () => healthOf(server),
      (h) => h.workers[0]!.in_flight >= 3,
    );
    leaver.abort();
    await leaving;
    await until(
      () => healthOf(server),
      (h) => h.workers[0]!.in_flight <= 2,
    );
    holder.abort();
    await running.then((response) => response.body?.cancel()).catch(() => undefined);
    const answer = await bystander;
    expect(answer.status).toBe(200);
    const body = (await answer.json()) as { choices: { finish_reason: string }[]; usage: { completion_tokens: number } };
    // Greedy on the tiny model: it runs to max_tokens, it was not cut short by the other client.
    expect(body.choices[0]!.finish_reason).toBe("length");
    expect(body.usage.completion_tokens).toBe(40);
  });

  it("a cancel at any stage (tokenizing, building the grammar, queued, generating) ends the request as cancelled, never as a server error", async () => {
    const before = await metricsOf(server);
    const delays = [0, 2, 5, 10, 20, 40, 80];
    await Promise.all(
      delays.map(async (delay, i) => {
        const abort = new AbortController();
        const sent = chat(
          server,
          {
            messages: [{ role: "user", content: `schema ${i}` }],
            max_tokens: 400,
            response_format: { type: "json_schema", json_schema: { name: "wide", schema: wideSchema(i) } },
          },
          {},
          abort.signal,
        ).catch(() => undefined);
        setTimeout(() => abort.abort(), delay);
        await sent;
      }),
    );
    // Each request ended in the worker: nothing is left running or queued.
    const drained = await until(
      () => healthOf(server),
      (h) => h.workers[0]!.in_flight === 0,
    );
    expect(drained.workers[0]!.in_flight).toBe(0);
    const after = await metricsOf(server);
    const count = (text: string, outcome: string) =>
      [...text.matchAll(new RegExp(`radixgate_requests_total\\{[^}]*outcome="${outcome}"[^}]*\\} (\\d+)`, "g"))].reduce((sum, m) => sum + Number(m[1]), 0);
    for (const outcome of ["internal_error", "worker_failed"]) expect(count(after, outcome)).toBe(count(before, outcome));
    const next = await server.client.chat.completions.create({ model: TINY_MODEL, messages: [{ role: "user", content: "still here" }], max_tokens: 2 });
    expect(next.usage?.completion_tokens).toBe(2);
  });

  it("refuses a text that no tokenization could fit in a slot, by its length, before tokenizing it", async () => {
    const response = await fetch(`${server.baseURL}/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: TINY_MODEL, prompt: "a ".repeat(2_000_000), max_tokens: 1 }),
    });
    expect(response.status).toBe(413);
    const body = (await response.json()) as { error: { code: string; param: string; message: string } };
    expect(body.error).toMatchObject({ code: "context_length_exceeded", param: "prompt" });
    expect(body.error.message).toMatch(/^The prompt is 4000000 characters, which is at least \d+ tokens/);
  });
});

describe("deadlines at any stage", () => {
  let server: TestServer;

  beforeAll(async () => {
    // Short enough that three wide grammars queued on one slot meet it while being built or
    // waiting; long enough for a two-token answer.
    server = await startTestServer({ workers: 1, slots: 1, requestTimeoutMs: 100 });
  });

  it("cancels a request past generation.requestTimeoutMs with a 504, and keeps serving", async () => {
    // ~1900 tokens of the tiny model take well over the 100 ms deadline.
    const late = await server.client.chat.completions
      .create({ model: TINY_MODEL, messages: [{ role: "user", content: "a long answer" }], max_tokens: 1900 })
      .then(
        () => undefined,
        (error: { status?: number; message: string }) => error,
      );
    expect(late?.status).toBe(504);
    expect(late?.message).toMatch(/deadline of 100 ms \(generation\.requestTimeoutMs\)/);
    const quick = await server.client.chat.completions.create({ model: TINY_MODEL, messages: [{ role: "user", content: "short" }], max_tokens: 2 });
    expect(quick.usage?.completion_tokens).toBe(2);
  });

  afterAll(async () => {
    await server?.close();
  });

  it("answers 504 whether the deadline passes while the grammar is built, queued or generating", async () => {
    const answers = await Promise.all(
      [0, 1, 2].map((i) =>
        chat(server, {
          messages: [{ role: "user", content: `late ${i}` }],
          max_tokens: 1900,
          response_format: { type: "json_schema", json_schema: { name: "wide", schema: wideSchema(100 + i) } },
        }),
      ),
    );
    for (const answer of answers) {
      expect(answer.status).toBe(504);
      expect(((await answer.json()) as { error: { code: string } }).error.code).toBe("deadline_exceeded");
    }
  });
});

describe("shutdown past its timeout", () => {
  it("cuts the running request, waits for its generation to stop, then frees the worker", async () => {
    const server = await startTestServer({ workers: 1, slots: 1 });
    const engine = server.radixgate.fleet.get("w0")!.engine;
    const cancelledBefore = engine.finished.cancelled;
    const stream = chat(server, { messages: [{ role: "user", content: "never finishes in time" }], max_tokens: 1900, stream: true })
      .then((response) => response.text())
      .catch(() => "cut");
    await until(
      async () => engine.inFlight,
      (count) => count >= 1,
    );
    await server.radixgate.shutdown(100);
    await stream;
    // The generation was cancelled and had ended before the worker was disposed (a thread
    // disposed while generating takes the whole process down: this test would not finish).
    expect(engine.inFlight).toBe(0);
    expect(engine.finished.cancelled).toBe(cancelledBefore + 1);
  });
});

describe("closing a worker", () => {
  it("waits for the generations still running on it to end before freeing llama.cpp", async () => {
    const server = await startTestServer({ workers: 1, slots: 2 });
    const engine = server.radixgate.fleet.get("w0")!.engine;
    let started = false;
    const running = engine.generate("closing", [1, 2, 3, 4], { temperature: 0, maxTokens: 300, stop: [] }, { onStarted: () => (started = true) });
    await until(
      async () => started,
      (yes) => yes,
    );
    await server.close();
    // Freed mid-generation, it would have failed or stopped short.
    expect(await running).toMatchObject({ finishReason: "length", completionTokens: 300 });
  });
});
