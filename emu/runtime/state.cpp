// Start-up, per-thread state and the primary contexts.
#include "emu/runtime/exports.hpp"
#include "emu/runtime/runtime.hpp"

#include "emu/log.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <vector>

namespace hone::cudart {

namespace {

thread_local cudaError_t t_last_error = cudaSuccess;
thread_local int t_device = 0;
thread_local std::vector<CallConfig> t_configs;
std::atomic<int> g_sticky{cudaSuccess};

struct Device {
  std::mutex mutex;
  CUcontext primary = nullptr;
  bool retained = false;
};

struct State {
  std::once_flag once;
  cudaError_t init_error = cudaErrorInitializationError;
  int device_count = 0;
  Device* devices = nullptr; // never freed: programs call the runtime from atexit handlers
};

State& state() {
  static State* s = new State;
  return *s;
}

void start() {
  State& s = state();
  CUresult r = load_driver();
  if (r != CUDA_SUCCESS) {
    s.init_error = cudaErrorInsufficientDriver;
    return;
  }
  const DriverTable& d = driver();
  r = d.cuInit(0);
  if (r != CUDA_SUCCESS) {
    s.init_error = r == CUDA_ERROR_NO_DEVICE ? cudaErrorNoDevice : to_cuda(r);
    emu::log(emu::LogLevel::warn, "cudart: cuInit failed (error " + std::to_string(int(r)) + ")");
    return;
  }
  int version = 0;
  if (call(d.cuDriverGetVersion, &version) != CUDA_SUCCESS || version < k_runtime_version) {
    emu::log(emu::LogLevel::warn, "cudart: the driver's CUDA version " + std::to_string(version) +
                                      " is older than this runtime's " +
                                      std::to_string(k_runtime_version));
    s.init_error = cudaErrorInsufficientDriver;
    return;
  }
  int count = 0;
  if (call(d.cuDeviceGetCount, &count) != CUDA_SUCCESS || count <= 0) {
    s.init_error = cudaErrorNoDevice;
    return;
  }
  s.device_count = count;
  s.devices = new Device[size_t(count)];
  s.init_error = cudaSuccess;
  if (const char* mode = std::getenv("CUDA_MODULE_LOADING"); mode && !std::strcmp(mode, "EAGER")) {
    load_all_fatbins();
  }
}

} // namespace

// --- errors ------------------------------------------------------------------------------------

cudaError_t to_cuda(CUresult r) {
  switch (r) {
  case CUDA_SUCCESS:
    return cudaSuccess;
  case CUDA_ERROR_CONTEXT_ALREADY_CURRENT:
    return cudaErrorIncompatibleDriverContext;
  case CUDA_ERROR_NOT_FOUND:
    return cudaErrorSymbolNotFound;
  default:
    break;
  }
  // Every other CUresult has the cudaError_t of the same value (driver_types.h and cuda.h agree by
  // design); a value the runtime does not know is cudaErrorUnknown.
  int v = int(r);
  for (size_t i = 0; i < k_error_name_count; ++i) {
    if (k_error_names[i].value == v) return cudaError_t(v);
  }
  return cudaErrorUnknown;
}

bool is_sticky(cudaError_t e) {
  switch (e) {
  case cudaErrorIllegalAddress:
  case cudaErrorLaunchTimeout:
  case cudaErrorAssert:
  case cudaErrorHardwareStackError:
  case cudaErrorIllegalInstruction:
  case cudaErrorMisalignedAddress:
  case cudaErrorInvalidAddressSpace:
  case cudaErrorInvalidPc:
  case cudaErrorLaunchFailure:
  case cudaErrorECCUncorrectable:
    return true;
  default:
    return false;
  }
}

cudaError_t record(cudaError_t e) noexcept {
  if (e == cudaSuccess || e == cudaErrorNotReady) return e;
  t_last_error = e;
  if (is_sticky(e)) {
    int expected = cudaSuccess;
    g_sticky.compare_exchange_strong(expected, int(e));
  }
  return e;
}

cudaError_t take_last_error() noexcept {
  if (int s = g_sticky.load(); s != cudaSuccess) return cudaError_t(s);
  cudaError_t e = t_last_error;
  t_last_error = cudaSuccess;
  return e;
}

cudaError_t peek_last_error() noexcept {
  if (int s = g_sticky.load(); s != cudaSuccess) return cudaError_t(s);
  return t_last_error;
}

void clear_sticky() noexcept {
  g_sticky.store(cudaSuccess);
  t_last_error = cudaSuccess;
}

void warn_once(const std::string& message) {
  static std::mutex mutex;
  static auto* seen = new std::set<std::string>;
  {
    std::lock_guard lock(mutex);
    if (!seen->insert(message).second) return;
  }
  emu::log(emu::LogLevel::warn, "cudart: " + message);
}

int unsupported_call(const char* name, std::atomic<bool>& logged) noexcept {
  if (!logged.exchange(true)) {
    emu::log(emu::LogLevel::warn,
             std::string("cudart: ") + name +
                 " is not implemented by the emulated device's runtime: cudaErrorNotSupported");
  }
  return record(cudaErrorNotSupported);
}

// --- start-up, devices, contexts -----------------------------------------------------------------

cudaError_t init() {
  State& s = state();
  std::call_once(s.once, start);
  return s.init_error;
}

int device_count() {
  return init() == cudaSuccess ? state().device_count : 0;
}
int thread_device() {
  return t_device;
}
void set_thread_device(int device) {
  t_device = device;
}

cudaError_t primary_context(int device, CUcontext& out) {
  if (cudaError_t e = init()) return e;
  State& s = state();
  if (device < 0 || device >= s.device_count) return cudaErrorInvalidDevice;
  Device& dev = s.devices[device];
  std::lock_guard lock(dev.mutex);
  if (!dev.retained) {
    CUdevice cu_device = 0;
    CUresult r = driver().cuDeviceGet(&cu_device, device);
    if (r == CUDA_SUCCESS) r = call(driver().cuDevicePrimaryCtxRetain, &dev.primary, cu_device);
    if (r != CUDA_SUCCESS) return to_cuda(r);
    dev.retained = true;
  }
  out = dev.primary;
  return cudaSuccess;
}

cudaError_t reset_device(int device) {
  if (cudaError_t e = init()) return e;
  State& s = state();
  if (device < 0 || device >= s.device_count) return cudaErrorInvalidDevice;
  Device& dev = s.devices[device];
  std::lock_guard lock(dev.mutex);
  CUdevice cu_device = 0;
  CUresult r = driver().cuDeviceGet(&cu_device, device);
  if (r == CUDA_SUCCESS) r = call(driver().cuDevicePrimaryCtxReset, cu_device);
  if (r != CUDA_SUCCESS) return to_cuda(r);
  // The reset dropped the runtime's reference with everything else; the next call retains anew.
  dev.retained = false;
  clear_sticky();
  return cudaSuccess;
}

cudaError_t ensure_context() {
  if (cudaError_t e = init()) return e;
  const DriverTable& d = driver();
  CUcontext primary = nullptr;
  // Retained first: after a reset the handle may still be current here but inactive.
  if (cudaError_t e = primary_context(t_device, primary)) return e;
  CUcontext current = nullptr;
  if (call(d.cuCtxGetCurrent, &current) == CUDA_SUCCESS && current != nullptr) return cudaSuccess;
  return to_cuda(call(d.cuCtxSetCurrent, primary));
}

// --- launch configuration --------------------------------------------------------------------

cudaError_t check_config(dim3 grid, dim3 block) {
  // The limits of the calling thread's device, read once (they do not change).
  struct Limits {
    int block[3] = {0, 0, 0};
    int grid[3] = {0, 0, 0};
    int threads = 0;
  };
  static const Limits limits = [] {
    Limits l;
    CUdevice dev = 0;
    const DriverTable& d = driver();
    if (call(d.cuDeviceGet, &dev, 0) != CUDA_SUCCESS) return l;
    for (int i = 0; i < 3; ++i) {
      call(d.cuDeviceGetAttribute, &l.block[i],
           CUdevice_attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X + i), dev);
      call(d.cuDeviceGetAttribute, &l.grid[i],
           CUdevice_attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X + i), dev);
    }
    call(d.cuDeviceGetAttribute, &l.threads, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, dev);
    return l;
  }();
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || block.x == 0 || block.y == 0 || block.z == 0)
    return cudaErrorInvalidConfiguration;
  if (limits.threads == 0) return cudaSuccess; // unknown: the driver decides
  const unsigned g[3] = {grid.x, grid.y, grid.z}, b[3] = {block.x, block.y, block.z};
  for (int i = 0; i < 3; ++i) {
    if (b[i] > unsigned(limits.block[i]) || g[i] > unsigned(limits.grid[i]))
      return cudaErrorInvalidConfiguration;
  }
  if (uint64_t(block.x) * block.y * block.z > uint64_t(limits.threads))
    return cudaErrorInvalidConfiguration;
  return cudaSuccess;
}

void push_config(const CallConfig& c) {
  t_configs.push_back(c);
}

bool pop_config(CallConfig& out) {
  if (t_configs.empty()) return false;
  out = t_configs.back();
  t_configs.pop_back();
  return true;
}

} // namespace hone::cudart
