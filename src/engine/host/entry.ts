// Where a worker's code is found when it starts in a thread or in a child process. Built
// JavaScript is started directly; TypeScript sources (npm start and the tests run under tsx)
// need help: a thread goes through the ts-thread.mjs bootstrap (see there for why), a child
// process gets `--import tsx`.
import { fileURLToPath } from "node:url";

export interface ThreadEntry {
  filename: string;
  argv: string[];
}

/** The thread module `name` beside `baseUrl` (the caller's import.meta.url). */
export function threadEntry(baseUrl: string, name: string): ThreadEntry {
  if (!baseUrl.endsWith(".ts")) return { filename: fileURLToPath(new URL(`./${name}.js`, baseUrl)), argv: [] };
  return {
    filename: fileURLToPath(new URL("../worker/ts-thread.mjs", import.meta.url)),
    argv: ["--thread-entry", new URL(`./${name}.ts`, baseUrl).href],
  };
}

export interface ProcessEntry {
  filename: string;
  execArgv: string[];
}

/** The module `name` beside `baseUrl`, as a child Node process's entry. */
export function processEntry(baseUrl: string, name: string): ProcessEntry {
  const fromSources = baseUrl.endsWith(".ts");
  return {
    filename: fileURLToPath(new URL(`./${name}${fromSources ? ".ts" : ".js"}`, baseUrl)),
    execArgv: fromSources ? ["--import", "tsx"] : [],
  };
}
