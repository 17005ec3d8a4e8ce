// A remote llama-server must serve the model this host tokenizes prompts with: requests carry
// token ids, so a server with another vocabulary would answer them as other text. Its
// /v1/models reports the loaded model's shape; the GGUF named by the model's `source` is read
// here (header only) and the two must agree.
import { readGgufFileInfo } from "node-llama-cpp";

export interface ServedModelShape {
  n_vocab?: number;
  n_ctx_train?: number;
  n_embd?: number;
}

/** Throws, naming both sides, when the server's model is not shaped like the local GGUF. */
export async function checkSameModel(baseURL: string, served: ServedModelShape, modelPath: string): Promise<void> {
  const info = await readGgufFileInfo(modelPath, { readTensorInfo: false, logWarnings: false });
  const local: ServedModelShape = {
    n_vocab: (info.metadata.tokenizer?.ggml?.tokens as readonly unknown[] | undefined)?.length,
    n_ctx_train: info.architectureMetadata.context_length,
    n_embd: info.architectureMetadata.embedding_length,
  };
  const differ = (Object.keys(local) as (keyof ServedModelShape)[]).filter(
    (key) => local[key] !== undefined && served[key] !== undefined && local[key] !== served[key],
  );
  if (differ.length > 0) {
    const show = (shape: ServedModelShape) => differ.map((key) => `${key} ${shape[key]}`).join(", ");
    throw new Error(
      `the llama-server at ${baseURL} serves another model (${show(served)}) than ${modelPath} (${show(local)}): ` +
        "point the model's `source` at the GGUF that server loaded; Radixgate tokenizes prompts with it",
    );
  }
}
