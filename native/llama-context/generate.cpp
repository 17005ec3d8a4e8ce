// Generates several tokens for several sequences of a node-llama-cpp context in one call.
//
// node-llama-cpp 3.21.1 runs a generation step through a chain of JavaScript promises: the
// batch is formed, decoded, each sequence's token sampled, its sampler configuration resolved
// and applied again, the token handed back through an async generator to LlamaCompletion,
// which detokenizes it, checks its stop triggers and queues the next one. On quantized
// weights, where a step of one sequence is about a millisecond on a CPU, that JavaScript is a
// sixth of the step (docs/engine.md, "Several steps per call"). Here the step's loop is
// llama.cpp's own: the pending token of every sequence in one batch, decoded, each
// sequence's next token sampled by its own llama.cpp sampler chain and checked against the
// vocabulary's end-of-generation tokens, again and again until a sequence ends, its budget is
// spent, or the call has run `maxMs` (so the worker reads its messages between calls), or
// a message from the host is waiting (the attention word raised, or the IPC channel readable:
// see below).
//
// JavaScript API (src/engine/worker/native-generation.ts):
//   generator(addonContext, maxSequences) -> handle     throws Error naming what failed
//   samplerChain(handle, temperature, topP, topK, seed) -> chain   node-llama-cpp's chain for those
//                                                         settings (greedy at temperature 0)
//   generate(handle, chains, state, out, maxSteps, maxMs, stopTokens[, attention[, attentionFd]]) -> steps run
//     state: Int32Array, STATE_FIELDS per sequence: its sequence id, its pending token (sampled,
//     not decoded yet), that token's position, its budget (steps it may still run); the call
//     sets `ended` (1: it sampled an end-of-generation token or one of `stopTokens`, 2: its
//     budget is spent) and `produced` (tokens it sampled in this call, written to
//     out[i * maxSteps ...]). A sequence already ended, or with no budget, sits the call out.
//     Throws as node-llama-cpp's decodeBatch() rejects; the state then tells what was done.
//     attention: an Int32Array on a SharedArrayBuffer (or undefined); the call ends after the
//     step during which another thread made its first element non-zero (at least one step is
//     run). attentionFd: a file descriptor (or -1); the call ends after the step during which
//     it became readable (a process worker's IPC channel: a message from the host waits).
#include <node_api.h>
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <string>
#include <vector>

#include "context.h"
#include "llama.h"

namespace llama_context_addon {
namespace {

constexpr int kSequenceId = 0;
constexpr int kPending = 1;
constexpr int kPosition = 2;
constexpr int kBudget = 3;
constexpr int kEnded = 4;
constexpr int kProduced = 5;
constexpr int kStateFields = 6;

constexpr int32_t kEndedStopToken = 1;
constexpr int32_t kEndedBudget = 2;

struct Library {
  decltype(&llama_decode) decode = nullptr;
  decltype(&llama_synchronize) synchronize = nullptr;
  decltype(&llama_batch_init) batchInit = nullptr;
  decltype(&llama_batch_free) batchFree = nullptr;
  decltype(&llama_get_model) model = nullptr;
  decltype(&llama_model_get_vocab) vocab = nullptr;
  decltype(&llama_vocab_is_eog) isEog = nullptr;
  decltype(&llama_vocab_n_tokens) vocabSize = nullptr;
  decltype(&llama_sampler_chain_default_params) chainParams = nullptr;
  decltype(&llama_sampler_chain_init) chainInit = nullptr;
  decltype(&llama_sampler_chain_add) chainAdd = nullptr;
  decltype(&llama_sampler_init_greedy) greedy = nullptr;
  decltype(&llama_sampler_init_top_k) topK = nullptr;
  decltype(&llama_sampler_init_top_p) topP = nullptr;
  decltype(&llama_sampler_init_temp) temp = nullptr;
  decltype(&llama_sampler_init_dist) dist = nullptr;
  decltype(&llama_sampler_sample) sample = nullptr;
  decltype(&llama_sampler_free) samplerFree = nullptr;

  bool Read(void* library) {
    decode = Symbol<decltype(decode)>(library, "llama_decode");
    synchronize = Symbol<decltype(synchronize)>(library, "llama_synchronize");
    batchInit = Symbol<decltype(batchInit)>(library, "llama_batch_init");
    batchFree = Symbol<decltype(batchFree)>(library, "llama_batch_free");
    model = Symbol<decltype(model)>(library, "llama_get_model");
    vocab = Symbol<decltype(vocab)>(library, "llama_model_get_vocab");
    isEog = Symbol<decltype(isEog)>(library, "llama_vocab_is_eog");
    vocabSize = Symbol<decltype(vocabSize)>(library, "llama_vocab_n_tokens");
    chainParams = Symbol<decltype(chainParams)>(library, "llama_sampler_chain_default_params");
    chainInit = Symbol<decltype(chainInit)>(library, "llama_sampler_chain_init");
    chainAdd = Symbol<decltype(chainAdd)>(library, "llama_sampler_chain_add");
    greedy = Symbol<decltype(greedy)>(library, "llama_sampler_init_greedy");
    topK = Symbol<decltype(topK)>(library, "llama_sampler_init_top_k");
    topP = Symbol<decltype(topP)>(library, "llama_sampler_init_top_p");
    temp = Symbol<decltype(temp)>(library, "llama_sampler_init_temp");
    dist = Symbol<decltype(dist)>(library, "llama_sampler_init_dist");
    sample = Symbol<decltype(sample)>(library, "llama_sampler_sample");
    samplerFree = Symbol<decltype(samplerFree)>(library, "llama_sampler_free");
    return decode && synchronize && batchInit && batchFree && model && vocab && isEog && vocabSize && chainParams && chainInit &&
           chainAdd && greedy && topK && topP && temp && dist && sample && samplerFree;
  }
};

struct Generator {
  AddonContext* context = nullptr;
  Library llama;
  int32_t maxSequences = 0;
  llama_batch batch{};

  ~Generator() {
    if (llama.batchFree) llama.batchFree(batch);
  }
};

struct SamplerChain {
  llama_sampler* chain = nullptr;
  decltype(&llama_sampler_free) free = nullptr;

  ~SamplerChain() {
    if (chain && free) free(chain);
  }
};

napi_value MakeGenerator(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2] = {nullptr, nullptr};
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  if (argc < 2) return Fail(env, "generator(addonContext, maxSequences): two arguments expected");
  int32_t maxSequences = 0;
  if (napi_get_value_int32(env, argv[1], &maxSequences) != napi_ok || maxSequences < 1)
    return Fail(env, "generator: maxSequences must be a positive number");
  ContextLookup found = LookUpContext(env, argv[0]);
  if (found.context == nullptr) return Fail(env, found.problem);
  auto* generator = new Generator{};
  generator->context = found.context;
  const bool complete = generator->llama.Read(found.library);
  dlclose(found.library);  // RTLD_NOLOAD took a reference; node keeps its own
  if (!complete) {
    delete generator;
    return Fail(env, "llama.cpp lacks a function the generation loop calls (decode, batch, vocabulary or sampler API)");
  }
  generator->maxSequences = maxSequences;
  generator->batch = generator->llama.batchInit(maxSequences, 0, 1);
  return ReturnHandle(env, generator, "generator");
}

// The chain node-llama-cpp's sampler builds for the same settings (AddonSampler::
// rebuildChainIfNeeded in llama/addon/AddonSampler.cpp of the package): greedy at temperature
// 0; otherwise top-k (all tokens when k <= 0), top-p (when 0 <= p < 1), temperature, then a
// draw seeded with `seed`.
napi_value MakeSampler(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5] = {nullptr, nullptr, nullptr, nullptr, nullptr};
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  auto* generator = HandleValue<Generator>(env, argv[0], "generator");
  if (generator == nullptr) return nullptr;
  double temperature = 0, topP = 1;
  int32_t topK = 0;
  uint32_t seed = 0;
  if (argc < 5 || napi_get_value_double(env, argv[1], &temperature) != napi_ok || napi_get_value_double(env, argv[2], &topP) != napi_ok ||
      napi_get_value_int32(env, argv[3], &topK) != napi_ok || napi_get_value_uint32(env, argv[4], &seed) != napi_ok)
    return Fail(env, "samplerChain(generator, temperature, topP, topK, seed): four numbers expected after the generator");
  AddonContext* context = generator->context;
  if (context->disposed || context->ctx == nullptr) return Fail(env, "Context is disposed");
  const Library& llama = generator->llama;
  auto* made = new SamplerChain{llama.chainInit(llama.chainParams()), llama.samplerFree};
  if (temperature <= 0) {
    llama.chainAdd(made->chain, llama.greedy());
  } else {
    const int32_t vocabSize = llama.vocabSize(llama.vocab(llama.model(context->ctx)));
    llama.chainAdd(made->chain, llama.topK(topK <= 0 ? vocabSize : std::min(topK, vocabSize)));
    if (topP >= 0 && topP < 1) llama.chainAdd(made->chain, llama.topP(static_cast<float>(topP), 1));
    llama.chainAdd(made->chain, llama.temp(static_cast<float>(temperature)));
    llama.chainAdd(made->chain, llama.dist(seed));
  }
  return ReturnHandle(env, made, "sampler chain");
}

// Reads the Int32Array `value` (an empty one has no data pointer); false after throwing.
bool Int32s(napi_env env, napi_value value, int32_t** data, size_t* length, const char* what) {
  napi_typedarray_type type;
  void* viewed = nullptr;
  if (napi_get_typedarray_info(env, value, &type, length, &viewed, nullptr, nullptr) != napi_ok || type != napi_int32_array) {
    Fail(env, std::string("generate: ") + what + " must be an Int32Array");
    return false;
  }
  *data = static_cast<int32_t*>(viewed);
  return true;
}

napi_value Generate(napi_env env, napi_callback_info info) {
  size_t argc = 9;
  napi_value argv[9] = {nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  auto* generator = HandleValue<Generator>(env, argv[0], "generator");
  if (generator == nullptr) return nullptr;
  if (argc < 7) return Fail(env, "generate(generator, chains, state, out, maxSteps, maxMs, stopTokens): seven arguments expected");
  size_t stateLength = 0, outLength = 0, stopLength = 0;
  int32_t* state = nullptr;
  int32_t* out = nullptr;
  int32_t* stopTokens = nullptr;
  if (!Int32s(env, argv[2], &state, &stateLength, "state") || !Int32s(env, argv[3], &out, &outLength, "out") ||
      !Int32s(env, argv[6], &stopTokens, &stopLength, "stopTokens"))
    return nullptr;
  int32_t* attention = nullptr;
  if (argc >= 8) {
    napi_valuetype type;
    napi_typeof(env, argv[7], &type);
    size_t attentionLength = 0;
    if (type != napi_undefined) {
      if (!Int32s(env, argv[7], &attention, &attentionLength, "attention")) return nullptr;
      if (attentionLength < 1) return Fail(env, "generate: attention must hold at least one element");
    }
  }
  int32_t attentionFd = -1;
  if (argc >= 9 && napi_get_value_int32(env, argv[8], &attentionFd) != napi_ok) return Fail(env, "generate: attentionFd must be a number");
  int32_t maxSteps = 0;
  double maxMs = 0;
  if (napi_get_value_int32(env, argv[4], &maxSteps) != napi_ok || maxSteps < 1) return Fail(env, "generate: maxSteps must be a positive number");
  if (napi_get_value_double(env, argv[5], &maxMs) != napi_ok) return Fail(env, "generate: maxMs must be a number");
  const size_t sequences = stateLength / kStateFields;
  if (stateLength % kStateFields != 0 || sequences == 0 || sequences > static_cast<size_t>(generator->maxSequences))
    return Fail(env, "generate: state must hold 1 to maxSequences sequences of " + std::to_string(kStateFields) + " fields");
  if (outLength < sequences * static_cast<size_t>(maxSteps)) return Fail(env, "generate: out must hold maxSteps tokens per sequence");
  uint32_t chainCount = 0;
  if (napi_get_array_length(env, argv[1], &chainCount) != napi_ok || chainCount != sequences)
    return Fail(env, "generate: one sampler chain per sequence expected");
  std::vector<llama_sampler*> chains(sequences);
  for (uint32_t i = 0; i < chainCount; i++) {
    napi_value element;
    napi_get_element(env, argv[1], i, &element);
    auto* chain = HandleValue<SamplerChain>(env, element, "sampler chain");
    if (chain == nullptr) return nullptr;
    chains[i] = chain->chain;
  }
  AddonContext* context = generator->context;
  if (context->disposed || context->ctx == nullptr) return Fail(env, "Context is disposed");
  const Library& llama = generator->llama;
  const llama_vocab* vocab = llama.vocab(llama.model(context->ctx));
  for (size_t i = 0; i < sequences; i++) state[i * kStateFields + kProduced] = 0;

  const auto started = std::chrono::steady_clock::now();
  llama_batch& batch = generator->batch;
  std::vector<size_t> inBatch;
  inBatch.reserve(sequences);
  int32_t steps = 0;
  try {
    while (steps < maxSteps) {
      inBatch.clear();
      batch.n_tokens = 0;
      for (size_t i = 0; i < sequences; i++) {
        int32_t* s = state + i * kStateFields;
        if (s[kEnded] != 0 || s[kBudget] <= 0) continue;
        const int32_t at = batch.n_tokens++;
        batch.token[at] = s[kPending];
        batch.pos[at] = s[kPosition];
        batch.n_seq_id[at] = 1;
        batch.seq_id[at][0] = s[kSequenceId];
        batch.logits[at] = 1;
        inBatch.push_back(i);
      }
      if (batch.n_tokens == 0) break;
      const int32_t status = llama.decode(context->ctx, batch);
      if (status == 1) return Fail(env, "could not find a KV slot for the batch (try reducing the size of the batch or increase the context)");
      if (status != 0) return Fail(env, "Eval has failed");
      llama.synchronize(context->ctx);
      steps++;
      bool someEnded = false;
      for (size_t at = 0; at < inBatch.size(); at++) {
        int32_t* s = state + inBatch[at] * kStateFields;
        const llama_token token = llama.sample(chains[inBatch[at]], context->ctx, static_cast<int32_t>(at));
        // The pending token is in the KV now; the sampled one is pending.
        s[kPosition]++;
        s[kBudget]--;
        s[kPending] = token;
        out[inBatch[at] * maxSteps + s[kProduced]++] = token;
        bool stop = llama.isEog(vocab, token);
        for (size_t k = 0; k < stopLength && !stop; k++) stop = stopTokens[k] == token;
        if (stop)
          s[kEnded] = kEndedStopToken;
        else if (s[kBudget] <= 0)
          s[kEnded] = kEndedBudget;
        someEnded = someEnded || s[kEnded] != 0;
      }
      // A sequence that ended goes back at once: its client has its answer's end without
      // waiting for the others' steps, and its slot is free for the next request.
      if (someEnded) break;
      const std::chrono::duration<double, std::milli> elapsed = std::chrono::steady_clock::now() - started;
      if (elapsed.count() >= maxMs) break;
      // Written by another thread (the host, after it posts a message to this worker).
      if (attention != nullptr && __atomic_load_n(attention, __ATOMIC_ACQUIRE) != 0) break;
      // Bytes in the channel that the event loop has not read yet (it reads all there is each
      // time it polls, so at a call's start the channel is drained).
      if (attentionFd >= 0) {
        pollfd channel{attentionFd, POLLIN, 0};
        if (poll(&channel, 1, 0) > 0 && (channel.revents & (POLLIN | POLLHUP)) != 0) break;
      }
    }
  } catch (const std::exception& error) {
    return Fail(env, error.what());
  } catch (...) {
    return Fail(env, "Unknown error when calling \"llama_decode\"");
  }
  return Int32Value(env, steps);
}

}  // namespace

void RegisterGenerate(napi_env env, napi_value exports) {
  Export(env, exports, "generator", MakeGenerator);
  Export(env, exports, "samplerChain", MakeSampler);
  Export(env, exports, "generate", Generate);
}

}  // namespace llama_context_addon
