// The llama-context addon: what Radixgate adds to a node-llama-cpp context from native code.
// Each part registers its functions here (thread-pool.cpp, inline-decode.cpp, inline-sample.cpp, generate.cpp).
#include <node_api.h>

namespace llama_context_addon {
void RegisterThreadPool(napi_env env, napi_value exports);
void RegisterInlineDecode(napi_env env, napi_value exports);
void RegisterInlineSample(napi_env env, napi_value exports);
void RegisterGenerate(napi_env env, napi_value exports);
}  // namespace llama_context_addon

NAPI_MODULE_INIT() {
  llama_context_addon::RegisterThreadPool(env, exports);
  llama_context_addon::RegisterInlineDecode(env, exports);
  llama_context_addon::RegisterInlineSample(env, exports);
  llama_context_addon::RegisterGenerate(env, exports);
  return exports;
}
