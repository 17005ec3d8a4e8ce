// The repository's models/ folder, whatever the working directory: the generated preset
// models, node-llama-cpp's downloads (hf/) and the calibration cache (.calibration/) go there.
import { fileURLToPath } from "node:url";

export const MODELS_DIR = fileURLToPath(new URL("../../models", import.meta.url));
