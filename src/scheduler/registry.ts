// Every placement policy by the name a user writes in config.yml (`scheduler.policy`).
// An unknown name is an error at start-up: never a silent fallback.
import { RoundRobinPolicy } from "./roundrobin.js";
import type { PlacementPolicy } from "./types.js";

const POLICIES: Record<string, () => PlacementPolicy> = {
  roundrobin: () => new RoundRobinPolicy(),
};

export const POLICY_NAMES = Object.keys(POLICIES);

export class UnknownPolicyError extends Error {
  override name = "UnknownPolicyError";
}

export function createPolicy(name: string): PlacementPolicy {
  const factory = POLICIES[name];
  if (!factory) {
    throw new UnknownPolicyError(`unknown scheduler.policy "${name}"; available: ${POLICY_NAMES.join(", ")}`);
  }
  return factory();
}
