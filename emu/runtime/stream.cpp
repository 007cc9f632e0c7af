// Streams (created, the legacy and the per-thread default streams), host callbacks, and events.
//
// Stream handles pass through unchanged: cudaStreamLegacy and cudaStreamPerThread are the
// driver's CU_STREAM_LEGACY and CU_STREAM_PER_THREAD, and the NULL stream means the legacy
// stream through a plain entry point and the calling thread's per-thread stream through a _ptsz
// one, which is exactly what the driver's legacy and per-thread entry points make of it.
#include "emu/runtime/runtime.hpp"

#include <memory>

// driver_types.h: cudaStreamLegacy is ((cudaStream_t)0x1), cudaStreamPerThread ((cudaStream_t)0x2),
// the values cuda.h gives CU_STREAM_LEGACY and CU_STREAM_PER_THREAD.

using namespace hone::cudart;

namespace {

static_assert(int(cudaStreamNonBlocking) == int(CU_STREAM_NON_BLOCKING));
static_assert(int(cudaEventDisableTiming) == int(CU_EVENT_DISABLE_TIMING));

CUstream cu(cudaStream_t s) {
  return reinterpret_cast<CUstream>(s);
}
CUevent cu(cudaEvent_t e) {
  return reinterpret_cast<CUevent>(e);
}

// cudaStreamAddCallback's callback takes the runtime's types; the driver calls this instead.
struct Callback {
  cudaStreamCallback_t fn;
  void* user;
  cudaStream_t stream;
};

void CUDA_CB run_callback(CUstream, CUresult status, void* data) {
  std::unique_ptr<Callback> c(static_cast<Callback*>(data));
  c->fn(c->stream, to_cuda(status), c->user);
}

} // namespace

// --- streams
// ---------------------------------------------------------------------------------------

HONE_CUDART_API cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return api([&] {
    if (stream == nullptr) return cudaErrorInvalidValue;
    if (cudaError_t e = ensure_context()) return e;
    return to_cuda(call(driver().cuStreamCreate, reinterpret_cast<CUstream*>(stream),
                        unsigned(CU_STREAM_DEFAULT)));
  });
}

HONE_CUDART_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
  return api([&] {
    if (stream == nullptr) return cudaErrorInvalidValue;
    if (cudaError_t e = ensure_context()) return e;
    return to_cuda(call(driver().cuStreamCreate, reinterpret_cast<CUstream*>(stream), flags));
  });
}

HONE_CUDART_API cudaError_t cudaStreamCreateWithPriority(cudaStream_t* stream, unsigned flags,
                                                         int priority) {
  return api([&] {
    if (stream == nullptr) return cudaErrorInvalidValue;
    if (cudaError_t e = ensure_context()) return e;
    return to_cuda(call(driver().cuStreamCreateWithPriority, reinterpret_cast<CUstream*>(stream),
                        flags, priority));
  });
}

HONE_CUDART_API cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  return api([&] {
    if (cudaError_t e = ensure_context()) return e;
    // The special streams are not the application's to destroy.
    if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread) {
      return cudaErrorInvalidResourceHandle;
    }
    return to_cuda(call(driver().cuStreamDestroy, cu(stream)));
  });
}

HONE_CUDART_PAIR(cudaStreamSynchronize, _ptsz, (cudaStream_t stream), (stream)) {
  if (cudaError_t e = ensure_context()) return e;
  return to_cuda(call(HONE_DRV(per_thread, cuStreamSynchronize), cu(stream)));
}

HONE_CUDART_PAIR(cudaStreamQuery, _ptsz, (cudaStream_t stream), (stream)) {
  if (cudaError_t e = ensure_context()) return e;
  return to_cuda(call(HONE_DRV(per_thread, cuStreamQuery), cu(stream)));
}

HONE_CUDART_PAIR(cudaStreamWaitEvent, _ptsz,
                 (cudaStream_t stream, cudaEvent_t event, unsigned flags), (stream, event, flags)) {
  if (cudaError_t e = ensure_context()) return e;
  return to_cuda(call(HONE_DRV(per_thread, cuStreamWaitEvent), cu(stream), cu(event), flags));
}

HONE_CUDART_PAIR(cudaStreamAddCallback, _ptsz,
                 (cudaStream_t stream, cudaStreamCallback_t callback, void* user, unsigned flags),
                 (stream, callback, user, flags)) {
  if (callback == nullptr || flags != 0) return cudaErrorInvalidValue;
  if (cudaError_t e = ensure_context()) return e;
  auto c = std::make_unique<Callback>(Callback{callback, user, stream});
  CUresult r =
      call(HONE_DRV(per_thread, cuStreamAddCallback), cu(stream), run_callback, c.get(), 0u);
  if (r == CUDA_SUCCESS) c.release(); // the callback owns it now
  return to_cuda(r);
}

HONE_CUDART_PAIR(cudaLaunchHostFunc, _ptsz, (cudaStream_t stream, cudaHostFn_t fn, void* user),
                 (stream, fn, user)) {
  if (fn == nullptr) return cudaErrorInvalidValue;
  if (cudaError_t e = ensure_context()) return e;
  return to_cuda(call(HONE_DRV(per_thread, cuLaunchHostFunc), cu(stream), fn, user));
}

HONE_CUDART_PAIR(cudaStreamGetPriority, _ptsz, (cudaStream_t stream, int* priority),
                 (stream, priority)) {
  if (priority == nullptr) return cudaErrorInvalidValue;
  if (cudaError_t e = ensure_context()) return e;
  return to_cuda(call(HONE_DRV(per_thread, cuStreamGetPriority), cu(stream), priority));
}

HONE_CUDART_PAIR(cudaStreamGetFlags, _ptsz, (cudaStream_t stream, unsigned* flags),
                 (stream, flags)) {
  if (flags == nullptr) return cudaErrorInvalidValue;
  if (cudaError_t e = ensure_context()) return e;
  return to_cuda(call(HONE_DRV(per_thread, cuStreamGetFlags), cu(stream), flags));
}

HONE_CUDART_PAIR(cudaStreamGetId, _ptsz, (cudaStream_t stream, unsigned long long* id),
                 (stream, id)) {
  if (id == nullptr) return cudaErrorInvalidValue;
  if (cudaError_t e = ensure_context()) return e;
  return to_cuda(call(HONE_DRV(per_thread, cuStreamGetId), cu(stream), id));
}

HONE_CUDART_PAIR(cudaStreamGetDevice, _ptsz, (cudaStream_t stream, int* device), (stream, device)) {
  if (device == nullptr) return cudaErrorInvalidValue;
  if (cudaError_t e = ensure_context()) return e;
  CUdevice d = 0;
  if (CUresult r = call(HONE_DRV(per_thread, cuStreamGetDevice), cu(stream), &d)) return to_cuda(r);
  *device = int(d);
  return cudaSuccess;
}

HONE_CUDART_PAIR(cudaStreamAttachMemAsync, _ptsz,
                 (cudaStream_t stream, void* ptr, size_t length, unsigned flags),
                 (stream, ptr, length, flags)) {
  if (cudaError_t e = ensure_context()) return e;
  return to_cuda(call(HONE_DRV(per_thread, cuStreamAttachMemAsync), cu(stream),
                      reinterpret_cast<CUdeviceptr>(ptr), length, flags));
}

HONE_CUDART_PAIR(cudaStreamIsCapturing, _ptsz,
                 (cudaStream_t stream, cudaStreamCaptureStatus* status), (stream, status)) {
  if (status == nullptr) return cudaErrorInvalidValue;
  if (cudaError_t e = ensure_context()) return e;
  CUstreamCaptureStatus s = CU_STREAM_CAPTURE_STATUS_NONE;
  if (CUresult r = call(HONE_DRV(per_thread, cuStreamIsCapturing), cu(stream), &s))
    return to_cuda(r);
  *status = cudaStreamCaptureStatus(s);
  return cudaSuccess;
}

// --- events
// ----------------------------------------------------------------------------------------

HONE_CUDART_API cudaError_t cudaEventCreate(cudaEvent_t* event) {
  return api([&] {
    if (event == nullptr) return cudaErrorInvalidValue;
    if (cudaError_t e = ensure_context()) return e;
    return to_cuda(call(driver().cuEventCreate, reinterpret_cast<CUevent*>(event), 0u));
  });
}

HONE_CUDART_API cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags) {
  return api([&] {
    if (event == nullptr) return cudaErrorInvalidValue;
    if (cudaError_t e = ensure_context()) return e;
    return to_cuda(call(driver().cuEventCreate, reinterpret_cast<CUevent*>(event), flags));
  });
}

HONE_CUDART_PAIR(cudaEventRecord, _ptsz, (cudaEvent_t event, cudaStream_t stream),
                 (event, stream)) {
  if (cudaError_t e = ensure_context()) return e;
  return to_cuda(call(HONE_DRV(per_thread, cuEventRecord), cu(event), cu(stream)));
}

HONE_CUDART_PAIR(cudaEventRecordWithFlags, _ptsz,
                 (cudaEvent_t event, cudaStream_t stream, unsigned flags), (event, stream, flags)) {
  if (cudaError_t e = ensure_context()) return e;
  return to_cuda(call(HONE_DRV(per_thread, cuEventRecordWithFlags), cu(event), cu(stream), flags));
}

HONE_CUDART_API cudaError_t cudaEventQuery(cudaEvent_t event) {
  return api([&] {
    if (cudaError_t e = ensure_context()) return e;
    return to_cuda(call(driver().cuEventQuery, cu(event)));
  });
}

HONE_CUDART_API cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  return api([&] {
    if (cudaError_t e = ensure_context()) return e;
    return to_cuda(call(driver().cuEventSynchronize, cu(event)));
  });
}

HONE_CUDART_API cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  return api([&] {
    if (ms == nullptr) return cudaErrorInvalidValue;
    if (cudaError_t e = ensure_context()) return e;
    return to_cuda(call(driver().cuEventElapsedTime, ms, cu(start), cu(end)));
  });
}

HONE_CUDART_API cudaError_t cudaEventDestroy(cudaEvent_t event) {
  return api([&] {
    if (cudaError_t e = ensure_context()) return e;
    return to_cuda(call(driver().cuEventDestroy, cu(event)));
  });
}
