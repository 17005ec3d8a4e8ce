// The simulator's workloads by name, and the load sweep.
//
// Load: load L means arrivals compressed or stretched (every inter-arrival gap scaled by one
// factor, so a trace keeps its burstiness) until the mean arrival rate is
//     L x r0,   r0 = workers x 1000 / mean cold prefill ms of the workload's prompts
// i.e. at load 1 a fleet that reused no prefix at all would spend all its time on prefill
// (and still owe the decode): L = 1 saturates a cache-blind policy, what a prefix-aware one
// saves is the headroom above it. r0 comes from the card's own time model, so "load 1" means
// the same thing on an A6000 and on an H100.
// - Closed-loop agent sessions: session starts are scaled so that starts x mean turns per
//   session = L x r0 (turns follow responses plus think time, which is not scaled).
// - The cold burst has no rate: L scales its size (16 x workers prompts at L = 1), all at once.
import { agentLoopRequests } from "../workloads/agent-loops.js";
import { AZURE_CODE_TRACE, AZURE_CONV_TRACE, azureRequests, readAzureTrace } from "../workloads/azure.js";
import { coldBurstRequests } from "../workloads/cold-burst.js";
import { MOONCAKE_CONVERSATION_TRACE, mooncakeRequests, readMooncakeTrace } from "../workloads/mooncake.js";
import { PREBLE_WORKLOADS, prebleRequests } from "../workloads/preble.js";
import { LLMD_PRECISE, SGLANG_GSP, sharedPrefixRequests } from "../workloads/shared-prefix.js";
import type { WorkloadRequest } from "../workloads/tokens.js";
import { TOOLBENCH_ZIPF_DEFAULTS, toolbenchZipf } from "../workloads/toolbench-zipf.js";
import { TimeModel } from "../../src/scheduler/time-model.js";
import type { WorkerSpec } from "./simulator.js";

export const WORKLOAD_NAMES = [
  "toolbench-zipf",
  "mooncake",
  "agent-loops",
  "azure-conv",
  "azure-code",
  "sglang-gsp",
  "llmd",
  "cold-burst",
  "preble-toolbench",
  "preble-alfworld",
  "preble-apps",
  "preble-nextqa",
  "preble-loogle",
] as const;
export type WorkloadName = (typeof WORKLOAD_NAMES)[number];

export function isWorkloadName(name: string): name is WorkloadName {
  return (WORKLOAD_NAMES as readonly string[]).includes(name);
}

export interface WorkloadSample {
  name: WorkloadName;
  describe: string;
  /** At the workload's own (nominal) arrival times. */
  requests: WorkloadRequest[];
  kind: "open" | "sessions" | "burst";
}

/** Requests per sample when --requests is not given (sessions for agent-loops, prompts per worker for cold-burst). */
export const DEFAULT_SIZES: Record<WorkloadName, number> = {
  "toolbench-zipf": 5000,
  mooncake: 2000,
  "agent-loops": 60,
  "azure-conv": 2000,
  "azure-code": 2000,
  "sglang-gsp": 1024,
  llmd: 750,
  "cold-burst": 16,
  "preble-toolbench": 5000,
  "preble-alfworld": 5000,
  "preble-apps": 5000,
  "preble-nextqa": 2000,
  "preble-loogle": 1000,
};

function take<T>(iterator: Iterator<T>, count: number): T[] {
  const out: T[] = [];
  for (let i = 0; i < count; i++) {
    const next = iterator.next();
    if (next.done) break;
    out.push(next.value);
  }
  return out;
}

/**
 * The workload's requests for a seed and salt. `size`: requests (the first ones of a trace),
 * sessions (agent-loops), or prompts per worker at load 1 (cold-burst; `maxLoad` x workers x
 * size are built so any load of the sweep can be cut from them).
 */
export function buildWorkload(name: WorkloadName, options: { seed: number; salt: number; size?: number; workers: number; maxLoad: number }): WorkloadSample {
  const { seed, salt } = options;
  const size = options.size ?? DEFAULT_SIZES[name];
  switch (name) {
    case "toolbench-zipf": {
      const o = TOOLBENCH_ZIPF_DEFAULTS;
      const requests = take(toolbenchZipf({ seed, salt }), size).map((request) => ({ ...request, messageCount: 2 }));
      return {
        name,
        requests,
        kind: "open",
        describe: `Preble's ToolBench shape: ${o.prefixes} tool prefixes of ~${o.prefixTokens} tokens, Zipf a=${o.zipfA}, unique ~${o.suffixTokens}-token question, outputs ${o.outputTokens.min}-${o.outputTokens.max}, Poisson arrivals; system + user (2 messages)`,
      };
    }
    case "mooncake": {
      const records = readMooncakeTrace(MOONCAKE_CONVERSATION_TRACE).slice(0, size);
      // Chat requests that carry a system prompt and a conversation: more than one message.
      const requests = take(mooncakeRequests(records, { seed, salt }), size).map((request) => ({ ...request, messageCount: 2 }));
      return {
        name,
        requests,
        kind: "open",
        describe: `Mooncake conversation trace, first ${records.length} records (arrivals, lengths, 512-token prefix blocks from hash_ids); 2 messages each`,
      };
    }
    case "agent-loops": {
      const requests = agentLoopRequests({ seed, salt, sessions: size });
      return {
        name,
        requests,
        kind: "sessions",
        describe: `${size} agent sessions replaying ToolBench and SWE-agent transcripts (each call re-sends the growing history; stand-in word-hash tokenizer), next turn 0.1-2 s after the response`,
      };
    }
    case "azure-conv":
    case "azure-code": {
      const path = name === "azure-conv" ? AZURE_CONV_TRACE : AZURE_CODE_TRACE;
      const requests = azureRequests(readAzureTrace(path).slice(0, size), { seed, salt });
      return {
        name,
        requests,
        kind: "open",
        describe: `Azure LLM inference trace 2023 (${name === "azure-conv" ? "conversation" : "code"}), first ${requests.length} rows; prefix sharing added: Zipf(1.1) over 64 system prompts, each taking the first half of the context`,
      };
    }
    case "sglang-gsp":
    case "llmd": {
      const shape = name === "sglang-gsp" ? SGLANG_GSP : LLMD_PRECISE;
      const all = sharedPrefixRequests({ seed, salt, shape });
      const requests = all.slice(0, size);
      return {
        name,
        requests,
        kind: "open",
        describe: `${name === "sglang-gsp" ? "SGLang generated-shared-prefix" : "llm-d precise-routing"}: ${shape.groups} groups x ${shape.perGroup}, system ${shape.systemTokens} / question ${shape.questionTokens} / output ${shape.outputTokens}, shuffled, Poisson arrivals${requests.length < all.length ? ` (first ${requests.length})` : ""}`,
      };
    }
    case "cold-burst": {
      const count = Math.max(1, Math.round(size * options.workers * options.maxLoad));
      return {
        name,
        requests: coldBurstRequests({ seed, salt, count }),
        kind: "burst",
        describe: `cold burst: ${size} x workers x load distinct one-shot prompts of 1024-3072 tokens, 128 output tokens, all at once`,
      };
    }
    case "preble-toolbench":
    case "preble-alfworld":
    case "preble-apps":
    case "preble-nextqa":
    case "preble-loogle": {
      const figures = PREBLE_WORKLOADS[name];
      const { promptTokens: prompt, outputTokens: output } = figures;
      return {
        name,
        requests: prebleRequests({ seed, salt, figures, requests: size }),
        kind: "open",
        describe: `Preble's ${figures.task}: prompt ${prompt.mean} (std ${prompt.std}) tokens, ${Math.round(figures.sharedFraction * 100)} % of it a prefix shared by ${figures.requestsPerPrefix} requests, output ${output.mean} (std ${output.std}); lognormal lengths, prefixes split evenly, Poisson arrivals; 2 messages`,
      };
    }
    default:
      return name satisfies never;
  }
}

/** r0: requests per second at which a fleet reusing nothing spends all its time on prefill. */
export function coldPrefillRatePerS(requests: readonly WorkloadRequest[], spec: WorkerSpec, workers: number): number {
  const model = new TimeModel(spec.timeModel);
  let total = 0;
  for (const request of requests) total += model.prefillMs(request.tokens.length, request.tokens.length);
  return (workers * 1000) / (total / Math.max(1, requests.length));
}

export interface LoadedWorkload {
  requests: WorkloadRequest[];
  /** Mean arrival rate (requests, or for sessions requests via starts x turns), per second. */
  ratePerS: number;
  /** Factor applied to the nominal arrival gaps. */
  timeScale: number;
  r0PerS: number;
}

/** The sample at load L (see the file comment). */
export function atLoad(sample: WorkloadSample, load: number, spec: WorkerSpec, workers: number, baseSize = DEFAULT_SIZES[sample.name]): LoadedWorkload {
  if (!(load > 0)) throw new RangeError(`load must be > 0, got ${load}`);
  const r0PerS = coldPrefillRatePerS(sample.requests, spec, workers);
  if (sample.kind === "burst") {
    const count = Math.max(1, Math.round(baseSize * workers * load));
    return { requests: sample.requests.slice(0, count), ratePerS: Infinity, timeScale: 0, r0PerS };
  }
  const starts = sample.requests.filter((request) => request.after === undefined);
  const first = starts[0]?.arrivalMs ?? 0;
  const span = (starts[starts.length - 1]?.arrivalMs ?? 0) - first;
  const targetPerS = load * r0PerS;
  // For sessions, starts per second such that starts x turns per session = the target.
  const perStart = sample.requests.length / Math.max(1, starts.length);
  const nominalPerS = span > 0 ? ((starts.length - 1) * 1000) / span : Infinity;
  const timeScale = Number.isFinite(nominalPerS) ? (nominalPerS * perStart) / targetPerS : 1;
  const requests = sample.requests.map((request) => ({ ...request, arrivalMs: (request.arrivalMs - first) * timeScale }));
  return { requests, ratePerS: targetPerS, timeScale, r0PerS };
}
