// How much host memory each worker's state store may fill: `spill.budgetBytes`, but never more
// than the workers of this host can write to the state folder together.
//
// The states live in a folder (/dev/shm by default), and a tmpfs holds only what it was sized
// for: half the RAM on a Linux host, 64 MiB in a container that sets no `shm_size`. A store whose
// budget the folder cannot hold fails its saves once the folder is full, and from then on keeps
// nothing new. So the workers that write to one folder share half of it (the other half is left
// to whatever else uses it), each at most its configured budget.
import { statfsSync } from "node:fs";
import { dirname, resolve } from "node:path";
import type { SpillSettings } from "../engine/wire/protocol.js";
import { defaultStateDir } from "../engine/worker/state-store.js";

/** The part of the state folder's filesystem the workers' stores may fill together. */
export const STATE_FOLDER_SHARE = 0.5;

/** Each worker's budget: the configured one, at most an even share of STATE_FOLDER_SHARE of the folder. */
export function fitSpillBudget(configuredBytes: number, workers: number, folderBytes: number | undefined): number {
  if (configuredBytes === 0 || workers <= 0 || folderBytes === undefined) return configuredBytes;
  return Math.min(configuredBytes, Math.floor((folderBytes * STATE_FOLDER_SHARE) / workers));
}

/** The size of the filesystem the folder is on (or will be: its nearest existing parent's), bytes; undefined when none can be read. */
export function folderBytes(dir: string): number | undefined {
  for (let at = resolve(dir); ; at = dirname(at)) {
    try {
      const stats = statfsSync(at);
      return stats.blocks * stats.bsize;
    } catch {
      if (dirname(at) === at) return undefined;
    }
  }
}

/** The spill settings each of `workers` local workers starts with, and what was configured. */
export interface FittedSpill {
  spill: SpillSettings;
  configuredBytes: number;
  /** The state folder and its filesystem's size, when that was what lowered the budget. */
  lowered?: { dir: string; folderBytes: number; workers: number };
}

export function fitSpill(spill: SpillSettings, workers: number, sizeOf: (dir: string) => number | undefined = folderBytes): FittedSpill {
  const dir = spill.dir || defaultStateDir();
  const size = spill.budgetBytes > 0 && workers > 0 ? sizeOf(dir) : undefined;
  const budgetBytes = fitSpillBudget(spill.budgetBytes, workers, size);
  return {
    spill: { ...spill, budgetBytes },
    configuredBytes: spill.budgetBytes,
    ...(budgetBytes < spill.budgetBytes && size !== undefined ? { lowered: { dir, folderBytes: size, workers } } : {}),
  };
}

/** A budget under this holds a few states of a 7B model's context at most. */
export const SMALL_STATE_STORE_BYTES = 256 * 2 ** 20;

/**
 * What the log says of a lowered budget: info where that is expected (a host whose folder is
 * half its RAM), a warning where the store is left with little (a container's /dev/shm is
 * 64 MiB unless it sets shm_size). Nothing when the configured budget stands.
 */
export function spillBudgetNotice(fitted: FittedSpill): { level: "info" | "warn"; message: string; fields: Record<string, number | string> } | undefined {
  const lowered = fitted.lowered;
  if (lowered === undefined) return undefined;
  const mib = (bytes: number) => Math.floor(bytes / 2 ** 20);
  const perWorker = fitted.spill.budgetBytes;
  const fields = {
    configuredMiB: mib(fitted.configuredBytes),
    perWorkerMiB: mib(perWorker),
    folder: lowered.dir,
    folderMiB: mib(lowered.folderBytes),
    workers: lowered.workers,
  };
  return perWorker < SMALL_STATE_STORE_BYTES
    ? {
        level: "warn",
        message: "each worker's state store is left with little room: give the state folder more (a container's shm_size) or set spill.dir to a larger one",
        fields,
      }
    : { level: "info", message: "spill.budgetBytes lowered to what the state folder holds: half of it, shared by this host's workers", fields };
}
