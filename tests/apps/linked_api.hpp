// The driver entry points of workload_driver.hpp as direct calls to the cu* symbols the program
// links from libcuda (-lcuda): what a program built against the toolkit's libcuda stub does.
#pragma once

#include "workload_driver.hpp"

namespace testapp {

struct LinkedApi {
  static CUresult init(unsigned flags) { return cuInit(flags); }
  static CUresult device_get(CUdevice* d, int ordinal) { return cuDeviceGet(d, ordinal); }
  static CUresult primary_ctx_retain(CUcontext* c, CUdevice d) { return cuDevicePrimaryCtxRetain(c, d); }
  static CUresult primary_ctx_release(CUdevice d) { return cuDevicePrimaryCtxRelease(d); }
  static CUresult ctx_set_current(CUcontext c) { return cuCtxSetCurrent(c); }
  static CUresult ctx_synchronize() { return cuCtxSynchronize(); }
  static CUresult module_load_data(CUmodule* m, const void* image) { return cuModuleLoadData(m, image); }
  static CUresult module_load_data_ex(CUmodule* m, const void* image, unsigned n, CUjit_option* keys,
                                      void** values) {
    return cuModuleLoadDataEx(m, image, n, keys, values);
  }
  static CUresult module_get_function(CUfunction* f, CUmodule m, const char* name) {
    return cuModuleGetFunction(f, m, name);
  }
  static CUresult module_unload(CUmodule m) { return cuModuleUnload(m); }
  static CUresult library_load_data(CUlibrary* l, const void* image, CUjit_option* jit_keys,
                                    void** jit_values, unsigned n_jit, CUlibraryOption* keys,
                                    void** values, unsigned n) {
    return cuLibraryLoadData(l, image, jit_keys, jit_values, n_jit, keys, values, n);
  }
  static CUresult library_get_kernel(CUkernel* k, CUlibrary l, const char* name) {
    return cuLibraryGetKernel(k, l, name);
  }
  static CUresult library_unload(CUlibrary l) { return cuLibraryUnload(l); }
  static CUresult mem_alloc(CUdeviceptr* p, size_t n) { return cuMemAlloc(p, n); }
  static CUresult mem_free(CUdeviceptr p) { return cuMemFree(p); }
  static CUresult memcpy_htod(CUdeviceptr d, const void* h, size_t n) { return cuMemcpyHtoD(d, h, n); }
  static CUresult memcpy_dtoh(void* h, CUdeviceptr d, size_t n) { return cuMemcpyDtoH(h, d, n); }
  static CUresult launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                         unsigned bz, unsigned shared, CUstream s, void** params, void** extra) {
    return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, s, params, extra);
  }
  static CUresult launch_ex(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
    return cuLaunchKernelEx(config, f, params, extra);
  }
  static CUresult launch_saxpy(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                               unsigned by, unsigned bz, unsigned shared, CUstream s, void** params,
                               void** extra) {
    return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, s, params, extra);
  }
  static CUresult get_error_name(CUresult r, const char** name) { return cuGetErrorName(r, name); }
};

} // namespace testapp
