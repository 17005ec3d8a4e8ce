// Bad input gets a 400 (or 404/413) in OpenAI's error shape naming the field, and the server
// keeps serving afterwards.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
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
  { name: "missing messages", body: JSON.stringify({ model: TINY_MODEL }), status: 400, code: "invalid_request", param: "messages", says: /`messages` is required/ },
  { name: "missing model", body: JSON.stringify({ messages: user }), status: 400, code: "invalid_request", param: "model", says: /`model` is required/ },
  { name: "messages of the wrong type", body: JSON.stringify({ model: TINY_MODEL, messages: "hi" }), status: 400, code: "invalid_request", param: "messages", says: /must be array; got string/ },
  { name: "temperature of the wrong type", body: JSON.stringify({ model: TINY_MODEL, messages: user, temperature: "hot" }), status: 400, code: "invalid_request", param: "temperature", says: /must be number or null; got string "hot"/ },
  { name: "max_tokens below 1", body: JSON.stringify({ model: TINY_MODEL, messages: user, max_tokens: 0 }), status: 400, code: "invalid_request", param: "max_tokens", says: /max_tokens/ },
  { name: "an unknown role", body: JSON.stringify({ model: TINY_MODEL, messages: [{ role: "wizard", content: "x" }] }), status: 400, code: "invalid_request", param: "messages[0].role", says: /must be one of "system", "developer", "user", "assistant", "tool"; got string "wizard"/ },
  { name: "a message without content", body: JSON.stringify({ model: TINY_MODEL, messages: [{ role: "user" }] }), status: 400, code: "invalid_request", param: "messages[0].content", says: /is required/ },
  { name: "an image part", body: JSON.stringify({ model: TINY_MODEL, messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "http://x" } }] }] }), status: 400, code: "invalid_request", param: "messages[0].content[0].type", says: /must be one of "text"/ },
  { name: "n > 1", body: JSON.stringify({ model: TINY_MODEL, messages: user, n: 3 }), status: 400, code: "unsupported_parameter", param: "n", says: /`n` is not supported/ },
  { name: "tools", body: JSON.stringify({ model: TINY_MODEL, messages: user, tools: [{ type: "function", function: { name: "f" } }] }), status: 400, code: "unsupported_parameter", param: "tools", says: /`tools` is not supported/ },
  { name: "a tool message", body: JSON.stringify({ model: TINY_MODEL, messages: [{ role: "tool", content: "x", tool_call_id: "1" }] }), status: 400, code: "unsupported_parameter", param: "messages[0].role", says: /tool calling is not supported/ },
  { name: "an unknown model", body: JSON.stringify({ model: "gpt-9", messages: user }), status: 404, code: "model_not_found", param: "model", says: /"gpt-9" is not served here\. Served models: radixgate-tiny/ },
  { name: "an unknown pinned worker", body: JSON.stringify({ model: TINY_MODEL, messages: user }), status: 400, code: "worker_not_found", param: "x-radixgate-worker", says: /"w9"/ },
  { name: "a prompt longer than a slot", body: JSON.stringify({ model: TINY_MODEL, messages: [{ role: "user", content: "files ".repeat(2500) }] }), status: 413, code: "context_length_exceeded", param: "messages", says: /The prompt is \d+ tokens but a slot .* holds 2048 tokens/ },
];

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

  it("keeps serving after all of the above", async () => {
    for (const testCase of cases) await postRaw(server.baseURL, "/chat/completions", testCase.body);
    const ok = await server.client.chat.completions.create({ model: TINY_MODEL, messages: [{ role: "user", content: "still there?" }], max_tokens: 3 });
    expect(ok.choices[0]?.message.content?.length).toBeGreaterThan(0);
    expect(ok.usage?.completion_tokens).toBe(3);
  });
});
