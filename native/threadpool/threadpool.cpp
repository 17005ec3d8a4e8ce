// A persistent llama.cpp CPU thread pool for a node-llama-cpp context.
//
// node-llama-cpp 3.21.1 never gives llama.cpp a thread pool, and its prebuilt CPU binaries
// are built without OpenMP, so every graph llama.cpp computes with more than one thread
// creates its helper threads, spins them through one barrier per graph node and joins them
// again (ggml_graph_compute's "disposable threadpool"). In a Node process that halves
// decoding with two threads (docs/engine.md, "Compute threads"). This addon makes the pool
// once, as llama.cpp's own tools do, and attaches it to the context with
// llama_attach_threadpool: its threads live as long as the context and sleep between graphs.
//
// JavaScript API (src/engine/worker/compute-pool.ts):
//   attach(addonContext, threads) -> handle   the context object node-llama-cpp keeps in
//                                              LlamaContext._ctx; throws Error naming what failed
//   release(handle)                           frees the pool; only once the context is disposed
//
// Built by scripts/build-native.mjs against the headers of the very llama.cpp and
// node-llama-cpp that are installed, so AddonContext's layout below is the binary's.
#include <dlfcn.h>
#include <node_api.h>

#include <cstring>
#include <string>

#include "AddonContext.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "llama.h"

namespace {

struct Pool {
  ggml_threadpool* threads = nullptr;
  void (*free_threads)(ggml_threadpool*) = nullptr;
};

napi_value Fail(napi_env env, const std::string& message) {
  napi_throw_error(env, nullptr, message.c_str());
  return nullptr;
}

bool EndsWith(const std::string& text, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return text.size() >= n && text.compare(text.size() - n, n, suffix) == 0;
}

// A handle collected without release() (a worker that crashed before disposing its
// context) frees only itself: the context may still compute on the pool, whose threads
// sleep between graphs.
void ForgetHandle(napi_env, void* data, void*) {
  delete static_cast<Pool*>(data);
}

template <typename Fn>
Fn Symbol(void* library, const char* name) {
  return reinterpret_cast<Fn>(dlsym(library, name));
}

napi_value Attach(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  if (argc < 2) return Fail(env, "attach(context, threads): two arguments expected");
  int32_t threads = 0;
  if (napi_get_value_int32(env, argv[1], &threads) != napi_ok || threads < 1) return Fail(env, "threads must be a positive integer");

  void* wrapped = nullptr;
  if (napi_unwrap(env, argv[0], &wrapped) != napi_ok || wrapped == nullptr) return Fail(env, "not a node-llama-cpp context: the object wraps nothing");
  // Any wrapped object unwraps: check that this one is an AddonContext of node-llama-cpp's
  // addon (its vtable pointer is that class's, which llama-addon.node exports) before
  // reading it as one. dladdr names the library the vtable lies in.
  Dl_info origin{};
  const void* vtable = *static_cast<void* const*>(wrapped);
  if (dladdr(vtable, &origin) == 0 || origin.dli_fname == nullptr || !EndsWith(origin.dli_fname, "llama-addon.node")) {
    return Fail(env, "not a node-llama-cpp context: its class is not from llama-addon.node");
  }
  // The llama.cpp this context runs on: the libraries that llama-addon.node loaded (CPU,
  // CUDA and Vulkan builds have libraries of different names), searched through its handle.
  void* addon = dlopen(origin.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (addon == nullptr) return Fail(env, std::string("llama-addon.node is not loaded: ") + dlerror());
  // An object's vtable pointer points past the vtable's offset-to-top and type-info words.
  const auto* context_vtable = static_cast<const char*>(dlsym(addon, "_ZTV12AddonContext"));
  if (context_vtable == nullptr || vtable != context_vtable + 2 * sizeof(void*)) {
    dlclose(addon);
    return Fail(env, "not a node-llama-cpp context: another class of its addon");
  }
  auto* context = static_cast<AddonContext*>(wrapped);
  if (context->ctx == nullptr || context->disposed) {
    dlclose(addon);
    return Fail(env, "the context is not loaded or already disposed");
  }
  auto attach = Symbol<decltype(&llama_attach_threadpool)>(addon, "llama_attach_threadpool");
  auto device_by_type = Symbol<decltype(&ggml_backend_dev_by_type)>(addon, "ggml_backend_dev_by_type");
  auto device_registry = Symbol<decltype(&ggml_backend_dev_backend_reg)>(addon, "ggml_backend_dev_backend_reg");
  auto proc_address = Symbol<decltype(&ggml_backend_reg_get_proc_address)>(addon, "ggml_backend_reg_get_proc_address");
  auto params_init = Symbol<decltype(&ggml_threadpool_params_init)>(addon, "ggml_threadpool_params_init");
  dlclose(addon);  // RTLD_NOLOAD took a reference; node keeps its own
  if (!attach || !device_by_type || !device_registry || !proc_address || !params_init) {
    return Fail(env, "llama.cpp lacks the thread pool functions (llama_attach_threadpool, ggml_threadpool_params_init)");
  }
  ggml_backend_dev_t cpu = device_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
  if (cpu == nullptr) return Fail(env, "llama.cpp has no CPU backend loaded");
  // The pool functions live in the CPU backend's own library (one of several variants,
  // chosen by instruction set when the backends were loaded): ask the backend for them.
  ggml_backend_reg_t registry = device_registry(cpu);
  auto create = reinterpret_cast<decltype(&ggml_threadpool_new)>(proc_address(registry, "ggml_threadpool_new"));
  auto free_threads = reinterpret_cast<decltype(&ggml_threadpool_free)>(proc_address(registry, "ggml_threadpool_free"));
  if (!create || !free_threads) return Fail(env, "the CPU backend does not export ggml_threadpool_new");

  ggml_threadpool_params params;
  params_init(&params, threads);
  // Sleep as soon as a graph is done instead of polling for the next one: on a box with
  // few cores the polling thread would take a core from Node's own threads between
  // decode steps (measured: polling gained nothing on the 2-core development box).
  params.poll = 0;
  ggml_threadpool* pool = create(&params);
  if (pool == nullptr) return Fail(env, "ggml_threadpool_new failed (threads: " + std::to_string(threads) + ")");
  attach(context->ctx, pool, nullptr);  // one pool for decode steps and prompt batches

  auto* handle = new Pool{pool, free_threads};
  napi_value result;
  if (napi_create_external(env, handle, ForgetHandle, nullptr, &result) != napi_ok) {
    // The context holds the pool now: leave it to the context's lifetime rather than free it under it.
    delete handle;
    return Fail(env, "could not return the pool's handle");
  }
  return result;
}

napi_value Release(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  void* data = nullptr;
  if (argc < 1 || napi_get_value_external(env, argv[0], &data) != napi_ok || data == nullptr) return Fail(env, "release(handle): not a pool handle");
  auto* handle = static_cast<Pool*>(data);
  if (handle->threads != nullptr) {
    handle->free_threads(handle->threads);  // wakes its sleeping threads and joins them
    handle->threads = nullptr;
  }
  return nullptr;
}

}  // namespace

NAPI_MODULE_INIT() {
  napi_value attach;
  napi_value release;
  napi_create_function(env, "attach", NAPI_AUTO_LENGTH, Attach, nullptr, &attach);
  napi_create_function(env, "release", NAPI_AUTO_LENGTH, Release, nullptr, &release);
  napi_set_named_property(env, exports, "attach", attach);
  napi_set_named_property(env, exports, "release", release);
  return exports;
}
