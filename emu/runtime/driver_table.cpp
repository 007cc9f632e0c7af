#include "emu/runtime/driver_table.hpp"

#include "emu/log.hpp"

#include <mutex>
#include <string>

#include <dlfcn.h>

namespace hone::cudart {

namespace {

DriverTable g_table;
CUresult g_load_result = CUDA_ERROR_NOT_INITIALIZED;
std::once_flag g_once;

// One lookup; a miss leaves `slot` null and is logged at debug level.
template <class F> void lookup(const char* name, F& slot, int version, cuuint64_t flags) {
  void* p = nullptr;
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
  CUresult r = g_table.cuGetProcAddress(name, &p, version, flags, &status);
  if (r != CUDA_SUCCESS || status != CU_GET_PROC_ADDRESS_SUCCESS || p == nullptr) {
    emu::log(emu::LogLevel::debug, std::string("cudart: the driver has no ") + name + " at CUDA " +
                                       std::to_string(version));
    return;
  }
  slot = reinterpret_cast<F>(p);
}

void load() {
  // The same name NVIDIA's runtime opens: whatever libcuda.so.1 the loader finds (the emulated
  // device through LD_LIBRARY_PATH).
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (h == nullptr) {
    const char* why = dlerror();
    emu::log(emu::LogLevel::warn,
             std::string("cudart: no CUDA driver: ") + (why ? why : "libcuda.so.1 not found"));
    g_load_result = CUDA_ERROR_STUB_LIBRARY;
    return;
  }
  g_table.cuGetProcAddress =
      reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(h, "cuGetProcAddress_v2"));
  if (g_table.cuGetProcAddress == nullptr) {
    emu::log(emu::LogLevel::warn, "cudart: the driver exports no cuGetProcAddress_v2");
    g_load_result = CUDA_ERROR_NOT_FOUND;
    return;
  }
#define HONE_X(name, version) lookup(#name, g_table.name, version, CU_GET_PROC_ADDRESS_DEFAULT);
#define HONE_P(name, version, pt_version)                                                          \
  lookup(#name, g_table.name, version, CU_GET_PROC_ADDRESS_DEFAULT);                               \
  lookup(#name, g_table.name##_pt, pt_version, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
  HONE_CUDART_DRIVER(HONE_X, HONE_P)
#undef HONE_X
#undef HONE_P
  g_load_result = g_table.cuInit ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

} // namespace

const DriverTable& driver() {
  return g_table;
}

CUresult load_driver() {
  std::call_once(g_once, load);
  return g_load_result;
}

} // namespace hone::cudart
