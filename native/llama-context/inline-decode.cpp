// Decodes a node-llama-cpp context's batch on the calling thread.
//
// node-llama-cpp 3.21.1 runs every llama_decode as an N-API async worker: the batch goes to
// a thread of libuv's pool, which computes it (with the context's CPU thread pool, if any)
// and hands the end back to the JavaScript thread. For a generation step, a few
// milliseconds on a CPU, those hand-offs are a share of the step (docs/engine.md, "Decoding
// on the worker's thread", has what calling llama_decode on the worker's thread gained). The same
// call as node-llama-cpp's worker makes (AddonContextDecodeBatchWorker::Execute in
// llama/addon/AddonContext.cpp of the package), with the same error messages.
//
// JavaScript API (src/engine/worker/inline-decode.ts):
//   inlineDecoder(addonContext) -> handle   the context object node-llama-cpp keeps in
//                                            LlamaContext._ctx; throws Error naming what failed
//   batchTokens(handle) -> number           tokens in the batch the context would decode next
//   decode(handle)                          decodes that batch now; throws as node-llama-cpp's
//                                            decodeBatch() rejects
#include <node_api.h>

#include <exception>
#include <string>

#include "context.h"
#include "llama.h"

namespace llama_context_addon {
namespace {

struct Decoder {
  AddonContext* context = nullptr;
  decltype(&llama_decode) decode = nullptr;
  decltype(&llama_synchronize) synchronize = nullptr;
};

napi_value InlineDecoder(napi_env env, napi_callback_info info) {
  ContextLookup found = ContextArgument(env, info, "inlineDecoder");
  if (found.context == nullptr) return Fail(env, found.problem);
  auto decode = Symbol<decltype(&llama_decode)>(found.library, "llama_decode");
  auto synchronize = Symbol<decltype(&llama_synchronize)>(found.library, "llama_synchronize");
  dlclose(found.library);  // RTLD_NOLOAD took a reference; node keeps its own
  if (!decode || !synchronize) return Fail(env, "llama.cpp lacks llama_decode or llama_synchronize");
  return ReturnHandle(env, new Decoder{found.context, decode, synchronize}, "decoder");
}

napi_value BatchTokens(napi_env env, napi_callback_info info) {
  auto* decoder = HandleArgument<Decoder>(env, info, "decoder");
  if (decoder == nullptr) return nullptr;
  const AddonContext* context = decoder->context;
  return Int32Value(env, context->has_batch && !context->disposed ? context->batch.n_tokens : 0);
}

napi_value Decode(napi_env env, napi_callback_info info) {
  auto* decoder = HandleArgument<Decoder>(env, info, "decoder");
  if (decoder == nullptr) return nullptr;
  AddonContext* context = decoder->context;
  if (context->disposed || context->ctx == nullptr) return Fail(env, "Context is disposed");
  if (!context->has_batch) return Fail(env, "No batch is initialized");
  try {
    const int32_t status = decoder->decode(context->ctx, context->batch);
    if (status == 1) return Fail(env, "could not find a KV slot for the batch (try reducing the size of the batch or increase the context)");
    if (status != 0) return Fail(env, "Eval has failed");
    decoder->synchronize(context->ctx);
  } catch (const std::exception& error) {
    return Fail(env, error.what());
  } catch (...) {
    return Fail(env, "Unknown error when calling \"llama_decode\"");
  }
  return nullptr;
}

}  // namespace

void RegisterInlineDecode(napi_env env, napi_value exports) {
  Export(env, exports, "inlineDecoder", InlineDecoder);
  Export(env, exports, "batchTokens", BatchTokens);
  Export(env, exports, "decode", Decode);
}

}  // namespace llama_context_addon
