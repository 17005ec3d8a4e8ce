// A thread's workerData (wire/thread-data.ts): takes the process's llama.cpp backend lock onto
// this thread's globalThis, where the patched node-llama-cpp looks for it, and returns the
// thread's own data. Call it before anything loads llama.cpp.
import { workerData } from "node:worker_threads";
import { LLAMA_BACKEND_LOCK, type ThreadData } from "../wire/thread-data.js";

export function threadData<T>(): T {
  const { data, llamaBackendLock } = workerData as ThreadData<T>;
  (globalThis as Record<symbol, Int32Array>)[LLAMA_BACKEND_LOCK] = llamaBackendLock;
  return data;
}
