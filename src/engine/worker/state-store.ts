// A worker's store of spilled KV states: prefixes evicted from its slots, saved with
// node-llama-cpp's `saveStateToFile` into host memory (/dev/shm where it exists), kept LRU
// within a byte budget, and loaded back into a slot instead of recomputing them. A state that
// a newer one holds nearly all of is dropped when the newer one is kept (`statesToDrop`). Copies
// of a hot prefix from another worker arrive here too (`adopt`).
//
// Every state file has a sidecar `.json` with what it may only be loaded into: the model
// file's fingerprint, the context size per slot and the slot count. node-llama-cpp loads a
// state from a same-shaped model without complaint (and the result is garbage, or a crash),
// so a mismatch is refused here, always.
//
// Every state kept and dropped is recorded until `takeChanges` collects it: the worker sends
// them to the host with its next request's start, so the global scheduler knows which
// prefixes the worker can load back (it places an agent's next turn where its history is).
import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { copyFile, mkdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { once } from "../../common/once.js";
import { commonPrefixLength, type TokenIds } from "../../common/tokens.js";
import { StoreChangeLog, type StoreChanges, statesToDrop } from "../../scheduler/placement/stored-states.js";

export interface StateIdentity {
  modelFingerprint: string;
  contextSize: number;
  slots: number;
  /** The context's flash attention setting (it changes how the V cache is laid out). */
  flashAttention?: boolean | "auto";
}

export interface StateEntry {
  file: string;
  tokens: number[];
  bytes: number;
  lastUsedMs: number;
  /** Loads of this file under way: a pinned entry is never evicted (its file must stay). */
  pins: number;
}

interface StateMeta extends StateIdentity {
  tokens: number[];
}

export class StateMismatchError extends Error {
  override name = "StateMismatchError";
}

/** Where spilled states live: /dev/shm (RAM) when the OS has it, else the temp folder. */
export function defaultStateDir(): string {
  return existsSync("/dev/shm") ? "/dev/shm" : tmpdir();
}

export class StateStore {
  private readonly entries: StateEntry[] = [];
  private totalBytes = 0;
  /** Kept and dropped since the last takeChanges, by state id. */
  private changes = new StoreChangeLog();

  constructor(
    readonly dir: string,
    private readonly identity: StateIdentity,
    private readonly budgetBytes: number,
    private readonly now: () => number = Date.now,
  ) {}

  get bytes(): number {
    return this.totalBytes;
  }

  get size(): number {
    return this.entries.length;
  }

  /** The entry sharing the longest prefix with `tokens` (and that length), if any; optionally only entries used within `usedWithinMs`. */
  bestPrefix(tokens: TokenIds, usedWithinMs = Infinity): { entry: StateEntry; length: number } | undefined {
    let best: { entry: StateEntry; length: number } | undefined;
    const since = this.now() - usedWithinMs;
    for (const entry of this.entries) {
      if (entry.lastUsedMs < since) continue;
      const length = commonPrefixLength(entry.tokens, tokens);
      if (length > 0 && (!best || length > best.length)) best = { entry, length };
    }
    return best;
  }

  /** Whether a stored state already covers these tokens (no need to save them again). */
  covers(tokens: TokenIds): boolean {
    return this.entries.some((entry) => entry.tokens.length >= tokens.length && commonPrefixLength(entry.tokens, tokens) === tokens.length);
  }

  /** Saves a sequence's state (its `tokens`) with `save(file)`, then evicts LRU entries past the budget. */
  async spill(tokens: readonly number[], save: (file: string) => Promise<unknown>): Promise<StateEntry | undefined> {
    await mkdir(this.dir, { recursive: true });
    const file = join(this.dir, `${randomUUID()}.state`);
    try {
      await save(file);
      await writeFile(`${file}.json`, JSON.stringify({ ...this.identity, tokens: [...tokens] } satisfies StateMeta));
    } catch (error) {
      // A save cut short (the folder full) leaves part of a file: it must not hold the room.
      await removeState(file);
      throw error;
    }
    return this.add(file, [...tokens]);
  }

  touch(entry: StateEntry): void {
    entry.lastUsedMs = this.now();
  }

  /**
   * Keeps `entry`'s file while it is read (a load into a slot): marked used, and never
   * evicted until the returned release is called. Eviction past the budget skips it.
   */
  pin(entry: StateEntry): () => void {
    this.touch(entry);
    entry.pins++;
    return once(() => entry.pins--);
  }

  /** Drops an entry whose file turned out unusable (missing, corrupt). */
  async remove(entry: StateEntry): Promise<void> {
    const index = this.entries.indexOf(entry);
    if (index < 0) return;
    this.drop(index);
    await removeState(entry.file);
  }

  /** The states kept and dropped since the last call (undefined when none), in that order. */
  takeChanges(): StoreChanges | undefined {
    return this.changes.take();
  }

  /**
   * Takes in a state file written by another worker's store (a prefix copy). Refused with a
   * StateMismatchError unless it was made from the same model file and context settings.
   */
  async adopt(file: string): Promise<StateEntry | undefined> {
    const meta = await readMeta(file);
    const mismatch = (["modelFingerprint", "contextSize", "slots", "flashAttention"] as const).filter((key) => meta[key] !== this.identity[key]);
    if (mismatch.length > 0) {
      const detail = mismatch.map((key) => `${key} ${JSON.stringify(meta[key])} != ${JSON.stringify(this.identity[key])}`).join(", ");
      throw new StateMismatchError(`refused to load KV state ${file}: it was made for another model or context (${detail})`);
    }
    await mkdir(this.dir, { recursive: true });
    const own = join(this.dir, `${randomUUID()}.state`);
    await copyFile(file, own);
    await writeFile(`${own}.json`, JSON.stringify(meta));
    return this.add(own, meta.tokens);
  }

  /** Copies an entry's files to `dir` for another worker to adopt; returns the copied state file. */
  async export(entry: StateEntry, dir: string): Promise<string> {
    await mkdir(dir, { recursive: true });
    const file = join(dir, `${randomUUID()}.state`);
    await copyFile(entry.file, file);
    await copyFile(`${entry.file}.json`, `${file}.json`);
    return file;
  }

  /** Empties the store (a worker starting or leaving: the host forgets its cache then). */
  async clear(): Promise<void> {
    this.entries.length = 0;
    this.totalBytes = 0;
    this.changes = new StoreChangeLog();
    await rm(this.dir, { recursive: true, force: true });
  }

  private async add(file: string, tokens: number[]): Promise<StateEntry | undefined> {
    const { size } = await stat(file);
    // A state bigger than the whole budget is not kept at all.
    if (size > this.budgetBytes) {
      await removeState(file);
      return undefined;
    }
    const entry: StateEntry = { file, tokens, bytes: size, lastUsedMs: this.now(), pins: 0 };
    this.entries.push(entry);
    this.totalBytes += size;
    this.changes.kept(stateId(entry), tokens);
    // A state being loaded stays until its load ends.
    const drops = statesToDrop(
      this.entries,
      entry,
      this.budgetBytes,
      (state) => state.bytes,
      (state) => state.pins > 0,
    );
    for (const dropped of drops) this.drop(this.entries.indexOf(dropped));
    await Promise.all(drops.map((dropped) => removeState(dropped.file)));
    return this.entries.includes(entry) ? entry : undefined;
  }

  private drop(index: number): void {
    const [entry] = this.entries.splice(index, 1);
    this.totalBytes -= entry!.bytes;
    this.changes.dropped(stateId(entry!));
  }
}

/** A state's id in the host's reports: its file's name, unique across the worker's restarts. */
export function stateId(entry: StateEntry): string {
  return basename(entry.file, ".state");
}

/** Reads the identity sidecar of a state file. */
export async function readMeta(file: string): Promise<StateMeta> {
  try {
    return JSON.parse(await readFile(`${file}.json`, "utf8")) as StateMeta;
  } catch (error) {
    throw new StateMismatchError(`refused to load KV state ${file}: its identity file is missing or unreadable (${(error as Error).message})`);
  }
}

async function removeState(file: string): Promise<void> {
  await rm(file, { force: true });
  await rm(`${file}.json`, { force: true });
}
