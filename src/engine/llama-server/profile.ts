// The start-up calibration of a llama-server worker, through its HTTP API: the same samples
// the node-llama-cpp worker takes (worker/profile.ts), timed by llama-server itself (its
// `timings`): cold prefills of a few lengths in one slot, prefills on top of the largest
// cached prompt, and decoding; then, where the server keeps slot files (--slot-save-path),
// what a prefix copy costs: a slot saved and restored, timed here, for the smallest and the
// largest prompt. A server without slot files gives no copy samples, and the time model then
// prices a copy as a recompute (the policy never prefers one).
import type { CopySample, DecodeSample, PrefillSample } from "../../scheduler/time-model.js";
import type { ProfileOptions, ProfileResult } from "../wire/protocol.js";
import { profileSizes, repeatsOf, WARM_EXTENDS } from "../wire/profile-plan.js";
import { jsonOf } from "../remote/http-client.js";

interface Timings {
  prompt_n: number;
  prompt_ms: number;
  predicted_per_token_ms: number;
}

export async function profileOverHttp(
  baseURL: string,
  slot: number,
  contextSize: number,
  options: ProfileOptions = {},
): Promise<Pick<ProfileResult, "prefill" | "decode" | "copy" | "totalMs">> {
  const started = performance.now();
  const decodeTokens = Math.max(0, Math.floor(options.decodeTokens ?? 16));
  const sizes = profileSizes(options.sizes, contextSize, decodeTokens);
  const largest = sizes[sizes.length - 1]!;
  const pool = await ordinaryTokens(baseURL, largest + Math.max(...WARM_EXTENDS), options.seed ?? 1);
  let offset = 0;
  const random = (count: number) => {
    const tokens = Array.from({ length: count }, (_, i) => pool[(offset + i) % pool.length]!);
    offset += count;
    return tokens;
  };
  // A remote server started without --slot-save-path refuses slot actions: its slot then keeps
  // the previous prompt, which shares no prefix with the next (each is fresh from the pool).
  const erase = () => post(baseURL, `/slots/${slot}?action=erase`, {}).catch(() => undefined);
  const run = async (prompt: number[], generate: number): Promise<Timings> => {
    const answer = (await post(baseURL, "/completion", {
      prompt,
      id_slot: slot,
      cache_prompt: true,
      n_predict: Math.max(1, generate),
      ignore_eos: true,
      temperature: 0,
    })) as { timings: Timings };
    return answer.timings;
  };
  const prefill: PrefillSample[] = [];
  const decode: DecodeSample[] = [];
  const copy: (CopySample & { bytes: number })[] = [];
  try {
    await erase();
    await run(random(Math.min(8, sizes[0]!)), Math.min(2, decodeTokens));
    for (const n of sizes) {
      const timeDecode = decodeTokens > 1 && (n === sizes[0] || n === largest);
      let best = Number.POSITIVE_INFINITY;
      for (let repeat = 0; repeat < repeatsOf(n); repeat++) {
        await erase();
        const last = repeat === repeatsOf(n) - 1;
        const timed = await run(random(n), timeDecode && last ? decodeTokens : 1);
        best = Math.min(best, timed.prompt_ms);
        if (timeDecode && last) decode.push({ context: n + decodeTokens / 2, msPerToken: timed.predicted_per_token_ms });
      }
      prefill.push({ extend: n, context: n, ms: best });
    }
    // On top of the largest prompt, cached: the slot keeps it across requests.
    const prefix = random(largest);
    await erase();
    await run(prefix, 1);
    for (const extend of WARM_EXTENDS.filter((e) => e < largest && largest + e + 2 <= contextSize)) {
      let best = Number.POSITIVE_INFINITY;
      for (let repeat = 0; repeat < repeatsOf(extend); repeat++) {
        const timed = await run([...prefix, ...random(extend)], 1);
        best = Math.min(best, timed.prompt_ms);
      }
      prefill.push({ extend, context: largest + extend, ms: best });
    }
    // A copy: save the slot's state to a file and load it back (what an export and an import do).
    for (const n of [...new Set([sizes[0]!, largest])]) {
      await erase();
      await run(random(n), 1);
      const copyStarted = performance.now();
      const saved = await post(baseURL, `/slots/${slot}?action=save`, { filename: "profile-copy.bin" }).catch(() => undefined);
      if (saved === undefined) break;
      await post(baseURL, `/slots/${slot}?action=restore`, { filename: "profile-copy.bin" });
      copy.push({ tokens: n, ms: performance.now() - copyStarted, bytes: (saved as { n_written?: number }).n_written ?? 0 });
    }
  } finally {
    await erase();
  }
  return { prefill, decode, copy, totalMs: performance.now() - started };
}

const post = (baseURL: string, path: string, body: unknown) => jsonOf(`${baseURL}${path}`, "POST", body);

/** At least `count` ordinary tokens: random lowercase words, tokenized by the server (seeded). */
async function ordinaryTokens(baseURL: string, count: number, seed: number): Promise<number[]> {
  let state = seed >>> 0;
  const next = () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 4294967296;
  };
  const words: string[] = [];
  for (let i = 0; i < count; i++) {
    const length = 2 + Math.floor(next() * 7);
    words.push(Array.from({ length }, () => String.fromCharCode(97 + Math.floor(next() * 26))).join(""));
  }
  const { tokens } = (await post(baseURL, "/tokenize", { content: words.join(" "), add_special: false })) as { tokens: number[] };
  if (tokens.length === 0) throw new Error("profile: the model tokenized no ordinary text");
  return tokens;
}
