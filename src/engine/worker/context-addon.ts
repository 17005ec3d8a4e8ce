// The llama-context addon (native/llama-context, built by scripts/build-native.mjs): what
// Radixgate adds to a node-llama-cpp context from native code, its compute thread pool
// (compute-pool.ts), decoding and sampling on the worker's own thread (inline-decode.ts) and
// several generation steps per call (native-generation.ts). Loaded once
// per thread or process, only when it was built for the installed node-llama-cpp and this
// Node; otherwise the reason, for the worker to report.
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { PACKAGE_ROOT } from "../../common/package-root.js";

/** What the addon exports; each function throws an Error naming what failed. */
export interface ContextAddon {
  /** Gives the context (node-llama-cpp's LlamaContext._ctx) a CPU thread pool of `threads` whose
   *  helpers spin for the next graph at `poll` (0-100, llama.cpp's `--poll`; absent: its default); its handle. */
  attach(addonContext: unknown, threads: number, poll?: number): unknown;
  /** The polling level a pool was created with. */
  pollOf(handle: unknown): number;
  /** Frees a pool: only once its context is disposed. */
  release(handle: unknown): void;
  /** A handle that decodes the context's batches on the calling thread. */
  inlineDecoder(addonContext: unknown): unknown;
  /** Tokens in the batch the context would decode next. */
  batchTokens(decoder: unknown): number;
  /** Decodes that batch now; throws with the message node-llama-cpp's decodeBatch() rejects with. */
  decode(decoder: unknown): void;
  /** A handle that samples the context's tokens on the calling thread (absent from an addon built before it). */
  inlineSampler?(addonContext: unknown): unknown;
  /** The token node-llama-cpp's sampler object picks from the logits at `batchLogitIndex`, accepted into its state; -1 when none. */
  sample(sampler: unknown, batchLogitIndex: number, addonSampler: unknown): number;
  /** A handle that runs generation steps of up to `maxSequences` sequences of the context on the calling thread (absent from an addon built before it). */
  generator?(addonContext: unknown, maxSequences: number): unknown;
  /** A llama.cpp sampler chain as node-llama-cpp builds it for these settings (greedy at temperature 0). */
  samplerChain?(generator: unknown, temperature: number, topP: number, topK: number, seed: number): unknown;
  /** Runs steps until a sequence ends, `maxSteps` or `maxMs` is reached, `attention[0]` is
   *  raised or `attentionFd` is readable; the steps run (native/llama-context/generate.cpp has
   *  the state layout). */
  generate?(
    generator: unknown,
    chains: unknown[],
    state: Int32Array,
    out: Int32Array,
    maxSteps: number,
    maxMs: number,
    stopTokens: Int32Array,
    attention?: Int32Array,
    attentionFd?: number,
  ): number;
}

interface AddonManifest {
  file: string;
  nodeLlamaCppVersion: string;
  nodeAbi: string;
  platform: string;
}

export const CONTEXT_ADDON_DIR = join(PACKAGE_ROOT, "node_modules", ".cache", "radixgate", "llama-context");

let loaded: { addon: ContextAddon } | { problem: string } | undefined;

/** The built addon, or why there is none to use. */
export function contextAddon(): { addon: ContextAddon } | { problem: string } {
  if (loaded !== undefined) return loaded;
  const manifestPath = join(CONTEXT_ADDON_DIR, "current.json");
  loaded = (() => {
    if (!existsSync(manifestPath)) return { problem: "the addon is not built (npm run build:native)" };
    try {
      const manifest = JSON.parse(readFileSync(manifestPath, "utf8")) as AddonManifest;
      const installed = (JSON.parse(readFileSync(join(PACKAGE_ROOT, "node_modules", "node-llama-cpp", "package.json"), "utf8")) as { version: string }).version;
      if (manifest.nodeLlamaCppVersion !== installed)
        return { problem: `the addon was built for node-llama-cpp ${manifest.nodeLlamaCppVersion}, ${installed} is installed (npm run build:native)` };
      if (manifest.nodeAbi !== process.versions.modules)
        return { problem: `the addon was built for another Node (ABI ${manifest.nodeAbi}, this is ${process.versions.modules}): npm run build:native` };
      return { addon: createRequire(import.meta.url)(join(CONTEXT_ADDON_DIR, manifest.file)) as ContextAddon };
    } catch (error) {
      return { problem: `the addon does not load (${(error as Error).message}): npm run build:native` };
    }
  })();
  return loaded;
}
