// The workload of workload.hpp through the CUDA driver API, for any way an application obtains the
// driver's entry points: `Api` is a type with the members below (function pointers filled by
// dlsym or cuGetProcAddress, or static functions that call the linked cu* symbols directly).
#pragma once

#include "workload.hpp"

#include <cuda.h>

#include <cstdint>
#include <cstdio>
#include <unistd.h>

namespace testapp {

// Entry points as pointers, named after what they do; the apps fill them by name.
struct DriverApi {
  decltype(&::cuInit) init = nullptr;
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) primary_ctx_retain = nullptr;
  decltype(&::cuDevicePrimaryCtxRelease) primary_ctx_release = nullptr;
  decltype(&::cuCtxSetCurrent) ctx_set_current = nullptr;
  decltype(&::cuCtxSynchronize) ctx_synchronize = nullptr;
  decltype(&::cuModuleLoadData) module_load_data = nullptr;
  decltype(&::cuModuleLoadDataEx) module_load_data_ex = nullptr;
  decltype(&::cuModuleGetFunction) module_get_function = nullptr;
  decltype(&::cuModuleUnload) module_unload = nullptr;
  decltype(&::cuLibraryLoadData) library_load_data = nullptr;
  decltype(&::cuLibraryGetKernel) library_get_kernel = nullptr;
  decltype(&::cuLibraryUnload) library_unload = nullptr;
  decltype(&::cuMemAlloc) mem_alloc = nullptr;
  decltype(&::cuMemFree) mem_free = nullptr;
  decltype(&::cuMemcpyHtoD) memcpy_htod = nullptr;
  decltype(&::cuMemcpyDtoH) memcpy_dtoh = nullptr;
  decltype(&::cuLaunchKernel) launch = nullptr;
  decltype(&::cuLaunchKernelEx) launch_ex = nullptr;
  // What saxpy is launched with: `launch`, or a per-thread default stream variant.
  decltype(&::cuLaunchKernel) launch_saxpy = nullptr;
  decltype(&::cuGetErrorName) get_error_name = nullptr;
};

struct Options {
  const void* image = nullptr;      // PTX text (NUL-terminated) or a fatbin
  bool load_ex = false;             // cuModuleLoadDataEx with JIT log buffers
  bool library = false;             // cuLibraryLoadData + cuLibraryGetKernel; launch the CUkernels
  bool extra_for_last_blur = false; // last blur launch passes CU_LAUNCH_PARAM_BUFFER_POINTER
  CUstream saxpy_stream = nullptr;  // the stream saxpy launches go to
  bool blur_with_launch_ex = false;     // blur through cuLaunchKernelEx with a priority attribute
  bool probe_rejected_launches = false; // first, two launches every driver refuses (printed)
  bool pause_before_launch = false; // after the kernel lookups, read one line of stdin
  bool wait_stdin = false;          // after printing, read stdin to EOF before tearing down
};

// Reads stdin up to a newline or EOF.
inline void read_line_from_stdin() {
  char c = 0;
  while (read(0, &c, 1) == 1 && c != '\n') {
  }
}

template <class Api> void print_error(const Api& api, const char* call, CUresult r) {
  const char* name = nullptr;
  if (api.get_error_name(r, &name) != CUDA_SUCCESS || name == nullptr) name = "?";
  std::printf("error: %s: %s (%d)\n", call, name, int(r));
  std::fflush(stdout);
}

#define TESTAPP_CHECK(call)                                                                        \
  do {                                                                                             \
    CUresult r_ = (call);                                                                          \
    if (r_ != CUDA_SUCCESS) {                                                                      \
      ::testapp::print_error(api, #call, r_);                                                      \
      return 2;                                                                                    \
    }                                                                                              \
  } while (0)

// Runs the three kernels k_kernels[k].launches times each, interleaved, checks every buffer against
// the host, prints the launches, checksum and check lines, and returns the exit status: 0 when
// every buffer matches, 1 on a mismatch, 2 when a driver call fails (after an "error:" line).
template <class Api> int run_workload(const Api& api, const Options& opt) {
  TESTAPP_CHECK(api.init(0));
  CUdevice dev = 0;
  TESTAPP_CHECK(api.device_get(&dev, 0));
  CUcontext ctx = nullptr;
  TESTAPP_CHECK(api.primary_ctx_retain(&ctx, dev));
  TESTAPP_CHECK(api.ctx_set_current(ctx));

  CUmodule mod = nullptr;
  CUlibrary lib = nullptr;
  CUfunction fn[k_kernel_count] = {};
  if (opt.library) {
    TESTAPP_CHECK(api.library_load_data(&lib, opt.image, nullptr, nullptr, 0, nullptr, nullptr, 0));
    for (int k = 0; k < k_kernel_count; ++k) {
      CUkernel kernel = nullptr;
      TESTAPP_CHECK(api.library_get_kernel(&kernel, lib, k_kernels[k].entry));
      fn[k] = reinterpret_cast<CUfunction>(kernel); // launchable as is (cuLibraryGetKernel docs)
    }
  } else {
    if (opt.load_ex) {
      static char info[4096], error[4096];
      CUjit_option keys[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                             CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
      void* values[] = {info, reinterpret_cast<void*>(uintptr_t(sizeof info)), error,
                        reinterpret_cast<void*>(uintptr_t(sizeof error))};
      TESTAPP_CHECK(api.module_load_data_ex(&mod, opt.image, 4, keys, values));
    } else {
      TESTAPP_CHECK(api.module_load_data(&mod, opt.image));
    }
    for (int k = 0; k < k_kernel_count; ++k)
      TESTAPP_CHECK(api.module_get_function(&fn[k], mod, k_kernels[k].entry));
  }

  if (opt.pause_before_launch) read_line_from_stdin();

  if (opt.probe_rejected_launches) {
    // A block of 0 threads, and a 2-block cluster on a 3-block grid: refused by any driver
    // (CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_INVALID_CLUSTER_SIZE). Nothing runs, so nothing may be
    // counted; a hook that dropped the cluster attribute would run the kernel instead.
    CUdeviceptr none = 0;
    int zero = 0;
    void* params[] = {&none, &none, &zero};
    CUresult r = api.launch(fn[k_blur], 1, 1, 1, 0, 1, 1, 0, nullptr, params, nullptr);
    std::printf("rejected launch (empty block): %d\n", int(r));
    CUlaunchAttribute cluster{};
    cluster.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    cluster.value.clusterDim.x = 2;
    cluster.value.clusterDim.y = 1;
    cluster.value.clusterDim.z = 1;
    CUlaunchConfig config{};
    config.gridDimX = 3;
    config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = 256;
    config.blockDimY = config.blockDimZ = 1;
    config.attrs = &cluster;
    config.numAttrs = 1;
    r = api.launch_ex(&config, fn[k_blur], params, nullptr);
    std::printf("rejected launch (cluster 2 on grid 3): %d\n", int(r));
  }

  Inputs in;
  CUdeviceptr x = 0, y = 0, bits = 0, blur[2] = {0, 0};
  TESTAPP_CHECK(api.mem_alloc(&x, in.x.size() * sizeof(float)));
  TESTAPP_CHECK(api.mem_alloc(&y, in.y.size() * sizeof(float)));
  TESTAPP_CHECK(api.mem_alloc(&bits, in.bits.size() * sizeof(uint32_t)));
  for (auto& b : blur) TESTAPP_CHECK(api.mem_alloc(&b, in.blur.size() * sizeof(int32_t)));
  TESTAPP_CHECK(api.memcpy_htod(x, in.x.data(), in.x.size() * sizeof(float)));
  TESTAPP_CHECK(api.memcpy_htod(y, in.y.data(), in.y.size() * sizeof(float)));
  TESTAPP_CHECK(api.memcpy_htod(bits, in.bits.data(), in.bits.size() * sizeof(uint32_t)));
  TESTAPP_CHECK(api.memcpy_htod(blur[0], in.blur.data(), in.blur.size() * sizeof(int32_t)));
  TESTAPP_CHECK(api.memcpy_htod(blur[1], in.blur.data(), in.blur.size() * sizeof(int32_t)));

  // Round r launches every kernel that has launches left: saxpy, mix_bits, blur, saxpy, ...
  int counts[k_kernel_count] = {};
  int rounds = 0;
  for (const auto& k : k_kernels) rounds = k.launches > rounds ? k.launches : rounds;
  for (int round = 0; round < rounds; ++round) {
    if (round < k_kernels[k_saxpy].launches) {
      float a = k_saxpy_a;
      int n = k_saxpy_n;
      void* params[] = {&a, &x, &y, &n};
      const KernelSpec& s = k_kernels[k_saxpy];
      TESTAPP_CHECK(api.launch_saxpy(fn[k_saxpy], s.grid[0], s.grid[1], s.grid[2], s.block[0],
                                     s.block[1], s.block[2], 0, opt.saxpy_stream, params, nullptr));
      ++counts[k_saxpy];
    }
    if (round < k_kernels[k_mix_bits].launches) {
      unsigned salt = mix_salt(round);
      int n = k_mix_n;
      void* params[] = {&bits, &salt, &n};
      const KernelSpec& s = k_kernels[k_mix_bits];
      TESTAPP_CHECK(api.launch(fn[k_mix_bits], s.grid[0], s.grid[1], s.grid[2], s.block[0],
                               s.block[1], s.block[2], 0, nullptr, params, nullptr));
      ++counts[k_mix_bits];
    }
    if (round < k_kernels[k_blur].launches) {
      CUdeviceptr src = blur[round % 2], dst = blur[1 - round % 2];
      int n = k_blur_n;
      const KernelSpec& s = k_kernels[k_blur];
      if (opt.extra_for_last_blur && round + 1 == k_kernels[k_blur].launches) {
        // The kernel's parameters as one buffer: two pointers and an int, 20 bytes.
        struct alignas(8) {
          CUdeviceptr in, out;
          int n;
        } packed{src, dst, n};
        size_t size = 20;
        void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                         CU_LAUNCH_PARAM_END};
        TESTAPP_CHECK(api.launch(fn[k_blur], s.grid[0], s.grid[1], s.grid[2], s.block[0],
                                 s.block[1], s.block[2], 0, nullptr, nullptr, extra));
      } else if (opt.blur_with_launch_ex) {
        void* params[] = {&src, &dst, &n};
        CUlaunchAttribute priority{};
        priority.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
        priority.value.priority = 0;
        CUlaunchConfig config{};
        config.gridDimX = s.grid[0];
        config.gridDimY = s.grid[1];
        config.gridDimZ = s.grid[2];
        config.blockDimX = s.block[0];
        config.blockDimY = s.block[1];
        config.blockDimZ = s.block[2];
        config.attrs = &priority;
        config.numAttrs = 1;
        TESTAPP_CHECK(api.launch_ex(&config, fn[k_blur], params, nullptr));
      } else {
        void* params[] = {&src, &dst, &n};
        TESTAPP_CHECK(api.launch(fn[k_blur], s.grid[0], s.grid[1], s.grid[2], s.block[0],
                                 s.block[1], s.block[2], 0, nullptr, params, nullptr));
      }
      ++counts[k_blur];
    }
  }
  TESTAPP_CHECK(api.ctx_synchronize());

  std::vector<float> y_out(in.y.size());
  std::vector<uint32_t> bits_out(in.bits.size());
  std::vector<int32_t> blur_out[2] = {std::vector<int32_t>(in.blur.size()),
                                      std::vector<int32_t>(in.blur.size())};
  TESTAPP_CHECK(api.memcpy_dtoh(y_out.data(), y, y_out.size() * sizeof(float)));
  TESTAPP_CHECK(api.memcpy_dtoh(bits_out.data(), bits, bits_out.size() * sizeof(uint32_t)));
  for (int b = 0; b < 2; ++b)
    TESTAPP_CHECK(api.memcpy_dtoh(blur_out[b].data(), blur[b], blur_out[b].size() * sizeof(int32_t)));

  std::vector<float> y_ref = in.y;
  reference_saxpy(in.x, y_ref, counts[k_saxpy]);
  std::vector<uint32_t> bits_ref = in.bits;
  reference_mix_bits(bits_ref, counts[k_mix_bits]);
  std::vector<int32_t> blur_ref[2] = {in.blur, in.blur};
  reference_blur(blur_ref[0], blur_ref[1], counts[k_blur]);

  std::printf("%s\n", launches_line(counts).c_str());
  std::printf("workload: checksum saxpy=%s mix_bits=%s blur_a=%s blur_b=%s\n",
              hex64(checksum(y_out)).c_str(), hex64(checksum(bits_out)).c_str(),
              hex64(checksum(blur_out[0])).c_str(), hex64(checksum(blur_out[1])).c_str());
  bool ok = std::memcmp(y_out.data(), y_ref.data(), y_ref.size() * sizeof(float)) == 0 &&
            bits_out == bits_ref && blur_out[0] == blur_ref[0] && blur_out[1] == blur_ref[1];
  std::printf("workload: check %s\n", ok ? "ok" : "MISMATCH");
  std::fflush(stdout);

  if (opt.wait_stdin) {
    char buf[256];
    while (read(0, buf, sizeof buf) > 0) {
    }
  }

  TESTAPP_CHECK(api.mem_free(x));
  TESTAPP_CHECK(api.mem_free(y));
  TESTAPP_CHECK(api.mem_free(bits));
  for (auto b : blur) TESTAPP_CHECK(api.mem_free(b));
  if (lib != nullptr) TESTAPP_CHECK(api.library_unload(lib));
  if (mod != nullptr) TESTAPP_CHECK(api.module_unload(mod));
  TESTAPP_CHECK(api.primary_ctx_release(dev));
  return ok ? 0 : 1;
}

} // namespace testapp
