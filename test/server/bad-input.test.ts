// Bad input gets a 4xx in OpenAI's error shape naming the field, and the server keeps serving
// afterwards: bodies, but also what fastify and Node refuse before a route runs (URLs,
// methods, content types, malformed HTTP), JSON nested too deeply and ids that are too long.
import { connect } from "node:net";
import { PassThrough } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clientErrorHandler } from "../../src/http/error-handler.js";
import { postRaw, startTestServer, TINY_MODEL, type TestServer } from "../helpers/server.js";

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({ workers: 1, slots: 1 });
});

afterAll(async () => {
  await server?.close();
});

const user = [{ role: "user", content: "hi" }];

const cases: { name: string; body: string | undefined; status: number; code: string; param: string | null; says: RegExp }[] = [
  { name: "malformed JSON", body: '{"model": "x", "messages": [', status: 400, code: "invalid_json", param: null, says: /not valid JSON/ },
  { name: "an empty body", body: "", status: 400, code: "invalid_json", param: null, says: /empty/ },
  {
    name: "missing messages",
    body: JSON.stringify({ model: TINY_MODEL }),
    status: 400,
    code: "invalid_request",
    param: "messages",
    says: /`messages` is required/,
  },
  { name: "missing model", body: JSON.stringify({ messages: user }), status: 400, code: "invalid_request", param: "model", says: /`model` is required/ },
  {
    name: "messages of the wrong type",
    body: JSON.stringify({ model: TINY_MODEL, messages: "hi" }),
    status: 400,
    code: "invalid_request",
    param: "messages",
    says: /must be array; got string/,
  },
  {
    name: "temperature of the wrong type",
    body: JSON.stringify({ model: TINY_MODEL, messages: user, temperature: "hot" }),
    status: 400,
    code: "invalid_request",
    param: "temperature",
    says: /must be number or null; got string "hot"/,
  },
  {
    name: "max_tokens below 1",
    body: JSON.stringify({ model: TINY_MODEL, messages: user, max_tokens: 0 }),
    status: 400,
    code: "invalid_request",
    param: "max_tokens",
    says: /max_tokens/,
  },
  {
    name: "an unknown role",
    body: JSON.stringify({ model: TINY_MODEL, messages: [{ role: "wizard", content: "x" }] }),
    status: 400,
    code: "invalid_request",
    param: "messages[0].role",
    says: /must be one of "system", "developer", "user", "assistant", "tool"; got string "wizard"/,
  },
  {
    name: "a message without content",
    body: JSON.stringify({ model: TINY_MODEL, messages: [{ role: "user" }] }),
    status: 400,
    code: "invalid_request",
    param: "messages[0].content",
    says: /is required/,
  },
  {
    name: "an image part",
    body: JSON.stringify({ model: TINY_MODEL, messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "http://x" } }] }] }),
    status: 400,
    code: "invalid_request",
    param: "messages[0].content[0].type",
    says: /must be one of "text"/,
  },
  {
    name: "n above generation.maxChoices",
    body: JSON.stringify({ model: TINY_MODEL, messages: user, n: 9 }),
    status: 400,
    code: "invalid_request",
    param: "n",
    says: /`n` is 9, but at most 8 choices are served per request \(generation\.maxChoices\)/,
  },
  {
    name: "a tool that is not a function",
    body: JSON.stringify({ model: TINY_MODEL, messages: user, tools: [{ type: "retrieval", function: { name: "f" } }] }),
    status: 400,
    code: "invalid_request",
    param: "tools[0].type",
    says: /must be one of "function"/,
  },
  {
    name: "a tool message that answers no call",
    body: JSON.stringify({ model: TINY_MODEL, messages: [{ role: "tool", content: "x", tool_call_id: "1" }] }),
    status: 400,
    code: "invalid_request",
    param: "messages[0].tool_call_id",
    says: /"1" answers no call/,
  },
  {
    name: "an unknown model",
    body: JSON.stringify({ model: "gpt-9", messages: user }),
    status: 404,
    code: "model_not_found",
    param: "model",
    says: /"gpt-9" is not served here\. Served models: radixgate-tiny/,
  },
  {
    name: "an unknown pinned worker",
    body: JSON.stringify({ model: TINY_MODEL, messages: user }),
    status: 400,
    code: "worker_not_found",
    param: "x-radixgate-worker",
    says: /"w9"/,
  },
  {
    name: "a prompt longer than a slot",
    body: JSON.stringify({ model: TINY_MODEL, messages: [{ role: "user", content: "files ".repeat(2500) }] }),
    status: 413,
    code: "context_length_exceeded",
    param: "messages",
    says: /The prompt is \d+ tokens but a slot .* holds 2048 tokens/,
  },
  {
    name: "five stop sequences",
    body: JSON.stringify({ model: TINY_MODEL, messages: user, stop: ["a", "b", "c", "d", "e"] }),
    status: 400,
    code: "invalid_request",
    param: "stop",
    says: /^`stop` holds 5 items; at most 4 are allowed\.$/,
  },
  {
    name: "an empty messages list",
    body: JSON.stringify({ model: TINY_MODEL, messages: [] }),
    status: 400,
    code: "invalid_request",
    param: "messages",
    says: /^`messages` holds 0 items; at least 1 is required\.$/,
  },
  {
    name: "JSON nested 5,000 levels deep",
    body: "[".repeat(5000) + "]".repeat(5000),
    status: 400,
    code: "json_too_deep",
    param: null,
    says: /more than 64 levels deep; at most 64 are allowed \(server\.maxJsonDepth\)/,
  },
  { name: "an unknown field nested 65 levels deep", body: nestedIn(65), status: 400, code: "json_too_deep", param: null, says: /at most 64/ },
  {
    name: "a json_schema nested past the limit",
    body: JSON.stringify({
      model: TINY_MODEL,
      messages: user,
      response_format: { type: "json_schema", json_schema: { name: "deep", schema: arraySchema(70) } },
    }),
    status: 400,
    code: "json_too_deep",
    param: null,
    says: /server\.maxJsonDepth/,
  },
  {
    name: "a `user` over 256 characters",
    body: JSON.stringify({ model: TINY_MODEL, messages: user, user: "u".repeat(257) }),
    status: 400,
    code: "invalid_request",
    param: "user",
    says: /^`user` is 257 characters long; at most 256 are allowed \(server\.maxIdLength\)\.$/,
  },
  {
    name: "a `model` over 256 characters",
    body: JSON.stringify({ model: "m".repeat(300), messages: user }),
    status: 400,
    code: "invalid_request",
    param: "model",
    says: /`model` is 300 characters long; at most 256/,
  },
  {
    name: "stray closing brackets before deep nesting",
    body: "]".repeat(100) + "[".repeat(100),
    status: 400,
    code: "json_too_deep",
    param: null,
    says: /at most 64/,
  },
  { name: "a JSON null body", body: "null", status: 400, code: "invalid_request", param: null, says: /^The request body must be object; got null\.$/ },
  { name: "a __proto__ key", body: '{"__proto__": {"admin": true}, "model": "x"}', status: 400, code: "invalid_json", param: null, says: /__proto__/ },
];

/** A valid chat body with an unknown field holding arrays nested so that the body is `depth` deep. */
function nestedIn(depth: number): string {
  const inner = depth - 1; // the body object is the first level
  return `{"model":"${TINY_MODEL}","messages":[{"role":"user","content":"x"}],"max_tokens":1,"extra":${"[".repeat(inner)}${"]".repeat(inner)}}`;
}

/** A JSON schema of arrays nested `levels` deep. */
function arraySchema(levels: number): Record<string, unknown> {
  let schema: Record<string, unknown> = { type: "string" };
  for (let i = 0; i < levels; i++) schema = { type: "array", items: schema };
  return schema;
}

interface ErrorAnswer {
  status: number;
  headers: Headers;
  error: { message: string; type: string; param: string | null; code: string };
}

/** Any request; the answer must be OpenAI's error shape, exactly its four keys. */
async function refused(path: string, init: RequestInit = {}): Promise<ErrorAnswer> {
  const response = await fetch(`${server.baseURL.replace(/\/v1$/, "")}${path}`, init);
  const body = (await response.json()) as { error: ErrorAnswer["error"] };
  expect(Object.keys(body)).toEqual(["error"]);
  expect(Object.keys(body.error).sort()).toEqual(["code", "message", "param", "type"]);
  expect(body.error.type).toBe("invalid_request_error");
  expect(response.headers.get("content-type")).toMatch(/^application\/json/);
  return { status: response.status, headers: response.headers, error: body.error };
}

/** Raw bytes to the server's port, for what fetch cannot send; the whole answer as text. */
function rawHttp(port: number, request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    let answer = "";
    socket.on("data", (chunk) => (answer += chunk.toString("latin1")));
    socket.on("close", () => resolve(answer));
    socket.on("error", reject);
    socket.end(request);
  });
}

function parseRawAnswer(answer: string) {
  const [head, body] = answer.split("\r\n\r\n");
  return { status: Number(head!.split(" ")[1]), head: head!, body: JSON.parse(body!) as { error: ErrorAnswer["error"] } };
}

describe("bad input", () => {
  for (const testCase of cases) {
    it(`refuses ${testCase.name} with ${testCase.status} ${testCase.code}`, async () => {
      const headers: Record<string, string> = { "content-type": "application/json" };
      if (testCase.code === "worker_not_found") headers["x-radixgate-worker"] = "w9";
      const response = await postRaw(server.baseURL, "/chat/completions", testCase.body, headers);
      expect(response.status).toBe(testCase.status);
      expect(response.json.error).toBeDefined();
      expect(Object.keys(response.json.error!).sort()).toEqual(["code", "message", "param", "type"]);
      expect(response.json.error!.type).toBe("invalid_request_error");
      expect(response.json.error!.code).toBe(testCase.code);
      expect(response.json.error!.param).toBe(testCase.param);
      expect(response.json.error!.message).toMatch(testCase.says);
    });
  }

  it("refuses a streaming request for an unknown model with a plain 404, not a broken stream", async () => {
    const response = await postRaw(server.baseURL, "/chat/completions", JSON.stringify({ model: "nope", messages: user, stream: true }));
    expect(response.status).toBe(404);
    expect(response.headers.get("content-type")).toMatch(/application\/json/);
    expect(response.json.error?.code).toBe("model_not_found");
  });

  it("answers an unknown route with a 404 in the same shape", async () => {
    const response = await fetch(`${server.baseURL}/embeddings/nope`);
    expect(response.status).toBe(404);
    const body = (await response.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe("route_not_found");
    expect(body.error.message).toMatch(/no route GET \/v1\/embeddings\/nope/);
  });

  it("answers a known route with the wrong method with 405 method_not_allowed and an Allow header", async () => {
    const chat = await refused("/v1/chat/completions");
    expect(chat.status).toBe(405);
    expect(chat.error.code).toBe("method_not_allowed");
    expect(chat.error.message).toBe("GET is not allowed on /v1/chat/completions; allowed: POST.");
    expect(chat.headers.get("allow")).toBe("POST");
    const model = await refused(`/v1/models/${TINY_MODEL}`, { method: "DELETE" });
    expect(model.status).toBe(405);
    expect(model.headers.get("allow")).toBe("GET, HEAD");
  });

  it("answers a path segment over server.maxIdLength with 414 url_too_long", async () => {
    const answer = await refused(`/v1/models/${"a".repeat(1000)}`);
    expect(answer.status).toBe(414);
    expect(answer.error.code).toBe("url_too_long");
    expect(answer.error.message).toMatch(/longer than the 256 characters allowed \(server\.maxIdLength\)/);
    expect(answer.error.message.length).toBeLessThan(300);
    expect(answer.headers.get("x-request-id")).toMatch(/^req-/);
  });

  it("answers a malformed percent-escape in the URL with 400 invalid_url", async () => {
    const answer = await refused("/v1/models/%E0%A4%A");
    expect(answer.status).toBe(400);
    expect(answer.error.code).toBe("invalid_url");
    expect(answer.error.message).toMatch(/"\/v1\/models\/%E0%A4%A" has a malformed percent-escape/);
  });

  it("answers a body that is not application/json with 415 unsupported_media_type", async () => {
    const body = JSON.stringify({ model: TINY_MODEL, messages: user, max_tokens: 1 });
    const plain = await refused("/v1/chat/completions", { method: "POST", headers: { "content-type": "text/plain" }, body });
    expect(plain.status).toBe(415);
    expect(plain.error.code).toBe("unsupported_media_type");
    expect(plain.error.message).toBe('The request body has Content-Type "text/plain"; send it as application/json.');
    const form = await refused("/v1/completions", { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "model=x" });
    expect(form.status).toBe(415);
  });

  it("answers headers over Node's size limit with 431 headers_too_large, in the same shape", async () => {
    const answer = parseRawAnswer(await rawHttp(Number(new URL(server.baseURL).port), `GET /v1/models/${"a".repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`));
    expect(answer.status).toBe(431);
    expect(answer.head).toMatch(/content-type: application\/json/i);
    expect(answer.body.error).toMatchObject({ code: "headers_too_large", type: "invalid_request_error", param: null });
    expect(answer.body.error.message).toMatch(/larger than the \d+ bytes this server accepts/);
  });

  it("answers a request that is not HTTP with 400 invalid_http, in the same shape", async () => {
    const answer = parseRawAnswer(await rawHttp(Number(new URL(server.baseURL).port), "HELLO THERE\r\n\r\n"));
    expect(answer.status).toBe(400);
    expect(answer.body.error).toMatchObject({ code: "invalid_http", type: "invalid_request_error", param: null });
  });

  it("answers a client too slow to send its request with 408 request_timeout, in the same shape", () => {
    // Node raises this after its requestTimeout (minutes); the handler is called as Node would.
    const written: string[] = [];
    const socket = Object.assign(new PassThrough(), { write: (text: string) => written.push(text) > 0 });
    const timeout = Object.assign(new Error("request timeout"), { code: "ERR_HTTP_REQUEST_TIMEOUT" });
    clientErrorHandler.call(server.radixgate.app, timeout, socket);
    const answer = parseRawAnswer(written.join(""));
    expect(answer.status).toBe(408);
    expect(answer.body.error).toMatchObject({ code: "request_timeout", type: "invalid_request_error", param: null });
    expect(socket.destroyed).toBe(true);
  });

  it("checks JSON depth outside strings only, and lets a body exactly at the limit through", async () => {
    const atLimit = await postRaw(server.baseURL, "/chat/completions", nestedIn(64));
    expect(atLimit.status).toBe(200);
    const brackets = await postRaw(
      server.baseURL,
      "/chat/completions",
      JSON.stringify({ model: TINY_MODEL, messages: [{ role: "user", content: `an "escaped quote ${"[{".repeat(200)}` }], max_tokens: 1 }),
    );
    expect(brackets.status).toBe(200);
  });

  it("turns a json_schema nested within the limit into a grammar or a 400, never a 500", async () => {
    const response = await postRaw(
      server.baseURL,
      "/chat/completions",
      JSON.stringify({
        model: TINY_MODEL,
        messages: user,
        max_tokens: 1,
        response_format: { type: "json_schema", json_schema: { name: "deep", schema: arraySchema(25) } },
      }),
    );
    expect([200, 400]).toContain(response.status);
    if (response.status === 400) expect(response.json.error?.param).toBe("response_format.json_schema.schema");
  });

  it("refuses over-long x-session-id and x-radixgate-worker headers by name", async () => {
    const body = JSON.stringify({ model: TINY_MODEL, messages: user, max_tokens: 1 });
    for (const header of ["x-session-id", "x-radixgate-worker"]) {
      const answer = await refused("/v1/chat/completions", {
        method: "POST",
        headers: { "content-type": "application/json", [header]: "s".repeat(257) },
        body,
      });
      expect(answer.status).toBe(400);
      expect(answer.error).toMatchObject({ code: "invalid_request", param: header });
      expect(answer.error.message).toBe(`The header \`${header}\` is 257 characters long; at most 256 are allowed (server.maxIdLength).`);
    }
  });

  it("takes ids exactly at server.maxIdLength", async () => {
    const ok = await postRaw(server.baseURL, "/chat/completions", JSON.stringify({ model: TINY_MODEL, messages: user, max_tokens: 1, user: "u".repeat(256) }), {
      "content-type": "application/json",
      "x-session-id": "s".repeat(256),
      "x-request-id": "r".repeat(256),
    });
    expect(ok.status).toBe(200);
    expect(ok.headers.get("x-request-id")).toBe("r".repeat(256));
  });

  it("refuses an over-long or non-printable x-request-id and never echoes it", async () => {
    const long = await refused("/v1/models", { headers: { "x-request-id": "r".repeat(5000) } });
    expect(long.status).toBe(400);
    expect(long.error).toMatchObject({ code: "invalid_request", param: "x-request-id" });
    expect(long.error.message).toMatch(/is 5000 characters long; at most 256 are allowed \(server\.maxIdLength\)/);
    expect(long.headers.get("x-request-id")).toMatch(/^req-[0-9a-z]+$/);
    const spaced = await refused("/v1/models", { headers: { "x-request-id": "two words" } });
    expect(spaced.status).toBe(400);
    expect(spaced.error.message).toMatch(/must be printable ASCII without spaces/);
    expect(spaced.headers.get("x-request-id")).toMatch(/^req-[0-9a-z]+$/);
    const fine = await fetch(`${server.baseURL}/models`, { headers: { "x-request-id": "client-id-1" } });
    expect(fine.status).toBe(200);
    expect(fine.headers.get("x-request-id")).toBe("client-id-1");
  });

  it("keeps serving after all of the above", async () => {
    for (const testCase of cases) await postRaw(server.baseURL, "/chat/completions", testCase.body);
    const ok = await server.client.chat.completions.create({ model: TINY_MODEL, messages: [{ role: "user", content: "still there?" }], max_tokens: 3 });
    expect(ok.choices[0]?.message.content?.length).toBeGreaterThan(0);
    expect(ok.usage?.completion_tokens).toBe(3);
  });
});

describe("bad input on the routes for routers (POST /v1/radixgate/generate)", () => {
  const sampling = { maxTokens: 4, temperature: 0, stop: [] };
  const syntax = { prefix: "<call>", alternatePrefixes: [], paramsPrefix: " ", suffix: "</call>", emptyParams: "{}", resultPrefix: "<result>" };
  const generateCases: { name: string; body: unknown; status: number; code: string; param: RegExp | null }[] = [
    { name: "no sampling", body: { model: TINY_MODEL, tokens: [1, 2] }, status: 400, code: "invalid_request", param: /sampling/ },
    { name: "no tokens", body: { model: TINY_MODEL, tokens: [], sampling }, status: 400, code: "invalid_request", param: /tokens/ },
    {
      name: "a token outside the vocabulary",
      body: { model: TINY_MODEL, tokens: [1, 99_999_999], sampling },
      status: 400,
      code: "invalid_request",
      param: /tokens/,
    },
    { name: "an unknown field", body: { model: TINY_MODEL, tokens: [1], sampling, extra: 1 }, status: 400, code: "invalid_request", param: null },
    {
      name: "a tool-call syntax of the wrong shape",
      body: {
        model: TINY_MODEL,
        tokens: [1],
        sampling: { ...sampling, toolCalls: { syntax: { prefix: 1 }, functions: [{ name: "f", parameters: {} }], parallel: false } },
      },
      status: 400,
      code: "invalid_request",
      param: /sampling\.toolCalls/,
    },
    {
      name: "a tool's parameters no grammar can take",
      body: {
        model: TINY_MODEL,
        tokens: [1],
        sampling: {
          ...sampling,
          toolCalls: { syntax, functions: [{ name: "f", parameters: { type: "object", patternProperties: { x: {} } } }], parallel: false },
        },
      },
      status: 400,
      code: "invalid_request",
      param: /sampling\.toolCalls\.functions\[0\]\.parameters/,
    },
    { name: "an unknown model", body: { model: "nope", tokens: [1], sampling }, status: 404, code: "model_not_found", param: /model/ },
  ];
  for (const testCase of generateCases) {
    it(`refuses ${testCase.name} with ${testCase.status} ${testCase.code}`, async () => {
      const response = await postRaw(server.baseURL, "/radixgate/generate", JSON.stringify(testCase.body));
      expect(response.status).toBe(testCase.status);
      expect(Object.keys(response.json.error!).sort()).toEqual(["code", "message", "param", "type"]);
      expect(response.json.error!.code).toBe(testCase.code);
      if (testCase.param) expect(response.json.error!.param).toMatch(testCase.param);
    });
  }

  it("runs a valid one and says which worker and slot took it", async () => {
    const response = await fetch(`${server.baseURL}/radixgate/generate`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: TINY_MODEL, tokens: [1, 2, 3, 4], sampling }),
    });
    const events = (await response.text())
      .split("\n\n")
      .filter((block) => block.startsWith("data: "))
      .map((block) => JSON.parse(block.slice(6)) as { type: string; worker?: string; slot?: number; result?: { completionTokens: number } });
    expect(events[0]).toMatchObject({ type: "started", worker: "w0", slot: 0 });
    expect(events.at(-1)).toMatchObject({ type: "end", result: { completionTokens: 4 } });
  });
});

describe("limits set in config.yml", () => {
  let limited: TestServer;

  beforeAll(async () => {
    limited = await startTestServer({ workers: 1, slots: 1, server: { maxJsonDepth: 10, maxIdLength: 20, bodyLimitBytes: 2048 } });
  });

  afterAll(async () => {
    await limited?.close();
  });

  it("refuses JSON deeper than server.maxJsonDepth and takes it at the limit", async () => {
    const deep = await postRaw(limited.baseURL, "/chat/completions", nestedIn(11));
    expect(deep.status).toBe(400);
    expect(deep.json.error).toMatchObject({ code: "json_too_deep", param: null, type: "invalid_request_error" });
    expect(deep.json.error!.message).toMatch(/more than 10 levels deep; at most 10 are allowed \(server\.maxJsonDepth\)/);
    const atLimit = await postRaw(limited.baseURL, "/chat/completions", nestedIn(10));
    expect(atLimit.status).toBe(200);
  });

  it("refuses ids longer than server.maxIdLength, in the body, the headers and the path", async () => {
    const body = { model: TINY_MODEL, messages: user, max_tokens: 1 };
    const longUser = await postRaw(limited.baseURL, "/chat/completions", JSON.stringify({ ...body, user: "u".repeat(21) }));
    expect(longUser.status).toBe(400);
    expect(longUser.json.error).toMatchObject({
      code: "invalid_request",
      param: "user",
      message: "`user` is 21 characters long; at most 20 are allowed (server.maxIdLength).",
    });
    const longSession = await postRaw(limited.baseURL, "/chat/completions", JSON.stringify(body), {
      "content-type": "application/json",
      "x-session-id": "s".repeat(21),
    });
    expect(longSession.json.error).toMatchObject({ code: "invalid_request", param: "x-session-id" });
    const longPath = await fetch(`${limited.baseURL}/models/${"m".repeat(21)}`);
    expect(longPath.status).toBe(414);
    expect(((await longPath.json()) as { error: { message: string } }).error.message).toMatch(/longer than the 20 characters allowed/);
    const fits = await postRaw(limited.baseURL, "/chat/completions", JSON.stringify({ ...body, user: "u".repeat(20) }), {
      "content-type": "application/json",
      "x-session-id": "s".repeat(20),
    });
    expect(fits.status).toBe(200);
  });

  it("answers a body over server.bodyLimitBytes with 413 body_too_large naming the limit", async () => {
    const response = await postRaw(
      limited.baseURL,
      "/chat/completions",
      JSON.stringify({ model: TINY_MODEL, messages: [{ role: "user", content: "x".repeat(3000) }] }),
    );
    expect(response.status).toBe(413);
    expect(response.json.error).toMatchObject({ code: "body_too_large", type: "invalid_request_error", param: null });
    expect(response.json.error!.message).toMatch(/larger than the 2048 bytes this server accepts \(server\.bodyLimitBytes\)/);
  });
});
