// Every worker of the box, for every configured model: starts them and finds them by id.
// Whether a worker is alive, and what it holds, is the global scheduler's to know.
import type { Config, ModelConfig } from "../config/schema.js";
import { EngineWorker } from "../engine/engine-worker.js";

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
}

export class Fleet {
  private readonly byId: Map<string, FleetWorker>;

  private constructor(
    readonly models: Map<string, ServedModel>,
    readonly workers: FleetWorker[],
  ) {
    this.byId = new Map(workers.map((worker) => [worker.engine.id, worker]));
  }

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
          local: config.scheduler.local,
          spill: config.spill,
        });
        workers.push({ engine, modelId: model.id });
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
      models.set(model.id, { config: model, path: modelPaths.get(model.id)!, contextSize: first.engine.info!.contextSize, createdAt });
    }
    return new Fleet(models, workers);
  }

  get(workerId: string): FleetWorker | undefined {
    return this.byId.get(workerId);
  }

  workerIds(modelId: string): string[] {
    return this.workers.filter((worker) => worker.modelId === modelId).map((worker) => worker.engine.id);
  }

  async close(): Promise<void> {
    await Promise.allSettled(this.workers.map((worker) => worker.engine.close()));
  }
}
