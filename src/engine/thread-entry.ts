// Where a piscina pool finds its thread code. Built JavaScript is started directly; a
// TypeScript source goes through the ts-thread.mjs bootstrap (see there for why).
import { fileURLToPath } from "node:url";

export interface ThreadEntry {
  filename: string;
  argv: string[];
}

/** The thread module `name` beside `baseUrl` (the caller's import.meta.url). */
export function threadEntry(baseUrl: string, name: string): ThreadEntry {
  if (!baseUrl.endsWith(".ts")) return { filename: fileURLToPath(new URL(`./${name}.js`, baseUrl)), argv: [] };
  return {
    filename: fileURLToPath(new URL("./ts-thread.mjs", import.meta.url)),
    argv: ["--thread-entry", new URL(`./${name}.ts`, baseUrl).href],
  };
}
