// How applications find driver entry points, and how the shim puts itself in their way:
// dlsym (programs that dlopen libcuda or NVRTC) and cuGetProcAddress (the CUDA runtime).
#include "shim/cuda_abi.hpp"
#include "shim/log.hpp"
#include "shim/real.hpp"
#include "shim/shim.hpp"
#include "shim/trace.hpp"

#include <dlfcn.h>

using namespace hone::shim;

namespace {

// A hooked name looked up through dlsym: hand out the hook when the symbol found is the real
// entry point the shim calls. Anything else (another library exporting the same name) passes.
__attribute__((noinline)) void* lookup_hooked(void* handle, const char* name, Fn f) {
  DlsymFn ds = real_dlsym();
  if (handle == RTLD_NEXT) {
    // RTLD_NEXT is relative to the caller, which the shim cannot stand in for here; the caller
    // wants the next definition of a driver entry point, which is the real one.
    void* r = real(f);
    return r && enabled() ? hook_of(f) : r;
  }
  void* p = ds(handle, name);
  if (!p || p == hook_of(f)) return p;
  void* r = real(f);
  if (!r) {
    adopt_real(f, p); // the application's own copy of the driver or NVRTC
    r = real(f);
  }
  if (p != r || !enabled()) return p;
  on_activity();
  return trace_pointer(hook_of(f), name, 0, 0, Found::dlsym);
}

// A driver entry point the shim does not hook, looked up through dlsym while tracing: the pointer
// found, as a thunk that logs its first call. (RTLD_NEXT never gets here: its meaning depends on
// the caller, which must stay the application.)
__attribute__((noinline)) void* lookup_traced(void* handle, const char* name) {
  return trace_pointer(real_dlsym()(handle, name), name, 0, 0, Found::dlsym);
}

// A name of the driver API: cu followed by an upper-case letter (cuMemAlloc, not cudaMalloc).
inline bool driver_name(const char* name) {
  return name && name[0] == 'c' && name[1] == 'u' && name[2] >= 'A' && name[2] <= 'Z';
}

void* wrap(const char* symbol, void* p) {
  if (!p || !enabled()) return p;
  if (void* h = hook_for_real(p)) return h;
  if (hooked_index(symbol) >= 0 && first_time(Once::unknown_variant)) {
    log(Level::info, "cuGetProcAddress(\"%s\") returned a variant the shim does not know; "
                     "launches through it are not observed", symbol);
  }
  return p;
}

} // namespace

extern "C" {

// Not hooked names go straight to glibc as a tail call, so the caller glibc sees (which decides
// what RTLD_NEXT means) is the application's, not the shim's.
__attribute__((visibility("default"))) void* dlsym(void* handle, const char* name) {
  int f = hooked_index(name);
  if (__builtin_expect(f >= 0, 0)) return lookup_hooked(handle, name, Fn(f));
  if (__builtin_expect(driver_name(name), 0) && handle != RTLD_NEXT && enabled() && tracing())
    return lookup_traced(handle, name);
  return real_dlsym()(handle, name);
}

__attribute__((visibility("default"))) CUresult CUDAAPI
cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                    CUdriverProcAddressQueryResult* status) {
  HONE_TRACE_HOOK(cuGetProcAddress_v2);
  auto real = real_as<decltype(&cuGetProcAddress_v2)>(Fn::cuGetProcAddress_v2);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUdriverProcAddressQueryResult own = CU_GET_PROC_ADDRESS_SUCCESS;
  CUdriverProcAddressQueryResult* s = status ? status : (tracing() ? &own : nullptr);
  CUresult r = real(symbol, pfn, version, flags, s);
  if (r == CUDA_SUCCESS && pfn) *pfn = wrap(symbol, *pfn);
  if (tracing()) {
    trace_lookup(symbol, version, flags, Found::proc_address_v2, r, s ? int(*s) : 0);
    if (r == CUDA_SUCCESS && pfn)
      *pfn = trace_pointer(*pfn, symbol, version, flags, Found::proc_address_v2);
  }
  return r;
}

// The legacy four-argument form (cuda.h before 12.0 called it cuGetProcAddress).
__attribute__((visibility("default"))) CUresult CUDAAPI
cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  HONE_TRACE_HOOK(cuGetProcAddress);
  auto real = real_as<CUresult(CUDAAPI*)(const char*, void**, int, cuuint64_t)>(
      Fn::cuGetProcAddress);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult r = real(symbol, pfn, version, flags);
  if (r == CUDA_SUCCESS && pfn) *pfn = wrap(symbol, *pfn);
  if (tracing()) {
    trace_lookup(symbol, version, flags, Found::proc_address, r, 0);
    if (r == CUDA_SUCCESS && pfn)
      *pfn = trace_pointer(*pfn, symbol, version, flags, Found::proc_address);
  }
  return r;
}

} // extern "C"
