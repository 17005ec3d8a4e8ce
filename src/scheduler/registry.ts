// Every placement policy by the name a user writes in config.yml (`scheduler.policy`), one
// file each under policies/. An unknown name is an error at start-up: never a silent fallback.
// An entry carries the policy's settings (their schema, under `scheduler.<settingsKey>` in
// config.yml, and their defaults) and the constructor that takes them.
import { Type, type Static, type TObject } from "@sinclair/typebox";
import { CLOSED, defaultsOf, live } from "../common/settings-schema.js";
import { GLOBAL_SCHEDULER_DEFAULTS, type GlobalSchedulerSettings } from "./global-scheduler-settings.js";
import { AffinityPolicy } from "./policies/affinity.js";
import { CacheAwarePolicy, CacheAwareSettingsSchema } from "./policies/cache-aware.js";
import { DynamoPolicy, DynamoSettingsSchema } from "./policies/dynamo.js";
import { LlmDPolicy, LlmDSettingsSchema } from "./policies/llm-d.js";
import { LeastLoadPolicy } from "./policies/least-load.js";
import { PreblePolicy, PrebleSettingsSchema } from "./policies/preble.js";
import { RoundRobinPolicy } from "./policies/roundrobin.js";
import { ShapePolicy } from "./policies/shape.js";
import type { PlacementPolicy } from "./types.js";

/** What a policy may take from the global scheduler's settings besides its own. */
type SharedSettings = Pick<GlobalSchedulerSettings, "windowMs">;

export interface PolicyEntry<Name extends string = string, Key extends string | undefined = string | undefined, Schema extends TObject = TObject> {
  readonly name: Name;
  /** Its settings' key under `scheduler` in config.yml; undefined for a policy without settings. */
  readonly settingsKey: Key;
  readonly schema: Schema;
  readonly defaults: Static<Schema>;
  create(settings: Static<Schema>, shared: SharedSettings): PlacementPolicy;
}

function entry<const Name extends string, const Key extends string | undefined, Schema extends TObject>(
  name: Name,
  settings: { key: Key; schema: Schema },
  create: (settings: Static<Schema>, shared: SharedSettings) => PlacementPolicy,
): PolicyEntry<Name, Key, Schema> {
  return { name, settingsKey: settings.key, schema: settings.schema, defaults: defaultsOf(settings.schema), create };
}

const NO_SETTINGS = { key: undefined, schema: Type.Object({}, CLOSED) };

const ENTRIES = [
  entry("preble", { key: "preble", schema: PrebleSettingsSchema }, (settings, { windowMs }) => new PreblePolicy({ ...settings, windowMs })),
  entry("shape", NO_SETTINGS, () => new ShapePolicy()),
  entry("cache-aware", { key: "cacheAware", schema: CacheAwareSettingsSchema }, (settings) => new CacheAwarePolicy(settings)),
  entry("roundrobin", NO_SETTINGS, () => new RoundRobinPolicy()),
  entry("affinity", NO_SETTINGS, () => new AffinityPolicy()),
  entry("least-load", NO_SETTINGS, () => new LeastLoadPolicy()),
  entry("dynamo", { key: "dynamo", schema: DynamoSettingsSchema }, (settings) => new DynamoPolicy(settings)),
  entry("llm-d", { key: "llmD", schema: LlmDSettingsSchema }, (settings) => new LlmDPolicy(settings)),
] as const;

type Entry = (typeof ENTRIES)[number];
type WithSettings = Extract<Entry, { settingsKey: string }>;

export type PolicyName = Entry["name"];
export const POLICY_NAMES: readonly PolicyName[] = ENTRIES.map((policy) => policy.name);

/** Each policy's settings by their key under `scheduler` in config.yml. */
export type PolicySettings = { [E in WithSettings as E["settingsKey"]]: Static<E["schema"]> };
/** What createPolicy builds any policy from: config.yml's `scheduler` section fits it. */
export type PolicyOptions = PolicySettings & SharedSettings;

const WITH_SETTINGS = ENTRIES.filter((policy): policy is WithSettings => policy.settingsKey !== undefined);

/** The policies' settings schemas by key, marked live: a config reload builds a new policy from them. */
export const POLICY_SETTINGS_SCHEMAS = Object.fromEntries(WITH_SETTINGS.map((policy) => [policy.settingsKey, live(policy.schema)])) as {
  [E in WithSettings as E["settingsKey"]]: E["schema"];
};

export const POLICY_DEFAULTS: PolicyOptions = {
  ...(Object.fromEntries(WITH_SETTINGS.map((policy) => [policy.settingsKey, policy.defaults])) as PolicySettings),
  windowMs: GLOBAL_SCHEDULER_DEFAULTS.windowMs,
};

/** scheduler.policy in config.yml; live, as the policies' settings. */
export const PolicyNameSchema = live(
  Type.String({ default: "preble", description: `Placement policy by name (env RADIXGATE_POLICY overrides): ${POLICY_NAMES.join(", ")}.` }),
);

/** The keys under `scheduler` a policy is built from: a change to any of them builds a new one. */
export const POLICY_CONFIG_KEYS: readonly string[] = ["policy", ...WITH_SETTINGS.map((policy) => policy.settingsKey)];

export class UnknownPolicyError extends Error {
  override name = "UnknownPolicyError";
}

export function isPolicyName(name: string): name is PolicyName {
  return (POLICY_NAMES as readonly string[]).includes(name);
}

export function createPolicy(name: string, options: PolicyOptions = POLICY_DEFAULTS): PlacementPolicy {
  const policy: PolicyEntry | undefined = ENTRIES.find((candidate) => candidate.name === name);
  if (!policy) {
    throw new UnknownPolicyError(`unknown scheduler.policy "${name}"; available: ${POLICY_NAMES.join(", ")}`);
  }
  const settings = policy.settingsKey === undefined ? policy.defaults : (options as Record<string, unknown>)[policy.settingsKey];
  return policy.create(settings as Static<TObject>, options);
}
