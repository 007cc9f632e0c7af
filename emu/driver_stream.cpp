// Streams and events. Work runs synchronously, so every stream is always idle; what streams and
// events carry is the modeled clock (driver.hpp, "Stream") that cuEventElapsedTime reads.
#include "emu/driver.hpp"

#include "emu/graph.hpp"

#include <algorithm>
#include <cmath>

namespace hone::emu {

namespace {

constexpr unsigned k_event_flags =
    CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;

// A stream named in a query or a synchronization: the current context's NULL or per-thread stream,
// or any live stream (of any context, as on the real driver). `ctx_out` is the stream's context.
CUresult find_stream(Registry& r, CUstream h, bool per_thread, Stream*& out, Context*& ctx_out) {
  Context* current = nullptr;
  if (CUresult rc = current_context(r, current); rc != CUDA_SUCCESS) return rc;
  Handle handle = from_cu(h);
  if (handle == 0 || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
    ctx_out = current;
    return resolve_stream(r, *current, h, per_thread, out);
  }
  out = r.stream(handle);
  if (out == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  ctx_out = live_context(r, out->ctx);
  return ctx_out != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult create_stream(CUstream* ph, unsigned flags, int priority) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (ph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if ((flags & ~static_cast<unsigned>(CU_STREAM_NON_BLOCKING)) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  Context* ctx = nullptr;
  if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
  auto s = std::make_unique<Stream>();
  s->handle = r.new_handle();
  s->ctx = ctx->handle;
  s->flags = flags;
  // Out-of-range priorities are clamped, as the real driver does.
  s->priority = std::clamp(priority, k_stream_priority_greatest, k_stream_priority_least);
  s->id = r.new_id();
  // A new stream has done nothing yet: its first operation starts at what the host has waited
  // for (Context::host_clock_ns), or later.
  ctx->streams.insert(s->handle);
  *ph = to_cu<CUstream>(s->handle);
  r.streams.emplace(s->handle, std::move(s));
  return CUDA_SUCCESS;
}

CUresult destroy_stream(CUstream h) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  Context* current = nullptr;
  if (CUresult rc = current_context(r, current); rc != CUDA_SUCCESS) return rc;
  Stream* s = r.stream(from_cu(h));
  if (s == nullptr || s->per_thread) return CUDA_ERROR_INVALID_HANDLE;
  Context* ctx = live_context(r, s->ctx);
  if (ctx == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (ctx->sticky != CUDA_SUCCESS) return ctx->sticky;
  // What the stream did stays in the clocks of the events recorded on it and, for a blocking
  // stream, in the legacy stream's view: fold its clock into the NULL stream's so the legacy stream
  // still waits for work issued before the destroy.
  if (s->blocking()) op_finish(ctx->legacy, s->clock_ns);
  capture_forget_stream(r, *s);
  ctx->streams.erase(s->handle);
  r.streams.erase(from_cu(h));
  return CUDA_SUCCESS;
}

CUresult sync_stream(CUstream h, bool per_thread, bool host_sync) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  Stream* s = nullptr;
  Context* ctx = nullptr;
  if (CUresult rc = find_stream(r, h, per_thread, s, ctx); rc != CUDA_SUCCESS) return rc;
  // Its work finished when the calls that issued it returned; in modeled time the host has now
  // waited for the stream (for the legacy stream, also for the blocking streams it waits for).
  if (ctx->sticky != CUDA_SUCCESS) return ctx->sticky;
  // During stream capture: the legacy stream is unusable while a blocking stream captures, a
  // capturing stream cannot be waited for (that invalidates its capture), and any other wait is
  // an unsafe call the capture mode may forbid.
  if (s->legacy && blocking_capture_in(r, *ctx)) return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  if (s->capture != 0) {
    capture_invalidate(r, *s);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  if (CUresult rc = capture_forbids_unsafe(r); rc != CUDA_SUCCESS) return rc;
  if (host_sync) host_waits(*ctx, s->legacy ? op_start(r, *ctx, *s) : s->clock_ns);
  return CUDA_SUCCESS;
}

CUresult wait_event(CUstream h, CUevent e, unsigned flags, bool per_thread) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if ((flags & ~static_cast<unsigned>(CU_EVENT_WAIT_EXTERNAL)) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  Context* ctx = nullptr;
  if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
  Stream* s = nullptr;
  if (CUresult rc = resolve_stream(r, *ctx, h, per_thread, s); rc != CUDA_SUCCESS) return rc;
  Event* ev = r.event(from_cu(e));
  if (ev == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  bool captured = false;
  if (CUresult rc = capture_check(r, *ctx, *s, captured); rc != CUDA_SUCCESS) return rc;
  // An event recorded in a capture joins the stream into it; a capturing stream's waits are
  // dependencies of its next node.
  bool handled = false;
  if (CUresult rc = capture_wait_event(r, *ctx, *s, *ev, flags, handled); rc != CUDA_SUCCESS)
    return rc;
  if (handled) return CUDA_SUCCESS;
  // An event never recorded is complete: waiting on it is a no-op. Events of other contexts are
  // fine: cross-context waits are what cuStreamWaitEvent is for.
  if (ev->recorded) op_finish(*s, std::max(op_start(r, *ctx, *s), ev->time_ns));
  return CUDA_SUCCESS;
}

template <class T, class F> CUresult stream_query(CUstream h, bool per_thread, T* out, F&& get) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  Stream* s = nullptr;
  Context* ctx = nullptr;
  if (CUresult rc = find_stream(r, h, per_thread, s, ctx); rc != CUDA_SUCCESS) return rc;
  *out = get(*s, *ctx);
  return CUDA_SUCCESS;
}

// A host function runs when the stream reaches it: here, right away, on the calling thread, with
// no lock held (it may not call CUDA, but it may take the application's own locks).
CUresult host_func(CUstream h, bool per_thread, void (*run)(void*), void* data, bool add_callback,
                   CUstreamCallback callback) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  Registry& r = registry();
  {
    std::lock_guard lock(r.mutex);
    Context* ctx = nullptr;
    if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
    Stream* s = nullptr;
    if (CUresult rc = resolve_stream(r, *ctx, h, per_thread, s); rc != CUDA_SUCCESS) return rc;
    bool captured = false;
    if (CUresult rc = capture_check(r, *ctx, *s, captured); rc != CUDA_SUCCESS) return rc;
    if (captured) {
      // A host node; stream callbacks (cuStreamAddCallback) cannot be captured.
      if (add_callback) {
        capture_invalidate(r, *s);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
      }
      GraphNode node;
      node.type = CU_GRAPH_NODE_TYPE_HOST;
      node.host.fn = run;
      node.host.userData = data;
      return capture_node(r, *s, std::move(node));
    }
    op_finish(*s, op_start(r, *ctx, *s));
    printf_flush(*ctx); // before a stream callback runs, device printf's FIFO is flushed
  }
  if (add_callback) {
    callback(h, CUDA_SUCCESS, data);
  } else {
    run(data);
  }
  return CUDA_SUCCESS;
}

CUresult record_event(CUevent e, CUstream h, unsigned flags, bool per_thread) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  // CU_EVENT_RECORD_EXTERNAL is only valid during stream capture (an event record node).
  if ((flags & ~static_cast<unsigned>(CU_EVENT_RECORD_EXTERNAL)) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  Context* ctx = nullptr;
  if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
  Event* ev = r.event(from_cu(e));
  if (ev == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  Stream* s = nullptr;
  if (CUresult rc = resolve_stream(r, *ctx, h, per_thread, s); rc != CUDA_SUCCESS) return rc;
  if (ev->ctx != s->ctx) return CUDA_ERROR_INVALID_HANDLE; // must share a context
  bool captured = false;
  if (CUresult rc = capture_check(r, *ctx, *s, captured); rc != CUDA_SUCCESS) return rc;
  if (captured) {
    if (flags & CU_EVENT_RECORD_EXTERNAL) {
      GraphNode node;
      node.type = CU_GRAPH_NODE_TYPE_EVENT_RECORD;
      node.event = ev->handle;
      return capture_node(r, *s, std::move(node));
    }
    capture_record_event(r, *s, *ev);
    return CUDA_SUCCESS;
  }
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE; // external records exist only in captures
  uint64_t t = op_start(r, *ctx, *s);
  op_finish(*s, t);
  ev->recorded = true;
  ev->time_ns = t;
  ev->capture = 0;
  ev->capture_nodes.clear();
  ev->capture_edges.clear();
  return CUDA_SUCCESS;
}

// An event named in a query: it must exist and its context must still work.
CUresult find_event(Registry& r, CUevent e, Event*& out, Context*& ctx) {
  Context* current = nullptr;
  if (CUresult rc = current_context(r, current); rc != CUDA_SUCCESS) return rc;
  out = r.event(from_cu(e));
  if (out == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  ctx = live_context(r, out->ctx);
  return ctx != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult event_status(CUevent e, bool host_sync) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  Event* ev = nullptr;
  Context* ctx = nullptr;
  if (CUresult rc = find_event(r, e, ev, ctx); rc != CUDA_SUCCESS) return rc;
  // Recorded work is complete; an event never recorded is complete too.
  if (ctx->sticky != CUDA_SUCCESS) return ctx->sticky;
  // An event last recorded in a live capture has no completion to wait for or query.
  if (ev->capture != 0 && graph_registry().capture(ev->capture) != nullptr)
    return CUDA_ERROR_CAPTURED_EVENT;
  if (CUresult rc = capture_forbids_unsafe(r); rc != CUDA_SUCCESS) return rc;
  if (host_sync && ev->recorded) host_waits(*ctx, ev->time_ns);
  return CUDA_SUCCESS;
}

CUresult elapsed_time(float* ms, CUevent start, CUevent end) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (ms == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  Event* a = nullptr;
  Event* b = nullptr;
  Context* ctx_a = nullptr;
  Context* ctx_b = nullptr;
  if (CUresult rc = find_event(r, start, a, ctx_a); rc != CUDA_SUCCESS) return rc;
  if (CUresult rc = find_event(r, end, b, ctx_b); rc != CUDA_SUCCESS) return rc;
  if (!a->recorded || !b->recorded) return CUDA_ERROR_INVALID_HANDLE;
  if (((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING) != 0) return CUDA_ERROR_INVALID_HANDLE;
  if (ctx_a->sticky != CUDA_SUCCESS) return ctx_a->sticky;
  double diff = static_cast<double>(b->time_ns) - static_cast<double>(a->time_ns);
  *ms = static_cast<float>(diff / 1e6);
  return CUDA_SUCCESS;
}

CUresult destroy_event(CUevent e) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  Event* ev = nullptr;
  Context* ctx = nullptr;
  if (CUresult rc = find_event(r, e, ev, ctx); rc != CUDA_SUCCESS) return rc;
  if (ctx->sticky != CUDA_SUCCESS) return ctx->sticky;
  ctx->events.erase(ev->handle);
  r.events.erase(ev->handle);
  return CUDA_SUCCESS;
}

} // namespace

} // namespace hone::emu

using namespace hone::emu;

extern "C" {

// --- streams
// ---------------------------------------------------------------------------------------

CUresult CUDAAPI cuStreamCreate(CUstream* phStream, unsigned int Flags) {
  return guarded([&] { return create_stream(phStream, Flags, k_stream_priority_least); });
}

CUresult CUDAAPI cuStreamCreateWithPriority(CUstream* phStream, unsigned int flags, int priority) {
  return guarded([&] { return create_stream(phStream, flags, priority); });
}

CUresult CUDAAPI cuStreamDestroy(CUstream hStream) {
  return guarded([&] { return destroy_stream(hStream); });
}

CUresult CUDAAPI cuStreamDestroy_v2(CUstream hStream) {
  return guarded([&] { return destroy_stream(hStream); });
}

CUresult CUDAAPI cuStreamSynchronize(CUstream hStream) {
  return guarded([&] { return sync_stream(hStream, false, true); });
}
CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream hStream) {
  return guarded([&] { return sync_stream(hStream, true, true); });
}
CUresult CUDAAPI cuStreamQuery(CUstream hStream) {
  return guarded([&] { return sync_stream(hStream, false, false); });
}
CUresult CUDAAPI cuStreamQuery_ptsz(CUstream hStream) {
  return guarded([&] { return sync_stream(hStream, true, false); });
}

CUresult CUDAAPI cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags) {
  return guarded([&] { return wait_event(hStream, hEvent, Flags, false); });
}
CUresult CUDAAPI cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags) {
  return guarded([&] { return wait_event(hStream, hEvent, Flags, true); });
}

CUresult CUDAAPI cuStreamGetPriority(CUstream hStream, int* priority) {
  return guarded([&] {
    return stream_query(hStream, false, priority, [](Stream& s, Context&) { return s.priority; });
  });
}
CUresult CUDAAPI cuStreamGetPriority_ptsz(CUstream hStream, int* priority) {
  return guarded([&] {
    return stream_query(hStream, true, priority, [](Stream& s, Context&) { return s.priority; });
  });
}
CUresult CUDAAPI cuStreamGetFlags(CUstream hStream, unsigned int* flags) {
  return guarded([&] {
    return stream_query(hStream, false, flags, [](Stream& s, Context&) { return s.flags; });
  });
}
CUresult CUDAAPI cuStreamGetFlags_ptsz(CUstream hStream, unsigned int* flags) {
  return guarded([&] {
    return stream_query(hStream, true, flags, [](Stream& s, Context&) { return s.flags; });
  });
}
CUresult CUDAAPI cuStreamGetId(CUstream hStream, unsigned long long* streamId) {
  return guarded([&] {
    return stream_query(hStream, false, streamId,
                        [](Stream& s, Context&) { return static_cast<unsigned long long>(s.id); });
  });
}
CUresult CUDAAPI cuStreamGetId_ptsz(CUstream hStream, unsigned long long* streamId) {
  return guarded([&] {
    return stream_query(hStream, true, streamId,
                        [](Stream& s, Context&) { return static_cast<unsigned long long>(s.id); });
  });
}
CUresult CUDAAPI cuStreamGetCtx(CUstream hStream, CUcontext* pctx) {
  return guarded([&] {
    return stream_query(hStream, false, pctx,
                        [](Stream&, Context& c) { return to_cu<CUcontext>(c.handle); });
  });
}
CUresult CUDAAPI cuStreamGetCtx_ptsz(CUstream hStream, CUcontext* pctx) {
  return guarded([&] {
    return stream_query(hStream, true, pctx,
                        [](Stream&, Context& c) { return to_cu<CUcontext>(c.handle); });
  });
}
CUresult CUDAAPI cuStreamGetDevice(CUstream hStream, CUdevice* device) {
  return guarded([&] {
    return stream_query(hStream, false, device, [](Stream&, Context& c) { return c.device; });
  });
}
CUresult CUDAAPI cuStreamGetDevice_ptsz(CUstream hStream, CUdevice* device) {
  return guarded([&] {
    return stream_query(hStream, true, device, [](Stream&, Context& c) { return c.device; });
  });
}
CUresult CUDAAPI cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void* userData) {
  return guarded([&] {
    if (fn == nullptr) return initialized() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    return host_func(hStream, false, fn, userData, false, nullptr);
  });
}
CUresult CUDAAPI cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void* userData) {
  return guarded([&] {
    if (fn == nullptr) return initialized() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    return host_func(hStream, true, fn, userData, false, nullptr);
  });
}
CUresult CUDAAPI cuStreamAddCallback(CUstream hStream, CUstreamCallback callback, void* userData,
                                     unsigned int flags) {
  return guarded([&] {
    if (callback == nullptr || flags != 0)
      return initialized() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    return host_func(hStream, false, nullptr, userData, true, callback);
  });
}
CUresult CUDAAPI cuStreamAddCallback_ptsz(CUstream hStream, CUstreamCallback callback,
                                          void* userData, unsigned int flags) {
  return guarded([&] {
    if (callback == nullptr || flags != 0)
      return initialized() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    return host_func(hStream, true, nullptr, userData, true, callback);
  });
}

// --- events
// ----------------------------------------------------------------------------------------

CUresult CUDAAPI cuEventCreate(CUevent* phEvent, unsigned int Flags) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (phEvent == nullptr || (Flags & ~k_event_flags) != 0) return CUDA_ERROR_INVALID_VALUE;
    // An interprocess event must disable timing (cuEventCreate documentation).
    if ((Flags & CU_EVENT_INTERPROCESS) != 0 && (Flags & CU_EVENT_DISABLE_TIMING) == 0)
      return CUDA_ERROR_INVALID_VALUE;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    Context* ctx = nullptr;
    if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
    auto ev = std::make_unique<Event>();
    ev->handle = r.new_handle();
    ev->ctx = ctx->handle;
    ev->flags = Flags;
    ctx->events.insert(ev->handle);
    *phEvent = to_cu<CUevent>(ev->handle);
    r.events.emplace(ev->handle, std::move(ev));
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream) {
  return guarded([&] { return record_event(hEvent, hStream, 0, false); });
}
CUresult CUDAAPI cuEventRecord_ptsz(CUevent hEvent, CUstream hStream) {
  return guarded([&] { return record_event(hEvent, hStream, 0, true); });
}
CUresult CUDAAPI cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags) {
  return guarded([&] { return record_event(hEvent, hStream, flags, false); });
}
CUresult CUDAAPI cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags) {
  return guarded([&] { return record_event(hEvent, hStream, flags, true); });
}

CUresult CUDAAPI cuEventQuery(CUevent hEvent) {
  return guarded([&] { return event_status(hEvent, false); });
}

CUresult CUDAAPI cuEventSynchronize(CUevent hEvent) {
  return guarded([&] { return event_status(hEvent, true); });
}

CUresult CUDAAPI cuEventElapsedTime(float* pMilliseconds, CUevent hStart, CUevent hEnd) {
  return guarded([&] { return elapsed_time(pMilliseconds, hStart, hEnd); });
}

CUresult CUDAAPI cuEventElapsedTime_v2(float* pMilliseconds, CUevent hStart, CUevent hEnd) {
  return guarded([&] { return elapsed_time(pMilliseconds, hStart, hEnd); });
}

CUresult CUDAAPI cuEventDestroy(CUevent hEvent) {
  return guarded([&] { return destroy_event(hEvent); });
}

CUresult CUDAAPI cuEventDestroy_v2(CUevent hEvent) {
  return guarded([&] { return destroy_event(hEvent); });
}

} // extern "C"
