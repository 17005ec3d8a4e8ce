// node-llama-cpp tests a llama.cpp binary in a child process before it loads it (1-2 s).
// The patched test (patches/node-llama-cpp+3.21.1.patch) skips a binary the server names as
// already passed, and records what it tested itself; the worker reports that back when it
// loads, and the server names it to every thread or process it starts later (a restart).
// The list travels in each worker's own environment at start, never by writing the shared
// process environment: a setenv while llama.cpp threads call getenv can crash the process.

/** The variable the patched test reads: a JSON array of binding keys known to pass. */
export const TESTED_BINDINGS_ENV = "RADIXGATE_TESTED_LLAMA_BINDINGS";

/** What the patched test did in one thread or process. */
export interface BindingTests {
  /** Keys (binary path, backends path, gpu) of the bindings that passed here. */
  passed: string[];
  /** Tests run here: 0 when every binary loaded was already known to pass. */
  ran: number;
}
