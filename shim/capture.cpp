#include "shim/capture.hpp"
#include "shim/shim.hpp"

#include "shim/capture_bounds.hpp"
#include "shim/config.hpp"
#include "shim/graph.hpp"

#include "shim/log.hpp"
#include "shim/pointer_fields.hpp"
#include "shim/real.hpp"
#include "shim/reporter.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace hone::shim {

namespace {

using CUctx = void*;
using GetParamInfo = int (*)(void*, size_t, size_t*, size_t*);
using GetRange = int (*)(uint64_t*, size_t*, uint64_t);
using AllocHost = int (*)(void**, size_t);
using FreeHost = int (*)(void*);
using CopyAsync = int (*)(void*, uint64_t, size_t, void*);
using EventCreate = int (*)(void**, unsigned);
using EventRecord = int (*)(void*, void*);
using EventQuery = int (*)(void*);
using EventDestroy = int (*)(void*);
using IsCapturing = int (*)(void*, int*);
using GetCurrent = int (*)(CUctx*);
using PushCtx = int (*)(CUctx);
using PopCtx = int (*)(CUctx*);

constexpr int k_success = 0;
constexpr int k_not_ready = 600;
constexpr unsigned k_event_disable_timing = 2;
constexpr uint32_t k_max_params = 1024;

struct Pending {
  Capture capture;
  void* host = nullptr;  // pinned copy of the data
  void* event = nullptr; // recorded after the last copy
  CUctx context = nullptr;
};

// Pinned memory and an event a collected capture no longer needs.
struct Spent {
  void* host = nullptr;
  void* event = nullptr;
  CUctx context = nullptr;
};

std::mutex g_mutex;
std::vector<Pending>* g_pending = new std::vector<Pending>(); // never freed: used during exit
std::vector<CaptureReady>* g_refused = new std::vector<CaptureReady>();
std::vector<Spent>* g_spent = new std::vector<Spent>(); // for capture_release()
// Launches being captured right now (claimed, not yet pending or refused).
std::atomic<uint32_t> g_capturing{0};

bool claim(KernelRecord* r) {
  return r->take_capture();
}

// Pointer fields of the kernel's parameters from its PTX (once per kernel), when the shim has it.
void analyze_pointers(KernelRecord* r) {
  std::call_once(r->pointers_once, [r] {
    auto fields = pointer_fields(r->key);
    if (!fields) return;
    r->pointers = std::move(*fields);
    r->pointers_known = true;
  });
}

void refuse(KernelRecord* r, uint64_t request, CaptureStatus status, std::string reason) {
  CaptureReady out;
  out.capture.request = request;
  out.capture.kernel = r->id;
  out.capture.key = r->key;
  out.capture.status = status;
  out.capture.reason = std::move(reason);
  {
    std::lock_guard lock(g_mutex);
    g_refused->push_back(std::move(out));
  }
  reporter().wake();
}

} // namespace

RelaxedCaptureMode::RelaxedCaptureMode() {
  if (stream_captures() == 0) return;
  using Exchange = CUresult (*)(CUstreamCaptureMode*);
  auto exchange = real_as<Exchange>(Fn::cuThreadExchangeStreamCaptureMode);
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  if (exchange && exchange(&mode) == CUDA_SUCCESS) m_previous = int(mode);
}
RelaxedCaptureMode::~RelaxedCaptureMode() {
  if (m_previous < 0) return;
  using Exchange = CUresult (*)(CUstreamCaptureMode*);
  auto exchange = real_as<Exchange>(Fn::cuThreadExchangeStreamCaptureMode);
  CUstreamCaptureMode mode = CUstreamCaptureMode(m_previous);
  if (exchange) exchange(&mode);
}

CaptureInFlight::CaptureInFlight() { g_capturing.fetch_add(1, std::memory_order_relaxed); }
CaptureInFlight::~CaptureInFlight() { g_capturing.fetch_sub(1, std::memory_order_release); }

bool capture_claim(KernelRecord* r, CaptureRequestInfo* out) {
  if (!claim(r)) return false;
  std::lock_guard lock(r->capture_mutex);
  out->request = r->capture_request;
  out->max_bytes = r->capture_max_bytes;
  out->outputs = r->capture_outputs;
  out->whole = r->capture_whole;
  return true;
}

void capture_refuse(KernelRecord* r, uint64_t request, CaptureStatus status, std::string reason) {
  refuse(r, request, status, std::move(reason));
}

bool capture_plan(KernelRecord* r, void* function, const LaunchArgs& a,
                  const CaptureRequestInfo& req, CapturePlan& plan) {
  auto param_info = real_as<GetParamInfo>(Fn::cuFuncGetParamInfo);
  auto range = real_as<GetRange>(Fn::cuMemGetAddressRange_v2);
  auto alloc_host = real_as<AllocHost>(Fn::cuMemAllocHost_v2);
  auto free_host = real_as<FreeHost>(Fn::cuMemFreeHost);
  auto event_create = real_as<EventCreate>(Fn::cuEventCreate);
  auto record = real_as<EventRecord>(a.per_thread ? Fn::cuEventRecord_ptsz : Fn::cuEventRecord);
  auto get_current = real_as<GetCurrent>(Fn::cuCtxGetCurrent);
  if (!param_info || !range || !alloc_host || !free_host || !event_create || !record ||
      !get_current) {
    refuse(r, req.request, CaptureStatus::failed, "the driver lacks a function capture needs");
    return false;
  }
  plan = CapturePlan{};
  plan.outputs = req.outputs;
  plan.request = req.request;

  // The parameter buffer as the driver lays it out.
  Capture& c = plan.capture;
  c.request = req.request;
  c.kernel = r->id;
  c.key = r->key;
  for (int i = 0; i < 3; ++i) {
    c.grid[size_t(i)] = a.grid[i];
    c.block[size_t(i)] = a.block[i];
  }
  c.shared_bytes = a.shared_bytes;
  for (uint32_t i = 0; i < k_max_params; ++i) {
    size_t off = 0, size = 0;
    if (param_info(function, i, &off, &size) != k_success) break;
    c.params.push_back({uint32_t(off), uint32_t(size)});
  }
  size_t total_params = 0;
  for (const auto& p : c.params) total_params = std::max<size_t>(total_params, p.offset + p.size);
  c.param_bytes.assign(total_params, '\0');
  if (a.params) {
    for (size_t i = 0; i < c.params.size(); ++i) {
      if (a.params[i])
        std::memcpy(c.param_bytes.data() + c.params[i].offset, a.params[i], c.params[i].size);
    }
  } else {
    const uint8_t* buf;
    size_t size;
    if (!extra_buffer(a.extra, &buf, &size) || size < total_params) {
      refuse(r, req.request, CaptureStatus::failed,
             "parameters passed in a form capture does not read");
      return false;
    }
    std::memcpy(c.param_bytes.data(), buf, total_params);
  }

  // Pointer parameters: from the PTX analysis when there is PTX, else every aligned 8-byte field
  // whose value lies inside a device allocation.
  analyze_pointers(r);
  std::vector<PointerField> fields;
  if (r->pointers_known) {
    fields = r->pointers;
  } else {
    for (uint32_t i = 0; i < c.params.size(); ++i) {
      for (uint32_t off = 0; off + 8 <= c.params[i].size; off += 8) {
        fields.push_back({i, off, c.params[i].offset + off, false});
      }
    }
  }
  c.pointers_from_analysis = r->pointers_known;
  std::vector<TouchedRange> ranges; // one per allocation, in order of first mention
  for (const auto& f : fields) {
    if (f.param >= c.params.size() || f.field + 8 > c.params[f.param].size) continue;
    uint64_t v;
    std::memcpy(&v, c.param_bytes.data() + c.params[f.param].offset + f.field, 8);
    if (!v) continue;
    uint64_t base = 0;
    size_t size = 0;
    if (range(&base, &size, v) != k_success) continue; // not device memory
    if (std::none_of(ranges.begin(), ranges.end(),
                     [&](const TouchedRange& t) { return t.base == base; })) {
      ranges.push_back({base, size});
    }
    CaptureBuffer b;
    b.param = f.param;
    b.field = f.field;
    b.pointer = v;
    b.base = base;
    b.size = size;
    c.buffers.push_back(b);
  }
  // Bounded ranges where a probe of the launch can run; else every allocation whole.
  bool bounded = false;
  if (req.whole && !ranges.empty()) {
    c.whole_why = "honed asked for whole allocations: a capture of this kernel by bounded ranges "
                  "proved unusable";
  } else if (config().capture_bounds && !ranges.empty()) {
    if (auto probed = probe_launch(r, function, a, ranges); probed) {
      bounded = true;
    } else {
      c.whole_why = probed.error().message;
    }
  }
  for (const auto& t : ranges) {
    if (!bounded) {
      plan.allocations[t.base] = t.size;
      continue;
    }
    uint64_t pointer = 0;
    for (const auto& b : c.buffers) {
      if (b.base == t.base) {
        pointer = b.pointer;
        break;
      }
    }
    uint64_t start = 0, size = 0;
    captured_range(t, pointer, &start, &size);
    plan.allocations[start] = size;
    for (auto& b : c.buffers) {
      if (b.base != t.base || b.bounded) continue;
      b.bounded = true;
      b.alloc_base = t.base;
      b.alloc_size = t.size;
      b.base = start;
      b.size = size;
    }
  }
  plan.before_bytes = 0;
  for (const auto& [base, size] : plan.allocations) {
    plan.offset_of[base] = plan.before_bytes;
    plan.before_bytes += size;
  }
  uint64_t total = plan.before_bytes * (req.outputs ? 2 : 1);
  if (total > req.max_bytes) {
    refuse(r, req.request, CaptureStatus::too_large,
           "the launch's buffers take " + std::to_string(total) +
               " bytes, over the capture cap of " + std::to_string(req.max_bytes) +
               (bounded ? " (the ranges the launch touches)"
                        : c.whole_why.empty() ? " (whole allocations)"
                                              : " (whole allocations: " + c.whole_why + ")"));
    return false;
  }
  for (auto& b : c.buffers) {
    b.before = plan.offset_of[b.base];
    if (req.outputs) b.after = plan.before_bytes + plan.offset_of[b.base];
  }
  c.data_bytes = total;
  if (total && alloc_host(&plan.host, total) != k_success) {
    plan.host = nullptr;
    refuse(r, req.request, CaptureStatus::failed, "no pinned host memory for the capture");
    return false;
  }
  return true;
}

void capture_abandon(KernelRecord* r, CapturePlan& plan, std::string reason) {
  if (plan.host) {
    if (auto free_host = real_as<FreeHost>(Fn::cuMemFreeHost)) free_host(plan.host);
  }
  plan.host = nullptr;
  refuse(r, plan.request, CaptureStatus::failed, std::move(reason));
}

void capture_finish(KernelRecord* r, CapturePlan& plan, void* stream, bool per_thread, bool copied,
                    int res) {
  auto event_create = real_as<EventCreate>(Fn::cuEventCreate);
  auto record = real_as<EventRecord>(per_thread ? Fn::cuEventRecord_ptsz : Fn::cuEventRecord);
  auto get_current = real_as<GetCurrent>(Fn::cuCtxGetCurrent);
  void* event = nullptr;
  if (!copied || res != k_success || event_create(&event, k_event_disable_timing) != k_success ||
      record(event, stream) != k_success) {
    capture_abandon(r, plan,
                    res != k_success ? "the captured launch failed" : "copying the buffers failed");
    return;
  }
  Pending p;
  p.capture = std::move(plan.capture);
  p.host = plan.host;
  p.event = event;
  get_current(&p.context);
  {
    std::lock_guard lock(g_mutex);
    g_pending->push_back(std::move(p));
  }
  reporter().wake();
}

int capture_launch(KernelRecord* r, void* function, const LaunchArgs& a,
                   const std::function<int()>& launch) {
  CaptureInFlight capturing_now; // until this capture is pending or refused
  CaptureRequestInfo req;
  if (!capture_claim(r, &req)) return launch();
  RelaxedCaptureMode relaxed;
  auto copy =
      real_as<CopyAsync>(a.per_thread ? Fn::cuMemcpyDtoHAsync_v2_ptsz : Fn::cuMemcpyDtoHAsync_v2);
  auto capturing =
      real_as<IsCapturing>(a.per_thread ? Fn::cuStreamIsCapturing_ptsz : Fn::cuStreamIsCapturing);
  if (!copy || !capturing) {
    refuse(r, req.request, CaptureStatus::failed, "the driver lacks a function capture needs");
    return launch();
  }
  int graph = 0;
  if (capturing(a.stream, &graph) != k_success || graph != 0) {
    refuse(r, req.request, CaptureStatus::unsupported,
           "the launch is being captured into a CUDA graph");
    return launch();
  }
  CapturePlan plan;
  if (!capture_plan(r, function, a, req, plan)) return launch();
  bool copied = true;
  for (const auto& [base, size] : plan.allocations) {
    copied = copied && copy(static_cast<char*>(plan.host) + plan.offset_of[base], base, size,
                            a.stream) == k_success;
  }
  int res = launch();
  if (plan.outputs && res == k_success) {
    for (const auto& [base, size] : plan.allocations) {
      copied = copied && copy(static_cast<char*>(plan.host) + plan.before_bytes +
                                  plan.offset_of[base],
                              base, size, a.stream) == k_success;
    }
  }
  capture_finish(r, plan, a.stream, a.per_thread, copied, res);
  return res;
}

std::vector<CaptureReady> capture_collect() {
  std::vector<CaptureReady> out;
  std::vector<Pending> done;
  {
    std::lock_guard lock(g_mutex);
    out.swap(*g_refused);
    if (g_pending->empty()) return out;
  }
  auto query = real_as<EventQuery>(Fn::cuEventQuery);
  auto destroy = real_as<EventDestroy>(Fn::cuEventDestroy_v2);
  auto free_host = real_as<FreeHost>(Fn::cuMemFreeHost);
  auto push = real_as<PushCtx>(Fn::cuCtxPushCurrent_v2);
  auto pop = real_as<PopCtx>(Fn::cuCtxPopCurrent_v2);
  if (!query || !destroy || !free_host || !push || !pop) return out;
  // Query outside the lock: no mutex of the shim is held around the driver.
  std::vector<Pending> waiting;
  {
    std::lock_guard lock(g_mutex);
    waiting.swap(*g_pending);
  }
  std::vector<Pending> still;
  std::vector<Pending> lost;
  std::vector<Spent> spent;
  for (auto& p : waiting) {
    if (push(p.context) != k_success) {
      // The context is gone (destroyed by the application): so are its copies and its memory.
      lost.push_back(std::move(p));
      continue;
    }
    int q = query(p.event);
    CUctx popped;
    pop(&popped);
    if (q == k_not_ready) {
      still.push_back(std::move(p));
    } else if (q != k_success) {
      p.capture.status = CaptureStatus::failed;
      p.capture.reason = "the copies of the capture failed (error " + std::to_string(q) + ")";
      done.push_back(std::move(p));
    } else {
      done.push_back(std::move(p));
    }
  }
  for (auto& p : lost) {
    CaptureReady ready;
    ready.capture = std::move(p.capture);
    ready.capture.status = CaptureStatus::failed;
    ready.capture.reason = "the application destroyed the context before the copies completed";
    ready.capture.buffers.clear();
    ready.capture.data_bytes = 0;
    out.push_back(std::move(ready));
  }
  if (!still.empty()) {
    std::lock_guard lock(g_mutex);
    for (auto& p : still) g_pending->push_back(std::move(p));
  }
  for (auto& p : done) {
    CaptureReady ready;
    ready.capture = std::move(p.capture);
    bool copied = ready.capture.status == CaptureStatus::ok;
    int fd = copied ? ::memfd_create("hone-capture", MFD_CLOEXEC | MFD_ALLOW_SEALING) : -1;
    bool ok = fd >= 0;
    int error = ok ? 0 : errno;
    const char* data = static_cast<const char*>(p.host);
    for (uint64_t done_bytes = 0; ok && done_bytes < ready.capture.data_bytes;) {
      ssize_t n = ::write(fd, data + done_bytes, ready.capture.data_bytes - done_bytes);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ok = false;
        error = n < 0 ? errno : ENOSPC;
      } else {
        done_bytes += uint64_t(n);
      }
    }
    if (ok) {
      ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
      ready.memfd = fd;
    } else {
      if (fd >= 0) ::close(fd);
      if (copied) {
        ready.capture.status = CaptureStatus::failed;
        ready.capture.reason = std::string("could not write the capture (") +
                               std::to_string(ready.capture.data_bytes) +
                               " bytes) to a memfd: " + std::strerror(error);
      }
      ready.capture.buffers.clear();
      ready.capture.data_bytes = 0;
    }
    spent.push_back({p.host, p.event, p.context});
    out.push_back(std::move(ready));
  }
  if (!spent.empty()) {
    std::lock_guard lock(g_mutex);
    g_spent->insert(g_spent->end(), spent.begin(), spent.end());
  }
  return out;
}

void capture_release() {
  std::vector<Spent> spent;
  {
    std::lock_guard lock(g_mutex);
    spent.swap(*g_spent);
  }
  if (spent.empty()) return;
  auto destroy = real_as<EventDestroy>(Fn::cuEventDestroy_v2);
  auto free_host = real_as<FreeHost>(Fn::cuMemFreeHost);
  auto push = real_as<PushCtx>(Fn::cuCtxPushCurrent_v2);
  auto pop = real_as<PopCtx>(Fn::cuCtxPopCurrent_v2);
  if (!destroy || !free_host || !push || !pop) return;
  for (const auto& s : spent) {
    if (push(s.context) != k_success) continue; // the context is gone, and its memory with it
    destroy(s.event);
    if (s.host) free_host(s.host);
    CUctx popped;
    pop(&popped);
  }
}

size_t captures_pending() {
  std::lock_guard lock(g_mutex);
  return g_pending->size() + g_refused->size() + g_capturing.load(std::memory_order_acquire);
}

void capture_reset_after_fork() {
  // the parent's pinned memory and events are not the child's to free
  g_pending = new std::vector<Pending>();
  g_refused = new std::vector<CaptureReady>();
  g_spent = new std::vector<Spent>();
  g_capturing.store(0, std::memory_order_relaxed); // the threads that were capturing are not here
  probes_reset_after_fork();
}

} // namespace hone::shim
