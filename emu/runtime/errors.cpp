// Errors: the thread's last error, and the names and descriptions of every cudaError_t.
#include "emu/runtime/exports.hpp"
#include "emu/runtime/runtime.hpp"

using namespace hone::cudart;

namespace {

// Descriptions of the errors only the runtime has; the rest share their value with a CUresult
// and take the driver's description (cuGetErrorString works before cuInit).
struct Description {
  cudaError_t error;
  const char* text;
};
constexpr Description k_runtime_only[] = {
    {cudaSuccess, "no error"},
    {cudaErrorInvalidConfiguration, "invalid configuration argument"},
    {cudaErrorInvalidPitchValue, "invalid pitch argument"},
    {cudaErrorInvalidSymbol, "invalid device symbol"},
    {cudaErrorInvalidHostPointer, "invalid host pointer"},
    {cudaErrorInvalidDevicePointer, "invalid device pointer"},
    {cudaErrorInvalidTexture, "invalid texture reference"},
    {cudaErrorInvalidTextureBinding, "texture is not bound to a pointer"},
    {cudaErrorInvalidChannelDescriptor, "invalid channel descriptor"},
    {cudaErrorInvalidMemcpyDirection, "invalid copy direction for memcpy"},
    {cudaErrorAddressOfConstant, "invalid address of constant"},
    {cudaErrorTextureFetchFailed, "fetch from texture failed"},
    {cudaErrorTextureNotBound, "cannot fetch from a texture that is not bound"},
    {cudaErrorSynchronizationError, "incorrect use of __syncthreads()"},
    {cudaErrorInvalidFilterSetting, "linear filtering not supported for non-float type"},
    {cudaErrorInvalidNormSetting,
     "read as normalized float not supported for 32-bit non float type"},
    {cudaErrorMixedDeviceExecution,
     "device emulation mode and device execution mode cannot be mixed"},
    {cudaErrorNotYetImplemented, "feature not yet implemented"},
    {cudaErrorMemoryValueTooLarge, "memory size or pointer value too large to fit in 32 bit"},
    {cudaErrorInsufficientDriver, "CUDA driver version is insufficient for CUDA runtime version"},
    {cudaErrorInvalidSurface, "invalid surface reference"},
    {cudaErrorDuplicateVariableName, "duplicate global variable looked up by string name"},
    {cudaErrorDuplicateTextureName, "duplicate texture looked up by string name"},
    {cudaErrorDuplicateSurfaceName, "duplicate surface looked up by string name"},
    {cudaErrorIncompatibleDriverContext, "incompatible driver context"},
    {cudaErrorMissingConfiguration, "__global__ function call is not configured"},
    {cudaErrorPriorLaunchFailure, "unspecified launch failure in prior launch"},
    {cudaErrorLaunchMaxDepthExceeded, "launch would exceed maximum depth of nested launches"},
    {cudaErrorLaunchFileScopedTex,
     "launch failed because kernel uses unsupported, file-scoped textures"},
    {cudaErrorLaunchFileScopedSurf,
     "launch failed because kernel uses unsupported, file-scoped surfaces"},
    {cudaErrorSyncDepthExceeded, "cudaDeviceSynchronize failed because caller's grid depth exceeds "
                                 "cudaLimitDevRuntimeSyncDepth"},
    {cudaErrorLaunchPendingCountExceeded,
     "launch failed because launch would exceed cudaLimitDevRuntimePendingLaunchCount"},
    {cudaErrorInvalidDeviceFunction, "invalid device function"},
    {cudaErrorSoftwareValidityNotEstablished, "integrity checks failed"},
    {cudaErrorStartupFailure, "startup failure in cuda runtime"},
    {cudaErrorApiFailureBase, "api failure base"},
};

} // namespace

HONE_CUDART_API cudaError_t cudaGetLastError() {
  return take_last_error();
}

HONE_CUDART_API cudaError_t cudaPeekAtLastError() {
  return peek_last_error();
}

// "unrecognized error code" for a value enum cudaError does not have, as documented.
HONE_CUDART_API const char* cudaGetErrorName(cudaError_t error) {
  // k_error_names holds the cudaError* enumerators (gen_exports.cmake): cudaSuccess is not one.
  if (error == cudaSuccess) return "cudaSuccess";
  for (size_t i = 0; i < k_error_name_count; ++i) {
    if (k_error_names[i].value == int(error)) return k_error_names[i].name;
  }
  return "unrecognized error code";
}

HONE_CUDART_API const char* cudaGetErrorString(cudaError_t error) {
  for (const Description& d : k_runtime_only) {
    if (d.error == error) return d.text;
  }
  const char* text = nullptr;
  if (load_driver() == CUDA_SUCCESS &&
      call(driver().cuGetErrorString, CUresult(error), &text) == CUDA_SUCCESS && text != nullptr) {
    return text;
  }
  return "unrecognized error code";
}
