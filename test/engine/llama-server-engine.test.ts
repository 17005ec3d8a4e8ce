// The llama-server engine against a real llama-server (the build `npm run build:llama-server`
// made from node-llama-cpp's bundled llama.cpp) on the tiny model: the host's record of what
// each slot holds is exact (what it predicts as cached when it sends a request is what the
// server then reports it reused), cancel works, the profile feeds the time model, and what
// the engine cannot do is refused naming the request field.
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ResponseFormatError, UnsupportedOnEngineError, WorkerDiedError } from "../../src/engine/host/worker-errors.js";
import { cachedLlamaServerPath, findLlamaServer } from "../../src/engine/llama-server/binary.js";
import { LlamaServerEngine } from "../../src/engine/llama-server/llama-server-engine.js";
import type { SamplingParams } from "../../src/contract/sampling.js";
import { ensureModel } from "../../src/presets/make-model.js";
import { TimeModel } from "../../src/scheduler/time-model.js";
import { until } from "../helpers/until.js";
import { workerInit } from "../helpers/worker-init.js";

/** Whether a process of that pid exists (and is not a zombie waiting for its parent). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, "utf8"));
}

const greedy = (maxTokens: number, extra: Partial<SamplingParams> = {}): SamplingParams => ({ maxTokens, temperature: 0, stop: [], ...extra });

/** Deterministic ordinary token ids of the tiny model (ids 261-1260: past its specials, inside its 1579-token vocabulary). */
const tokensOf = (seed: number, count: number) => Array.from({ length: count }, (_, i) => 261 + ((seed * 7919 + i * 104729) % 1000));

describe("the llama-server engine, its RAM prompt cache off (an exact tree)", () => {
  let engine: LlamaServerEngine;

  beforeAll(async () => {
    const modelPath = await ensureModel("tiny");
    engine = new LlamaServerEngine(workerInit(modelPath, { workerId: "ls-test", slots: 2, contextSize: 1024, threadPoll: 7 }), {
      binary: await findLlamaServer(undefined),
      cacheRamMiB: 0,
    });
    await engine.start();
  });

  afterAll(async () => {
    await engine?.close();
  });

  it("loads with the slots and context asked for, in a process of its own", () => {
    expect(engine.info).toMatchObject({ slots: 2, contextSize: 1024, binary: "llama-server" });
    expect(engine.pid).toBeTypeOf("number");
    expect(engine.pid).not.toBe(process.pid);
    // The model's compute settings are llama-server's flags: threadPoll is its --poll.
    const argv = readFileSync(`/proc/${engine.pid}/cmdline`, "utf8").split("\0");
    expect(argv.slice(argv.indexOf("--poll"), argv.indexOf("--poll") + 2)).toEqual(["--poll", "7"]);
  });

  it("knows what each slot holds: the cached prefix it predicts is the one the server reuses, turn after turn", async () => {
    const seen: { predicted: number; reused: number; promptTokens: number }[] = [];
    const run = async (tokens: number[], maxTokens: number) => {
      let predicted = -1;
      const result = await engine.generate("r", tokens, greedy(maxTokens), { onStarted: (event) => (predicted = event.cachedTokens) });
      seen.push({ predicted, reused: result.cachedTokens, promptTokens: tokens.length });
      return result;
    };
    // Two conversations taking turns on two slots; each turn sends the last prompt, the
    // answer's tokens as the slot holds them, and a new message.
    const conversations = [tokensOf(1, 120), tokensOf(2, 90)];
    for (let turn = 0; turn < 3; turn++) {
      for (const c of [0, 1]) {
        const prompt = [...conversations[c]!, ...tokensOf(10 * turn + c + 3, 20)];
        const result = await run(prompt, 4);
        conversations[c] = [...prompt, ...engine.heldTokens(result.slot).slice(prompt.length)];
      }
    }
    // A prompt unlike any slot: nothing cached, predicted or reused.
    await run(tokensOf(500, 60), 2);
    expect(seen.length).toBe(7);
    for (const entry of seen) expect(entry.predicted).toBe(entry.reused);
    expect(seen.filter((entry) => entry.reused > 100).length).toBe(4);
    expect(seen[seen.length - 1]!.reused).toBe(0);
  });

  it("runs each request in the slot its local scheduler chose, not in the one llama-server would pick", async () => {
    const short = await engine.generate("short", tokensOf(600, 30), greedy(1));
    const long = tokensOf(601, 200);
    const held = await engine.generate("long", long, greedy(1));
    expect(held.slot).not.toBe(short.slot);
    // Shares 30 tokens with the long slot: too little of either to count as the same
    // conversation here (half), so the least recently used slot takes it; llama-server's own
    // choice (any share above 10 %) would be the long slot.
    let predicted = -1;
    const result = await engine.generate("partly", [...long.slice(0, 30), ...tokensOf(602, 70)], greedy(1), {
      onStarted: (event) => (predicted = event.cachedTokens),
    });
    expect(result.slot).toBe(short.slot);
    expect(predicted).toBe(0);
    expect(result.cachedTokens).toBe(0);
  });

  it("counts the generated tokens in the slot: a prompt that continues the answer reuses it too", async () => {
    const prompt = tokensOf(700, 80);
    const first = await engine.generate("answer", prompt, greedy(12, { logprobs: 0 }));
    expect(first.completionTokens).toBe(12);
    let predicted = -1;
    // Continue with the answer tokens the slot now holds after the prompt: the server gave
    // them back as ids; the engine kept them.
    const stats = await engine.stats();
    const held = stats.slots.find((slot) => slot.slot === first.slot)!;
    // All but the last answer token, which was sampled but never evaluated.
    expect(held.tokens).toBe(80 + 11);
    const answerIds = engine.heldTokens(first.slot).slice(prompt.length);
    const next = await engine.generate("continue", [...prompt, ...answerIds, ...tokensOf(701, 10)], greedy(2), {
      onStarted: (event) => (predicted = event.cachedTokens),
    });
    expect(predicted).toBeGreaterThanOrEqual(80 + 11);
    expect(next.cachedTokens).toBe(predicted);
  });

  it("reports logprobs per generated token with the number of candidates asked for", async () => {
    const result = await engine.generate("lp", tokensOf(800, 30), greedy(6, { logprobs: 3 }));
    expect(result.logprobs).toHaveLength(result.completionTokens);
    for (const entry of result.logprobs!) {
      expect(entry.top).toHaveLength(3);
      expect(entry.logprob).toBeLessThanOrEqual(0);
      // Greedy: the chosen token is the most likely candidate.
      expect(entry.top[0]!.logprob).toBeCloseTo(entry.logprob, 5);
    }
  });

  it("cancels a running generation by its signal; the slot serves the next request", async () => {
    const abort = new AbortController();
    let pieces = 0;
    const running = engine.generate("long", tokensOf(900, 40), greedy(900), {
      signal: abort.signal,
      onText: () => {
        pieces++;
        if (pieces === 5) abort.abort();
      },
    });
    const result = await running;
    expect(result.finishReason).toBe("cancelled");
    expect(result.completionTokens).toBeLessThan(900);
    const after = await engine.generate("after", tokensOf(901, 20), greedy(3));
    expect(after).toMatchObject({ finishReason: "length", completionTokens: 3 });
  });

  it("profiles over HTTP: cold and warm prefills and decoding, which the time model fits", async () => {
    const profile = await engine.profile({ sizes: [32, 128, 256], decodeTokens: 8 });
    expect(profile.prefill.filter((sample) => sample.extend === sample.context).map((sample) => sample.extend)).toEqual([32, 128, 256]);
    expect(profile.prefill.some((sample) => sample.context > sample.extend)).toBe(true);
    expect(profile.decode.length).toBeGreaterThan(0);
    for (const sample of profile.prefill) expect(sample.ms).toBeGreaterThan(0);
    // A copy (slot saved and restored) for the smallest and the largest prompt: the time model prices copies from them.
    expect(profile.copy.map((sample) => sample.tokens)).toEqual([32, 256]);
    for (const sample of profile.copy) expect(sample.ms).toBeGreaterThan(0);
    const coefficients = TimeModel.fit(profile.prefill, profile.decode, profile.copy);
    expect(new TimeModel(coefficients).prefillMs(256, 256)).toBeGreaterThan(0);
    // The profile leaves its slot empty.
    expect((await engine.stats()).slots.find((slot) => slot.slot === profile.slot)!.tokens).toBe(0);
  });

  it("takes a schema llama-server cannot turn into a grammar as the request's fault, with the server's reason", async () => {
    const refused = engine.generate(
      "schema",
      tokensOf(940, 10),
      greedy(4, { responseFormat: { type: "json_schema", schema: { $ref: "#/definitions/absent" } } }),
    );
    await expect(refused).rejects.toBeInstanceOf(ResponseFormatError);
    await expect(refused).rejects.toThrow(/Error resolving ref #\/definitions\/absent/);
    // A schema it can build constrains the output.
    const object = await engine.generate("object", tokensOf(941, 10), greedy(24, { responseFormat: { type: "json_object" } }));
    expect(object.text.trimStart().startsWith("{")).toBe(true);
  });

  it("refuses a required tool call when it was given no way to build its grammar, naming tool_choice", async () => {
    const refused = engine.generate(
      "tools",
      tokensOf(950, 10),
      greedy(4, {
        toolCalls: {
          syntax: { kind: "generic" } as never,
          functions: [{ name: "f", parameters: { type: "object", properties: {} } }] as never,
          parallel: false,
        },
      }),
    );
    await expect(refused).rejects.toBeInstanceOf(UnsupportedOnEngineError);
    await expect(refused).rejects.toMatchObject({ param: "tool_choice" });
  });

  it("dies for real when its process is killed, failing what ran on it, and restarts empty", async () => {
    const running = engine.generate("doomed", tokensOf(960, 30), greedy(900));
    await new Promise((resolve) => setTimeout(resolve, 200));
    const died = engine.died;
    process.kill(engine.pid!, "SIGKILL");
    await expect(running).rejects.toBeInstanceOf(WorkerDiedError);
    await expect(died).resolves.toMatch(/SIGKILL/);
    await expect(engine.generate("down", tokensOf(961, 5), greedy(1))).rejects.toBeInstanceOf(WorkerDiedError);
    await engine.restart();
    expect((await engine.stats()).slots.every((slot) => slot.tokens === 0)).toBe(true);
    expect((await engine.generate("back", tokensOf(962, 10), greedy(2))).completionTokens).toBe(2);
  });
});

describe("the llama-server engine with its RAM prompt cache (the default)", () => {
  let engine: LlamaServerEngine;

  beforeAll(async () => {
    engine = new LlamaServerEngine(workerInit(await ensureModel("tiny"), { workerId: "ls-cache", slots: 2, contextSize: 1024 }), {
      binary: await findLlamaServer(undefined),
    });
    await engine.start();
  });

  afterAll(async () => {
    await engine?.close();
  });

  it("finds an evicted prompt in RAM: more cached than the host predicted, never less", async () => {
    const first = tokensOf(1100, 150);
    await engine.generate("a", first, greedy(2));
    await engine.generate("b", tokensOf(1101, 150), greedy(2));
    // Evicts the least recently used slot: the first prompt's.
    await engine.generate("c", tokensOf(1102, 150), greedy(2));
    let predicted = -1;
    const again = await engine.generate("a again", [...first, ...tokensOf(1103, 20)], greedy(2), { onStarted: (event) => (predicted = event.cachedTokens) });
    expect(predicted).toBe(0);
    expect(again.cachedTokens).toBeGreaterThanOrEqual(first.length);
  });
});

describe("prefix copies between llama-server workers of one host", () => {
  const engines: LlamaServerEngine[] = [];

  beforeAll(async () => {
    const modelPath = await ensureModel("tiny");
    const binary = await findLlamaServer(undefined);
    for (const workerId of ["ls-from", "ls-to"]) {
      const engine = new LlamaServerEngine(workerInit(modelPath, { workerId, slots: 2, contextSize: 1024 }), { binary, cacheRamMiB: 0 });
      await engine.start();
      engines.push(engine);
    }
  });

  afterAll(async () => {
    await Promise.allSettled(engines.map((engine) => engine.close()));
  });

  it("saves a slot's prefix on one worker and restores it on another, which then reuses it", async () => {
    const [from, to] = engines as [LlamaServerEngine, LlamaServerEngine];
    const prefix = tokensOf(41, 150);
    await from.generate("r", prefix, greedy(2));
    // Nobody holds this one: nothing to copy.
    expect(await from.exportPrefix(tokensOf(42, 50))).toBeNull();
    const exported = await from.exportPrefix(prefix);
    expect(exported).not.toBeNull();
    expect(exported!.tokens).toBeGreaterThanOrEqual(150);
    expect(existsSync(exported!.file)).toBe(true);
    expect(await to.importState(exported!.file)).toEqual({ tokens: exported!.tokens });
    // The exported files are gone once taken in.
    expect(existsSync(exported!.file)).toBe(false);
    let predicted = -1;
    const result = await to.generate("r", [...prefix, ...tokensOf(43, 10)], greedy(2), { onStarted: (event) => (predicted = event.cachedTokens) });
    // The server's own count of reused tokens: the prefix came with the copy.
    expect(result.cachedTokens).toBeGreaterThanOrEqual(149);
    expect(predicted).toBe(result.cachedTokens);
  });
});

describe("a host killed outright", () => {
  it("takes its llama-server processes with it (parent-death signal)", async () => {
    const host = spawn(process.execPath, ["--import", "tsx", "test/helpers/llama-server-host.ts", await ensureModel("tiny")], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    const line = await new Promise<string>((resolve, reject) => {
      let out = "";
      host.stdout!.on("data", (chunk: Buffer) => {
        out += chunk.toString();
        if (out.includes("\n")) resolve(out.split("\n")[0]!);
      });
      host.once("exit", (code) => reject(new Error(`the host exited with ${code} before its server started`)));
    });
    const { pid } = JSON.parse(line) as { pid: number };
    expect(alive(pid)).toBe(true);
    host.kill("SIGKILL");
    expect(
      await until(
        async () => alive(pid),
        (running) => !running,
      ),
    ).toBe(false);
  });
});

describe("finding the llama-server binary", () => {
  it("names the command that builds it when a configured binary is missing", async () => {
    await expect(findLlamaServer("/nonexistent/llama-server")).rejects.toThrow(/\/nonexistent\/llama-server: no such file/);
  });

  it("keys the cached build by the bundled llama.cpp source", async () => {
    expect(await cachedLlamaServerPath()).toMatch(/radixgate\/llama-server\/[0-9a-f]{16}\/src\/build\/bin\/llama-server$/);
  });
});
