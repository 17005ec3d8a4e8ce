// What the patched node-llama-cpp binding test recorded in this thread or process.
import type { BindingTests } from "../wire/binding-tests.js";

const TESTED_HERE = Symbol.for("radixgate.llamaBindingTests");

/** The tests run here so far and the bindings that passed them. */
export function bindingTestsHere(): BindingTests {
  const here = (globalThis as Record<symbol, BindingTests | undefined>)[TESTED_HERE];
  return { passed: [...(here?.passed ?? [])], ran: here?.ran ?? 0 };
}
