// One chat completion from validated input to result: render + tokenize once in the host,
// place on a worker with the configured policy, run it there. Errors a client can act on are
// ServingErrors; the HTTP layer only formats them.
import type { PromptPreparer } from "../engine/prompt-preparer.js";
import type { ChatTurn } from "../engine/prompt-protocol.js";
import type { GenerationResult, SamplingParams } from "../engine/protocol.js";
import type { PlacementPolicy, PlacementRequest } from "../scheduler/types.js";
import { ServingError } from "./errors.js";
import type { Fleet, FleetWorker } from "./fleet.js";

export interface ChatJob {
  requestId: string;
  modelId: string;
  messages: ChatTurn[];
  /** max_tokens from the request, if any; capped to what fits in the slot. */
  maxTokens?: number;
  sampling: Omit<SamplingParams, "maxTokens">;
  /** Operator override: run on this worker id (header x-radixgate-worker), bypassing the policy. */
  pinnedWorkerId?: string;
  signal?: AbortSignal;
}

export interface ChatStart {
  workerId: string;
  promptTokens: number;
  cachedTokens: number;
  placement: string;
}

export interface ChatHooks {
  /** The worker has the request in a slot: headers can be written from here on. */
  onStarted?: (start: ChatStart) => void;
  onText?: (text: string) => void;
}

export interface ChatOutcome extends GenerationResult {
  workerId: string;
  placement: string;
}

export class CompletionService {
  constructor(
    private readonly fleet: Fleet,
    private readonly preparer: PromptPreparer,
    private readonly policy: PlacementPolicy,
    private readonly defaultMaxTokens: number,
  ) {}

  async chat(job: ChatJob, hooks: ChatHooks = {}): Promise<ChatOutcome> {
    const model = this.fleet.models.get(job.modelId);
    if (!model) {
      throw new ServingError(
        "model_not_found",
        `The model "${job.modelId}" is not served here. Served models: ${[...this.fleet.models.keys()].join(", ")}.`,
        "model",
      );
    }
    const { tokens } = await this.preparer.chat({ modelId: job.modelId, messages: job.messages });
    // The generation needs room for at least one completion token in the slot.
    if (tokens.length >= model.contextSize) {
      throw new ServingError(
        "context_length_exceeded",
        `The prompt is ${tokens.length} tokens but a slot of model "${job.modelId}" holds ${model.contextSize} tokens ` +
          `(prompt plus completion). Shorten the messages or raise contextSize in config.yml.`,
        "messages",
      );
    }
    const maxTokens = Math.min(job.maxTokens ?? this.defaultMaxTokens, model.contextSize - tokens.length);
    const request: PlacementRequest = { modelId: job.modelId, tokens, messageCount: job.messages.length };
    const { worker, placement } = this.place(request, job.pinnedWorkerId);

    let ok = false;
    let cachedTokens = 0;
    try {
      const result = await worker.engine.generate(
        job.requestId,
        tokens,
        { ...job.sampling, maxTokens },
        {
          signal: job.signal,
          onStarted: (event) => {
            cachedTokens = event.cachedTokens;
            hooks.onStarted?.({ workerId: worker.engine.id, promptTokens: tokens.length, cachedTokens, placement });
          },
          onText: hooks.onText,
        },
      );
      ok = true;
      return { ...result, workerId: worker.engine.id, placement };
    } catch (error) {
      throw new ServingError("worker_failed", `Worker ${worker.engine.id} failed while generating (request ${job.requestId}): ${(error as Error).message}`);
    } finally {
      this.policy.onRequestComplete?.(worker.engine.id, request, { ok, cachedTokens });
    }
  }

  private place(request: PlacementRequest, pinnedWorkerId: string | undefined): { worker: FleetWorker; placement: string } {
    if (pinnedWorkerId !== undefined) {
      const worker = this.fleet.get(pinnedWorkerId);
      if (!worker || worker.modelId !== request.modelId) {
        const ids = this.fleet.candidates(request.modelId).map((view) => view.id);
        throw new ServingError(
          "worker_not_found",
          `x-radixgate-worker names "${pinnedWorkerId}", which is not a worker of model "${request.modelId}". Its workers: ${ids.join(", ") || "none"}.`,
          "x-radixgate-worker",
        );
      }
      if (!worker.alive) throw new ServingError("no_live_worker", `Worker ${pinnedWorkerId} is down; retry without x-radixgate-worker.`);
      return { worker, placement: "pinned" };
    }
    const decision = this.policy.place(request, this.fleet.candidates(request.modelId));
    const worker = decision && this.fleet.get(decision.workerId);
    if (!decision || !worker) {
      throw new ServingError("no_live_worker", `No live worker serves model "${request.modelId}" right now; retry shortly.`);
    }
    return { worker, placement: decision.reason };
  }
}
