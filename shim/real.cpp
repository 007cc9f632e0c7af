#include "shim/real.hpp"

#include "shim/log.hpp"

#include <atomic>
#include <cstring>

#include <dlfcn.h>

// The hooks, defined in the hooks_*.cpp files under their ABI names.
extern "C" {
#define HONE_X(name) void name();
HONE_SHIM_CU_HOOKS(HONE_X)
HONE_SHIM_NVRTC_HOOKS(HONE_X)
#undef HONE_X
}

namespace hone::shim {

namespace {

constexpr const char* k_names[] = {
#define HONE_X(name) #name,
    HONE_SHIM_CU_HOOKS(HONE_X) HONE_SHIM_NVRTC_HOOKS(HONE_X) HONE_SHIM_CU_USES(HONE_X)
        HONE_SHIM_NVRTC_USES(HONE_X)
#undef HONE_X
};

constexpr unsigned k_first_nvrtc_hook = unsigned(Fn::nvrtcCreateProgram);
constexpr unsigned k_first_use = unsigned(Fn::cuFuncGetName);
constexpr unsigned k_first_nvrtc_use = unsigned(Fn::nvrtcGetPTXSize);

void* const k_hooks[] = {
#define HONE_X(name) reinterpret_cast<void*>(&::name),
    HONE_SHIM_CU_HOOKS(HONE_X) HONE_SHIM_NVRTC_HOOKS(HONE_X)
#undef HONE_X
};

std::atomic<void*> g_libcuda{nullptr};
std::atomic<DlsymFn> g_dlsym{nullptr};

void* libcuda() {
  void* h = g_libcuda.load(std::memory_order_acquire);
  if (h) return h;
  // The driver the application already loaded (by -lcuda or dlopen); else load it ourselves.
  h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!h) h = dlopen("libcuda.so.1", RTLD_NOW);
  if (!h) {
    if (first_time(Once::no_driver)) log(Level::warn, "no CUDA driver (libcuda.so.1) could be loaded");
    return nullptr;
  }
  void* expected = nullptr;
  if (!g_libcuda.compare_exchange_strong(expected, h)) {
    dlclose(h); // another thread got there first; drop our extra reference
    h = expected;
  }
  return h;
}

} // namespace

std::atomic<void*> detail::g_real[unsigned(Fn::count)];

namespace {

// An NVRTC function the application never looked up (nvrtcGetPTXSize, which the shim calls to
// size an output), from the library of an NVRTC entry point it did look up: hashcat dlopens
// libnvrtc.so privately, so RTLD_NEXT does not reach it. nullptr when none is known yet.
void* from_nvrtc_library(DlsymFn ds, const char* name) {
  for (unsigned i = k_first_nvrtc_hook; i < k_first_use; ++i) {
    void* known = detail::g_real[i].load(std::memory_order_acquire);
    if (!known) continue;
    Dl_info info{};
    if (!dladdr(known, &info) || !info.dli_fname) continue;
    void* lib = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    if (!lib) continue;
    void* p = ds(lib, name);
    dlclose(lib); // RTLD_NOLOAD took a reference; the application still holds its own
    if (p) return p;
  }
  return nullptr;
}

} // namespace
using detail::g_real;

DlsymFn real_dlsym() {
  DlsymFn f = g_dlsym.load(std::memory_order_acquire);
  if (f) return f;
  f = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34"));
  if (!f) f = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5"));
  g_dlsym.store(f, std::memory_order_release);
  return f;
}

bool is_hooked(Fn f) { return unsigned(f) < k_first_use; }
bool is_nvrtc(Fn f) {
  unsigned i = unsigned(f);
  return (i >= k_first_nvrtc_hook && i < k_first_use) || i >= k_first_nvrtc_use;
}
const char* fn_name(Fn f) { return k_names[unsigned(f)]; }

void* detail::resolve_real(Fn f) {
  unsigned i = unsigned(f);
  void* p = g_real[i].load(std::memory_order_acquire);
  if (p) return p;
  DlsymFn ds = real_dlsym();
  if (!ds) return nullptr;
  if (is_nvrtc(f)) {
    p = ds(RTLD_NEXT, k_names[i]);
    if (!p) p = from_nvrtc_library(ds, k_names[i]);
  } else if (void* h = libcuda()) {
    p = ds(h, k_names[i]);
  }
  if (p == hook_of(f)) p = nullptr; // never call ourselves
  if (p) {
    void* expected = nullptr;
    g_real[i].compare_exchange_strong(expected, p);
    return g_real[i].load(std::memory_order_acquire);
  }
  return nullptr;
}

void adopt_real(Fn f, void* p) {
  if (!p || p == hook_of(f)) return;
  void* expected = nullptr;
  g_real[unsigned(f)].compare_exchange_strong(expected, p);
}

void* hook_of(Fn f) { return is_hooked(f) ? k_hooks[unsigned(f)] : nullptr; }

int hooked_index(const char* name) {
  if (!name || (name[0] != 'c' && name[0] != 'n')) return -1;
  for (unsigned i = 0; i < k_first_use; ++i) {
    if (std::strcmp(name, k_names[i]) == 0) return int(i);
  }
  return -1;
}

void* hook_for_real(void* p) {
  if (!p) return nullptr;
  for (unsigned i = 0; i < k_first_nvrtc_hook; ++i) {
    if (k_hooks[i] == p) return p; // already a hook
    void* r = g_real[i].load(std::memory_order_acquire);
    if (!r) r = real(Fn(i));
    if (r == p) return k_hooks[i];
  }
  return nullptr;
}

} // namespace hone::shim
