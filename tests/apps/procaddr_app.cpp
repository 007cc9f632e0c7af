// hone-testapp-procaddr: the workload through entry points found the way the CUDA runtime finds
// them. dlopen("libcuda.so.1"), dlsym("cuGetProcAddress_v2") and nothing else; cuGetProcAddress
// itself is looked up through it, and every other entry point through that, by base name at CUDA
// 12.0 (cuMemAlloc -> cuMemAlloc_v2). saxpy is launched on stream 0 through the entry point a
// CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM lookup returns (cuLaunchKernel_ptsz: stream 0 is
// the calling thread's default stream); blur through cuLaunchKernelEx with a launch attribute; one
// lookup passes a NULL symbolStatus. Two failing lookups and two launches every driver refuses
// print their results, which a hook must not change (and must not count as launches).
//
// Usage: hone-testapp-procaddr [--library] [--pause-before-launch] [--wait-stdin]
//   --library     load the image with cuLibraryLoadData and launch the CUkernels of
//                 cuLibraryGetKernel (what the CUDA 12+ runtime does), instead of a module
//   --pause-before-launch  after the kernel lookups, wait for a line on stdin
//   --wait-stdin  after printing the results, read stdin to EOF before tearing down
#include "workload_driver.hpp"

#include <cstring>
#include <dlfcn.h>

extern const unsigned char k_workload_ptx[];

namespace {

constexpr int k_cuda_version = 12000;

using GetProcAddress = decltype(&::cuGetProcAddress_v2);
GetProcAddress g_get_proc = nullptr;

// Looks `name` up and checks what a successful lookup promises.
template <class F>
bool find(F& fn, const char* name, cuuint64_t flags = CU_GET_PROC_ADDRESS_DEFAULT,
          bool with_status = true) {
  void* p = nullptr;
  CUdriverProcAddressQueryResult status = CUdriverProcAddressQueryResult(-1);
  CUresult r = g_get_proc(name, &p, k_cuda_version, flags, with_status ? &status : nullptr);
  if (r != CUDA_SUCCESS || p == nullptr || (with_status && status != CU_GET_PROC_ADDRESS_SUCCESS)) {
    std::printf("error: cuGetProcAddress_v2(%s, %d, %llu): %d, status %d\n", name, k_cuda_version,
                static_cast<unsigned long long>(flags), int(r), int(status));
    return false;
  }
  fn = reinterpret_cast<F>(p);
  return true;
}

// A lookup expected to fail: prints what the driver said.
void print_failed_lookup(const char* name, int version) {
  void* p = reinterpret_cast<void*>(uintptr_t(1));
  CUdriverProcAddressQueryResult status = CUdriverProcAddressQueryResult(-1);
  CUresult r = g_get_proc(name, &p, version, CU_GET_PROC_ADDRESS_DEFAULT, &status);
  std::printf("lookup %s@%d: result %d status %d pointer %s\n", name, version, int(r), int(status),
              p == nullptr ? "null" : "set");
}

} // namespace

int main(int argc, char** argv) {
  testapp::Options opt;
  opt.image = k_workload_ptx;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--wait-stdin") == 0) {
      opt.wait_stdin = true;
    } else if (std::strcmp(argv[i], "--pause-before-launch") == 0) {
      opt.pause_before_launch = true;
    } else if (std::strcmp(argv[i], "--library") == 0) {
      opt.library = true;
    } else {
      std::fprintf(stderr, "usage: %s [--library] [--pause-before-launch] [--wait-stdin]\n", argv[0]);
      return 64;
    }
  }
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::printf("error: dlopen libcuda.so.1: %s\n", dlerror());
    return 2;
  }
  g_get_proc = reinterpret_cast<GetProcAddress>(dlsym(lib, "cuGetProcAddress_v2"));
  if (g_get_proc == nullptr) {
    std::printf("error: dlsym cuGetProcAddress_v2: not found\n");
    return 2;
  }
  // The runtime's own first lookup: cuGetProcAddress through itself (12.0: cuGetProcAddress_v2).
  if (!find(g_get_proc, "cuGetProcAddress")) return 2;

  testapp::DriverApi api;
  bool found = find(api.init, "cuInit") && find(api.device_get, "cuDeviceGet") &&
               find(api.primary_ctx_retain, "cuDevicePrimaryCtxRetain") &&
               find(api.primary_ctx_release, "cuDevicePrimaryCtxRelease") &&
               find(api.ctx_set_current, "cuCtxSetCurrent") &&
               find(api.ctx_synchronize, "cuCtxSynchronize", CU_GET_PROC_ADDRESS_DEFAULT, false) &&
               find(api.module_load_data, "cuModuleLoadData") &&
               find(api.module_load_data_ex, "cuModuleLoadDataEx") &&
               find(api.module_get_function, "cuModuleGetFunction") &&
               find(api.module_unload, "cuModuleUnload") &&
               find(api.library_load_data, "cuLibraryLoadData") &&
               find(api.library_get_kernel, "cuLibraryGetKernel") &&
               find(api.library_unload, "cuLibraryUnload") && find(api.mem_alloc, "cuMemAlloc") &&
               find(api.mem_free, "cuMemFree") && find(api.memcpy_htod, "cuMemcpyHtoD") &&
               find(api.memcpy_dtoh, "cuMemcpyDtoH") && find(api.launch, "cuLaunchKernel") &&
               find(api.launch_ex, "cuLaunchKernelEx") &&
               find(api.launch_saxpy, "cuLaunchKernel", CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) &&
               find(api.get_error_name, "cuGetErrorName");
  if (!found) return 2;
  print_failed_lookup("cuHoneNoSuchFunction", k_cuda_version);
  print_failed_lookup("cuLibraryLoadData", 11080); // introduced in 12.0
  opt.saxpy_stream = nullptr;                      // with _ptsz: this thread's default stream
  opt.blur_with_launch_ex = true;
  opt.probe_rejected_launches = true;
  return testapp::run_workload(api, opt);
}
