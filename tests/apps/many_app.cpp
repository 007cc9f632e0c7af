// hone-testapp-many: many kernels, launched in rounds for a while. One generated PTX module holds
// --kernels trivial entries (hone_many_0, hone_many_1, ...); every round launches each once (it
// adds 1 to its own counter), then the program pauses --pause-ms, for --rounds rounds. A shim
// reporting every 100 ms then has a large report to send every interval: what fills the socket
// of a daemon that stopped reading. Linked with -lcuda.
//
// stdout: "many: kernels N rounds R launches N*R checksum <hex> check ok|MISMATCH".
//
// Usage: hone-testapp-many [--kernels N] [--rounds R] [--pause-ms M]
#include "workload.hpp"

#include <cuda.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

[[noreturn]] void fail(const char* call, CUresult r) {
  const char* name = "?";
  cuGetErrorName(r, &name);
  std::printf("error: %s: %s (%d)\n", call, name, int(r));
  std::fflush(stdout);
  std::_Exit(2);
}
#define CK(call)                                                                                   \
  do {                                                                                             \
    CUresult r_ = (call);                                                                          \
    if (r_ != CUDA_SUCCESS) fail(#call, r_);                                                       \
  } while (0)

// Entry i: *p += 1 (one thread).
std::string make_ptx(int kernels) {
  std::string ptx = ".version 8.0\n.target sm_75\n.address_size 64\n";
  for (int i = 0; i < kernels; ++i) {
    ptx += ".visible .entry hone_many_" + std::to_string(i) +
           "(.param .u64 p)\n{\n.reg .b32 %r<3>;\n.reg .b64 %rd<3>;\n"
           "ld.param.u64 %rd1, [p];\ncvta.to.global.u64 %rd2, %rd1;\n"
           "ld.global.u32 %r1, [%rd2];\nadd.s32 %r2, %r1, 1;\nst.global.u32 [%rd2], %r2;\nret;\n}\n";
  }
  return ptx;
}

int parse_int(const char* s, int max) {
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < 0 || v > max) {
    std::fprintf(stderr, "not a count in [0, %d]: %s\n", max, s);
    std::exit(64);
  }
  return int(v);
}

} // namespace

int main(int argc, char** argv) {
  int kernels = 2000, rounds = 10, pause_ms = 100;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--kernels") == 0 && i + 1 < argc) {
      kernels = parse_int(argv[++i], 60000);
    } else if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
      rounds = parse_int(argv[++i], 100000);
    } else if (std::strcmp(argv[i], "--pause-ms") == 0 && i + 1 < argc) {
      pause_ms = parse_int(argv[++i], 10000);
    } else {
      std::fprintf(stderr, "usage: %s [--kernels N] [--rounds R] [--pause-ms M]\n", argv[0]);
      return 64;
    }
  }
  if (kernels < 1) kernels = 1;
  CK(cuInit(0));
  CUdevice dev = 0;
  CK(cuDeviceGet(&dev, 0));
  CUcontext ctx = nullptr;
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  std::string ptx = make_ptx(kernels);
  CUmodule mod = nullptr;
  CK(cuModuleLoadData(&mod, ptx.c_str()));
  std::vector<CUfunction> fn(static_cast<size_t>(kernels), nullptr);
  for (int i = 0; i < kernels; ++i)
    CK(cuModuleGetFunction(&fn[size_t(i)], mod, ("hone_many_" + std::to_string(i)).c_str()));
  CUdeviceptr counters = 0;
  CK(cuMemAlloc(&counters, size_t(kernels) * sizeof(uint32_t)));
  CK(cuMemsetD32(counters, 0, size_t(kernels)));
  for (int r = 0; r < rounds; ++r) {
    if (r > 0 && pause_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
    for (int i = 0; i < kernels; ++i) {
      CUdeviceptr p = counters + CUdeviceptr(i) * sizeof(uint32_t);
      void* params[] = {&p};
      CK(cuLaunchKernel(fn[size_t(i)], 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
    }
  }
  CK(cuCtxSynchronize());
  std::vector<uint32_t> out(static_cast<size_t>(kernels));
  CK(cuMemcpyDtoH(out.data(), counters, out.size() * sizeof(uint32_t)));
  bool ok = true;
  for (uint32_t v : out) ok = ok && v == uint32_t(rounds);
  CK(cuMemFree(counters));
  CK(cuModuleUnload(mod));
  CK(cuDevicePrimaryCtxRelease(dev));
  std::printf("many: kernels %d rounds %d launches %lld checksum %s check %s\n", kernels, rounds,
              static_cast<long long>(kernels) * rounds, testapp::hex64(testapp::checksum(out)).c_str(),
              ok ? "ok" : "MISMATCH");
  return ok ? 0 : 1;
}
