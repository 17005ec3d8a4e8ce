// Property-based fuzzing of the HTTP surface against one real server (the tiny model): chat
// and completion bodies with mutated fields, odd headers, random paths and methods, junk
// bodies. Every answer must be a 2xx, or a 4xx in OpenAI's error shape; never a 5xx, never
// no answer at all. Most requests go through app.inject (fast); a share goes over real HTTP
// so that Node's own parser sees them too. A failure prints fast-check's seed and the
// shrunk request; rerun it with FUZZ_SEED=<seed>.
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, TINY_MODEL, type TestServer } from "../helpers/server.js";

/** Requests per run (each property run sends one). */
const RUNS = 2000;
/** A request still unanswered after this long counts as a hang (a liveness check, not a speed check). */
const HANG_MS = 30_000;

let server: TestServer;
let origin: string;

beforeAll(async () => {
  server = await startTestServer({ workers: 1, slots: 2 });
  origin = new URL(server.baseURL).origin;
});

afterAll(async () => {
  await server?.close();
});

interface FuzzRequest {
  via: "inject" | "http";
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string;
}

interface Answer {
  status: number;
  contentType: string;
  text: string;
}

// ---------------------------------------------------------------------------------------------
// Values

/** A JSON literal JSON.stringify cannot write (1e999, -0): written as a marker, swapped in after. */
const raw = (literal: string) => `\u0000raw:${literal}\u0000`;
const toJson = (value: unknown) => JSON.stringify(value).replace(/"\\u0000raw:([^\\]*)\\u0000"/g, "$1");

const oddStrings = fc.constantFrom(
  "",
  " ",
  "\u0000",
  "\uD800",
  "\uDFFF",
  "🙂",
  "\u202E",
  "e\u0301",
  "<|im_end|>",
  "<|im_start|>system\n",
  "\n\n\n",
  "\\",
  '"',
  "%s%n",
  "{{x}}",
  "ﷺ",
  "\u2028",
);
const text = fc.oneof(
  { weight: 3, arbitrary: fc.string({ maxLength: 30 }) },
  { weight: 2, arbitrary: fc.string({ unit: "grapheme", maxLength: 15 }) },
  { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 15 }) },
  { weight: 2, arbitrary: oddStrings },
);
const hugeNumbers = fc.constantFrom(
  1e308,
  -1e308,
  2 ** 53 + 2,
  -(2 ** 53),
  2 ** 31,
  -(2 ** 31) - 1,
  1e-320,
  0.5,
  -0.5,
  raw("1e999"),
  raw("-1e999"),
  raw("-0"),
  raw("1E400"),
);
/** Mostly `valid`, sometimes `invalid`: valid-ish bodies, so that a good share is answered 200. */
const mostly = <T, U>(valid: fc.Arbitrary<T>, invalid: fc.Arbitrary<U>) => fc.oneof({ weight: 19, arbitrary: valid }, { weight: 1, arbitrary: invalid });

/** Anything a client could put in a field: wrong types, huge numbers, nested junk. */
const junk: fc.Arbitrary<unknown> = fc.oneof(
  text,
  hugeNumbers,
  fc.integer({ min: -5, max: 5 }),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.boolean(),
  fc.constant(null),
  fc.constant([]),
  fc.constant({}),
  fc.jsonValue({ maxDepth: 3 }),
  fc.array(text, { maxLength: 6 }),
  fc.integer({ min: 1, max: 12 }).map((depth) => JSON.parse("[".repeat(depth) + "]".repeat(depth)) as unknown),
);
/** Junk for the token limits: never a valid count above 2 and never absent (the default is 256 tokens), so runs stay cheap. */
const tokenLimitJunk = fc.oneof(
  fc.constantFrom(0, -1, -(2 ** 31), -1e308, 1.5, "2", true, [], {}, raw("-0"), raw("1e999"), raw("-1e999")),
  fc.integer({ min: -1000, max: 0 }),
  fc.string({ maxLength: 5 }),
);

/** A JSON-schema-ish value for response_format: some the grammar takes, most it should refuse. */
const jsonSchema = fc.letrec<{ schema: unknown }>((tie) => ({
  schema: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.record({ type: fc.constantFrom("string", "number", "integer", "boolean", "null") }),
    fc.record({ type: fc.constant("string"), format: fc.constantFrom("date", "date-time", "time", "email", "uuid") }),
    fc.record(
      {
        type: fc.constant("object"),
        properties: fc.dictionary(fc.string({ maxLength: 6 }), tie("schema"), { maxKeys: 3 }),
        required: fc.array(fc.string({ maxLength: 6 }), { maxLength: 2 }),
      },
      { requiredKeys: ["type"] },
    ),
    fc.record(
      { type: fc.constant("array"), items: tie("schema"), minItems: fc.integer({ min: -1, max: 3 }), maxItems: fc.integer({ min: -1, max: 3 }) },
      { requiredKeys: ["type"] },
    ),
    fc.record({ anyOf: fc.array(tie("schema"), { maxLength: 3 }) }),
    fc.record({ oneOf: fc.array(tie("schema"), { maxLength: 3 }) }),
    fc.record({ enum: fc.array(fc.jsonValue({ maxDepth: 1 }), { maxLength: 3 }) }),
    fc.record({ const: fc.jsonValue({ maxDepth: 1 }) }),
    fc.record({ type: fc.array(fc.constantFrom("string", "number", "null", "object", "array", "nope"), { maxLength: 3 }) }),
    fc.record(
      { $ref: fc.constantFrom("#/$defs/a", "#/definitions/a", "#", "http://x/y", "#/$defs/missing"), $defs: fc.record({ a: tie("schema") }) },
      { requiredKeys: ["$ref"] },
    ),
    fc.record({ type: fc.constant("object"), additionalProperties: fc.oneof(fc.boolean(), tie("schema")) }),
    fc.record(
      { type: fc.constant("string"), minLength: fc.integer({ min: -1, max: 5 }), maxLength: fc.integer({ min: -1, max: 5 }) },
      { requiredKeys: ["type"] },
    ),
    junk,
  ),
})).schema;

const simpleSchema = fc.constantFrom(
  { type: "string" },
  { type: "object", properties: { answer: { type: "integer" }, ok: { type: "boolean" } }, required: ["answer"] },
  { type: "array", items: { type: "string", format: "date" } },
  { anyOf: [{ type: "null" }, { enum: ["a", "b"] }] },
);
const responseFormat = mostly(
  fc.oneof(
    fc.constantFrom({ type: "text" }, { type: "json_object" }),
    fc.record({
      type: fc.constant("json_schema"),
      json_schema: fc.record(
        { name: fc.constantFrom("answer", "x"), schema: mostly(simpleSchema, jsonSchema), strict: fc.option(fc.boolean()) },
        { requiredKeys: ["name"] },
      ),
    }),
  ),
  fc.oneof(fc.constantFrom({ type: "json_schema" }, { type: "xml" }, { type: "json_schema", json_schema: { name: "" } }), junk),
);

const stop = mostly(fc.oneof(text, fc.array(text, { maxLength: 4 }), fc.constant(null)), fc.array(text, { minLength: 5, maxLength: 7 }));

const role = mostly(fc.constantFrom("system", "developer", "user", "assistant"), fc.constantFrom("tool", "function", "wizard", ""));
const message = fc.record(
  {
    role,
    content: mostly(
      fc.oneof({ weight: 4, arbitrary: text }, fc.array(fc.record({ type: fc.constant("text"), text }), { maxLength: 2 }), fc.constant(null)),
      fc.array(fc.record({ type: fc.constantFrom("image_url", "input_audio"), text }), { minLength: 1, maxLength: 2 }),
    ),
    name: text,
  },
  { requiredKeys: ["role", "content"] },
);

/** Function tools: mostly valid (a small schema), sometimes with a schema the grammar cannot enforce or a bad name. */
const tool = fc.record({
  type: mostly(fc.constant("function"), fc.constantFrom("retrieval", "")),
  function: fc.record(
    {
      name: mostly(fc.constantFrom("get_weather", "f", "lookup-2"), fc.constantFrom("", "has space", "x".repeat(65))),
      description: text,
      parameters: mostly(simpleSchema, jsonSchema),
    },
    { requiredKeys: ["name"] },
  ),
});
const toolChoice = mostly(
  fc.constantFrom("auto", "none", "required", { type: "function", function: { name: "get_weather" } }),
  fc.oneof(text, fc.constant({ type: "function", function: { name: "nope" } }), junk),
);
/** A call in an assistant message, answered or not by the tool message after it. */
const callTurns = fc
  .record({ id: fc.constantFrom("call_1", "call_2"), arguments: mostly(fc.constantFrom('{"city": "Oslo"}', "{}", ""), text), answered: fc.boolean() })
  .map(({ id, arguments: args, answered }) => [
    { role: "assistant", content: null, tool_calls: [{ id, type: "function", function: { name: "get_weather", arguments: args } }] },
    ...(answered ? [{ role: "tool", tool_call_id: "call_1", content: "sunny" }] : []),
  ]);

/** Fields both completion routes take, mostly valid, each optional. */
const generationFields = {
  model: mostly(fc.constant(TINY_MODEL), text),
  max_tokens: fc.integer({ min: 1, max: 2 }),
  stream: fc.boolean(),
  stream_options: fc.oneof(fc.record({ include_usage: fc.boolean() }), fc.constant(null)),
  temperature: fc.oneof(fc.double({ min: 0, max: 2, noNaN: true }), fc.constant(null)),
  top_p: fc.double({ min: 0, max: 1, noNaN: true }),
  seed: fc.oneof(fc.integer(), fc.constantFrom(0, -1, 2 ** 53 - 1, -(2 ** 53) + 1, 1e21)),
  stop,
  user: text,
  n: mostly(fc.constant(1), fc.constant(2)),
  presence_penalty: fc.double({ min: -2, max: 2, noNaN: true }),
  frequency_penalty: fc.double({ min: -2, max: 2, noNaN: true }),
  response_format: responseFormat,
};
const generationKeys = Object.keys(generationFields);

const chatBody = fc.record(
  {
    ...generationFields,
    messages: fc
      .tuple(fc.array(message, { minLength: 1, maxLength: 3 }), mostly(fc.constant([]), callTurns))
      .map(([messages, calls]) => [...messages, ...calls]),
    max_completion_tokens: fc.integer({ min: 1, max: 2 }),
    tools: fc.array(tool, { maxLength: 2 }),
    tool_choice: toolChoice,
    parallel_tool_calls: fc.boolean(),
  },
  { requiredKeys: ["model", "max_tokens", "messages"] },
);
const prompt = fc.oneof(
  { weight: 4, arbitrary: text },
  fc.array(fc.integer({ min: -5, max: 600 }), { minLength: 0, maxLength: 8 }),
  fc.array(fc.oneof(fc.integer({ min: -(2 ** 31), max: 2 ** 31 }), hugeNumbers), { maxLength: 4 }),
  fc.array(text, { maxLength: 3 }),
  fc.array(fc.array(fc.integer({ min: 0, max: 300 }), { maxLength: 4 }), { maxLength: 3 }),
  junk,
);
const completionBody = fc.record(
  {
    ...generationFields,
    prompt,
    echo: mostly(fc.constant(false), fc.constant(true)),
    suffix: mostly(fc.constant(""), text),
    best_of: mostly(fc.constant(1), fc.constant(2)),
  },
  { requiredKeys: ["model", "max_tokens", "prompt"] },
);

/** Field paths a mutation may hit (dotted; numbers index arrays). */
const mutationTargets = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.constantFrom(
      ...generationKeys.filter((key) => key !== "max_tokens"),
      "messages",
      "prompt",
      "messages.0",
      "messages.0.role",
      "messages.0.content",
      "messages.0.content.0",
      "response_format.json_schema.schema",
      "response_format.json_schema",
      "response_format.type",
      "stream_options.include_usage",
      "stop.0",
      "logprobs",
      "tools",
      "tools.0.function.parameters",
      "tool_choice",
      "messages.0.tool_calls",
      "logit_bias",
      "functions",
      "modalities",
      "prediction",
      "top_logprobs",
    ),
  },
  { weight: 1, arbitrary: fc.string({ maxLength: 12 }) },
);
const mutation = fc.oneof(
  { weight: 8, arbitrary: fc.tuple(mutationTargets, junk) },
  { weight: 2, arbitrary: fc.tuple(fc.constantFrom("max_tokens", "max_completion_tokens"), tokenLimitJunk) },
  { weight: 1, arbitrary: fc.tuple(mutationTargets, fc.constant(undefined)) },
);

function setPath(root: Record<string, unknown>, path: string, value: unknown): void {
  const parts = path.split(".");
  let node: unknown = root;
  for (const part of parts.slice(0, -1)) {
    if (node === null || typeof node !== "object") return;
    node = (node as Record<string, unknown>)[part];
  }
  if (node === null || typeof node !== "object") return;
  const last = parts[parts.length - 1]!;
  if (value === undefined) delete (node as Record<string, unknown>)[last];
  else (node as Record<string, unknown>)[last] = value;
}

const mutatedBody = (base: fc.Arbitrary<Record<string, unknown>>) =>
  fc.tuple(base, fc.oneof(fc.constant([]), fc.array(mutation, { minLength: 1, maxLength: 3 }))).map(([body, mutations]) => {
    const copy = structuredClone(body);
    // A mutation's value may be a constant shared between runs (fc.constantFrom): a later
    // mutation writing below it would change that constant, even into a cycle. Each gets a copy.
    for (const [path, value] of mutations) setPath(copy, path, structuredClone(value));
    // Never the default of 256 tokens: a run must stay cheap.
    if (copy.max_tokens === undefined || copy.max_tokens === null) copy.max_tokens = 1;
    return toJson(copy);
  });

const junkBody = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: "binary", maxLength: 40 }),
  fc.jsonValue({ maxDepth: 4 }).map(toJson),
  fc.integer({ min: 1, max: 300 }).map((depth) => "[".repeat(depth) + "]".repeat(depth)),
  fc.integer({ min: 1, max: 300 }).map((depth) => `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`),
  fc
    .integer({ min: 1, max: 100 })
    .map((depth) => `{"model":"${TINY_MODEL}","messages":[{"role":"user","content":"x"}],"max_tokens":1,"deep":${"[".repeat(depth)}${"]".repeat(depth)}}`),
  fc.tuple(chatBody, fc.nat()).map(([body, cut]) => {
    const json = toJson(body);
    return json.slice(0, cut % Math.max(1, json.length));
  }),
  fc.constantFrom(
    "",
    "null",
    "[]",
    "1",
    '"x"',
    "{}",
    "{,}",
    '{"a":1,}',
    "{'a':1}",
    '{"__proto__":{"x":1}}',
    '{"constructor":{"prototype":{"x":1}}}',
    "\uFEFF{}",
    "/* c */{}",
    "[".repeat(5000),
  ),
);

// ---------------------------------------------------------------------------------------------
// Headers and paths

/** Header values a client can send (no CR, LF or NUL; Latin-1 at most). */
const headerValue = fc.oneof(
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it removes
  fc.string({ unit: "binary-ascii", maxLength: 20 }).map((value) => value.replace(/[\u0000-\u001f\u007f]/g, "")),
  fc.string({
    unit: fc
      .integer({ min: 0x20, max: 0xff })
      .filter((c) => c !== 0x7f)
      .map((c) => String.fromCharCode(c)),
    maxLength: 20,
  }),
  fc.integer({ min: 200, max: 2000 }).map((length) => "h".repeat(length)),
);
const contentType = fc.oneof(
  { weight: 18, arbitrary: fc.constantFrom("application/json", "application/json; charset=utf-8", "Application/JSON") },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      "text/plain",
      "application/x-www-form-urlencoded",
      "multipart/form-data; boundary=x",
      "application/json; charset=latin1",
      "application/jsonx",
      "application/",
      ";",
      "*/*",
    ),
  },
  { weight: 1, arbitrary: headerValue },
);
const headers = fc
  .record(
    {
      "content-type": mostly(contentType, fc.constant(undefined)),
      "x-session-id": mostly(fc.string({ unit: "grapheme-ascii", maxLength: 20 }), headerValue),
      "x-request-id": mostly(fc.stringMatching(/^[A-Za-z0-9_-]{1,40}$/), headerValue),
      "x-radixgate-worker": mostly(fc.constant("w0"), fc.oneof(fc.constantFrom("w1", "w9", ""), headerValue)),
      authorization: fc.oneof(fc.constant("Bearer sk-test"), headerValue),
    },
    { requiredKeys: ["content-type"] },
  )
  .map(
    (record) =>
      Object.fromEntries(Object.entries(record).flatMap(([name, value]) => (value === undefined ? [] : [[name, value.trim()]]))) as Record<string, string>,
  );

const KNOWN_PATHS = [
  "/v1/chat/completions",
  "/v1/completions",
  "/v1/models",
  `/v1/models/${TINY_MODEL}`,
  "/v1/models/nope",
  // The routes for routers in front of this host (the event stream without its model: a 400).
  "/v1/radixgate/generate",
  "/v1/radixgate/events",
  "/health",
  "/ready",
  "/metrics",
  "/v1/embeddings",
  "/",
  "/v1",
  "/v1/",
];
const segment = fc.oneof(
  fc.stringMatching(/^[A-Za-z0-9._~-]{1,12}$/),
  fc.constantFrom("%", "%E0%A4%A", "%00", "%2F", "%zz", "%C3%28", "%FF", "%25", "..", ".", ";a=b", "a%20b", ":id", "*"),
  fc.integer({ min: 90, max: 1200 }).map((length) => "a".repeat(length)),
);
const path = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...KNOWN_PATHS) },
  { weight: 2, arbitrary: fc.tuple(fc.constantFrom("/v1/models/", "/v1/", "/", "/v1/chat/"), segment).map(([prefix, last]) => prefix + last) },
  { weight: 1, arbitrary: fc.array(segment, { minLength: 1, maxLength: 4 }).map((parts) => `/${parts.join("/")}`) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.constantFrom(...KNOWN_PATHS), fc.string({ unit: "grapheme-ascii", maxLength: 10 }))
      .map(([known, query]) => `${known}?${encodeURIComponent(query)}=%ZZ&a`),
  },
);

const via = fc.oneof({ weight: 3, arbitrary: fc.constant("inject" as const) }, { weight: 1, arbitrary: fc.constant("http" as const) });

const completionRequest = fc.oneof(
  fc.record({ via, method: fc.constant("POST"), path: fc.constant("/v1/chat/completions"), headers, body: mutatedBody(chatBody) }),
  fc.record({ via, method: fc.constant("POST"), path: fc.constant("/v1/completions"), headers, body: mutatedBody(completionBody) }),
);
const junkRequest = fc.record({ via, method: fc.constant("POST"), path: fc.constantFrom("/v1/chat/completions", "/v1/completions"), headers, body: junkBody });
const anyRequest = fc
  .record({
    via,
    method: fc.constantFrom("GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"),
    path,
    headers,
    body: fc.option(fc.oneof(junkBody, mutatedBody(chatBody)), { nil: undefined }),
  })
  .map((request): FuzzRequest => (request.method === "GET" || request.method === "HEAD" ? { ...request, body: undefined } : request));
const injectOnlyRequest = fc.record({
  via: fc.constant("inject" as const),
  method: fc.constantFrom("QUERY", "PROPFIND", "SEARCH", "LOCK"),
  path,
  headers,
  body: fc.option(junkBody, { nil: undefined }),
});

const fuzzRequest: fc.Arbitrary<FuzzRequest> = fc.oneof(
  { weight: 8, arbitrary: completionRequest },
  { weight: 3, arbitrary: junkRequest },
  { weight: 4, arbitrary: anyRequest },
  { weight: 1, arbitrary: injectOnlyRequest },
);

// ---------------------------------------------------------------------------------------------
// Sending and checking

async function withHangGuard<T>(what: string, run: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const abort = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const hang = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      abort.abort();
      reject(new Error(`no answer to ${what} within ${HANG_MS / 1000} s`));
    }, HANG_MS);
  });
  try {
    return await Promise.race([run(abort.signal), hang]);
  } finally {
    clearTimeout(timer);
  }
}

async function send(request: FuzzRequest): Promise<Answer> {
  const what = `${request.method} ${request.path} via ${request.via}`;
  if (request.via === "inject") {
    return withHangGuard(what, async () => {
      const response = await server.radixgate.app.inject({
        method: request.method as "GET",
        url: request.path,
        headers: request.headers,
        ...(request.body !== undefined ? { payload: request.body } : {}),
      });
      return { status: response.statusCode, contentType: String(response.headers["content-type"] ?? ""), text: response.body };
    });
  }
  return withHangGuard(what, async (signal) => {
    const response = await fetch(`${origin}${request.path}`, { method: request.method, headers: request.headers, body: request.body, signal });
    return { status: response.status, contentType: response.headers.get("content-type") ?? "", text: await response.text() };
  });
}

/** Why an answer breaks the property, or undefined when it holds. */
function violation(request: FuzzRequest, answer: Answer): string | undefined {
  if (answer.status >= 500) return `status ${answer.status}`;
  if (answer.status < 200 || (answer.status >= 300 && answer.status < 400)) return `status ${answer.status}`;
  if (request.method === "HEAD") return undefined;
  if (answer.status < 300) {
    // A stream that started must not end in a server-side error event.
    if (answer.contentType.startsWith("text/event-stream")) {
      if (!answer.text.trimEnd().endsWith("data: [DONE]")) return "a stream without its closing [DONE]";
      if (/"type":"server_error"/.test(answer.text)) return "a stream that ended with a server error";
    }
    return undefined;
  }
  let body: unknown;
  try {
    body = JSON.parse(answer.text);
  } catch {
    return "an error body that is not JSON";
  }
  const error = (body as { error?: Record<string, unknown> } | null)?.error;
  if (error === undefined || error === null || typeof error !== "object") return "no `error` object";
  if (Object.keys(body as object).length !== 1) return "keys beside `error`";
  if (typeof error.message !== "string" || error.message.length === 0) return "`error.message` is not a non-empty string";
  if (typeof error.type !== "string") return "`error.type` is not a string";
  if (typeof error.code !== "string") return "`error.code` is not a string";
  if (error.param !== null && typeof error.param !== "string") return "`error.param` is neither a string nor null";
  if (!answer.contentType.startsWith("application/json")) return `an error sent as ${answer.contentType || "no content type"}`;
  return undefined;
}

/** Error codes the generators must reach in a run: a run that reaches none of them tests little. */
const CODES_REACHED = [
  "invalid_request",
  "invalid_json",
  "unsupported_parameter",
  "unsupported_media_type",
  "route_not_found",
  "method_not_allowed",
  "json_too_deep",
  "invalid_url",
];

describe("fuzzing the HTTP surface", () => {
  it(`answers ${RUNS} generated requests with a 2xx or an OpenAI-shaped 4xx, never a 5xx or a hang, and still serves afterwards`, async () => {
    const seen = new Map<string, number>();
    const tally = (key: string) => seen.set(key, (seen.get(key) ?? 0) + 1);
    const seed = process.env.FUZZ_SEED === undefined ? undefined : Number(process.env.FUZZ_SEED);
    await fc.assert(
      fc.asyncProperty(fuzzRequest, async (request) => {
        const answer = await send(request);
        tally("sent");
        tally(request.via);
        tally(answer.status < 300 ? "2xx" : String(answer.status));
        const code = /"code":"([a-z_]+)"/.exec(answer.text)?.[1];
        if (code && answer.status >= 400) tally(code);
        const broken = violation(request, answer);
        if (broken) throw new Error(`${broken}: ${answer.status} ${answer.text.slice(0, 400)}`);
      }),
      // No shrinking: the server's state is shared, so a smaller retry could meet a worker
      // still restarting from the request that failed; the report names that request itself.
      { numRuns: RUNS, endOnFailure: true, ...(seed !== undefined ? { seed } : {}) },
    );
    console.info(`fuzz: ${JSON.stringify(Object.fromEntries([...seen].sort()))}`);
    expect(seen.get("sent")).toBe(RUNS);
    // The run covered what it claims: real HTTP, answered requests, and the error paths.
    expect(seen.get("http")).toBeGreaterThan(RUNS / 10);
    expect(seen.get("2xx")).toBeGreaterThan(RUNS / 20);
    for (const code of CODES_REACHED) expect(seen.get(code), code).toBeGreaterThan(0);

    const ok = await server.client.chat.completions.create({ model: TINY_MODEL, messages: [{ role: "user", content: "still there?" }], max_tokens: 3 });
    expect(ok.choices[0]?.message.content?.length).toBeGreaterThan(0);
    expect(ok.usage?.completion_tokens).toBe(3);
    expect(ok.usage?.total_tokens).toBe(ok.usage!.prompt_tokens + 3);
  }, 900_000); // A guard against a wedged run, far above what it needs; no speed is asserted.

  // Found by the fuzz above; the fault is in the worker's sampling, not in the HTTP layer.
  // Last in the file: it stops the worker while that bug stands.
  it("keeps the worker alive for a near-zero temperature with top_p 1 and a JSON grammar", async () => {
    const answer = await send({
      via: "inject",
      method: "POST",
      path: "/v1/chat/completions",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: TINY_MODEL,
        messages: [{ role: "user", content: "hi" }],
        max_tokens: 2,
        temperature: 1e-39,
        top_p: 1,
        response_format: { type: "json_object" },
      }),
    });
    expect(answer.text).not.toMatch(/worker_failed/);
    expect(answer.status).toBe(200);
  });
});
