// The llama.cpp bindings this server's workers found to pass node-llama-cpp's load test:
// each thread or process started afterwards is told, and loads them without testing again.
import { TESTED_BINDINGS_ENV, type BindingTests } from "../wire/binding-tests.js";

const known = new Set<string>();

/** Notes what a worker reported when it loaded. */
export function rememberBindingTests(tests: BindingTests): void {
  for (const key of tests.passed) known.add(key);
}

/** The environment of a thread or process started now: the server's, plus the bindings known to pass. */
export function workerEnvironment(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) if (value !== undefined) env[name] = value;
  return { ...env, [TESTED_BINDINGS_ENV]: JSON.stringify([...known]), ...extra };
}
