// What both parts of the addon need: a node-llama-cpp context object read safely, and the
// llama.cpp library it runs on.
//
// Built by scripts/build-native.mjs against the headers of the very llama.cpp and
// node-llama-cpp that are installed, so AddonContext's layout is the binary's.
#pragma once

#include <dlfcn.h>
#include <node_api.h>

#include <cstring>
#include <string>

#include "AddonContext.h"

namespace llama_context_addon {

inline napi_value Fail(napi_env env, const std::string& message) {
  napi_throw_error(env, nullptr, message.c_str());
  return nullptr;
}

// A JavaScript number holding `value`.
inline napi_value Int32Value(napi_env env, int32_t value) {
  napi_value result;
  napi_create_int32(env, value, &result);
  return result;
}

inline bool EndsWith(const std::string& text, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return text.size() >= n && text.compare(text.size() - n, n, suffix) == 0;
}

template <typename Fn>
Fn Symbol(void* library, const char* name) {
  return reinterpret_cast<Fn>(dlsym(library, name));
}

inline void Export(napi_env env, napi_value exports, const char* name, napi_callback function) {
  napi_value value;
  napi_create_function(env, name, NAPI_AUTO_LENGTH, function, nullptr, &value);
  napi_set_named_property(env, exports, name, value);
}

template <typename T>
void DeleteHandle(napi_env, void* data, void*) {
  delete static_cast<T*>(data);
}

// Hands `handle` to JavaScript as an external that is deleted (the struct only) when it is
// collected; deletes it and throws (naming `what`) if that fails.
template <typename T>
napi_value ReturnHandle(napi_env env, T* handle, const char* what) {
  napi_value result;
  if (napi_create_external(env, handle, DeleteHandle<T>, nullptr, &result) != napi_ok) {
    delete handle;
    return Fail(env, std::string("could not return the ") + what + "'s handle");
  }
  return result;
}

// The handle `value` holds, or null after throwing "not a <what> handle".
template <typename T>
T* HandleValue(napi_env env, napi_value value, const char* what) {
  void* data = nullptr;
  if (value == nullptr || napi_get_value_external(env, value, &data) != napi_ok || data == nullptr) {
    Fail(env, std::string("not a ") + what + " handle");
    return nullptr;
  }
  return static_cast<T*>(data);
}

// The handle a function got as its first argument, or null after throwing "not a <what> handle".
template <typename T>
T* HandleArgument(napi_env env, napi_callback_info info, const char* what) {
  size_t argc = 1;
  napi_value argv[1] = {nullptr};
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  return HandleValue<T>(env, argc < 1 ? nullptr : argv[0], what);
}

// A live context of node-llama-cpp's addon and a handle on that addon's library (dlclose it
// once the symbols are read: node keeps its own reference), or a reason why not.
struct ContextLookup {
  AddonContext* context = nullptr;
  void* library = nullptr;
  std::string problem;
};

// Any wrapped object unwraps: this checks that `value` wraps an AddonContext of node-llama-
// cpp's addon (its vtable pointer is that class's, which llama-addon.node exports) before
// reading it as one. dladdr names the library the vtable lies in; searching symbols through
// its handle finds the llama.cpp that addon loaded (CPU, CUDA and Vulkan builds have
// libraries of different names).
inline ContextLookup LookUpContext(napi_env env, napi_value value) {
  ContextLookup found;
  void* wrapped = nullptr;
  if (napi_unwrap(env, value, &wrapped) != napi_ok || wrapped == nullptr) {
    found.problem = "not a node-llama-cpp context: the object wraps nothing";
    return found;
  }
  Dl_info origin{};
  const void* vtable = *static_cast<void* const*>(wrapped);
  if (dladdr(vtable, &origin) == 0 || origin.dli_fname == nullptr || !EndsWith(origin.dli_fname, "llama-addon.node")) {
    found.problem = "not a node-llama-cpp context: its class is not from llama-addon.node";
    return found;
  }
  void* addon = dlopen(origin.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (addon == nullptr) {
    found.problem = std::string("llama-addon.node is not loaded: ") + dlerror();
    return found;
  }
  // An object's vtable pointer points past the vtable's offset-to-top and type-info words.
  const auto* context_vtable = static_cast<const char*>(dlsym(addon, "_ZTV12AddonContext"));
  if (context_vtable == nullptr || vtable != context_vtable + 2 * sizeof(void*)) {
    dlclose(addon);
    found.problem = "not a node-llama-cpp context: another class of its addon";
    return found;
  }
  auto* context = static_cast<AddonContext*>(wrapped);
  if (context->ctx == nullptr || context->disposed) {
    dlclose(addon);
    found.problem = "the context is not loaded or already disposed";
    return found;
  }
  found.context = context;
  found.library = addon;
  return found;
}

// LookUpContext on a function's first argument; `call` names the function for the error.
inline ContextLookup ContextArgument(napi_env env, napi_callback_info info, const char* call) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  if (argc < 1) {
    ContextLookup missing;
    missing.problem = std::string(call) + "(context): one argument expected";
    return missing;
  }
  return LookUpContext(env, argv[0]);
}

}  // namespace llama_context_addon
