// Where a worker's code is found when it starts in a thread or in a child process. Built
// JavaScript is started directly; TypeScript sources (npm start and the tests run under tsx)
// need help: a thread goes through the ts-thread.mjs bootstrap (see there for why), a child
// process gets `--import tsx`.
import { fileURLToPath } from "node:url";
import type { ThreadData } from "../wire/thread-data.js";
import { llamaBackendLock } from "./llama-backend-lock.js";
import { workerEnvironment } from "./tested-bindings.js";

/** What a piscina pool needs to start the thread: spread it into the pool's options. */
export interface ThreadEntry<T> {
  filename: string;
  argv: string[];
  /**
   * The thread's own copy of the server's environment, naming the llama.cpp binaries already
   * known to pass their load test (tested-bindings.ts). Never SHARE_ENV: a thread writing the
   * shared environment while llama.cpp reads it can crash the process.
   */
  env: Record<string, string>;
  /** The thread's data, with the lock every thread takes to load llama.cpp backends (worker/thread-data.ts unwraps it). */
  workerData: ThreadData<T>;
}

/** The thread module `name` beside `baseUrl` (the caller's import.meta.url), to start now with `data`. */
export function threadEntry<T>(baseUrl: string, name: string, data: T): ThreadEntry<T> {
  const env = workerEnvironment();
  const workerData = { data, llamaBackendLock };
  if (!baseUrl.endsWith(".ts")) return { filename: fileURLToPath(new URL(`./${name}.js`, baseUrl)), argv: [], env, workerData };
  return {
    filename: fileURLToPath(new URL("../worker/ts-thread.mjs", import.meta.url)),
    argv: ["--thread-entry", new URL(`./${name}.ts`, baseUrl).href],
    env,
    workerData,
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
