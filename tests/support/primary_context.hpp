// The device's primary context, retained once per test process and made current on the calling
// thread: what tests that drive the emulated driver directly share.
#pragma once

#include <cuda.h>

namespace hone::test {

// cuInit, then the primary context of device 0 current here; the first failure is returned.
inline CUresult use_primary_context() {
  static CUcontext ctx = nullptr;
  static CUresult status = [] {
    CUresult r = cuInit(0);
    CUdevice dev = 0;
    if (r == CUDA_SUCCESS) r = cuDeviceGet(&dev, 0);
    if (r == CUDA_SUCCESS) r = cuDevicePrimaryCtxRetain(&ctx, dev);
    return r;
  }();
  if (status != CUDA_SUCCESS) return status;
  return cuCtxSetCurrent(ctx);
}

} // namespace hone::test
