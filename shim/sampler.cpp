#include "shim/sampler.hpp"

#include "shim/log.hpp"
#include "shim/real.hpp"

#include <atomic>

namespace hone::shim {

namespace {

using CUctx = void*;
using CUev = void*;
using GetCurrent = int (*)(CUctx*);
using PushPop = int (*)(CUctx);
using Pop = int (*)(CUctx*);
using EventCreate = int (*)(CUev*, unsigned);
using EventRecord = int (*)(CUev, void*);
using EventQuery = int (*)(CUev);
using EventElapsed = int (*)(float*, CUev, CUev);
using IsCapturing = int (*)(void*, int*);

constexpr int k_pairs = 128;
constexpr int k_contexts = 16;
constexpr int k_success = 0;
constexpr int k_not_ready = 600; // CUDA_ERROR_NOT_READY

enum : int { k_free = 0, k_recording = 1, k_in_flight = 2, k_reaping = 3 };

struct Pair {
  CUev start = nullptr;
  CUev end = nullptr;
  std::atomic<int> state{k_free};
  std::atomic<uint64_t>* sampled = nullptr; // where the measurement goes
  std::atomic<uint64_t>* sampled_ns = nullptr;
};

struct Pool {
  Pair pairs[k_pairs];
};

struct ContextSlot {
  std::atomic<CUctx> ctx{nullptr};
  std::atomic<Pool*> pool{nullptr};
  std::atomic<bool> failed{false};
  std::atomic<bool> creating{false};
};

ContextSlot g_contexts[k_contexts];
std::atomic<uint32_t> g_in_flight{0};

// Fold a finished pair into its record and free it. False when it is still running (or another
// thread is reaping it).
bool reap(Pair& p) {
  int expected = k_in_flight;
  if (!p.state.compare_exchange_strong(expected, k_reaping)) return false;
  auto query = real_as<EventQuery>(Fn::cuEventQuery);
  auto elapsed = real_as<EventElapsed>(Fn::cuEventElapsedTime);
  int q = query ? query(p.end) : -1;
  if (q == k_not_ready) {
    p.state.store(k_in_flight, std::memory_order_release);
    return false;
  }
  float ms = 0;
  if (q == k_success && elapsed && elapsed(&ms, p.start, p.end) == k_success && ms >= 0) {
    p.sampled->fetch_add(1, std::memory_order_relaxed);
    p.sampled_ns->fetch_add(uint64_t(double(ms) * 1e6), std::memory_order_relaxed);
  }
  g_in_flight.fetch_sub(1, std::memory_order_relaxed);
  p.state.store(k_free, std::memory_order_release);
  return true;
}

// Make the events of `slot` (whose context is current on this thread, or pushed by the caller).
void create_pool(ContextSlot& slot) {
  if (slot.pool.load(std::memory_order_acquire) || slot.failed.load(std::memory_order_relaxed)) {
    return;
  }
  if (slot.creating.exchange(true)) return;
  auto create = real_as<EventCreate>(Fn::cuEventCreate);
  auto* fresh = new Pool();
  bool ok = create != nullptr;
  for (auto& p : fresh->pairs) {
    ok = ok && create(&p.start, 0) == k_success && create(&p.end, 0) == k_success;
  }
  if (ok) {
    slot.pool.store(fresh, std::memory_order_release);
  } else {
    slot.failed = true; // leaked on purpose: some events of a failed pool may exist
    log(Level::debug, "could not create timing events; launches in this context are not timed");
  }
}

ContextSlot* slot_for(CUctx ctx) {
  for (auto& c : g_contexts) {
    CUctx have = c.ctx.load(std::memory_order_acquire);
    if (have == ctx) return &c;
    if (!have) {
      CUctx expected = nullptr;
      if (c.ctx.compare_exchange_strong(expected, ctx)) return &c; // the reporter makes its pool
      if (expected == ctx) return &c;
    }
  }
  return nullptr;
}

} // namespace

bool sample_begin(void* stream, bool per_thread, SampleSlot* out) {
  auto get_current = real_as<GetCurrent>(Fn::cuCtxGetCurrent);
  auto record = real_as<EventRecord>(per_thread ? Fn::cuEventRecord_ptsz : Fn::cuEventRecord);
  auto capturing =
      real_as<IsCapturing>(per_thread ? Fn::cuStreamIsCapturing_ptsz : Fn::cuStreamIsCapturing);
  if (!get_current || !record || !capturing) return false;
  CUctx ctx = nullptr;
  if (get_current(&ctx) != k_success || !ctx) return false;
  ContextSlot* cs = slot_for(ctx);
  if (!cs) return false;
  Pool* pool = cs->pool.load(std::memory_order_acquire);
  if (!pool) return false;
  // Recording an event into a stream being captured would add a node to the application's graph.
  int status = 0;
  if (capturing(stream, &status) != k_success || status != 0) return false;
  for (int i = 0, reaped = 0; i < k_pairs; ++i) {
    int expected = k_free;
    if (!pool->pairs[i].state.compare_exchange_strong(expected, k_recording)) {
      // All busy so far: reclaim a finished pair here rather than skip the sample.
      if (expected != k_in_flight || reaped++ > 4 || !reap(pool->pairs[i])) continue;
      expected = k_free;
      if (!pool->pairs[i].state.compare_exchange_strong(expected, k_recording)) continue;
    }
    if (record(pool->pairs[i].start, stream) != k_success) {
      pool->pairs[i].state.store(k_free, std::memory_order_release);
      return false;
    }
    out->pool = pool;
    out->pair = i;
    return true;
  }
  return false;
}

void sample_end(const SampleSlot& slot, void* stream, bool per_thread, KernelRecord* rec,
                bool launched) {
  sample_end_into(slot, stream, per_thread, &rec->sampled, &rec->sampled_ns, launched);
}

void sample_end_into(const SampleSlot& slot, void* stream, bool per_thread,
                     std::atomic<uint64_t>* sampled, std::atomic<uint64_t>* sampled_ns,
                     bool launched) {
  auto* pool = static_cast<Pool*>(slot.pool);
  Pair& p = pool->pairs[slot.pair];
  auto record = real_as<EventRecord>(per_thread ? Fn::cuEventRecord_ptsz : Fn::cuEventRecord);
  if (!launched || record(p.end, stream) != k_success) {
    p.state.store(k_free, std::memory_order_release);
    return;
  }
  p.sampled = sampled;
  p.sampled_ns = sampled_ns;
  g_in_flight.fetch_add(1, std::memory_order_relaxed);
  p.state.store(k_in_flight, std::memory_order_release);
}

void sample_prepare_current_context() {
  auto get_current = real_as<GetCurrent>(Fn::cuCtxGetCurrent);
  CUctx ctx = nullptr;
  if (!get_current || get_current(&ctx) != k_success || !ctx) return;
  if (ContextSlot* cs = slot_for(ctx)) create_pool(*cs);
}

uint32_t sample_in_flight() { return g_in_flight.load(std::memory_order_relaxed); }

void sample_collect() {
  auto push = real_as<PushPop>(Fn::cuCtxPushCurrent_v2);
  auto pop = real_as<Pop>(Fn::cuCtxPopCurrent_v2);
  if (!push || !pop) return;
  for (auto& c : g_contexts) {
    CUctx ctx = c.ctx.load(std::memory_order_acquire);
    if (!ctx || c.failed.load(std::memory_order_relaxed)) continue;
    Pool* pool = c.pool.load(std::memory_order_acquire);
    bool busy = false;
    if (pool) {
      for (auto& p : pool->pairs) busy = busy || p.state.load(std::memory_order_relaxed) == k_in_flight;
    }
    if (pool && !busy) continue;
    if (push(ctx) != k_success) {
      c.failed = true;
      continue;
    }
    if (!pool) {
      create_pool(c); // a context first seen at a launch
    } else {
      for (auto& p : pool->pairs) reap(p);
    }
    CUctx popped = nullptr;
    pop(&popped);
  }
}

void sample_reset_after_fork() {
  g_in_flight.store(0, std::memory_order_relaxed);
  for (auto& c : g_contexts) {
    c.creating.store(false, std::memory_order_relaxed);
    c.pool.store(nullptr, std::memory_order_relaxed);
    c.ctx.store(nullptr, std::memory_order_relaxed);
    c.failed.store(false, std::memory_order_relaxed);
  }
}

} // namespace hone::shim
