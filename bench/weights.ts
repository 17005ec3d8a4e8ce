// The bench preset in another weight type, for measuring the engines on the kind of weights
// users serve. The preset is written in F32 (src/presets/make-model.ts), and on F32 and F16
// weights the prebuilt llama.cpp binary evaluates prompts far slower than one compiled on the
// machine (docs/engine.md, "CPU binaries: prebuilt or built here"), which quantized weights do
// not show. The conversion is llama.cpp's own `llama-quantize`, of the same cached build as
// the llama-server peer, so every arm reads the very same file.
import { spawnSync } from "node:child_process";
import { existsSync, renameSync, rmSync, statSync } from "node:fs";
import { findOrBuildLlamaCppTool } from "../src/engine/llama-server/binary.js";

/** `F32` is the preset as written; the others are made from it by llama-quantize. */
export const WEIGHT_TYPES = ["F32", "F16", "Q8_0", "Q4_0"] as const;
export type WeightType = (typeof WEIGHT_TYPES)[number];

/** The `--weights` argument of a bench, checked. */
export function weightTypeArgument(value: string): WeightType {
  if (!(WEIGHT_TYPES as readonly string[]).includes(value))
    throw new RangeError(
      `--weights: ${value} is not one of ${WEIGHT_TYPES.join(", ")} (F32: the bench preset as written; the others converted from it by llama-quantize)`,
    );
  return value as WeightType;
}

/** The preset at `presetPath` in `type` weights: the preset itself for F32, else a converted
 *  copy beside it (`<preset>-<type>.gguf`), made again when the preset is newer. */
export async function presetInWeights(presetPath: string, type: WeightType, onProgress: (line: string) => void): Promise<string> {
  if (type === "F32") return presetPath;
  const out = presetPath.replace(/\.gguf$/, `-${type}.gguf`);
  if (existsSync(out) && statSync(out).mtimeMs >= statSync(presetPath).mtimeMs) return out;
  const quantize = await findOrBuildLlamaCppTool("llama-quantize", onProgress);
  const partial = `${out}.tmp${process.pid}`;
  onProgress(`converting ${presetPath} to ${type} weights: ${out}`);
  const result = spawnSync(quantize, [presetPath, partial, type], { encoding: "utf8" });
  if (result.status !== 0) {
    rmSync(partial, { force: true });
    throw new Error(
      `llama-quantize ${type} failed (exit ${result.status}): ${(result.stderr || result.stdout || "").trim().split("\n").slice(-3).join(" / ")}`,
    );
  }
  renameSync(partial, out);
  return out;
}
