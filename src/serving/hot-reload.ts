// Live configuration: on SIGHUP or when config.yml changes, the file is read and validated
// again. An invalid file changes nothing (the old config keeps running, and the reason is
// logged). A valid one applies at once what can change under running requests: the keys
// marked live in the config schema (LIVE_KEYS). Everything else needs a restart: those keys
// are named in the log, and keep their old values.
import { watch, type FSWatcher } from "node:fs";
import { basename, dirname } from "node:path";
import { loadConfigFile } from "../config/load-config.js";
import { LIVE_KEYS, type Config } from "../config/schema.js";

export interface ReloadTargets {
  /** Applies the live part of `next`; called only with a valid config. */
  apply(next: Config, previous: Config): Promise<void>;
  log: { info(object: object, message: string): void; warn(object: object, message: string): void; error(object: object, message: string): void };
}

export interface ReloadResult {
  ok: boolean;
  error?: string;
  /** Keys whose new value waits for a restart. */
  restartNeeded: string[];
}

export class ConfigReloader {
  private watcher: FSWatcher | undefined;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<ReloadResult> | undefined;
  lastError: string | undefined;

  constructor(
    private readonly path: string,
    private current: Config,
    private readonly targets: ReloadTargets,
    private readonly env: NodeJS.ProcessEnv = process.env,
  ) {}

  get config(): Config {
    return this.current;
  }

  /** Re-reads the file now (SIGHUP). Reloads never overlap, and never reject: a failure is in the result, the log and lastError. */
  async reload(trigger: string): Promise<ReloadResult> {
    while (this.running) await this.running;
    this.running = this.reloadOnce(trigger);
    try {
      return await this.running;
    } finally {
      this.running = undefined;
    }
  }

  /** Follows the file: editors often replace it, so the folder is watched. Debounced. */
  watchFile(): void {
    this.watcher = watch(dirname(this.path), (_event, name) => {
      if (name !== null && name.toString() !== basename(this.path)) return;
      clearTimeout(this.timer);
      this.timer = setTimeout(() => void this.reload("file change"), 150);
    });
  }

  close(): void {
    clearTimeout(this.timer);
    this.watcher?.close();
  }

  private async reloadOnce(trigger: string): Promise<ReloadResult> {
    let next: Config;
    try {
      next = loadConfigFile(this.path, this.env).config;
    } catch (error) {
      this.lastError = (error as Error).message;
      this.targets.log.error({ trigger, path: this.path }, `config reload refused, the running config stays: ${this.lastError}`);
      return { ok: false, error: this.lastError, restartNeeded: [] };
    }
    const previous = this.current;
    const restartNeeded = changedPaths(previous, next).filter((path) => !LIVE_KEYS.some((live) => path === live || path.startsWith(`${live}.`)));
    // What needs a restart keeps its running value; only the live part moves.
    const applied = keepRestartKeys(next, previous);
    try {
      await this.targets.apply(applied, previous);
    } catch (error) {
      this.lastError = `the new config could not be applied: ${(error as Error).message}`;
      this.targets.log.error({ trigger, path: this.path }, `config reload failed, the running config stays: ${this.lastError}`);
      return { ok: false, error: this.lastError, restartNeeded: [] };
    }
    this.current = applied;
    this.lastError = undefined;
    this.targets.log.info({ trigger, path: this.path, changed: changedPaths(previous, applied) }, "config reloaded");
    if (restartNeeded.length > 0) this.targets.log.warn({ keys: restartNeeded }, "config changes that need a restart to take effect");
    return { ok: true, restartNeeded };
  }
}

/** Dotted paths whose values differ (objects compared key by key, arrays as a whole). */
export function changedPaths(a: unknown, b: unknown, prefix = ""): string[] {
  const isObject = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);
  if (isObject(a) && isObject(b)) {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    return [...keys].flatMap((key) => changedPaths(a[key], b[key], prefix ? `${prefix}.${key}` : key));
  }
  return JSON.stringify(a) === JSON.stringify(b) ? [] : [prefix];
}

type Tree = Record<string, unknown>;

/** `previous` with the live keys' values taken from `next`. */
function keepRestartKeys(next: Config, previous: Config): Config {
  let kept = previous as Tree;
  for (const live of LIVE_KEYS) kept = withValueAt(kept, live.split("."), next as Tree);
  return kept as Config;
}

/** A copy of `target` holding `source`'s value at `path`; only the objects on the path are copied. */
function withValueAt(target: Tree, [key, ...rest]: string[], source: Tree): Tree {
  const value = rest.length === 0 ? source[key!] : withValueAt(target[key!] as Tree, rest, source[key!] as Tree);
  return { ...target, [key!]: value };
}
