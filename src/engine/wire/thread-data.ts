// What a worker or prompt thread receives as its workerData: its own data, plus what every
// thread of the server process shares.
//
// ggml's backend registry is one per process and loading a backend into it is not
// thread-safe: two threads constructing node-llama-cpp's Llama at once crashed the server
// (SIGSEGV in ggml_backend_registry::load_backend). The patched Llama constructor holds a
// lock while it loads backends: one Int32Array on a SharedArrayBuffer, made by the server's
// main thread and put on each thread's globalThis under this symbol before it loads llama.cpp.

export const LLAMA_BACKEND_LOCK = Symbol.for("radixgate.llamaBackendLock");

export interface ThreadData<T> {
  data: T;
  llamaBackendLock: Int32Array;
}
