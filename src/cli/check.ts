// `radixgate check`: validates a config file without serving, and says what starting the
// server would do with it: the settings after defaults and environment, where each model's
// file comes from, the GPUs found and which worker runs where.
import { existsSync } from "node:fs";
import { stringify as toYaml } from "yaml";
import type { Config } from "../config/schema.js";
import { planModelSource, type ModelSourcePlan } from "../engine/host/model-source.js";
import { planFleet } from "../serving/fleet.js";
import { loadConfigFor, type ServeOptions } from "./serve.js";

export interface CheckReport {
  path: string;
  config: Config;
  models: { id: string; source: string; file: string }[];
  workers: { id: string; model: string; isolation: string; backend: string; devices: string[]; env: Record<string, string> }[];
}

export async function checkConfig(options: ServeOptions): Promise<CheckReport> {
  const { config, path, dir } = loadConfigFor(options);
  const models = config.models.map((model) => ({
    id: model.id,
    source: model.source,
    file: describeSource(planModelSource(model.source, { configDir: dir, seed: model.seed })),
  }));
  const workers = (await planFleet(config)).map((worker) => ({
    id: worker.workerId,
    model: worker.model.id,
    isolation: worker.isolation,
    backend: worker.gpus.backend,
    devices: worker.gpus.devices.map((device) => device.name),
    env: worker.env,
  }));
  return { path, config, models, workers };
}

function describeSource(plan: ModelSourcePlan): string {
  switch (plan.kind) {
    case "preset":
      return `${plan.path} (${existsSync(plan.path) ? "present" : "generated on first start"})`;
    case "download":
      return `downloaded on first start into models/hf/ (${plan.uri})`;
    case "file":
      return plan.path;
  }
}

/** The report for a person: what is served where, then every setting. */
export function formatCheckReport(report: CheckReport): string {
  const { config } = report;
  const lines = [`${report.path}: valid`, "", `policy: ${config.scheduler.policy}`, `listens on: ${config.server.host}:${config.server.port}`, "", "models:"];
  for (const model of report.models) lines.push(`  ${model.id}  ${model.source} -> ${model.file}`);
  lines.push("", "workers:");
  for (const worker of report.workers) {
    const model = config.models.find((candidate) => candidate.id === worker.model)!;
    const where = worker.devices.length > 0 ? `${worker.backend} (${worker.devices.join(", ")})` : worker.backend;
    const pinned = Object.entries(worker.env).map(([name, value]) => ` ${name}=${value}`);
    lines.push(
      `  ${worker.id}  ${worker.model}  ${worker.isolation}  ${where}${pinned.join("")}  ` +
        `${model.slots} slots x ${model.contextSize} tokens, ${model.threads} CPU thread${model.threads === 1 ? "" : "s"}`,
    );
  }
  lines.push("", "settings (defaults filled in, environment and options applied):", toYaml(config).trimEnd());
  return `${lines.join("\n")}\n`;
}
