// The emulated device's primary context, made current on the calling thread: what tests that
// launch hand-written kernels through the driver API share. cuInit and the retain happen once per
// process; the status of that first attempt is returned ever after.
#pragma once

#include <cuda.h>

namespace hone::test {

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
