#include "shim/cupti.hpp"

#include "shim/config.hpp"
#include "shim/log.hpp"

#include <cupti_activity.h>
#include <cupti_version.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>

#include <dlfcn.h>

namespace hone::shim {

namespace {

using GetVersion = CUptiResult (*)(uint32_t*);
using RegisterCallbacks = CUptiResult (*)(CUpti_BuffersCallbackRequestFunc,
                                          CUpti_BuffersCallbackCompleteFunc);
using Enable = CUptiResult (*)(CUpti_ActivityKind);
using NextRecord = CUptiResult (*)(uint8_t*, size_t, CUpti_Activity**);
using FlushAll = CUptiResult (*)(uint32_t);
using NodeId = CUptiResult (*)(CUgraphNode, uint64_t*);
using ResultString = CUptiResult (*)(CUptiResult, const char**);

constexpr size_t k_buffer_bytes = 1u << 20;

struct Cupti {
  NextRecord next = nullptr;
  FlushAll flush = nullptr;
  NodeId node_id = nullptr;
};

std::once_flag g_once;
std::atomic<bool> g_active{false};
Cupti g_cupti;
std::mutex g_mutex; // g_nodes
std::unordered_map<uint64_t, NodeTime*>* g_nodes = new std::unordered_map<uint64_t, NodeTime*>;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, k_buffer_bytes));
  *size = *buffer ? k_buffer_bytes : 0;
  *max_records = 0; // as many as fit
}

// CUPTI's thread: fold each graph kernel's time into its node's counters.
void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  while (buffer && g_cupti.next(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    // The layout of this CUPTI_API_VERSION (checked at start).
    auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    if (k->graphNodeId == 0 || k->end <= k->start) continue;
    NodeTime* t = nullptr;
    {
      std::lock_guard lock(g_mutex);
      auto it = g_nodes->find(k->graphNodeId);
      if (it != g_nodes->end()) t = it->second;
    }
    if (!t) continue;
    t->kernels.fetch_add(1, std::memory_order_relaxed);
    t->ns.fetch_add(k->end - k->start, std::memory_order_relaxed);
  }
  std::free(buffer);
}

bool start() {
  if (!config().cupti) return false;
  auto refuse = [](const std::string& why) {
    log(Level::info, "HONE_CUPTI: not enabled (%s); graph kernels are timed with events",
        why.c_str());
    return false;
  };
  const char* injection = std::getenv("CUDA_INJECTION64_PATH");
  if (injection && *injection) return refuse("a CUDA injection library, a profiler, is configured");
  if (void* h = dlopen("libcupti.so", RTLD_NOW | RTLD_NOLOAD)) {
    dlclose(h);
    return refuse("the application loaded CUPTI itself");
  }
  if (void* h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD)) {
    dlclose(h);
    return refuse("the application loaded CUPTI itself");
  }
  void* h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
  if (!h) h = dlopen("libcupti.so", RTLD_NOW | RTLD_LOCAL);
  if (!h) return refuse("libcupti.so could not be loaded");
  auto version = reinterpret_cast<GetVersion>(dlsym(h, "cuptiGetVersion"));
  auto reg = reinterpret_cast<RegisterCallbacks>(dlsym(h, "cuptiActivityRegisterCallbacks"));
  auto enable = reinterpret_cast<Enable>(dlsym(h, "cuptiActivityEnable"));
  g_cupti.next = reinterpret_cast<NextRecord>(dlsym(h, "cuptiActivityGetNextRecord"));
  g_cupti.flush = reinterpret_cast<FlushAll>(dlsym(h, "cuptiActivityFlushAll"));
  g_cupti.node_id = reinterpret_cast<NodeId>(dlsym(h, "cuptiGetGraphNodeId"));
  auto result_string = reinterpret_cast<ResultString>(dlsym(h, "cuptiGetResultString"));
  auto failed = [&](const char* what, CUptiResult r) {
    const char* text = nullptr;
    if (result_string) result_string(r, &text);
    return std::string(what) + " failed: " + (text ? text : "CUPTI error " + std::to_string(int(r)));
  };
  if (!version || !reg || !enable || !g_cupti.next || !g_cupti.flush || !g_cupti.node_id) {
    return refuse("the CUPTI found lacks the activity API");
  }
  uint32_t v = 0;
  if (version(&v) != CUPTI_SUCCESS || v != CUPTI_API_VERSION) {
    return refuse("the CUPTI found is of another API version than hone was built with");
  }
  if (CUptiResult r = reg(buffer_requested, buffer_completed); r != CUPTI_SUCCESS) {
    return refuse(failed("cuptiActivityRegisterCallbacks", r));
  }
  if (CUptiResult r = enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL); r != CUPTI_SUCCESS) {
    return refuse(failed("cuptiActivityEnable(CONCURRENT_KERNEL)", r));
  }
  log(Level::info, "HONE_CUPTI: graph kernels are timed per node from CUPTI activity records");
  return true;
}

} // namespace

bool cupti_start() {
  std::call_once(g_once, [] { g_active.store(start(), std::memory_order_release); });
  return g_active.load(std::memory_order_acquire);
}

bool cupti_active() { return g_active.load(std::memory_order_acquire); }

void cupti_flush() {
  if (cupti_active()) g_cupti.flush(0);
}

NodeTime* cupti_node(CUgraphNode node) {
  if (!cupti_active() || !node) return nullptr;
  uint64_t id = 0;
  if (g_cupti.node_id(node, &id) != CUPTI_SUCCESS || id == 0) return nullptr;
  try {
    std::lock_guard lock(g_mutex);
    NodeTime*& t = (*g_nodes)[id];
    if (!t) t = new NodeTime;
    return t;
  } catch (...) {
    return nullptr;
  }
}

} // namespace hone::shim
