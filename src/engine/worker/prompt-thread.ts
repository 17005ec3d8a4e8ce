// Renders chat messages with each model's own chat template and tokenizes them, in a thread
// of its own so that long prompts never block the HTTP event loop. Models are loaded
// vocabulary-only: no weights, no context, just the tokenizer and the template metadata.
import { LlamaLogLevel, resolveChatWrapper, type ChatWrapper, type Llama, type LlamaModel } from "node-llama-cpp";
import { promptWithBos } from "../../common/tokens.js";
import { loadLlama } from "./llama-binary.js";
import { availableFunctionsOf, chatHistoryOf, toolCallSyntaxOf } from "./chat-history.js";
import { toolCallGrammarText } from "./grammars.js";
import { threadData } from "./thread-data.js";
import type {
  ChatPromptTask,
  PromptModel,
  PromptTask,
  PreparedPrompt,
  TextPromptTask,
  TokenizedText,
  ToolCallGrammar,
  VocabInfo,
  VocabTask,
} from "../wire/prompt-protocol.js";

const models = threadData<PromptModel[]>();

interface Tokenizer {
  model: LlamaModel;
  chatWrapper: ChatWrapper;
}

interface Tokenizers {
  llama: Llama;
  byModel: Map<string, Tokenizer>;
}

let tokenizers: Promise<Tokenizers> | undefined;

async function loadTokenizers(): Promise<Tokenizers> {
  const llama = await loadLlama({ gpu: false, build: "never", maxThreads: 1, logLevel: LlamaLogLevel.warn });
  const byModel = new Map<string, Tokenizer>();
  for (const { id, path } of models) {
    const model = await llama.loadModel({ modelPath: path, vocabOnly: true, gpuLayers: 0 });
    byModel.set(id, { model, chatWrapper: resolveChatWrapper(model) });
  }
  return { llama, byModel };
}

export default async function handlePromptTask(task: PromptTask): Promise<PreparedPrompt | TokenizedText | VocabInfo | ToolCallGrammar | null> {
  switch (task.kind) {
    case "chat":
      return renderChat(task);
    case "text":
      return tokenizeText(task);
    case "vocab":
      return vocabInfo(task);
    case "tool-call-grammar": {
      tokenizers ??= loadTokenizers();
      return toolCallGrammarText((await tokenizers).llama, task.constraint);
    }
    case "dispose":
      await disposeTokenizers();
      return null;
    default:
      return task satisfies never;
  }
}

async function disposeTokenizers(): Promise<void> {
  if (!tokenizers) return;
  const { llama, byModel } = await tokenizers;
  tokenizers = undefined;
  for (const { model } of byModel.values()) await model.dispose();
  await llama.dispose();
}

async function tokenizerOf(modelId: string): Promise<Tokenizer> {
  tokenizers ??= loadTokenizers();
  const tokenizer = (await tokenizers).byModel.get(modelId);
  if (!tokenizer) throw new Error(`prompt thread has no tokenizer for model "${modelId}"`);
  return tokenizer;
}

async function renderChat(task: ChatPromptTask): Promise<PreparedPrompt> {
  const tokenizer = await tokenizerOf(task.modelId);
  const { contextText } = tokenizer.chatWrapper.generateContextState({
    chatHistory: chatHistoryOf(task.messages, tokenizer.chatWrapper),
    ...(task.tools ? { availableFunctions: availableFunctionsOf(task.tools) } : {}),
  });
  const tokens = promptWithBos(contextText.tokenize(tokenizer.model.tokenizer), bosOf(tokenizer.model));
  return {
    tokens,
    chatTemplate: tokenizer.chatWrapper.wrapperName,
    ...(task.tools ? { toolCallSyntax: toolCallSyntaxOf(tokenizer.chatWrapper) } : {}),
  };
}

/**
 * A raw prompt as one text. Special-token text is parsed (the client owns the whole prompt,
 * as with llama.cpp's server); "trimLeadingSpace" tokenizes it as it reads after BOS, which
 * is how node-llama-cpp's own LlamaCompletion tokenizes a text input.
 */
async function tokenizeText(task: TextPromptTask): Promise<TokenizedText> {
  const { model } = await tokenizerOf(task.modelId);
  const tokens = model.tokenize(task.text, true, bosOf(model) !== null ? "trimLeadingSpace" : undefined);
  return { tokens: promptWithBos(tokens, bosOf(model)) };
}

async function vocabInfo(task: VocabTask): Promise<VocabInfo> {
  const { model } = await tokenizerOf(task.modelId);
  // node-llama-cpp 3.21.1 has no n_vocab accessor: the GGUF's token list is the vocabulary.
  const metadata = model.fileInfo.metadata as { tokenizer?: { ggml?: { tokens?: readonly unknown[] } } };
  const tokens = metadata.tokenizer?.ggml?.tokens;
  const size = tokens?.length ?? model.fileInfo.architectureMetadata.vocab_size;
  if (size === undefined) throw new Error(`model "${task.modelId}" declares no vocabulary size`);
  let longestTokenBytes = 1;
  for (const token of tokens ?? []) if (typeof token === "string") longestTokenBytes = Math.max(longestTokenBytes, Buffer.byteLength(token, "utf8"));
  // Without the token list there is no bound to give: no text is refused by its length alone.
  if (tokens === undefined) longestTokenBytes = Number.POSITIVE_INFINITY;
  return { size, bos: bosOf(model), longestTokenBytes };
}

/** The token the worker's prompts start with (null: the model wants none); the exact tokens
 *  the worker evaluates carry it first (promptWithBos). */
function bosOf(model: LlamaModel): number | null {
  return model.tokens.shouldPrependBosToken ? model.tokens.bos : null;
}
