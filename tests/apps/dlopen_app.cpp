// hone-testapp-dlopen: the workload through entry points found with dlopen("libcuda.so.1") and
// dlsym, by the ABI names cuda.h maps its API to ("cuMemAlloc_v2", "cuLaunchKernel"), the way
// statically linked runtimes and frameworks load the driver. Not linked with libcuda.
// The module is loaded with cuModuleLoadDataEx and JIT log buffers.
//
// Usage: hone-testapp-dlopen [--fatbin] [--pause-before-launch] [--wait-stdin]
//   --fatbin      load the workload as a fatbin container (PTX entry) instead of PTX text
//   --pause-before-launch  after the kernel lookups, wait for a line on stdin
//   --wait-stdin  after printing the results, read stdin to EOF before tearing down
#include "workload_driver.hpp"

#include <cstring>
#include <dlfcn.h>

extern const unsigned char k_workload_ptx[];
extern const unsigned char k_workload_fatbin[];

namespace {

template <class F> bool find(void* lib, F& fn, const char* name) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (fn == nullptr) std::printf("error: dlsym %s: not found\n", name);
  return fn != nullptr;
}

} // namespace

int main(int argc, char** argv) {
  testapp::Options opt;
  opt.image = k_workload_ptx;
  opt.load_ex = true;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--wait-stdin") == 0) {
      opt.wait_stdin = true;
    } else if (std::strcmp(argv[i], "--pause-before-launch") == 0) {
      opt.pause_before_launch = true;
    } else if (std::strcmp(argv[i], "--fatbin") == 0) {
      opt.image = k_workload_fatbin;
    } else {
      std::fprintf(stderr, "usage: %s [--fatbin] [--pause-before-launch] [--wait-stdin]\n", argv[0]);
      return 64;
    }
  }
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::printf("error: dlopen libcuda.so.1: %s\n", dlerror());
    return 2;
  }
  testapp::DriverApi api;
  bool found = find(lib, api.init, "cuInit") && find(lib, api.device_get, "cuDeviceGet") &&
               find(lib, api.primary_ctx_retain, "cuDevicePrimaryCtxRetain") &&
               find(lib, api.primary_ctx_release, "cuDevicePrimaryCtxRelease_v2") &&
               find(lib, api.ctx_set_current, "cuCtxSetCurrent") &&
               find(lib, api.ctx_synchronize, "cuCtxSynchronize") &&
               find(lib, api.module_load_data, "cuModuleLoadData") &&
               find(lib, api.module_load_data_ex, "cuModuleLoadDataEx") &&
               find(lib, api.module_get_function, "cuModuleGetFunction") &&
               find(lib, api.module_unload, "cuModuleUnload") &&
               find(lib, api.library_load_data, "cuLibraryLoadData") &&
               find(lib, api.library_get_kernel, "cuLibraryGetKernel") &&
               find(lib, api.library_unload, "cuLibraryUnload") &&
               find(lib, api.mem_alloc, "cuMemAlloc_v2") && find(lib, api.mem_free, "cuMemFree_v2") &&
               find(lib, api.memcpy_htod, "cuMemcpyHtoD_v2") &&
               find(lib, api.memcpy_dtoh, "cuMemcpyDtoH_v2") &&
               find(lib, api.launch, "cuLaunchKernel") &&
               find(lib, api.launch_ex, "cuLaunchKernelEx") &&
               find(lib, api.get_error_name, "cuGetErrorName");
  if (!found) return 2;
  api.launch_saxpy = api.launch;
  return testapp::run_workload(api, opt);
}
