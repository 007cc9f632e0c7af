// JIT linker hooks (cuLinkCreate, cuLinkAddData, cuLinkAddFile, cuLinkComplete, cuLinkDestroy):
// the cubin cuLinkComplete returns holds SASS only on a GPU, but the application handed the linker
// PTX in the same process. Each hook calls the driver first and records only what it accepted;
// on cuLinkComplete the inputs are remembered by the output image's hash (Registry::link_output),
// so the module loaded from it is known by its PTX and, when that PTX is an NVRTC program's
// output, by its source. Nothing here changes what the application gets back.
#include "shim/cuda_abi.hpp"
#include "shim/links.hpp"
#include "shim/real.hpp"
#include "shim/registry.hpp"
#include "shim/shim.hpp"
#include "shim/trace.hpp"

using namespace hone::shim;

namespace {

// PTX files larger than this are recorded by name only (the image cache bounds what is kept).
constexpr size_t k_max_ptx_file = 256u << 20;

Links& links() {
  static Links* l = new Links(); // never destroyed: hooks may run during exit
  return *l;
}

void created(CUresult r, CUlinkState* state) {
  if (r == CUDA_SUCCESS && state && enabled()) links().created(*state);
}

void added_data(CUresult r, CUlinkState state, CUjitInputType type, const void* data, size_t size,
                const char* name) {
  if (r == CUDA_SUCCESS && enabled()) links().added(state, uint32_t(type), name, data, size);
}

void added_file(CUresult r, CUlinkState state, CUjitInputType type, const char* path) {
  if (r != CUDA_SUCCESS || !enabled()) return;
  if (type == CU_JIT_INPUT_PTX) {
    std::string text = read_small_file(path, k_max_ptx_file);
    links().added(state, uint32_t(type), path, text.data(), text.size());
  } else {
    links().added(state, uint32_t(type), path, nullptr, 0);
  }
}

#define HONE_REAL(name) HONE_TRACE_HOOK(name); \
  auto real = real_as<decltype(&::name)>(Fn::name); \
  if (!real) return CUDA_ERROR_NOT_INITIALIZED

} // namespace

extern "C" {

// cuda.h maps cuLinkCreate, cuLinkAddData and cuLinkAddFile to their _v2 forms; the legacy names
// take the same arguments and are hooked too.
__attribute__((visibility("default"))) CUresult CUDAAPI
cuLinkCreate_v2(unsigned n, CUjit_option* options, void** values, CUlinkState* state) {
  HONE_REAL(cuLinkCreate_v2);
  CUresult r = real(n, options, values, state);
  created(r, state);
  return r;
}

__attribute__((visibility("default"))) CUresult CUDAAPI
cuLinkCreate(unsigned n, CUjit_option* options, void** values, CUlinkState* state) {
  HONE_REAL(cuLinkCreate);
  CUresult r = real(n, options, values, state);
  created(r, state);
  return r;
}

__attribute__((visibility("default"))) CUresult CUDAAPI
cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void* data, size_t size,
                 const char* name, unsigned n, CUjit_option* options, void** values) {
  HONE_REAL(cuLinkAddData_v2);
  CUresult r = real(state, type, data, size, name, n, options, values);
  added_data(r, state, type, data, size, name);
  return r;
}

__attribute__((visibility("default"))) CUresult CUDAAPI
cuLinkAddData(CUlinkState state, CUjitInputType type, void* data, size_t size, const char* name,
              unsigned n, CUjit_option* options, void** values) {
  HONE_REAL(cuLinkAddData);
  CUresult r = real(state, type, data, size, name, n, options, values);
  added_data(r, state, type, data, size, name);
  return r;
}

__attribute__((visibility("default"))) CUresult CUDAAPI
cuLinkAddFile_v2(CUlinkState state, CUjitInputType type, const char* path, unsigned n,
                 CUjit_option* options, void** values) {
  HONE_REAL(cuLinkAddFile_v2);
  CUresult r = real(state, type, path, n, options, values);
  added_file(r, state, type, path);
  return r;
}

__attribute__((visibility("default"))) CUresult CUDAAPI
cuLinkAddFile(CUlinkState state, CUjitInputType type, const char* path, unsigned n,
              CUjit_option* options, void** values) {
  HONE_REAL(cuLinkAddFile);
  CUresult r = real(state, type, path, n, options, values);
  added_file(r, state, type, path);
  return r;
}

__attribute__((visibility("default"))) CUresult CUDAAPI cuLinkComplete(CUlinkState state,
                                                                       void** cubin,
                                                                       size_t* size) {
  HONE_REAL(cuLinkComplete);
  CUresult r = real(state, cubin, size);
  if (r == CUDA_SUCCESS && cubin && *cubin && enabled()) {
    if (auto inputs = links().inputs(state)) {
      registry().link_output(*cubin, size ? *size : 0, std::move(*inputs));
    }
  }
  return r;
}

__attribute__((visibility("default"))) CUresult CUDAAPI cuLinkDestroy(CUlinkState state) {
  HONE_REAL(cuLinkDestroy);
  if (enabled()) links().destroyed(state);
  return real(state);
}

} // extern "C"
