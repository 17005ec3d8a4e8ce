// Turns a model's `source` from config.yml into a local .gguf path:
//   preset:<name>      a model the project generates itself (src/presets/make-model.ts), made on
//                      first use, never downloaded;
//   hf:<user>/<repo>…  or an https URL: fetched once by node-llama-cpp into models/hf/;
//   anything else      a file path, relative to config.yml's folder.
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { resolveModelFile } from "node-llama-cpp";
import { MODELS_DIR } from "../../common/models-dir.js";
import { DEFAULT_SEED, PRESETS, defaultModelPath, ensureModel, isPresetName, type PresetName } from "../../presets/make-model.js";

export class ModelSourceError extends Error {
  override name = "ModelSourceError";
}

export interface ModelSourceOptions {
  configDir: string;
  seed: number;
}

/** Where a source's file is (or will be) and what starting the server does about it; no side effect. */
export type ModelSourcePlan = { kind: "preset"; preset: PresetName; path: string } | { kind: "download"; uri: string } | { kind: "file"; path: string };

export function planModelSource(source: string, options: ModelSourceOptions): ModelSourcePlan {
  if (source.startsWith("preset:")) {
    const preset = source.slice("preset:".length);
    if (!isPresetName(preset)) {
      throw new ModelSourceError(`unknown model preset "${preset}" in "${source}"; presets: ${Object.keys(PRESETS).join(", ")}`);
    }
    // One file per preset and seed, so changing the seed never reuses a stale file.
    const path = options.seed === DEFAULT_SEED ? defaultModelPath(preset) : join(MODELS_DIR, `${preset}-seed${options.seed}.gguf`);
    return { kind: "preset", preset, path };
  }
  if (source.startsWith("hf:") || /^https?:\/\//.test(source)) return { kind: "download", uri: source };
  const path = resolve(options.configDir, source);
  if (!existsSync(path)) {
    throw new ModelSourceError(`model file not found: ${path} (from source "${source}"); use a .gguf path, preset:tiny, or an hf: URI`);
  }
  return { kind: "file", path };
}

export async function resolveModelSource(source: string, options: ModelSourceOptions): Promise<string> {
  const plan = planModelSource(source, options);
  switch (plan.kind) {
    case "preset":
      return ensureModel(plan.preset, { seed: options.seed, path: plan.path });
    case "download":
      // node-llama-cpp draws its download progress bar only for a person at a terminal.
      return resolveModelFile(plan.uri, { directory: join(MODELS_DIR, "hf"), cli: process.stderr.isTTY === true });
    case "file":
      return plan.path;
  }
}
