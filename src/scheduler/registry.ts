// Every placement policy by the name a user writes in config.yml (`scheduler.policy`), one
// file each under policies/. An unknown name is an error at start-up: never a silent fallback.
import { AffinityPolicy } from "./policies/affinity.js";
import { CACHE_AWARE_DEFAULTS, CacheAwarePolicy, type CacheAwareOptions } from "./policies/cache-aware.js";
import { LeastLoadPolicy } from "./policies/least-load.js";
import { PREBLE_DEFAULTS, PreblePolicy, type PrebleOptions } from "./policies/preble.js";
import { RoundRobinPolicy } from "./policies/roundrobin.js";
import { ShapePolicy } from "./policies/shape.js";
import type { PlacementPolicy } from "./types.js";

export interface PolicyOptions {
  preble: PrebleOptions;
  cacheAware: CacheAwareOptions;
}

export const POLICY_DEFAULTS: PolicyOptions = { preble: PREBLE_DEFAULTS, cacheAware: CACHE_AWARE_DEFAULTS };

const POLICIES = {
  preble: (options) => new PreblePolicy(options.preble),
  shape: () => new ShapePolicy(),
  "cache-aware": (options) => new CacheAwarePolicy(options.cacheAware),
  roundrobin: () => new RoundRobinPolicy(),
  affinity: () => new AffinityPolicy(),
  "least-load": () => new LeastLoadPolicy(),
} satisfies Record<string, (options: PolicyOptions) => PlacementPolicy>;

export type PolicyName = keyof typeof POLICIES;
export const POLICY_NAMES = Object.keys(POLICIES) as PolicyName[];

export class UnknownPolicyError extends Error {
  override name = "UnknownPolicyError";
}

export function isPolicyName(name: string): name is PolicyName {
  return Object.hasOwn(POLICIES, name);
}

export function createPolicy(name: string, options: PolicyOptions = POLICY_DEFAULTS): PlacementPolicy {
  if (!isPolicyName(name)) {
    throw new UnknownPolicyError(`unknown scheduler.policy "${name}"; available: ${POLICY_NAMES.join(", ")}`);
  }
  return POLICIES[name](options);
}
