// Module, library and function-lookup hooks: where kernels get their identity. Each calls the
// driver first and records only what the driver accepted.
#include "shim/cuda_abi.hpp"
#include "shim/links.hpp"
#include "shim/log.hpp"
#include "shim/real.hpp"
#include "shim/registry.hpp"
#include "shim/config.hpp"
#include "shim/sampler.hpp"
#include "shim/shim.hpp"
#include "shim/trace.hpp"

#include <string>

using namespace hone::shim;

namespace {

// The bytes of an image file the driver just loaded, for hashing; empty when unreadable.
std::string read_image_file(const char* path) {
  return read_small_file(path, (size_t(1) << 30) - 1);
}

void loaded(const void* handle, const void* data, size_t size) {
  if (!enabled()) return;
  registry().module_loaded(handle, data, size);
  if (config().sample_every) sample_prepare_current_context();
  on_activity();
}

void loaded_file(const void* handle, const char* path) {
  if (!enabled()) return;
  std::string bytes = read_image_file(path);
  if (bytes.empty()) {
    log(Level::debug, "could not read module file %s to identify its kernels", path ? path : "?");
    return;
  }
  // PTX files are NUL-terminated in memory as the driver sees them
  if (bytes.find('\0') == std::string::npos) bytes.push_back('\0');
  registry().module_loaded(handle, bytes.data(), bytes.size());
  if (config().sample_every) sample_prepare_current_context();
  on_activity();
}

void* current_context() {
  using GetCurrent = CUresult (*)(CUcontext*);
  CUcontext ctx = nullptr;
  if (auto f = real_as<GetCurrent>(Fn::cuCtxGetCurrent)) f(&ctx);
  return ctx;
}

#define HONE_REAL(name) HONE_TRACE_HOOK(name); \
  auto real = real_as<decltype(&::name)>(Fn::name); \
  if (!real) return CUDA_ERROR_NOT_INITIALIZED

} // namespace

extern "C" {

__attribute__((visibility("default"))) CUresult CUDAAPI cuModuleLoadData(CUmodule* m,
                                                                         const void* image) {
  HONE_REAL(cuModuleLoadData);
  CUresult r = real(m, image);
  if (r == CUDA_SUCCESS && m) loaded(*m, image, 0);
  return r;
}

__attribute__((visibility("default"))) CUresult CUDAAPI
cuModuleLoadDataEx(CUmodule* m, const void* image, unsigned n, CUjit_option* options,
                   void** values) {
  HONE_REAL(cuModuleLoadDataEx);
  CUresult r = real(m, image, n, options, values);
  if (r == CUDA_SUCCESS && m) loaded(*m, image, 0);
  return r;
}

__attribute__((visibility("default"))) CUresult CUDAAPI cuModuleLoadFatBinary(CUmodule* m,
                                                                              const void* fat) {
  HONE_REAL(cuModuleLoadFatBinary);
  CUresult r = real(m, fat);
  if (r == CUDA_SUCCESS && m) loaded(*m, fat, 0);
  return r;
}

__attribute__((visibility("default"))) CUresult CUDAAPI cuModuleLoad(CUmodule* m, const char* path) {
  HONE_REAL(cuModuleLoad);
  CUresult r = real(m, path);
  if (r == CUDA_SUCCESS && m) loaded_file(*m, path);
  return r;
}

__attribute__((visibility("default"))) CUresult CUDAAPI cuModuleUnload(CUmodule m) {
  HONE_REAL(cuModuleUnload);
  if (enabled()) registry().module_unloaded(m);
  return real(m);
}

__attribute__((visibility("default"))) CUresult CUDAAPI cuModuleGetFunction(CUfunction* f,
                                                                            CUmodule m,
                                                                            const char* name) {
  HONE_REAL(cuModuleGetFunction);
  CUresult r = real(f, m, name);
  if (r == CUDA_SUCCESS && f && enabled()) {
    registry().function_found(*f, m, name, current_context(), false);
    on_activity();
  }
  return r;
}

__attribute__((visibility("default"))) CUresult CUDAAPI
cuLibraryLoadData(CUlibrary* lib, const void* code, CUjit_option* jit_options, void** jit_values,
                  unsigned n_jit, CUlibraryOption* lib_options, void** lib_values,
                  unsigned n_lib) {
  HONE_REAL(cuLibraryLoadData);
  CUresult r = real(lib, code, jit_options, jit_values, n_jit, lib_options, lib_values, n_lib);
  if (r == CUDA_SUCCESS && lib) loaded(*lib, code, 0);
  return r;
}

__attribute__((visibility("default"))) CUresult CUDAAPI
cuLibraryLoadFromFile(CUlibrary* lib, const char* path, CUjit_option* jit_options,
                      void** jit_values, unsigned n_jit, CUlibraryOption* lib_options,
                      void** lib_values, unsigned n_lib) {
  HONE_REAL(cuLibraryLoadFromFile);
  CUresult r = real(lib, path, jit_options, jit_values, n_jit, lib_options, lib_values, n_lib);
  if (r == CUDA_SUCCESS && lib) loaded_file(*lib, path);
  return r;
}

__attribute__((visibility("default"))) CUresult CUDAAPI cuLibraryUnload(CUlibrary lib) {
  HONE_REAL(cuLibraryUnload);
  if (enabled()) registry().module_unloaded(lib);
  return real(lib);
}

__attribute__((visibility("default"))) CUresult CUDAAPI cuLibraryGetKernel(CUkernel* k,
                                                                           CUlibrary lib,
                                                                           const char* name) {
  HONE_REAL(cuLibraryGetKernel);
  CUresult r = real(k, lib, name);
  if (r == CUDA_SUCCESS && k && enabled()) {
    registry().function_found(*k, lib, name, current_context(), true);
    on_activity();
  }
  return r;
}

__attribute__((visibility("default"))) CUresult CUDAAPI cuLibraryGetModule(CUmodule* m,
                                                                           CUlibrary lib) {
  HONE_REAL(cuLibraryGetModule);
  CUresult r = real(m, lib);
  if (r == CUDA_SUCCESS && m && enabled()) registry().alias_module(*m, lib);
  return r;
}

__attribute__((visibility("default"))) CUresult CUDAAPI cuKernelGetFunction(CUfunction* f,
                                                                            CUkernel k) {
  HONE_REAL(cuKernelGetFunction);
  CUresult r = real(f, k);
  if (r == CUDA_SUCCESS && f && enabled()) registry().alias_function(*f, k);
  return r;
}

} // extern "C"
