// cuGetErrorName and cuGetErrorString for every CUresult of cuda.h 13.0. The strings are the ones
// the real driver returns, so logs read the same on the emulated device.
#include "emu/driver.hpp"

#include <algorithm>
#include <iterator>

namespace hone::emu {

namespace {

struct ErrorText {
  CUresult code;
  const char* name;
  const char* text;
};

#define HONE_ERR(code, text)                                                                       \
  { code, #code, text }
// Sorted by code.
constexpr ErrorText k_errors[] = {
    HONE_ERR(CUDA_SUCCESS, "no error"),
    HONE_ERR(CUDA_ERROR_INVALID_VALUE, "invalid argument"),
    HONE_ERR(CUDA_ERROR_OUT_OF_MEMORY, "out of memory"),
    HONE_ERR(CUDA_ERROR_NOT_INITIALIZED, "initialization error"),
    HONE_ERR(CUDA_ERROR_DEINITIALIZED, "driver shutting down"),
    HONE_ERR(CUDA_ERROR_PROFILER_DISABLED, "profiler disabled while using external profiling tool"),
    HONE_ERR(CUDA_ERROR_PROFILER_NOT_INITIALIZED,
             "profiler not initialized: call cudaProfilerInitialize()"),
    HONE_ERR(CUDA_ERROR_PROFILER_ALREADY_STARTED, "profiler already started"),
    HONE_ERR(CUDA_ERROR_PROFILER_ALREADY_STOPPED, "profiler already stopped"),
    HONE_ERR(CUDA_ERROR_STUB_LIBRARY, "CUDA driver is a stub library"),
    HONE_ERR(CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER,
             "API call is not supported in the installed CUDA driver"),
    HONE_ERR(CUDA_ERROR_DEVICE_UNAVAILABLE, "CUDA-capable device(s) is/are busy or unavailable"),
    HONE_ERR(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected"),
    HONE_ERR(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal"),
    HONE_ERR(CUDA_ERROR_DEVICE_NOT_LICENSED, "device doesn't have valid Grid license"),
    HONE_ERR(CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid"),
    HONE_ERR(CUDA_ERROR_INVALID_CONTEXT, "invalid device context"),
    HONE_ERR(CUDA_ERROR_CONTEXT_ALREADY_CURRENT, "context already current"),
    HONE_ERR(CUDA_ERROR_MAP_FAILED, "mapping of buffer object failed"),
    HONE_ERR(CUDA_ERROR_UNMAP_FAILED, "unmapping of buffer object failed"),
    HONE_ERR(CUDA_ERROR_ARRAY_IS_MAPPED, "array is mapped"),
    HONE_ERR(CUDA_ERROR_ALREADY_MAPPED, "resource already mapped"),
    HONE_ERR(CUDA_ERROR_NO_BINARY_FOR_GPU,
             "no kernel image is available for execution on the device"),
    HONE_ERR(CUDA_ERROR_ALREADY_ACQUIRED, "resource already acquired"),
    HONE_ERR(CUDA_ERROR_NOT_MAPPED, "resource not mapped"),
    HONE_ERR(CUDA_ERROR_NOT_MAPPED_AS_ARRAY, "resource not mapped as array"),
    HONE_ERR(CUDA_ERROR_NOT_MAPPED_AS_POINTER, "resource not mapped as pointer"),
    HONE_ERR(CUDA_ERROR_ECC_UNCORRECTABLE, "uncorrectable ECC error encountered"),
    HONE_ERR(CUDA_ERROR_UNSUPPORTED_LIMIT, "limit is not supported on this architecture"),
    HONE_ERR(CUDA_ERROR_CONTEXT_ALREADY_IN_USE,
             "exclusive-thread device already in use by a different thread"),
    HONE_ERR(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED,
             "peer access is not supported between these two devices"),
    HONE_ERR(CUDA_ERROR_INVALID_PTX, "a PTX JIT compilation failed"),
    HONE_ERR(CUDA_ERROR_INVALID_GRAPHICS_CONTEXT, "invalid OpenGL or DirectX context"),
    HONE_ERR(CUDA_ERROR_NVLINK_UNCORRECTABLE,
             "uncorrectable NVLink error detected during the execution"),
    HONE_ERR(CUDA_ERROR_JIT_COMPILER_NOT_FOUND, "PTX JIT compiler library not found"),
    HONE_ERR(CUDA_ERROR_UNSUPPORTED_PTX_VERSION,
             "the provided PTX was compiled with an unsupported toolchain."),
    HONE_ERR(CUDA_ERROR_JIT_COMPILATION_DISABLED, "PTX JIT compilation was disabled"),
    HONE_ERR(CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY,
             "the provided execution affinity is not supported"),
    HONE_ERR(CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC,
             "the provided PTX contains unsupported call to cudaDeviceSynchronize"),
    HONE_ERR(CUDA_ERROR_CONTAINED, "an exception occurred on the device that is now contained by "
                                   "the GPU's error containment capability"),
    HONE_ERR(CUDA_ERROR_INVALID_SOURCE, "device kernel image is invalid"),
    HONE_ERR(CUDA_ERROR_FILE_NOT_FOUND, "file not found"),
    HONE_ERR(CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND, "shared object symbol not found"),
    HONE_ERR(CUDA_ERROR_SHARED_OBJECT_INIT_FAILED, "shared object initialization failed"),
    HONE_ERR(CUDA_ERROR_OPERATING_SYSTEM, "OS call failed or operation not supported on this OS"),
    HONE_ERR(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle"),
    HONE_ERR(CUDA_ERROR_ILLEGAL_STATE, "the operation cannot be performed in the present state"),
    HONE_ERR(CUDA_ERROR_LOSSY_QUERY, "attempted introspection would be semantically lossy"),
    HONE_ERR(CUDA_ERROR_NOT_FOUND, "named symbol not found"),
    HONE_ERR(CUDA_ERROR_NOT_READY, "device not ready"),
    HONE_ERR(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered"),
    HONE_ERR(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "too many resources requested for launch"),
    HONE_ERR(CUDA_ERROR_LAUNCH_TIMEOUT, "the launch timed out and was terminated"),
    HONE_ERR(CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING, "launch uses incompatible texturing mode"),
    HONE_ERR(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "peer access is already enabled"),
    HONE_ERR(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, "peer access has not been enabled"),
    HONE_ERR(CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE,
             "cannot set while device is active in this process"),
    HONE_ERR(CUDA_ERROR_CONTEXT_IS_DESTROYED, "context is destroyed"),
    HONE_ERR(CUDA_ERROR_ASSERT, "device-side assert triggered"),
    HONE_ERR(CUDA_ERROR_TOO_MANY_PEERS, "peer mapping resources exhausted"),
    HONE_ERR(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
             "part or all of the requested memory range is already mapped"),
    HONE_ERR(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
             "pointer does not correspond to a registered memory region"),
    HONE_ERR(CUDA_ERROR_HARDWARE_STACK_ERROR, "hardware stack error"),
    HONE_ERR(CUDA_ERROR_ILLEGAL_INSTRUCTION, "an illegal instruction was encountered"),
    HONE_ERR(CUDA_ERROR_MISALIGNED_ADDRESS, "misaligned address"),
    HONE_ERR(CUDA_ERROR_INVALID_ADDRESS_SPACE,
             "operation not supported on global/shared address space"),
    HONE_ERR(CUDA_ERROR_INVALID_PC, "invalid program counter"),
    HONE_ERR(CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure"),
    HONE_ERR(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, "too many blocks in cooperative launch"),
    HONE_ERR(CUDA_ERROR_TENSOR_MEMORY_LEAK, "tensor memory not completely freed"),
    HONE_ERR(CUDA_ERROR_NOT_PERMITTED, "operation not permitted"),
    HONE_ERR(CUDA_ERROR_NOT_SUPPORTED, "operation not supported"),
    HONE_ERR(CUDA_ERROR_SYSTEM_NOT_READY, "system not yet initialized"),
    HONE_ERR(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH,
             "system has unsupported display driver / cuda driver combination"),
    HONE_ERR(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE,
             "forward compatibility was attempted on non supported HW"),
    HONE_ERR(CUDA_ERROR_MPS_CONNECTION_FAILED,
             "MPS client failed to connect to the MPS control daemon or the MPS server"),
    HONE_ERR(CUDA_ERROR_MPS_RPC_FAILURE,
             "the remote procedural call between the MPS server and the MPS client failed"),
    HONE_ERR(CUDA_ERROR_MPS_SERVER_NOT_READY,
             "MPS server is not ready to accept new MPS client requests"),
    HONE_ERR(CUDA_ERROR_MPS_MAX_CLIENTS_REACHED,
             "the hardware resources required to create MPS client have been exhausted"),
    HONE_ERR(CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED,
             "the hardware resources required to support device connections have been exhausted"),
    HONE_ERR(CUDA_ERROR_MPS_CLIENT_TERMINATED, "the MPS client has been terminated by the server"),
    HONE_ERR(CUDA_ERROR_CDP_NOT_SUPPORTED, "is using CUDA Dynamic Parallelism, but the current "
                                           "configuration, like MPS, does not support it"),
    HONE_ERR(CUDA_ERROR_CDP_VERSION_MISMATCH,
             "unsupported interaction between different versions of CUDA Dynamic Parallelism"),
    HONE_ERR(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
             "operation not permitted when stream is capturing"),
    HONE_ERR(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
             "operation failed due to a previous error during capture"),
    HONE_ERR(CUDA_ERROR_STREAM_CAPTURE_MERGE,
             "operation would result in a merge of separate capture sequences"),
    HONE_ERR(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED,
             "capture was not ended in the same stream as it began"),
    HONE_ERR(CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "capturing stream has unjoined work"),
    HONE_ERR(CUDA_ERROR_STREAM_CAPTURE_ISOLATION,
             "dependency created on uncaptured work in another stream"),
    HONE_ERR(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
             "operation would make the legacy stream depend on a capturing blocking stream"),
    HONE_ERR(CUDA_ERROR_CAPTURED_EVENT,
             "operation not permitted on an event last recorded in a capturing stream"),
    HONE_ERR(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD,
             "attempt to terminate a thread-local capture sequence from another thread"),
    HONE_ERR(CUDA_ERROR_TIMEOUT, "wait operation timed out"),
    HONE_ERR(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE,
             "the graph update was not performed because it included changes which violated "
             "constraints specific to instantiated graph update"),
    HONE_ERR(CUDA_ERROR_EXTERNAL_DEVICE, "an async error has occurred in a device outside of CUDA"),
    HONE_ERR(CUDA_ERROR_INVALID_CLUSTER_SIZE,
             "a kernel launch error has occurred due to cluster misconfiguration"),
    HONE_ERR(
        CUDA_ERROR_FUNCTION_NOT_LOADED,
        "the function handle is not loaded when calling an API that requires a loaded function"),
    HONE_ERR(CUDA_ERROR_INVALID_RESOURCE_TYPE,
             "one or more resources passed in are not valid resource types for the operation"),
    HONE_ERR(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION,
             "one or more resources are insufficient or non-applicable for the operation"),
    HONE_ERR(CUDA_ERROR_KEY_ROTATION, "an error happened during the key rotation sequence"),
    HONE_ERR(CUDA_ERROR_UNKNOWN, "unknown error"),
};
#undef HONE_ERR

const ErrorText* find_error(int code) {
  auto it = std::lower_bound(std::begin(k_errors), std::end(k_errors), code,
                             [](const ErrorText& e, int c) { return e.code < c; });
  return it != std::end(k_errors) && it->code == code ? &*it : nullptr;
}

} // namespace

} // namespace hone::emu

using namespace hone::emu;

extern "C" {

// Both work before cuInit, as on the real driver: they are how a program reports cuInit failing.
CUresult CUDAAPI cuGetErrorName(CUresult error, const char** pStr) {
  if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const ErrorText* e = find_error(enum_value(error));
  *pStr = e != nullptr ? e->name : nullptr;
  return e != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuGetErrorString(CUresult error, const char** pStr) {
  if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const ErrorText* e = find_error(enum_value(error));
  *pStr = e != nullptr ? e->text : nullptr;
  return e != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

} // extern "C"
