// Where the requests of a shared-prefix workload found their prefix, on one simulated fleet at
// one load: each request counted as a hit (at least 30 % of its prompt reused) or, when cold,
// the first of its prefix, cold on a card that had served its prefix before (whose slots and
// store no longer held it), or cold on a card new to it; by the policy's reason. Then how many
// cards each prefix was placed on. A decision trace for the store and placement rules.
//
//   npx tsx bench/sim/prefix-trace.ts [--workload preble-toolbench] [--workers 4] [--load 0.34] [--policy preble] [--seed 1] [--salt 12345]
//
// The load is a fraction of the cold-prefill rate r0, as bench:sim's --loads. Prints; writes nothing.
import { parseArgs } from "node:util";
import { CAPACITY_SIZES } from "./capacity-run.js";
import { DEFAULT_GPU, gpuSpec } from "./hardware.js";
import { simulate } from "./simulator.js";
import { atLoad, buildWorkload, isWorkloadName } from "./workloads.js";

const { values } = parseArgs({
  options: {
    workload: { type: "string", default: "preble-toolbench" },
    workers: { type: "string", default: "4" },
    load: { type: "string", default: "0.34" },
    policy: { type: "string", default: "preble" },
    seed: { type: "string", default: "1" },
    salt: { type: "string", default: "12345" },
  },
});
const name = values.workload!;
if (!isWorkloadName(name)) throw new Error(`--workload ${name}: not a workload of bench:sim`);
const workers = Number(values.workers);
const load = Number(values.load);
const spec = gpuSpec(DEFAULT_GPU, {});
const size = CAPACITY_SIZES[name];
const sample = buildWorkload(name, { seed: Number(values.seed), salt: Number(values.salt), size, workers, maxLoad: 1 });
const loaded = atLoad(sample, load, spec, workers, size);
const result = await simulate({ policy: values.policy!, workers, spec, requests: loaded.requests });

const groupOf = new Map(loaded.requests.map((request) => [request.index, request.group]));
const cardsOf = new Map<unknown, Set<string>>();
const counts = new Map<string, number>();
for (const record of [...result.records].sort((a, b) => a.arrivalMs - b.arrivalMs)) {
  const group = groupOf.get(record.index);
  const cards = cardsOf.get(group);
  const kind =
    record.cachedFraction >= 0.3
      ? "hit"
      : cards === undefined
        ? "cold, first of its prefix"
        : cards.has(record.workerId)
          ? "cold on a card that had served its prefix"
          : "cold on a card new to its prefix";
  const key = `${kind} (${record.reason})`;
  counts.set(key, (counts.get(key) ?? 0) + 1);
  if (cards) cards.add(record.workerId);
  else cardsOf.set(group, new Set([record.workerId]));
}
console.log(`${name} on ${workers} x ${DEFAULT_GPU}, load ${load} of r0, ${values.policy}: ${result.records.length} requests, ${cardsOf.size} prefixes`);
for (const [key, count] of [...counts].sort((a, b) => b[1] - a[1])) console.log(`  ${count} ${key}`);
const spread = Array.from({ length: workers }, (_, k) => [...cardsOf.values()].filter((cards) => cards.size === k + 1).length);
console.log(`  prefixes placed on 1..${workers} cards: ${spread.join(", ")}`);
