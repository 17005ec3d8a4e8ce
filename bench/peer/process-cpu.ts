// CPU time a server process tree spends, read from /proc (Linux): the process's own threads
// and every descendant process (a llama-server worker under Radixgate), plus its main thread
// alone (Radixgate's event loop: HTTP, the scheduler, per-token delivery). Taken around a
// decode measurement it says how much CPU each output token cost the server, and what share
// of the cores neither the server nor the benchmark client used while the tokens were being
// made (other processes on the machine count as idle there). The kernel counts CPU time in
// 10 ms ticks: a main thread that spent a few ticks over a run is known to about one tick.
import { existsSync, readdirSync, readFileSync } from "node:fs";

/** Seconds per clock tick in /proc's stat files (USER_HZ, 100 on Linux). */
const TICK_S = 0.01;

export interface ProcessCpu {
  /** CPU seconds of the whole tree: every thread of the process and of its descendants. */
  treeS: number;
  /** CPU seconds of the process's main thread. */
  mainThreadS: number;
}

/** utime + stime of a /proc stat file, in seconds (fields 14 and 15; the name may hold spaces). */
function cpuOfStat(path: string): number {
  try {
    const fields = readFileSync(path, "utf8").split(") ")[1]!.split(" ");
    return (Number(fields[11]) + Number(fields[12])) * TICK_S;
  } catch {
    return 0; // the thread or process ended meanwhile
  }
}

function childrenOf(pid: number): number[] {
  const tasks = `/proc/${pid}/task`;
  if (!existsSync(tasks)) return [];
  return readdirSync(tasks).flatMap((tid) => {
    try {
      return readFileSync(`${tasks}/${tid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number);
    } catch {
      return [];
    }
  });
}

/** The CPU used so far by `pid` and its descendants; undefined where /proc is missing. */
export function processCpu(pid: number | undefined): ProcessCpu | undefined {
  if (pid === undefined || !existsSync(`/proc/${pid}/stat`)) return undefined;
  let treeS = 0;
  const pending = [pid];
  while (pending.length > 0) {
    const next = pending.pop()!;
    // A process's own stat sums all its threads (not its children, which are walked instead).
    treeS += cpuOfStat(`/proc/${next}/stat`);
    pending.push(...childrenOf(next));
  }
  return { treeS, mainThreadS: cpuOfStat(`/proc/${pid}/task/${pid}/stat`) };
}

/**
 * Waits until none of `pids` (with their descendants) has used CPU for `windowMs`, or `maxMs`
 * has passed; the ms it waited. Servers measured side by side share the cores, and a server
 * can go on using one after its last answer: llama.cpp's compute threads spin for the next
 * step for a while before they sleep (read from /proc by a scratch script on the development
 * box: about 20 ms for llama-server, 160 ms for a compute pool polling at llama.cpp's default
 * level; the report's settled seconds are what a run waited). Without this wait, whichever
 * arm came next ran its first steps on fewer cores. CPU time comes in 10 ms ticks: one tick
 * in a window counts as quiet.
 */
export async function settle(pids: (number | undefined)[], windowMs = 100, maxMs = 2000): Promise<number> {
  const started = performance.now();
  const treeS = (): number => pids.reduce<number>((sum, pid) => sum + (processCpu(pid)?.treeS ?? 0), 0);
  for (;;) {
    const before = treeS();
    await new Promise((resolve) => setTimeout(resolve, windowMs));
    const waited = performance.now() - started;
    if (treeS() - before <= TICK_S + 1e-9 || waited >= maxMs) return waited;
  }
}
