// A persistent llama.cpp CPU thread pool for a node-llama-cpp context.
//
// node-llama-cpp 3.21.1 never gives llama.cpp a thread pool, and its prebuilt CPU binaries
// are built without OpenMP, so every graph llama.cpp computes with more than one thread
// creates its helper threads, spins them through one barrier per graph node and joins them
// again (ggml_graph_compute's "disposable threadpool"). In a Node process that halves
// decoding with two threads (docs/engine.md, "Compute threads"). This addon makes the pool
// once, as llama.cpp's own tools do, and attaches it to the context with
// llama_attach_threadpool: its threads live as long as the context.
//
// JavaScript API (src/engine/worker/compute-pool.ts; the worker passes its model's threadPoll,
// 0 unless set):
//   attach(addonContext, threads, poll) -> handle   the context object node-llama-cpp keeps in
//                                              LlamaContext._ctx; poll 0-100 as llama.cpp's
//                                              --poll (absent: llama.cpp's default, 50);
//                                              throws Error naming what failed
//   pollOf(handle) -> number                   the polling level the pool was created with
//   release(handle)                           frees the pool; only once the context is disposed
#include <node_api.h>

#include <string>

#include "context.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "llama.h"

namespace llama_context_addon {
namespace {

struct Pool {
  ggml_threadpool* threads = nullptr;
  void (*free_threads)(ggml_threadpool*) = nullptr;
  uint32_t poll = 0;  // what the pool was created with
};

napi_value Attach(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  if (argc < 2) return Fail(env, "attach(context, threads, poll): at least two arguments expected");
  int32_t threads = 0;
  if (napi_get_value_int32(env, argv[1], &threads) != napi_ok || threads < 1) return Fail(env, "threads must be a positive integer");
  int32_t poll = -1;  // llama.cpp's default
  napi_valuetype pollType = napi_undefined;
  if (argc > 2) napi_typeof(env, argv[2], &pollType);
  if (pollType != napi_undefined && (napi_get_value_int32(env, argv[2], &poll) != napi_ok || poll < 0 || poll > 100)) {
    return Fail(env, "poll must be an integer from 0 to 100");
  }

  ContextLookup found = LookUpContext(env, argv[0]);
  if (found.context == nullptr) return Fail(env, found.problem);
  void* addon = found.library;
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
  // How long a helper thread spins for the next graph before it sleeps (0: sleep at once).
  if (poll >= 0) params.poll = static_cast<uint32_t>(poll);
  ggml_threadpool* pool = create(&params);
  if (pool == nullptr) return Fail(env, "ggml_threadpool_new failed (threads: " + std::to_string(threads) + ")");
  attach(found.context->ctx, pool, nullptr);  // one pool for decode steps and prompt batches

  // A handle collected without release() (a worker that crashed before disposing its
  // context), or one that never reached JavaScript, frees only itself: the context may still
  // compute on the pool, whose threads wait between graphs.
  return ReturnHandle(env, new Pool{pool, free_threads, params.poll}, "pool");
}

napi_value PollOf(napi_env env, napi_callback_info info) {
  auto* handle = HandleArgument<Pool>(env, info, "pool");
  if (handle == nullptr) return nullptr;
  napi_value result;
  napi_create_uint32(env, handle->poll, &result);
  return result;
}

napi_value Release(napi_env env, napi_callback_info info) {
  auto* handle = HandleArgument<Pool>(env, info, "pool");
  if (handle == nullptr) return nullptr;
  if (handle->threads != nullptr) {
    handle->free_threads(handle->threads);  // wakes its sleeping threads and joins them
    handle->threads = nullptr;
  }
  return nullptr;
}

}  // namespace

void RegisterThreadPool(napi_env env, napi_value exports) {
  Export(env, exports, "attach", Attach);
  Export(env, exports, "pollOf", PollOf);
  Export(env, exports, "release", Release);
}

}  // namespace llama_context_addon
