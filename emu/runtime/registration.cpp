// The host-side ABI nvcc generates (crt/host_runtime.h, the *.cudafe1.stub.c of `nvcc -keep`):
// each translation unit registers its fatbin at static initialization, then its kernels and
// variables by host address. Nothing is loaded then: a fatbin becomes a CUlibrary
// (cuLibraryLoadData, which needs no context) the first time one of its kernels or variables is
// needed, and each kernel a CUkernel (cuLibraryGetKernel) the first time it is launched or looked
// up, as NVIDIA's runtime does under CUDA_MODULE_LOADING=LAZY, its default.
#include "emu/runtime/runtime.hpp"

#include "emu/log.hpp"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace hone::cudart {

namespace {

// __fatBinC_Wrapper_t (fatbinary_section.h): what __cudaRegisterFatBinary receives.
struct FatbinWrapper {
  int magic;
  int version;
  const unsigned long long* data;
  void* filename_or_fatbins;
};
constexpr int k_wrapper_magic = 0x466243B1;
constexpr unsigned k_fatbin_magic = 0xBA55ED50;

struct Variable {
  Fatbin* fatbin = nullptr;
  std::string name;
  size_t size = 0;
  bool constant = false;
  void** managed_host_pointer = nullptr; // __managed__: the host variable holding its address
};

} // namespace

struct Fatbin {
  const void* image = nullptr;
  cudaError_t invalid = cudaSuccess; // a registration that cannot be loaded, and why
  std::string invalid_reason;
  std::mutex mutex; // guards the fields below and the kernels' handles
  bool load_tried = false;
  CUlibrary library = nullptr;
  cudaError_t load_error = cudaSuccess;
  bool unregistered = false;
  std::vector<KernelInfo*> kernels;
  std::vector<Variable*> variables;
};

namespace {

// Never freed: programs register at static initialization and unregister from atexit handlers,
// either of which may run outside this library's static lifetime.
struct Registry {
  std::shared_mutex mutex;
  std::unordered_set<Fatbin*> fatbins;
  std::unordered_map<const void*, KernelInfo*> by_host;
  std::unordered_map<CUkernel, KernelInfo*> by_handle;
  std::unordered_map<const void*, Variable*> variables;
  // Handles __cudaGetKernel gave out for registered kernels that cannot load (the KernelInfo's
  // own address, never a driver handle): their launches report why.
  std::unordered_set<const void*> unloadable;
};

Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

Fatbin* fatbin_of(void** handle) {
  auto* fb = reinterpret_cast<Fatbin*>(handle);
  Registry& r = registry();
  std::shared_lock lock(r.mutex);
  return r.fatbins.count(fb) ? fb : nullptr;
}

// Load `fb` into a CUlibrary once (call with fb.mutex held). The error stays for good: a fatbin
// that cannot load never will.
cudaError_t load_locked(Fatbin& fb) {
  if (fb.unregistered) return cudaErrorInvalidDeviceFunction;
  if (fb.load_tried) return fb.load_error;
  fb.load_tried = true;
  if (fb.invalid != cudaSuccess) {
    fb.load_error = fb.invalid;
  } else if (cudaError_t e = init()) {
    fb.load_tried = false; // no driver yet: nothing learned about the fatbin
    return e;
  } else {
    CUresult r = call(driver().cuLibraryLoadData, &fb.library, fb.image, nullptr, nullptr, 0u,
                      nullptr, nullptr, 0u);
    fb.load_error = to_cuda(r);
    if (r != CUDA_SUCCESS) {
      fb.library = nullptr;
      fb.invalid_reason = "the driver refused it (CUresult " + std::to_string(int(r)) + ")";
    }
  }
  if (fb.load_error != cudaSuccess) {
    warn_once("a fatbin this program registered cannot be loaded: " + fb.invalid_reason +
              "; its kernels and variables fail with " + cudaGetErrorName(fb.load_error));
    return fb.load_error;
  }
  // Managed variables: the host reads them through a pointer the runtime sets.
  for (Variable* v : fb.variables) {
    if (!v->managed_host_pointer) continue;
    CUdeviceptr address = 0;
    size_t bytes = 0;
    CUresult r = call(driver().cuLibraryGetManaged, &address, &bytes, fb.library, v->name.c_str());
    if (r == CUDA_SUCCESS) {
      *v->managed_host_pointer = reinterpret_cast<void*>(address);
      // nvcc's host code names a managed variable by the memory it points at (`mv` reads
      // `*ptr`), so the symbol APIs receive that address: it names the variable too.
      Registry& reg = registry();
      std::unique_lock lock(reg.mutex);
      reg.variables[reinterpret_cast<const void*>(address)] = v;
    } else {
      warn_once("managed variable " + v->name + " has no managed memory (CUresult " +
                std::to_string(int(r)) + ")");
    }
  }
  return cudaSuccess;
}

} // namespace

cudaError_t kernel_of(const void* host_fun, KernelInfo*& out) {
  KernelInfo* k = nullptr;
  {
    Registry& r = registry();
    std::shared_lock lock(r.mutex);
    auto it = r.by_host.find(host_fun);
    if (it != r.by_host.end()) k = it->second;
  }
  if (k == nullptr) return cudaErrorInvalidDeviceFunction;
  out = k; // also on failure below: the caller may report which kernel
  Fatbin& fb = *k->fatbin;
  std::lock_guard lock(fb.mutex);
  if (cudaError_t e = load_locked(fb)) return e;
  if (k->kernel == nullptr) {
    CUkernel handle = nullptr;
    CUresult res = call(driver().cuLibraryGetKernel, &handle, fb.library, k->name.c_str());
    if (res != CUDA_SUCCESS) {
      warn_once("kernel " + k->name + " is registered but not in its fatbin (CUresult " +
                std::to_string(int(res)) + ")");
      return res == CUDA_ERROR_NOT_FOUND ? cudaErrorInvalidDeviceFunction : to_cuda(res);
    }
    k->kernel = handle;
    Registry& r = registry();
    std::unique_lock rlock(r.mutex);
    r.by_handle[handle] = k;
  }
  return cudaSuccess;
}

KernelInfo* kernel_by_handle(CUkernel handle) {
  Registry& r = registry();
  std::shared_lock lock(r.mutex);
  auto it = r.by_handle.find(handle);
  return it == r.by_handle.end() ? nullptr : it->second;
}

cudaError_t function_of(const KernelInfo& k, CUfunction& out) {
  if (cudaError_t e = ensure_context()) return e;
  return to_cuda(call(driver().cuKernelGetFunction, &out, k.kernel));
}

cudaError_t symbol_of(const void* host_var, Symbol& out) {
  Variable* v = nullptr;
  {
    Registry& r = registry();
    std::shared_lock lock(r.mutex);
    auto it = r.variables.find(host_var);
    if (it != r.variables.end()) v = it->second;
  }
  if (v == nullptr) return cudaErrorInvalidSymbol;
  CUlibrary library = nullptr;
  {
    std::lock_guard lock(v->fatbin->mutex);
    if (cudaError_t e = load_locked(*v->fatbin)) return e;
    library = v->fatbin->library;
  }
  if (cudaError_t e = ensure_context()) return e;
  size_t bytes = 0;
  CUresult r =
      v->managed_host_pointer
          ? call(driver().cuLibraryGetManaged, &out.address, &bytes, library, v->name.c_str())
          : call(driver().cuLibraryGetGlobal, &out.address, &bytes, library, v->name.c_str());
  if (r != CUDA_SUCCESS) return r == CUDA_ERROR_NOT_FOUND ? cudaErrorInvalidSymbol : to_cuda(r);
  out.size = bytes;
  out.constant = v->constant;
  return cudaSuccess;
}

void load_all_fatbins() {
  std::vector<Fatbin*> all;
  {
    Registry& r = registry();
    std::shared_lock lock(r.mutex);
    all.assign(r.fatbins.begin(), r.fatbins.end());
  }
  for (Fatbin* fb : all) {
    std::lock_guard lock(fb->mutex);
    load_locked(*fb);
  }
}

cudaError_t check_args(KernelInfo& k, void** args) {
  int count = __atomic_load_n(&k.param_count, __ATOMIC_RELAXED);
  if (count < 0) {
    count = 0;
    size_t offset = 0, size = 0;
    while (call(driver().cuKernelGetParamInfo, k.kernel, size_t(count), &offset, &size) ==
           CUDA_SUCCESS) {
      ++count;
    }
    __atomic_store_n(&k.param_count, count, __ATOMIC_RELAXED);
  }
  if (count == 0) return cudaSuccess;
  if (args == nullptr) {
    warn_once("kernel " + k.name + " takes " + std::to_string(count) +
              " parameters and was launched without arguments");
    return cudaErrorInvalidValue;
  }
  for (int i = 0; i < count; ++i) {
    if (args[i] == nullptr) {
      warn_once("kernel " + k.name + " takes " + std::to_string(count) + " parameters; argument " +
                std::to_string(i) + " of a launch is missing (null)");
      return cudaErrorInvalidValue;
    }
  }
  return cudaSuccess;
}

cudaError_t launch(KernelInfo& k, dim3 grid, dim3 block, void** args, size_t shared,
                   cudaStream_t stream, bool per_thread) {
  if (cudaError_t e = ensure_context()) return e;
  if (cudaError_t e = check_config(grid, block)) return e;
  if (cudaError_t e = check_args(k, args)) return e;
  if (shared > 0xffffffffu) return cudaErrorInvalidValue;
  return to_cuda(call(HONE_DRV(per_thread, cuLaunchKernel), reinterpret_cast<CUfunction>(k.kernel),
                      grid.x, grid.y, grid.z, block.x, block.y, block.z, unsigned(shared),
                      reinterpret_cast<CUstream>(stream), args, nullptr));
}

} // namespace hone::cudart

using namespace hone::cudart;

HONE_CUDART_API void** __cudaRegisterFatBinary(void* fat_cubin) {
  try {
    auto* fb = new Fatbin;
    const auto* w = static_cast<const FatbinWrapper*>(fat_cubin);
    char why[160];
    if (w == nullptr) {
      fb->invalid = cudaErrorInvalidKernelImage;
      fb->invalid_reason = "its wrapper is null";
    } else if (w->magic != k_wrapper_magic) {
      std::snprintf(why, sizeof why, "its wrapper has magic 0x%08x, not 0x%08x", unsigned(w->magic),
                    unsigned(k_wrapper_magic));
      fb->invalid = cudaErrorInvalidKernelImage;
      fb->invalid_reason = why;
    } else if (w->version != 1) {
      std::snprintf(why, sizeof why,
                    "its wrapper is version %d (relocatable device code, -rdc, is not supported)",
                    w->version);
      fb->invalid = cudaErrorNotSupported;
      fb->invalid_reason = why;
    } else if (w->data == nullptr) {
      fb->invalid = cudaErrorInvalidKernelImage;
      fb->invalid_reason = "its wrapper points at no fatbin";
    } else if (unsigned(*w->data & 0xffffffffu) != k_fatbin_magic) {
      std::snprintf(why, sizeof why, "it does not start with the fatbin magic 0x%08x",
                    k_fatbin_magic);
      fb->invalid = cudaErrorInvalidKernelImage;
      fb->invalid_reason = why;
    } else {
      fb->image = w->data;
    }
    Registry& r = registry();
    std::unique_lock lock(r.mutex);
    r.fatbins.insert(fb);
    return reinterpret_cast<void**>(fb);
  } catch (...) {
    return nullptr;
  }
}

HONE_CUDART_API void __cudaRegisterFatBinaryEnd(void** handle) {
  (void)handle; // loading is lazy; nothing to do when a translation unit has registered all
}

HONE_CUDART_API void __cudaUnregisterFatBinary(void** handle) {
  try {
    Fatbin* fb = fatbin_of(handle);
    if (fb == nullptr) return;
    CUlibrary library = nullptr;
    {
      std::lock_guard lock(fb->mutex);
      fb->unregistered = true;
      library = fb->library;
      fb->library = nullptr;
    }
    Registry& r = registry();
    {
      std::unique_lock lock(r.mutex);
      // Host addresses may be reused by the next library dlopen()ed at the same place.
      for (KernelInfo* k : fb->kernels) {
        auto it = r.by_host.find(k->host_fun);
        if (it != r.by_host.end() && it->second == k) r.by_host.erase(it);
        if (k->kernel) r.by_handle.erase(k->kernel);
      }
      // (the managed variables' memory addresses go with their fatbin's other symbols)
      for (auto it = r.variables.begin(); it != r.variables.end();) {
        it = it->second->fatbin == fb ? r.variables.erase(it) : std::next(it);
      }
    }
    if (library != nullptr) call(driver().cuLibraryUnload, library);
  } catch (...) {
  }
}

HONE_CUDART_API void __cudaRegisterFunction(void** handle, const char* host_fun, char* device_fun,
                                            const char* device_name, int thread_limit, uint3* tid,
                                            uint3* bid, dim3* block_dim, dim3* grid_dim,
                                            int* warp_size) {
  (void)device_fun, (void)thread_limit, (void)tid, (void)bid, (void)block_dim, (void)grid_dim,
      (void)warp_size;
  try {
    Fatbin* fb = fatbin_of(handle);
    if (fb == nullptr || host_fun == nullptr || device_name == nullptr) return;
    auto* k = new KernelInfo;
    k->fatbin = fb;
    k->host_fun = host_fun;
    k->name = device_name;
    std::lock_guard flock(fb->mutex);
    fb->kernels.push_back(k);
    Registry& r = registry();
    std::unique_lock lock(r.mutex);
    r.by_host[host_fun] = k;
  } catch (...) {
  }
}

namespace {

void register_variable(void** handle, const void* host_var, const char* name, size_t size,
                       int constant, void** managed) {
  try {
    Fatbin* fb = fatbin_of(handle);
    if (fb == nullptr || host_var == nullptr || name == nullptr) return;
    auto* v = new Variable;
    v->fatbin = fb;
    v->name = name;
    v->size = size;
    v->constant = constant != 0;
    v->managed_host_pointer = managed;
    std::lock_guard flock(fb->mutex);
    fb->variables.push_back(v);
    Registry& r = registry();
    std::unique_lock lock(r.mutex);
    r.variables[host_var] = v;
  } catch (...) {
  }
}

} // namespace

HONE_CUDART_API void __cudaRegisterVar(void** handle, char* host_var, char* device_address,
                                       const char* device_name, int ext, size_t size, int constant,
                                       int global) {
  (void)device_address, (void)ext, (void)global;
  register_variable(handle, host_var, device_name, size, constant, nullptr);
}

HONE_CUDART_API void __cudaRegisterManagedVar(void** handle, void** host_var_ptr_address,
                                              char* device_address, const char* device_name,
                                              int ext, size_t size, int constant, int global) {
  (void)device_address, (void)ext, (void)global;
  // The symbol APIs name a managed variable by the host pointer variable's address.
  register_variable(handle, host_var_ptr_address, device_name, size, constant,
                    host_var_ptr_address);
}

// The first host access to a __managed__ variable calls this: load the fatbin so the host
// pointer is set. Nonzero on success.
HONE_CUDART_API char __cudaInitModule(void** handle) {
  try {
    Fatbin* fb = fatbin_of(handle);
    if (fb == nullptr) return 0;
    std::lock_guard lock(fb->mutex);
    if (record(load_locked(*fb)) != cudaSuccess) return 0;
    // Managed memory is reached through a context on a real GPU; have one, as NVIDIA's does.
    return record(ensure_context()) == cudaSuccess ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

HONE_CUDART_API unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shared,
                                                     struct CUstream_st* stream) {
  try {
    push_config(CallConfig{grid, block, shared, stream});
    return 0;
  } catch (...) {
    return 1; // the <<<>>> expression then skips the launch
  }
}

HONE_CUDART_API cudaError_t __cudaPopCallConfiguration(dim3* grid, dim3* block, size_t* shared,
                                                       void* stream) {
  CallConfig c;
  if (!pop_config(c)) return record(cudaErrorMissingConfiguration);
  if (grid) *grid = c.grid;
  if (block) *block = c.block;
  if (shared) *shared = c.shared;
  if (stream) *static_cast<cudaStream_t*>(stream) = c.stream;
  return cudaSuccess;
}

HONE_CUDART_API cudaError_t __cudaGetKernel(cudaKernel_t* out, const void* host_fun) {
  return api([&] {
    if (out == nullptr) return cudaErrorInvalidValue;
    *out = nullptr;
    KernelInfo* k = nullptr;
    cudaError_t e = kernel_of(host_fun, k);
    if (e == cudaSuccess) {
      *out = reinterpret_cast<cudaKernel_t>(k->kernel);
    } else if (k != nullptr) {
      Registry& r = registry();
      std::unique_lock lock(r.mutex);
      r.unloadable.insert(k);
      *out = reinterpret_cast<cudaKernel_t>(k);
    }
    return e;
  });
}

namespace {

cudaError_t launch_handle(cudaKernel_t kernel, dim3 grid, dim3 block, void** args, size_t shared,
                          cudaStream_t stream, bool per_thread) {
  return api([&] {
    // A kernel never registered arrives as null (its __cudaGetKernel failed); one whose fatbin
    // cannot load as the handle __cudaGetKernel made for it, which repeats why.
    if (kernel == nullptr) return cudaErrorInvalidDeviceFunction;
    KernelInfo* k = kernel_by_handle(reinterpret_cast<CUkernel>(kernel));
    if (k == nullptr) {
      Registry& r = registry();
      {
        std::shared_lock lock(r.mutex);
        if (!r.unloadable.count(kernel)) return cudaErrorInvalidResourceHandle;
      }
      auto* failed = reinterpret_cast<KernelInfo*>(kernel);
      cudaError_t e = kernel_of(failed->host_fun, failed);
      return e != cudaSuccess ? e : launch(*failed, grid, block, args, shared, stream, per_thread);
    }
    return launch(*k, grid, block, args, shared, stream, per_thread);
  });
}

} // namespace

HONE_CUDART_API cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block,
                                               void** args, size_t shared, cudaStream_t stream) {
  return launch_handle(kernel, grid, block, args, shared, stream, false);
}

HONE_CUDART_API cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 grid, dim3 block,
                                                    void** args, size_t shared,
                                                    cudaStream_t stream) {
  return launch_handle(kernel, grid, block, args, shared, stream, true);
}
