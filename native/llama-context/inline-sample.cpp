// Samples a sequence's next token on the calling thread.
//
// node-llama-cpp 3.21.1 samples every token as an N-API async worker, as it decodes
// (AddonContextSampleTokenWorker in llama/addon/AddonContext.cpp of the package): the call
// goes to a thread of libuv's pool and its result comes back through the event loop, a round
// trip for each generating sequence after every decode step. Measured in a timeline of a
// served worker (`bench` model, 2 threads, built here), a sequence's token came back a median
// 0.28 ms after its step ended, against a step of 3.4 ms in F32 weights and about 1.3 ms in
// Q8_0. This makes the same calls as that worker's Execute (the sampler's chain rebuilt if its
// configuration changed, llama.cpp's samplers applied to the step's logits, the token
// accepted into the sampler's state) on the calling thread, through the sampler's own member
// functions, which node-llama-cpp's addon exports. Only the plain call: a request for the
// candidates' probabilities or the token's confidence keeps node-llama-cpp's path.
//
// JavaScript API (src/engine/worker/inline-decode.ts):
//   inlineSampler(addonContext) -> handle          throws Error naming what failed
//   sample(handle, batchLogitIndex, addonSampler)  the token, or -1 when the samplers left
//                                                   none; throws as sampleToken() rejects
#include <node_api.h>

#include <exception>
#include <string>

#include "context.h"
#include "llama.h"

namespace llama_context_addon {
namespace {

// node-llama-cpp's sampler, as its addon exports it: non-virtual member functions are plain
// functions taking the object first (the Itanium C++ ABI).
struct AddonSamplerObject;
using RebuildChain = void (*)(AddonSamplerObject*);
using SampleInto = void (*)(AddonSamplerObject*, llama_context*, int32_t, llama_token_data_array&, bool);
using AcceptToken = void (*)(AddonSamplerObject*, llama_token);

struct Sampler {
  AddonContext* context = nullptr;
  const void* samplerVtable = nullptr;
  RebuildChain rebuild = nullptr;
  SampleInto sample = nullptr;
  AcceptToken accept = nullptr;
  decltype(&llama_get_logits) logits = nullptr;
};

napi_value InlineSampler(napi_env env, napi_callback_info info) {
  ContextLookup found = ContextArgument(env, info, "inlineSampler");
  if (found.context == nullptr) return Fail(env, found.problem);
  auto* handle = new Sampler{};
  handle->context = found.context;
  const auto* vtable = static_cast<const char*>(dlsym(found.library, "_ZTV12AddonSampler"));
  handle->samplerVtable = vtable == nullptr ? nullptr : vtable + 2 * sizeof(void*);
  handle->rebuild = Symbol<RebuildChain>(found.library, "_ZN12AddonSampler20rebuildChainIfNeededEv");
  handle->sample = Symbol<SampleInto>(found.library, "_ZN12AddonSampler6sampleEP13llama_contextiR22llama_token_data_arrayb");
  handle->accept = Symbol<AcceptToken>(found.library, "_ZN12AddonSampler11acceptTokenEi");
  handle->logits = Symbol<decltype(&llama_get_logits)>(found.library, "llama_get_logits");
  dlclose(found.library);  // RTLD_NOLOAD took a reference; node keeps its own
  if (!handle->samplerVtable || !handle->rebuild || !handle->sample || !handle->accept || !handle->logits) {
    delete handle;
    return Fail(env, "node-llama-cpp's addon does not export AddonSampler's rebuildChainIfNeeded, sample and acceptToken");
  }
  return ReturnHandle(env, handle, "sampler");
}

napi_value Sample(napi_env env, napi_callback_info info) {
  // Once per generated token: the arguments are read once.
  size_t argc = 3;
  napi_value argv[3] = {nullptr, nullptr, nullptr};
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  auto* handle = HandleValue<Sampler>(env, argv[0], "sampler");
  if (handle == nullptr) return nullptr;
  if (argc < 3) return Fail(env, "sample(sampler, batchLogitIndex, addonSampler): three arguments expected");
  int32_t batchLogitIndex = 0;
  if (napi_get_value_int32(env, argv[1], &batchLogitIndex) != napi_ok) return Fail(env, "sample: the batch logit index is not a number");
  // The sampler object must be one of node-llama-cpp's AddonSampler (its vtable is that class's).
  void* wrapped = nullptr;
  if (napi_unwrap(env, argv[2], &wrapped) != napi_ok || wrapped == nullptr || *static_cast<void* const*>(wrapped) != handle->samplerVtable)
    return Fail(env, "sample: not a node-llama-cpp sampler");
  auto* sampler = static_cast<AddonSamplerObject*>(wrapped);
  AddonContext* context = handle->context;
  if (context->disposed || context->ctx == nullptr) return Fail(env, "Context is disposed");
  if (handle->logits(context->ctx) == nullptr) return Fail(env, "This model does not support token generation");
  llama_token token = -1;
  try {
    handle->rebuild(sampler);
    llama_token_data_array candidates{};
    handle->sample(sampler, context->ctx, batchLogitIndex, candidates, false);
    if (candidates.size > 0 && candidates.selected >= 0 && candidates.selected < static_cast<int64_t>(candidates.size)) {
      token = candidates.data[candidates.selected].id;
      try {
        handle->accept(sampler, token);
      } catch (const std::exception& error) {
        return Fail(env, std::string("Failed to accept token in sampler: ") + error.what());
      }
    }
  } catch (const std::exception& error) {
    return Fail(env, error.what());
  } catch (...) {
    return Fail(env, "Unknown error when calling \"SampleToken\"");
  }
  return Int32Value(env, token);
}

}  // namespace

void RegisterInlineSample(napi_env env, napi_value exports) {
  Export(env, exports, "inlineSampler", InlineSampler);
  Export(env, exports, "sample", Sample);
}

}  // namespace llama_context_addon
