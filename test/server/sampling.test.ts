// Sampling controls end to end on the tiny model: presence/frequency penalties and
// response_format grammars. Its weights are random, so these test the mechanics (the
// penalty moves the greedy choice, the grammar forces the syntax), not the quality.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ENGINES, postRaw, startTestServer, TINY_MODEL, type TestServer } from "../helpers/server.js";

let server: TestServer;

/** Distinct words over words: the tiny model's text is vocabulary words separated by spaces. */
function variety(text: string): number {
  const words = text.split(/\s+/).filter(Boolean);
  return new Set(words).size / words.length;
}

async function chatText(body: Record<string, unknown>): Promise<{ text: string; finish: string; status: number; json: Record<string, unknown> }> {
  const response = await postRaw(server.baseURL, "/chat/completions", JSON.stringify({ model: TINY_MODEL, temperature: 0, ...body }));
  const choice = (response.json.choices as { message: { content: string }; finish_reason: string }[] | undefined)?.[0];
  return { text: choice?.message.content ?? "", finish: choice?.finish_reason ?? "", status: response.status, json: response.json };
}

describe.each(ENGINES)("the %s engine", (engine) => {
  beforeAll(async () => {
    server = await startTestServer({ workers: 1, slots: 2, engine });
  });

  afterAll(async () => {
    await server?.close();
  });

  describe("presence_penalty and frequency_penalty", () => {
    const prompts = ["the the the the", "Count the files.", "hello"];

    it("leave the greedy output exactly as it is at 0", async () => {
      for (const prompt of prompts) {
        const plain = await server.client.completions.create({ model: TINY_MODEL, prompt, max_tokens: 48, temperature: 0 });
        const zero = await server.client.completions.create({
          model: TINY_MODEL,
          prompt,
          max_tokens: 48,
          temperature: 0,
          presence_penalty: 0,
          frequency_penalty: 0,
        });
        expect(zero.choices[0]?.text).toBe(plain.choices[0]?.text);
      }
    });

    it("move the greedy output on /v1/completions: positive ones away from repeats, negative ones into a loop", async () => {
      for (const prompt of prompts) {
        const request = { model: TINY_MODEL, prompt, max_tokens: 64, temperature: 0 };
        const plain = (await server.client.completions.create(request)).choices[0]!.text;
        const discouraged = (await server.client.completions.create({ ...request, presence_penalty: 2, frequency_penalty: 2 })).choices[0]!.text;
        const encouraged = (await server.client.completions.create({ ...request, presence_penalty: -2, frequency_penalty: -2 })).choices[0]!.text;
        expect(discouraged).not.toBe(plain);
        expect(variety(discouraged)).toBeGreaterThanOrEqual(variety(plain));
        expect(encouraged).not.toBe(plain);
        // -2 on everything already said: a handful of words, repeated.
        expect(variety(encouraged)).toBeLessThan(0.25);
        expect(variety(encouraged)).toBeLessThan(variety(plain));
      }
    });

    it("move the greedy output on /v1/chat/completions too, each penalty on its own", async () => {
      const messages = [{ role: "user", content: "Count the files." }];
      const plain = await chatText({ messages, max_tokens: 64 });
      const presence = await chatText({ messages, max_tokens: 64, presence_penalty: -2 });
      const frequency = await chatText({ messages, max_tokens: 64, frequency_penalty: -2 });
      expect(presence.status).toBe(200);
      expect(frequency.status).toBe(200);
      expect(variety(presence.text)).toBeLessThan(variety(plain.text));
      expect(variety(frequency.text)).toBeLessThan(variety(plain.text));
    });

    for (const [endpoint, base] of [
      ["/chat/completions", { messages: [{ role: "user", content: "hi" }] }],
      ["/completions", { prompt: "hi" }],
    ] as const) {
      for (const [param, value] of [
        ["presence_penalty", 2.5],
        ["frequency_penalty", -2.01],
        ["presence_penalty", "high"],
      ] as const) {
        it(`refuses ${param} = ${JSON.stringify(value)} on ${endpoint} with a 400 naming it`, async () => {
          const response = await postRaw(server.baseURL, endpoint, JSON.stringify({ model: TINY_MODEL, max_tokens: 2, ...base, [param]: value }));
          expect(response.status).toBe(400);
          expect(response.json.error?.code).toBe("invalid_request");
          expect(response.json.error?.param).toBe(param);
          expect(response.json.error?.message).toMatch(typeof value === "number" ? new RegExp(`\`${param}\` must be (<=|>=) -?2`) : /must be number or null/);
        });
      }
    }
  });

  /**
   * True when `text` can still be completed into valid JSON: what a grammar-constrained
   * generation cut short by max_tokens must be. A small JSON scanner that accepts a truncated end.
   */
  function isJsonPrefix(text: string): boolean {
    const stack: ("{" | "[")[] = [];
    type Expect = "value" | "valueOrEnd" | "key" | "keyOrEnd" | "colon" | "commaOrEnd" | "end";
    let want = "value" as Expect;
    let i = 0;
    const afterValue = () => {
      want = stack.length === 0 ? "end" : "commaOrEnd";
    };
    /** Scans a string from its opening quote; false if invalid, "open" if the text ends inside it. */
    const scanString = (): boolean | "open" => {
      i++;
      while (i < text.length) {
        const c = text[i]!;
        if (c === '"') {
          i++;
          return true;
        }
        if (c.charCodeAt(0) < 0x20) return false;
        if (c === "\\") {
          const escaped = text.slice(i + 1, i + 6);
          if (escaped.length === 0) return "open";
          if ('"\\/bfnrt'.includes(escaped[0]!)) i += 2;
          else if (escaped[0] === "u") {
            const hex = escaped.slice(1);
            if (!/^[0-9a-fA-F]*$/.test(hex)) return false;
            if (hex.length < 4) return "open";
            i += 6;
          } else return false;
          continue;
        }
        i++;
      }
      return "open";
    };
    while (i < text.length) {
      const c = text[i]!;
      if (" \t\n\r".includes(c)) {
        i++;
        continue;
      }
      switch (want) {
        case "end":
          return false;
        case "colon":
          if (c !== ":") return false;
          i++;
          want = "value";
          continue;
        case "commaOrEnd":
          if (c === ",") {
            i++;
            want = stack.at(-1) === "{" ? "key" : "value";
            continue;
          }
          if ((c === "}" && stack.at(-1) === "{") || (c === "]" && stack.at(-1) === "[")) {
            i++;
            stack.pop();
            afterValue();
            continue;
          }
          return false;
        case "key":
        case "keyOrEnd": {
          if (c === "}" && want === "keyOrEnd") {
            i++;
            stack.pop();
            afterValue();
            continue;
          }
          if (c !== '"') return false;
          const scanned = scanString();
          if (scanned !== true) return scanned === "open";
          want = "colon";
          continue;
        }
        case "value":
        case "valueOrEnd": {
          if (c === "]" && want === "valueOrEnd") {
            i++;
            stack.pop();
            afterValue();
            continue;
          }
          if (c === "{" || c === "[") {
            stack.push(c);
            i++;
            want = c === "{" ? "keyOrEnd" : "valueOrEnd";
            continue;
          }
          if (c === '"') {
            const scanned = scanString();
            if (scanned !== true) return scanned === "open";
            afterValue();
            continue;
          }
          const number = /^[-+0-9.eE]+/.exec(text.slice(i))?.[0];
          if (number) {
            i += number.length;
            const complete = (n: string) => /^-?(0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?$/.test(n);
            if (i === text.length) return [number, `${number}0`].some(complete);
            if (!complete(number)) return false;
            afterValue();
            continue;
          }
          const word = /^[a-z]+/.exec(text.slice(i))?.[0] ?? "";
          const literal = ["true", "false", "null"].find((candidate) => candidate.startsWith(word) && word.length > 0);
          if (!literal) return false;
          i += word.length;
          if (i === text.length) return true;
          if (word !== literal) return false;
          afterValue();
          continue;
        }
      }
    }
    return true;
  }

  describe("isJsonPrefix (the test's own checker)", () => {
    it("accepts truncated JSON and refuses what no continuation can fix", () => {
      for (const ok of ['{"a": tr', '{"a": [1, 2.', '{"a": "x\\u00', "{", '{"a": {"b": null}, "c": -', '{"k": 1e', '{"a": true}', "[]"])
        expect(isJsonPrefix(ok), ok).toBe(true);
      for (const bad of ['{"a" 1', "{a", '{"a": 01', '{"a": trux', '{"a": 1}}', '{"a": 1} x', '["a": 1]', '{"a": "\\x"'])
        expect(isJsonPrefix(bad), bad).toBe(false);
    });
  });

  describe("response_format", () => {
    const messages = [{ role: "user", content: "Reply in JSON." }];
    const schema = { type: "object", properties: { a: { type: "boolean" } }, required: ["a"], additionalProperties: false };

    it("leaves the output as it is with {type: text}", async () => {
      const plain = await chatText({ messages, max_tokens: 16 });
      const text = await chatText({ messages, max_tokens: 16, response_format: { type: "text" } });
      expect(text.text).toBe(plain.text);
      // Without a grammar the tiny model writes words, not JSON: what follows is the grammar's doing.
      expect(isJsonPrefix(plain.text)).toBe(false);
    });

    it("json_object: the output is a JSON object, or one cut short by max_tokens", async () => {
      for (const temperature of [0, 1]) {
        const { text, finish, status } = await chatText({ messages, max_tokens: 48, temperature, seed: 7, response_format: { type: "json_object" } });
        expect(status).toBe(200);
        expect(text.trimStart().startsWith("{"), text).toBe(true);
        expect(isJsonPrefix(text), text).toBe(true);
        if (finish === "stop") expect(() => JSON.parse(text)).not.toThrow();
        else expect(finish).toBe("length");
      }
    });

    it("json_schema: the output parses and matches the schema, greedy and sampled, streamed too", async () => {
      const responseFormat = { type: "json_schema", json_schema: { name: "flag", schema, strict: true } };
      for (const seed of [1, 2, 3]) {
        const { text, finish } = await chatText({ messages, max_tokens: 64, temperature: seed === 1 ? 0 : 1, seed, response_format: responseFormat });
        expect(finish).toBe("stop");
        const parsed = JSON.parse(text) as Record<string, unknown>;
        expect(Object.keys(parsed)).toEqual(["a"]);
        expect(typeof parsed.a).toBe("boolean");
      }
      const stream = await server.client.chat.completions.create({
        model: TINY_MODEL,
        messages: [{ role: "user", content: "stream it" }],
        max_tokens: 64,
        temperature: 0,
        stream: true,
        response_format: { type: "json_schema", json_schema: { name: "flag", schema } },
      });
      let streamed = "";
      for await (const chunk of stream) streamed += chunk.choices[0]?.delta.content ?? "";
      expect(typeof (JSON.parse(streamed) as { a: unknown }).a).toBe("boolean");
    });

    it("json_schema: anyOf and type lists (OpenAI's nullable spelling) are honoured, integers are whole numbers", async () => {
      const nullable = {
        type: "object",
        properties: { n: { anyOf: [{ type: "integer" }, { type: "null" }] }, s: { type: ["string", "null"], maxLength: 3 }, e: { enum: ["x", "y"] } },
        required: ["n", "s", "e"],
        additionalProperties: false,
      };
      // Seeds 2 to 4 drew `0E39...` and `22E94...` (Infinity to a JSON parser) from node-llama-cpp's own integer rule.
      for (const seed of [1, 2, 3, 4]) {
        const { text, finish } = await chatText({
          messages,
          max_tokens: 96,
          temperature: 1,
          seed,
          response_format: { type: "json_schema", json_schema: { name: "nullable", schema: nullable } },
        });
        expect(finish, text).toBe("stop");
        const parsed = JSON.parse(text) as { n: unknown; s: unknown; e: unknown };
        expect(parsed.n === null || Number.isInteger(parsed.n), text).toBe(true);
        expect(parsed.s === null || (typeof parsed.s === "string" && parsed.s.length <= 3), text).toBe(true);
        expect(["x", "y"]).toContain(parsed.e);
      }
    });

    it("works on /v1/completions as well", async () => {
      const response = await postRaw(
        server.baseURL,
        "/completions",
        JSON.stringify({
          model: TINY_MODEL,
          prompt: "JSON:",
          max_tokens: 64,
          temperature: 0,
          response_format: { type: "json_schema", json_schema: { name: "flag", schema } },
        }),
      );
      expect(response.status).toBe(200);
      const text = (response.json.choices as { text: string }[])[0]!.text;
      expect(typeof (JSON.parse(text) as { a: unknown }).a).toBe("boolean");
    });

    const refusals: { name: string; format: unknown; code: string; param: string; says: RegExp }[] = [
      {
        name: "a keyword the grammar cannot enforce",
        format: { type: "json_schema", json_schema: { name: "x", schema: { type: "object", properties: { id: { type: "string", pattern: "^[a-z]+$" } } } } },
        code: "invalid_request",
        param: "response_format.json_schema.schema",
        says: /schema\.properties\.id uses `pattern`, which the JSON-schema grammar cannot enforce/,
      },
      {
        name: "a schema without a type",
        format: { type: "json_schema", json_schema: { name: "x", schema: { type: "object", properties: { v: {} } } } },
        code: "invalid_request",
        param: "response_format.json_schema.schema",
        says: /properties\.v needs a `type`/,
      },
      {
        name: "a string format node-llama-cpp would turn into an empty string",
        format: { type: "json_schema", json_schema: { name: "x", schema: { type: "string", format: "email" } } },
        code: "invalid_request",
        param: "response_format.json_schema.schema",
        says: /format "email" is not supported/,
      },
      {
        name: "a dangling $ref",
        format: { type: "json_schema", json_schema: { name: "x", schema: { type: "object", properties: { v: { $ref: "#/$defs/missing" } } } } },
        code: "invalid_request",
        param: "response_format.json_schema.schema",
        says: /\$ref "#\/\$defs\/missing" must point to a definition/,
      },
      // Passed on to the worker: node-llama-cpp itself refuses a non-scalar literal (llama-server
      // builds it; its own refusals are tested on the engine: test/engine/llama-server-engine.test.ts).
      ...(engine === "node-llama-cpp"
        ? [
            {
              name: "an enum of objects (node-llama-cpp's own error, from the worker)",
              format: { type: "json_schema", json_schema: { name: "x", schema: { enum: [{ a: 1 }] } } },
              code: "invalid_request",
              param: "response_format.json_schema.schema",
              says: /cannot be turned into a grammar: Unrecognized literal type: object/,
            },
          ]
        : []),
      {
        name: "json_schema without its schema",
        format: { type: "json_schema", json_schema: { name: "x" } },
        code: "invalid_request",
        param: "response_format.json_schema.schema",
        says: /is required when `response_format.type` is "json_schema"/,
      },
      {
        name: "an unknown type",
        format: { type: "grammar", grammar: "root ::= x" },
        code: "unsupported_parameter",
        param: "response_format.type",
        says: /"grammar" is not supported; use one of "text", "json_object", "json_schema"/,
      },
    ];
    for (const refusal of refusals) {
      it(`refuses ${refusal.name} with a 400 naming ${refusal.param}`, async () => {
        for (const stream of [false, true]) {
          const response = await postRaw(
            server.baseURL,
            "/chat/completions",
            JSON.stringify({ model: TINY_MODEL, messages, max_tokens: 4, stream, response_format: refusal.format }),
          );
          expect(response.status).toBe(400);
          expect(response.json.error?.code).toBe(refusal.code);
          expect(response.json.error?.param).toBe(refusal.param);
          expect(response.json.error?.message).toMatch(refusal.says);
        }
      });
    }

    it("keeps serving after refused schemas", async () => {
      const ok = await chatText({ messages, max_tokens: 3 });
      expect(ok.status).toBe(200);
    });
  });
});
