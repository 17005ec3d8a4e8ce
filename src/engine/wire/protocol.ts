// The messages between the host (engine/host/) and a worker (engine/worker/), in a thread or
// a child process. Types only: the host side imports this without loading node-llama-cpp.
//
// A generation is one piscina task. Its text streams back over a MessagePort that the task
// carries (transferred, not cloned), and the host cancels it by posting `{type: "cancel"}`
// on that port: killing a thread or aborting a piscina task mid-generation aborts the whole
// process (measured on node-llama-cpp 3.21.1), so a message is the only safe way to stop.

import type { TextPieces, TokenLogprob } from "../../contract/generation.js";
import type { SamplingParams } from "../../contract/sampling.js";
import type { LocalSchedulerSettings } from "../../scheduler/local-scheduler-settings.js";
import type { StoreChanges } from "../../scheduler/placement/stored-states.js";
import type { BindingTests } from "./binding-tests.js";
import type { TokenIds } from "../../common/tokens.js";

export type { LocalSchedulerSettings };

export type GpuSetting = false | "auto" | "cuda" | "vulkan" | "metal";

/** Passed to the thread as workerData: everything it needs to load its model. */
export interface WorkerInit {
  workerId: string;
  /** The host process: a worker's state files live under a folder named after it and the worker. */
  hostPid: number;
  modelPath: string;
  slots: number;
  /** Tokens per slot. */
  contextSize: number;
  batchSize: number;
  threads: number;
  /** How hard llama.cpp's helper threads spin for the next graph before they sleep (0-100, its
   *  `--poll`). Absent: DEFAULT_THREAD_POLL. */
  threadPoll?: number;
  /** llama.cpp flash attention; "auto" lets llama.cpp decide per device. Absent: "auto". */
  flashAttention?: boolean | "auto";
  gpu: GpuSetting;
  /** The local scheduler's settings (scheduler.local in config.yml). */
  local: LocalSchedulerSettings;
  /** Spilled KV states (spill in config.yml). */
  spill: SpillSettings;
  /**
   * Thread workers only: one Int32 on a SharedArrayBuffer that the host raises (sets to 1)
   * just after it posts any message to the worker. The generation loop lowers it before it
   * reads its messages and ends a long call at the next step once it is raised
   * (worker/native-generation.ts).
   */
  attention?: Int32Array;
  /**
   * Process workers only, set by the child itself: its IPC channel's file descriptor. The
   * generation loop ends a long call at the next step once the channel is readable (a
   * message from the host waits). With neither, the loop runs short calls.
   */
  channelFd?: number;
}

export interface SpillSettings {
  /** Bytes of spilled states a worker keeps (0 = never spill). */
  budgetBytes: number;
  /** Only an evicted part at least this long is worth saving. */
  minTokens: number;
  /** Only content used within this many ms is worth saving. */
  recentMs: number;
  /** Folder for state files ("" = /dev/shm where it exists, else the OS temp folder). */
  dir: string;
}

/**
 * A worker loads a stored KV state into a slot only when the state holds at least this many
 * more prompt tokens than the slot keeps (a load has a fixed cost). The simulator uses it too.
 */
export const MIN_RESTORE_GAIN = 16;

export interface LoadTask {
  kind: "load";
}

/**
 * The generation's two-way channel as the worker sees it: a transferred MessagePort in a
 * thread, an IPC-backed stand-in in a child process.
 */
export interface GenerationPort {
  on(event: "message", listener: (message: GenerationControl) => void): unknown;
  postMessage(message: GenerationEvent): void;
  close(): void;
}

export interface GenerateTask {
  kind: "generate";
  /**
   * Made by the host for this one generation: the key of its place in the worker's queue and
   * of its cancel. A client's x-request-id can repeat across clients; this cannot.
   */
  generationId: string;
  /** The client's request id, for logs only. */
  requestId: string;
  /** The exact prompt tokens to evaluate, BOS included when the model wants one. */
  tokens: TokenIds;
  sampling: SamplingParams;
  /** "first": send only the first text event; the result carries the text and the gaps between pieces. Absent: "all". */
  pieces?: TextPieces;
  port: GenerationPort;
}

export interface DisposeTask {
  kind: "dispose";
}

/**
 * Time the worker (worker/profile.ts, fitted by host/calibration.ts): synthetic prompts in one idle slot, which is
 * cleared afterwards. Every field is optional; the defaults suit a start-up calibration.
 */
export interface ProfileTask {
  kind: "profile";
  /** Cold prompt lengths. Default: 32, 128, 512 and min(2048, contextSize / 2). */
  sizes?: number[];
  /** Tokens generated to time decoding, after the shortest and the longest prompt. Default 16. */
  decodeTokens?: number;
  /** Time a save + load of the slot's KV state (a prefix copy). Default true. */
  measureCopy?: boolean;
  /** Seed of the random prompt tokens. Default 1. */
  seed?: number;
}

export type ProfileOptions = Omit<ProfileTask, "kind">;

/** Save the KV state of a prefix this worker holds (idle slot or spilled) for another worker. */
export interface ExportPrefixTask {
  kind: "export-prefix";
  tokens: TokenIds;
}

/** Take in a state file exported by another worker (refused unless model and context match). */
export interface ImportStateTask {
  kind: "import-state";
  file: string;
}

export interface ExportResult {
  file: string;
  /** Tokens the exported state holds (at least the requested prefix). */
  tokens: number;
  bytes: number;
}

export interface ImportResult {
  tokens: number;
}

/** Hot reload: new local scheduler settings, in effect for the next admission and batch. */
export interface ConfigureTask {
  kind: "configure";
  local: LocalSchedulerSettings;
}

/** Counters of the worker's batches and its state store. */
export interface StatsTask {
  kind: "stats";
}

export interface WorkerStats {
  /** llama.cpp decode steps (batches) since the worker started. */
  steps: number;
  /** Generated tokens decoded in them: decodeTokens / steps is how many sequences a step carried. */
  decodeTokens: number;
  /** Prompt tokens evaluated in them. */
  prefillTokens: number;
  /** Of the steps, those decoded on the worker's own thread (the embedded engine's generation steps: worker/inline-decode.ts). */
  inlineSteps?: number;
  /** Generated tokens sampled on the worker's own thread (worker/inline-decode.ts). */
  inlineSamples?: number;
  /** Calls into the generation loop (worker/native-generation.ts), the steps they ran and the tokens they sampled. */
  nativeCalls?: number;
  nativeSteps?: number;
  nativeTokens?: number;
  /** Of nativeCalls, those run while the worker was quiet (long calls), and of those the ones a message from the host, waiting, ended early. */
  nativeQuietCalls?: number;
  nativeInterruptedCalls?: number;
  /** Times the embedded engine's batch gate woke on its own to let a held step go (worker/batch-gate.ts): a sequence late past its wait limit; rare, never one per step. */
  gateWakeups?: number;
  /** KV states in the worker's store, and their bytes. */
  storedStates: number;
  storedBytes: number;
  /** The local scheduler settings the worker runs with now (hot reloads included). */
  local: LocalSchedulerSettings;
  /** What each slot holds now (the status page). */
  slots: SlotReport[];
  /** Requests waiting for a slot, per priority group (index = group, 0 = lowest hit ratio). */
  waitingByGroup: number[];
}

export interface SlotReport {
  slot: number;
  /** Tokens in the slot's KV. */
  tokens: number;
  /** The first words of what it holds (special tokens left out). */
  preview: string;
  /** A request runs in it now. */
  busy: boolean;
  /** Since its last request ended, ms; null if it never served one. */
  idleMs: number | null;
}

/** Empty every idle slot (running requests keep theirs). */
export interface ClearIdleSlotsTask {
  kind: "clear-idle-slots";
}

export interface ClearedSlots {
  slots: number[];
}

/**
 * Fault injection for the tests and bench:soak: the worker dies the way a crash kills it (an
 * uncaught exception ends a thread; a process exits with an error), whatever it is running.
 * Only host code sends it; no client request can.
 */
export interface CrashTask {
  kind: "crash";
}

export type WorkerTask =
  | ClearIdleSlotsTask
  | LoadTask
  | GenerateTask
  | DisposeTask
  | ProfileTask
  | ExportPrefixTask
  | ImportStateTask
  | ConfigureTask
  | StatsTask
  | CrashTask;

/** What a profile measured, in milliseconds. */
export interface ProfileResult {
  workerId: string;
  slot: number;
  /** Prefills: `extend` tokens evaluated, ending at `context` tokens in the sequence; slot to first token. */
  prefill: { extend: number; context: number; ms: number }[];
  decode: { context: number; msPerToken: number }[];
  /** Save + load of a sequence state of `tokens` tokens (`bytes` on disk), through `stateDir`. */
  copy: { tokens: number; ms: number; bytes: number }[];
  stateDir: string;
  /** Slots that were busy with other work during the profile: its timings are then not representative. */
  otherBusySlots: number;
  totalMs: number;
}

/** How a node-llama-cpp worker's llama.cpp threads run: one thread, a pool that lives with the context, or helper threads made again for every step. */
export type ComputePoolKind = "single-thread" | "persistent" | "per-step";

/**
 * The compute pool's polling level unless a model sets one: its helpers sleep as soon as a
 * graph is done. llama.cpp's own default is 50; measured with a scratch client on the 2-core
 * development box (docs/engine.md, "Compute threads"), it decoded no faster, and kept a core
 * spinning for about 160 ms after every request's last step.
 */
export const DEFAULT_THREAD_POLL = 0;

export interface LoadResult {
  workerId: string;
  backend: string;
  /** Which llama.cpp binary node-llama-cpp loaded: "prebuilt" (from npm) or "localBuild" (compiled on this machine). */
  binary: string;
  /** Tokens per slot as llama.cpp created it (it may round up). */
  contextSize: number;
  slots: number;
  trainContextSize: number;
  loadMs: number;
  /** The model file's identity (model-fingerprint.ts): state files carry it. */
  modelFingerprint: string;
  /** node-llama-cpp's binary load tests in this worker (binding-tests.ts). */
  bindingTests: BindingTests;
  /** How llama.cpp's CPU threads run (worker/compute-pool.ts); engines other than node-llama-cpp leave it out. */
  computePool?: ComputePoolKind;
  /** Why they run per step although more than one thread was asked for. */
  computePoolProblem?: string;
  /** The persistent pool's polling level (0-100). */
  threadPoll?: number;
  /** Whether generation steps are decoded on the worker's own thread (worker/inline-decode.ts); engines other than node-llama-cpp leave it out. */
  inlineDecode?: boolean;
  /** Why they are not. */
  inlineDecodeProblem?: string;
  /** Why the tokens of those steps are sampled through node-llama-cpp's asynchronous call instead of on the worker's thread. */
  inlineSampleProblem?: string;
  /** Whether plain requests generate several steps per call into native code (worker/native-generation.ts); engines other than node-llama-cpp leave it out. */
  nativeGeneration?: boolean;
  /** Why they do not. */
  nativeGenerationProblem?: string;
}

/** Worker -> host, on the generation's port. */
export type GenerationEvent =
  /** `states`: what the worker's state store kept and dropped since its last start event (absent: nothing). */
  | { type: "started"; slot: number; cachedTokens: number; queueMs: number; restoredTokens: number; states?: StoreChanges }
  /** `logprobs`: the entries of the tokens this text came from, when the request asked for them. */
  | { type: "text"; text: string; logprobs?: TokenLogprob[] }
  /** Last event of every generation: everything before it has been delivered. */
  | { type: "done" };

/** Host -> worker, on the generation's port. */
export type GenerationControl = { type: "cancel" };
