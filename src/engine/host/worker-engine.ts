// What the serving layer needs of one worker, whichever engine runs it: a node-llama-cpp
// context in a thread or child process (worker-handle.ts), or a llama-server process that
// this host starts and drives over HTTP (../llama-server/llama-server-engine.ts). The fleet,
// the dispatcher, calibration, /health and the metrics see only this.
import type { FinishReason, GenerationResult, TextPieces, TokenLogprob } from "../../contract/generation.js";
import type { SamplingParams } from "../../contract/sampling.js";
import type { ExportResult, GenerationEvent, ImportResult, LoadResult, ProfileOptions, ProfileResult, WorkerInit, WorkerStats } from "../wire/protocol.js";
import type { TokenIds } from "../../common/tokens.js";
import type { StoreChanges } from "../../scheduler/placement/stored-states.js";

/** How a worker runs: a thread of the host, a child process (node-llama-cpp's or llama-server), or a server elsewhere. */
export type Isolation = "thread" | "process" | "remote";

/**
 * How exact the global tree is about a worker's cache. exact: it knows every token each slot
 * holds; at-least: a request finds at least what it predicts (llama-server's RAM prompt cache
 * may give more); approximate: other clients of a remote server may change its slots.
 */
export type CachePrecision = "exact" | "at-least" | "approximate";

/** Which engine evaluates the model: node-llama-cpp here, llama-server, another Radixgate host, or any OpenAI-compatible server. */
export type EngineKind = "node-llama-cpp" | "llama-server" | "radixgate" | "openai";

/** What an engine that knows its slots better than this host's placements tells the global scheduler. */
export interface CacheReports {
  /** Slot `slot` now holds exactly `tokens`. */
  slotHolds(slot: number, tokens: readonly number[]): void;
  /** Requests it holds now, whoever sent them. */
  load(inFlight: number): void;
  /** Its state store kept and dropped these states (an engine that has a store of ours). */
  storeChanged(changes: StoreChanges): void;
}

export interface GenerateHooks {
  /** The worker took a slot for the request; cachedTokens is known from here on. */
  onStarted?: (event: Extract<GenerationEvent, { type: "started" }>) => void;
  onText?: (text: string, logprobs?: TokenLogprob[]) => void;
  /** Which pieces `onText` needs; an engine may send only the first when told so (absent: all). */
  pieces?: TextPieces;
  /** Aborting cancels the generation; the promise then resolves with finishReason "cancelled". */
  signal?: AbortSignal;
}

export interface WorkerEngine {
  readonly kind: EngineKind;
  readonly id: string;
  /** What the worker was started with; `local` follows hot reloads. */
  readonly init: WorkerInit;
  readonly isolation: Isolation;
  readonly precision: CachePrecision;
  /** A remote engine's base URL; undefined for workers of this host. */
  readonly url: string | undefined;
  /** Resolves with the reason when the worker dies on its own (crash, kill); never on close(). */
  readonly died: Promise<string>;
  /** The worker's OS process id, when it has one of its own. */
  readonly pid: number | undefined;
  /** What the worker reported when it loaded; undefined before. */
  readonly info: LoadResult | undefined;
  /** Generations sent to it that have not ended (queued or running). */
  readonly inFlight: number;
  /** Finished generations by finish reason, across restarts. */
  readonly finished: Record<FinishReason, number>;
  start(): Promise<LoadResult>;
  /** After a death: a fresh worker loads the model again, with the current `init`. */
  restart(): Promise<LoadResult>;
  /** One generation; rejects with WorkerDiedError when the worker dies under it. */
  generate(requestId: string, tokens: TokenIds, sampling: SamplingParams, hooks?: GenerateHooks): Promise<GenerationResult>;
  /** Times the worker in one idle slot, which is left empty (the start-up calibration). */
  profile(options?: ProfileOptions): Promise<ProfileResult>;
  /** Saves a prefix this worker holds for another worker; null when it cannot. */
  exportPrefix(tokens: TokenIds): Promise<ExportResult | null>;
  importState(file: string): Promise<ImportResult>;
  stats(): Promise<WorkerStats>;
  /** Hot reload of the local scheduler's settings; kept for a restart too. */
  configure(local: WorkerInit["local"]): Promise<void>;
  /**
   * Engines that hear of their own cache (another Radixgate host's events) report it here, all
   * of it at once first, then every change; engines that do not, leave it out (the tree then
   * follows this host's placements).
   */
  reportCacheTo?(reports: CacheReports): void;
  /** Fault injection (tests, bench:soak): the worker dies as on a crash. */
  crash(): Promise<void>;
  /** Stops the worker once its generations have ended (cancel them first). */
  close(): Promise<void>;
}
