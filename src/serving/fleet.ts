// Every worker of the box, for every configured model: starts them, knows which are alive,
// and shows them to placement policies as plain WorkerViews.
import type { Config, ModelConfig } from "../config/schema.js";
import { EngineWorker } from "../engine/engine-worker.js";
import type { LoadResult } from "../engine/protocol.js";
import type { WorkerView } from "../scheduler/types.js";

export interface ServedModel {
  config: ModelConfig;
  path: string;
  /** Tokens per slot, as the workers created it. */
  contextSize: number;
  createdAt: number;
}

export interface FleetWorker {
  engine: EngineWorker;
  modelId: string;
  alive: boolean;
}

export class Fleet {
  private constructor(
    readonly models: Map<string, ServedModel>,
    readonly workers: FleetWorker[],
  ) {}

  /** Starts every worker of every model; resolves once all have loaded (fails if any fails). */
  static async start(config: Config, modelPaths: Map<string, string>): Promise<Fleet> {
    const workers: FleetWorker[] = [];
    for (const model of config.models) {
      for (let i = 0; i < model.workers; i++) {
        const engine = new EngineWorker({
          workerId: `w${workers.length}`,
          modelPath: modelPaths.get(model.id)!,
          slots: model.slots,
          contextSize: model.contextSize,
          batchSize: model.batchSize,
          threads: model.threads,
          gpu: model.gpu,
        });
        workers.push({ engine, modelId: model.id, alive: false });
      }
    }
    const loads = await Promise.allSettled(workers.map((worker) => worker.engine.start()));
    const failed = loads.find((load): load is PromiseRejectedResult => load.status === "rejected");
    if (failed) {
      await Promise.allSettled(workers.map((worker) => worker.engine.close()));
      throw new Error(`a worker failed to load its model: ${(failed.reason as Error).message}`);
    }
    const createdAt = Math.floor(Date.now() / 1000);
    const models = new Map<string, ServedModel>();
    for (const model of config.models) {
      const first = workers.find((worker) => worker.modelId === model.id)!;
      const info = first.engine.info as LoadResult;
      models.set(model.id, { config: model, path: modelPaths.get(model.id)!, contextSize: info.contextSize, createdAt });
    }
    for (const worker of workers) worker.alive = true;
    return new Fleet(models, workers);
  }

  get(workerId: string): FleetWorker | undefined {
    return this.workers.find((worker) => worker.engine.id === workerId);
  }

  /** Live workers serving `modelId`, as placement sees them. */
  candidates(modelId: string): WorkerView[] {
    return this.workers.filter((worker) => worker.alive && worker.modelId === modelId).map(toView);
  }

  views(): WorkerView[] {
    return this.workers.map(toView);
  }

  async close(): Promise<void> {
    for (const worker of this.workers) worker.alive = false;
    await Promise.allSettled(this.workers.map((worker) => worker.engine.close()));
  }
}

function toView(worker: FleetWorker): WorkerView {
  return { id: worker.engine.id, modelId: worker.modelId, alive: worker.alive, inFlight: worker.engine.inFlight };
}
