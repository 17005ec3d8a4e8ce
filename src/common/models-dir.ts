// The repository's models/ folder, whatever the working directory: the generated preset
// models, node-llama-cpp's downloads (hf/) and the calibration cache (.calibration/) go there.
import { join } from "node:path";
import { PACKAGE_ROOT } from "./package-root.js";

export const MODELS_DIR = join(PACKAGE_ROOT, "models");
