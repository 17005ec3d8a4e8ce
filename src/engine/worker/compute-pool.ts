// The CPU threads llama.cpp computes a context's graphs with. node-llama-cpp 3.21.1 gives
// llama.cpp no thread pool, and its prebuilt CPU binaries have no OpenMP, so with more than
// one thread every decode step creates its helper threads and joins them again; in a Node
// process that made two threads decode at half the speed of one (docs/engine.md, "Compute
// threads"). The native addon in native/threadpool attaches a pool that lives as long as
// the context instead. Without the addon (not built: scripts/build-native.mjs says why), or
// with RADIXGATE_NO_THREAD_POOL=1, a worker runs as before, and says so.
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import type { LlamaContext } from "node-llama-cpp";
import { PACKAGE_ROOT } from "../../common/package-root.js";
import type { ComputePoolKind } from "../wire/protocol.js";

export interface ComputePool {
  readonly kind: ComputePoolKind;
  /** Why the pool is per step when more than one thread was asked for. */
  readonly reason?: string;
  /** Frees the pool's threads: only after the context is disposed (it computes on them until then). */
  release(): void;
}

interface PoolAddon {
  attach(addonContext: unknown, threads: number): unknown;
  release(handle: unknown): void;
}

interface PoolManifest {
  file: string;
  nodeLlamaCppVersion: string;
  nodeAbi: string;
  platform: string;
}

const ADDON_DIR = join(PACKAGE_ROOT, "node_modules", ".cache", "radixgate", "threadpool");
const NO_RELEASE = () => {};

let loaded: { addon: PoolAddon } | { problem: string } | undefined;

/** The built addon, when it was built for this node-llama-cpp and this Node. */
function poolAddon(): { addon: PoolAddon } | { problem: string } {
  if (loaded !== undefined) return loaded;
  const manifestPath = join(ADDON_DIR, "current.json");
  loaded = (() => {
    if (!existsSync(manifestPath)) return { problem: "the addon is not built (npm run build:native)" };
    try {
      const manifest = JSON.parse(readFileSync(manifestPath, "utf8")) as PoolManifest;
      const installed = (JSON.parse(readFileSync(join(PACKAGE_ROOT, "node_modules", "node-llama-cpp", "package.json"), "utf8")) as { version: string }).version;
      if (manifest.nodeLlamaCppVersion !== installed)
        return { problem: `the addon was built for node-llama-cpp ${manifest.nodeLlamaCppVersion}, ${installed} is installed (npm run build:native)` };
      if (manifest.nodeAbi !== process.versions.modules)
        return { problem: `the addon was built for another Node (ABI ${manifest.nodeAbi}, this is ${process.versions.modules}): npm run build:native` };
      return { addon: createRequire(import.meta.url)(join(ADDON_DIR, manifest.file)) as PoolAddon };
    } catch (error) {
      return { problem: `the addon does not load (${(error as Error).message}): npm run build:native` };
    }
  })();
  return loaded;
}

/**
 * Gives the context a thread pool of `threads` for as long as it lives. Call right after
 * the context is created, before it computes anything.
 */
export function attachComputePool(context: LlamaContext, threads: number): ComputePool {
  if (threads <= 1) return { kind: "single-thread", release: NO_RELEASE };
  if (process.env.RADIXGATE_NO_THREAD_POOL === "1") return { kind: "per-step", reason: "RADIXGATE_NO_THREAD_POOL=1", release: NO_RELEASE };
  const found = poolAddon();
  if ("problem" in found) return { kind: "per-step", reason: found.problem, release: NO_RELEASE };
  // node-llama-cpp keeps its native context object here (a private field of 3.21.1's
  // LlamaContext; the addon checks that the object is node-llama-cpp's before using it).
  const addonContext = (context as unknown as { _ctx: unknown })._ctx;
  try {
    const handle = found.addon.attach(addonContext, threads);
    let released = false;
    return {
      kind: "persistent",
      release: () => {
        if (released) return;
        released = true;
        found.addon.release(handle);
      },
    };
  } catch (error) {
    return { kind: "per-step", reason: (error as Error).message, release: NO_RELEASE };
  }
}
