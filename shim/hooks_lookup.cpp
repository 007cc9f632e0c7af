// How applications find driver entry points, and how the shim puts itself in their way:
// dlsym (programs that dlopen libcuda or NVRTC) and cuGetProcAddress (the CUDA runtime).
#include "shim/cuda_abi.hpp"
#include "shim/log.hpp"
#include "shim/real.hpp"
#include "shim/shim.hpp"

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
  return hook_of(f);
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
  return real_dlsym()(handle, name);
}

__attribute__((visibility("default"))) CUresult CUDAAPI
cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                    CUdriverProcAddressQueryResult* status) {
  auto real = real_as<decltype(&cuGetProcAddress_v2)>(Fn::cuGetProcAddress_v2);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult r = real(symbol, pfn, version, flags, status);
  if (r == CUDA_SUCCESS && pfn) *pfn = wrap(symbol, *pfn);
  return r;
}

// The legacy four-argument form (cuda.h before 12.0 called it cuGetProcAddress).
__attribute__((visibility("default"))) CUresult CUDAAPI
cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  auto real = real_as<CUresult(CUDAAPI*)(const char*, void**, int, cuuint64_t)>(
      Fn::cuGetProcAddress);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult r = real(symbol, pfn, version, flags);
  if (r == CUDA_SUCCESS && pfn) *pfn = wrap(symbol, *pfn);
  return r;
}

} // extern "C"
