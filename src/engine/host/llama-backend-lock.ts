// The process's one lock around llama.cpp backend loading (wire/thread-data.ts says why), also
// on the main thread's globalThis, so a Llama made here takes it too. Cell 0: 1 while a thread
// loads; cell 1: how many loads had to wait for another.
import { LLAMA_BACKEND_LOCK } from "../wire/thread-data.js";

const slot = globalThis as Record<symbol, Int32Array | undefined>;

export const llamaBackendLock: Int32Array = (slot[LLAMA_BACKEND_LOCK] ??= new Int32Array(new SharedArrayBuffer(8)));
