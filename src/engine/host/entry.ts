// Where a worker's code is found when it starts in a thread or in a child process. Built
// JavaScript is started directly; TypeScript sources (npm start and the tests run under tsx)
// need help: a thread goes through the ts-thread.mjs bootstrap (see there for why), a child
// process gets `--import tsx`.
import { fileURLToPath } from "node:url";
import { SHARE_ENV } from "node:worker_threads";

/** What a piscina pool needs to start the thread: spread it into the pool's options. */
export interface ThreadEntry {
  filename: string;
  argv: string[];
  /**
   * Threads share the server's environment: node-llama-cpp (as patched) tests its binary in a
   * child process, 1-2 s, once per server and notes it there, so a thread started later (a
   * restart) or a process forked later does not test it again.
   */
  env: typeof SHARE_ENV;
}

/** The thread module `name` beside `baseUrl` (the caller's import.meta.url). */
export function threadEntry(baseUrl: string, name: string): ThreadEntry {
  if (!baseUrl.endsWith(".ts")) return { filename: fileURLToPath(new URL(`./${name}.js`, baseUrl)), argv: [], env: SHARE_ENV };
  return {
    filename: fileURLToPath(new URL("../worker/ts-thread.mjs", import.meta.url)),
    argv: ["--thread-entry", new URL(`./${name}.ts`, baseUrl).href],
    env: SHARE_ENV,
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
