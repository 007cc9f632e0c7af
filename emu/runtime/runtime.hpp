// What the runtime's entry points share: start-up, the per-thread state (device, last error,
// launch configurations), the primary contexts, error conversion, and the registered fatbins,
// kernels and variables.
//
// The runtime is written against the public driver API only (driver_table.hpp); it holds no
// driver object of its own beyond the handles the driver gave it.
#pragma once

#include "emu/runtime/driver_table.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <new>
#include <string>

namespace hone::cudart {

// The runtime's own version (cudaRuntimeGetVersion): the toolkit it was built against.
inline constexpr int k_runtime_version = CUDART_VERSION;

// --- errors ------------------------------------------------------------------------------------

// The runtime's error for a driver result (the values mostly coincide, by NVIDIA's design).
cudaError_t to_cuda(CUresult r);

// Errors that leave the device unusable for the rest of the process (until cudaDeviceReset).
bool is_sticky(cudaError_t e);

// Record `e` as the calling thread's last error (unless success or cudaErrorNotReady, which is
// a status, not an error) and return it.
cudaError_t record(cudaError_t e) noexcept;

// The thread's last error, reset to success; a sticky error is returned again every time.
cudaError_t take_last_error() noexcept;
cudaError_t peek_last_error() noexcept;
// cudaDeviceReset succeeded: the sticky error is gone.
void clear_sticky() noexcept;

// Log `message` once per distinct text (warn level).
void warn_once(const std::string& message);

// Run an entry point's body: no exception crosses the C ABI, and whatever it returns becomes the
// thread's last error.
template <class F> cudaError_t api(F&& body) noexcept {
  cudaError_t e;
  try {
    e = body();
  } catch (const std::bad_alloc&) {
    e = cudaErrorMemoryAllocation;
  } catch (...) {
    e = cudaErrorUnknown;
  }
  return record(e);
}

// --- start-up, devices, contexts -----------------------------------------------------------------

// Load the driver, cuInit, check its version (once per process). cudaSuccess or the error that
// keeps every call from working (no driver: cudaErrorInsufficientDriver, ...).
cudaError_t init();

int device_count();
// The calling thread's device (cudaSetDevice; 0 by default).
int thread_device();
void set_thread_device(int device);

// Make sure the calling thread has a context: the one it already has current (a driver-API
// context of the application's own, as NVIDIA's runtime accepts), or its device's primary
// context, retained once per process and made current. Every call that needs a context starts
// here.
cudaError_t ensure_context();

// The primary context of `device`, retained (once per process, again after a reset).
cudaError_t primary_context(int device, CUcontext& out);
// cudaDeviceReset on `device`: reset its primary context; it is retained again on next use.
cudaError_t reset_device(int device);

// --- launch configuration (<<<>>>) -----------------------------------------------------------

struct CallConfig {
  dim3 grid;
  dim3 block;
  size_t shared = 0;
  cudaStream_t stream = nullptr;
};
void push_config(const CallConfig& c);
bool pop_config(CallConfig& out);

// --- registered device code
// -----------------------------------------------------------------------

struct Fatbin;

// A __global__ function registered by the program's host code.
struct KernelInfo {
  Fatbin* fatbin = nullptr;
  const void* host_fun = nullptr;
  std::string name;          // the device name (mangled for C++)
  CUkernel kernel = nullptr; // once its fatbin is loaded
  int param_count = -1;      // from the driver, on first launch
};

// The kernel of a host function pointer (`kernel<<<>>>`'s symbol, cudaLaunchKernel's `func`),
// loading its fatbin on first use. cudaErrorInvalidDeviceFunction when it was never registered.
cudaError_t kernel_of(const void* host_fun, KernelInfo*& out);
// The registered kernel behind a CUkernel the runtime handed out (__cudaGetKernel), or null.
KernelInfo* kernel_by_handle(CUkernel k);
// The function `k` resolves to in the current context.
cudaError_t function_of(const KernelInfo& k, CUfunction& out);

// A __device__/__constant__/__managed__ variable: its address and size in the current context.
struct Symbol {
  CUdeviceptr address = 0;
  size_t size = 0;
  bool constant = false;
};
cudaError_t symbol_of(const void* host_var, Symbol& out);

// Load every registered fatbin now (CUDA_MODULE_LOADING=EAGER, read at start-up).
void load_all_fatbins();

// Check a launch configuration against the device's limits (grid and block dimensions, threads
// per block), as the runtime does before the driver sees it: cudaErrorInvalidConfiguration.
cudaError_t check_config(dim3 grid, dim3 block);

// Check a launch's arguments against the kernel's parameters: `args` must hold one non-null
// pointer per parameter.
cudaError_t check_args(KernelInfo& k, void** args);

// Launch `k` through the legacy or the per-thread driver entry point.
cudaError_t launch(KernelInfo& k, dim3 grid, dim3 block, void** args, size_t shared,
                   cudaStream_t stream, bool per_thread);

} // namespace hone::cudart

// Entry points are defined under their ABI names with default visibility.
#define HONE_CUDART_API extern "C" __attribute__((visibility("default")))

// A runtime entry point and its per-thread default stream spelling (`suffix`: _ptds for the
// synchronous calls, _ptsz for the stream-ordered ones) from one body, which sees `per_thread`:
//   HONE_CUDART_PAIR(cudaMemset, _ptds, (void* p, int v, size_t n), (p, v, n)) { ... }
#define HONE_CUDART_UNPAREN(...) __VA_ARGS__
#define HONE_CUDART_PAIR(name, suffix, params, args)                                               \
  static cudaError_t name##_body(bool per_thread, HONE_CUDART_UNPAREN params);                     \
  HONE_CUDART_API cudaError_t name params {                                                        \
    return hone::cudart::api([&] { return name##_body(false, HONE_CUDART_UNPAREN args); });        \
  }                                                                                                \
  HONE_CUDART_API cudaError_t name##suffix params {                                                \
    return hone::cudart::api([&] { return name##_body(true, HONE_CUDART_UNPAREN args); });         \
  }                                                                                                \
  static cudaError_t name##_body(bool per_thread, HONE_CUDART_UNPAREN params)
