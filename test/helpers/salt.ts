// Prompts that no earlier request of the test process has sent, and that are the same in
// every run. A random salt would also miss every cache, but the tiny model's weights are
// random: some prompts make it generate bytes that are not UTF-8, which the llama-server
// engine refuses, so a random salt turns that into a test that fails one run in many. A
// fixed prompt makes the same text every run (greedy, or sampled with a seed).

let issued = 0;

/** `prefix` with a number no earlier call in this process returned. */
export function freshLabel(prefix = "run"): string {
  issued += 1;
  return `${prefix} ${issued}`;
}

/** A long prompt that starts with a fresh label, so no earlier request has it cached. */
export function salted(words: number): string {
  const filler = Array.from({ length: words }, (_, i) => ["the", "tool", "returns", "a", "list", "of", "files", "and", "their", "sizes"][i % 10]).join(" ");
  return `${freshLabel()}\n${filler}`;
}
