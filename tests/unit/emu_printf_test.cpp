// Device-side printf on the emulated device (emu/exec_printf.hpp, emu/driver_printf.cpp): nvcc's
// and NVRTC's `vprintf(format, args)` calls are formatted as CUDA's printf documents (CUDA C++
// Programming Guide, "Formatted Output": its conversions, flags, width, precision and length
// modifiers, formatted on the host by the host's C library, so glibc's snprintf of the same format
// and arguments is the reference), buffered per launch and printed to stdout at the flush points
// the guide lists, in block order, as many records as CU_LIMIT_PRINTF_FIFO_SIZE holds; the call
// returns the number of arguments it parsed. Both execution paths print the same.
//
// Kernels are CUDA C++ compiled by NVRTC at test time; only the public driver API is used.
#include "cuda/nvrtc.hpp"

#include <cuda.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace {

const char* k_source = R"(
extern "C" __global__ void formats(const char* dev_string, int* ret) {
  ret[0] = printf("%d %i %u %x %X %o %c %s %f %e %g %a %p %% |%5d|%-5d|%05d|%+d|\n", -42, 42,
                  4000000000u, 0xbeefu, 0xbeefu, 8u, 'Q', "lit", 3.25f, 1234.5, 0.0001, 1.0,
                  (void*)0x1234, 7, 7, 7, 7);
  ret[1] = printf("%hd %hhd %ld %lld %lu %llx |%8.3f|%-10.2e|%.0f|%G|%E|%*d|%.*f| %s %s %#x %c\n",
                  (short)-3, (char)65, -9l, 123456789012345ll, 99ul, 0xfeedull, 3.14159, 31415.9,
                  2.5, 1e-10, 2.0f, 6, 42, 3, 2.71828, dev_string, (const char*)0, 255, 'z');
  ret[2] = printf("no arguments\n");
  ret[3] = printf("%d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d "
                  "%d %d %d %d %d %d %d|\n",
                  1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22,
                  23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33);
}

extern "C" __global__ void each_thread(int tag) {
  printf("%d:%d:%d\n", tag, blockIdx.x, threadIdx.x);
}

extern "C" __global__ void divergent() {
  if (threadIdx.x % 2) printf("odd %d\n", threadIdx.x);
  else printf("even %d\n", threadIdx.x);
}
)";

// What the host's snprintf makes of the same format and arguments.
template <class... A> std::string host(const char* format, A... args) {
  char buf[1024];
  std::snprintf(buf, sizeof buf, format, args...);
  return buf;
}

class DevicePrintf : public testing::Test {
protected:
  void SetUp() override {
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
    CUdevice dev;
    ASSERT_EQ(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxCreate(&m_ctx, nullptr, 0, dev), CUDA_SUCCESS);
    auto out = hone::cuda::nvrtc_compile(k_source, "printf.cu", {"--gpu-architecture=compute_90"});
    ASSERT_TRUE(out) << out.error().message;
    m_ptx = out->ptx;
    ASSERT_EQ(cuModuleLoadData(&m_module, m_ptx.c_str()), CUDA_SUCCESS);
  }
  void TearDown() override {
    if (m_ctx) cuCtxDestroy(m_ctx);
    unsetenv("HONE_EMU_EXEC");
  }
  CUfunction fn(const char* name) {
    CUfunction f = nullptr;
    EXPECT_EQ(cuModuleGetFunction(&f, m_module, name), CUDA_SUCCESS) << name;
    return f;
  }
  void launch(const char* name, unsigned grid, unsigned block, std::vector<void*> args) {
    ASSERT_EQ(cuLaunchKernel(fn(name), grid, 1, 1, block, 1, 1, 0, nullptr, args.data(), nullptr),
              CUDA_SUCCESS);
  }
  // What the device printed to stdout while `f` ran.
  template <class F> std::string printed(F&& f) {
    std::fflush(stdout);
    testing::internal::CaptureStdout();
    f();
    std::fflush(stdout);
    return testing::internal::GetCapturedStdout();
  }

  CUcontext m_ctx = nullptr;
  CUmodule m_module = nullptr;
  std::string m_ptx;
};

TEST_F(DevicePrintf, FormatsAsTheHostCLibraryDoes) {
  for (const char* path : {"interpret", "compile"}) {
    setenv("HONE_EMU_EXEC", path, 1);
    CUdeviceptr s = 0, ret = 0;
    ASSERT_EQ(cuMemAlloc(&s, 16), CUDA_SUCCESS);
    ASSERT_EQ(cuMemcpyHtoD(s, "on device", 10), CUDA_SUCCESS);
    ASSERT_EQ(cuMemAlloc(&ret, 16), CUDA_SUCCESS);
    const std::string out = printed([&] {
      launch("formats", 1, 1, {&s, &ret});
      ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    });
    std::string want = host("%d %i %u %x %X %o %c %s %f %e %g %a %p %% |%5d|%-5d|%05d|%+d|\n", -42,
                            42, 4000000000u, 0xbeefu, 0xbeefu, 8u, 'Q', "lit", 3.25, 1234.5, 0.0001,
                            1.0, (void*)0x1234, 7, 7, 7, 7);
    want += host("%hd %hhd %ld %lld %lu %llx |%8.3f|%-10.2e|%.0f|%G|%E|%*d|%.*f| %s %s %#x %c\n",
                 -3, 65, -9l, 123456789012345ll, 99ul, 0xfeedull, 3.14159, 31415.9, 2.5, 1e-10,
                 2.0, 6, 42, 3, 2.71828, "on device", "(null)", 255, 'z');
    want += "no arguments\n";
    // at most 32 arguments: a conversion past them is printed as written
    want += "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 %d|\n";
    EXPECT_EQ(out, want) << path;
    int r[4] = {};
    ASSERT_EQ(cuMemcpyDtoH(r, ret, sizeof r), CUDA_SUCCESS);
    // printf returns the number of arguments parsed (the `*`s count as arguments)
    EXPECT_EQ(r[0], 17) << path;
    EXPECT_EQ(r[1], 19) << path;
    EXPECT_EQ(r[2], 0) << path;
    EXPECT_EQ(r[3], 32) << path;
    cuMemFree(s);
    cuMemFree(ret);
  }
}

// Records wait in the FIFO until a flush point: here a launch's output appears at
// cuCtxSynchronize, cuStreamSynchronize, cuEventSynchronize, a synchronous copy, the next launch,
// a module unload and the context's destruction, and not before.
TEST_F(DevicePrintf, PrintsAtTheFlushPoints) {
  int tag = 1;
  auto once = [&] { launch("each_thread", 1, 1, {&tag}); };
  auto line = [&] { return std::to_string(tag) + ":0:0\n"; };
  CUstream stream = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, 0), CUDA_SUCCESS);
  CUevent event = nullptr;
  ASSERT_EQ(cuEventCreate(&event, 0), CUDA_SUCCESS);
  CUdeviceptr d = 0;
  ASSERT_EQ(cuMemAlloc(&d, 4), CUDA_SUCCESS);
  int host_word = 0;
  const std::vector<std::pair<const char*, std::function<void()>>> flushes = {
      {"cuCtxSynchronize", [] { ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS); }},
      {"cuStreamSynchronize", [&] { ASSERT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS); }},
      {"cuEventSynchronize",
       [&] {
         ASSERT_EQ(cuEventRecord(event, nullptr), CUDA_SUCCESS);
         ASSERT_EQ(cuEventSynchronize(event), CUDA_SUCCESS);
       }},
      {"cuMemcpyDtoH", [&] { ASSERT_EQ(cuMemcpyDtoH(&host_word, d, 4), CUDA_SUCCESS); }},
  };
  for (const auto& [what, flush] : flushes) {
    ++tag;
    EXPECT_EQ(printed(once), "") << "printed before " << what;
    EXPECT_EQ(printed(flush), line()) << what;
  }
  // the next launch flushes at its start: the earlier launch's line, not its own
  ++tag;
  EXPECT_EQ(printed(once), "");
  const std::string earlier = line();
  ++tag;
  EXPECT_EQ(printed(once), earlier) << "at the next launch";
  EXPECT_EQ(printed([&] { ASSERT_EQ(cuModuleUnload(m_module), CUDA_SUCCESS); }), line())
      << "at cuModuleUnload";
  ASSERT_EQ(cuModuleLoadData(&m_module, m_ptx.c_str()), CUDA_SUCCESS);
  ++tag;
  EXPECT_EQ(printed(once), "");
  EXPECT_EQ(printed([&] {
              ASSERT_EQ(cuCtxDestroy(m_ctx), CUDA_SUCCESS);
              m_ctx = nullptr;
            }),
            line())
      << "at cuCtxDestroy";
}

// A launch's records come in block order, each block's in the order its threads made them: here
// the lanes of a warp in lane order, its warps in index order (the fixed schedule runs them in
// turn), and a diverged warp's paths one after the other (the lower PTX position first).
TEST_F(DevicePrintf, RecordsComeInBlockOrder) {
  for (const char* path : {"interpret", "compile"}) {
    setenv("HONE_EMU_EXEC", path, 1);
    int tag = 7;
    const std::string out = printed([&] {
      launch("each_thread", 3, 64, {&tag});
      ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    });
    std::string want;
    for (int b = 0; b < 3; ++b)
      for (int t = 0; t < 64; ++t) want += "7:" + std::to_string(b) + ":" + std::to_string(t) + "\n";
    EXPECT_EQ(out, want) << path;
    const std::string div = printed([&] {
      launch("divergent", 1, 4, {});
      ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    });
    EXPECT_TRUE(div == "odd 1\nodd 3\neven 0\neven 2\n" || div == "even 0\neven 2\nodd 1\nodd 3\n")
        << path << ": " << div;
  }
}

// CU_LIMIT_PRINTF_FIFO_SIZE bounds what a flush prints: records that do not fit are dropped, as on
// a GPU; the FIFO is empty again after the flush.
TEST_F(DevicePrintf, TheFifoSizeBoundsWhatIsKept) {
  size_t fifo = 0;
  ASSERT_EQ(cuCtxGetLimit(&fifo, CU_LIMIT_PRINTF_FIFO_SIZE), CUDA_SUCCESS);
  EXPECT_EQ(fifo, size_t(1) << 20);
  // "%d:%d:%d\n": a 16-byte header and 3 ints (16 bytes, rounded to 8): 32 bytes a record
  ASSERT_EQ(cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 10 * 32), CUDA_SUCCESS);
  int tag = 3;
  const std::string out = printed([&] {
    launch("each_thread", 2, 32, {&tag});
    ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  });
  std::string want;
  for (int t = 0; t < 10; ++t) want += "3:0:" + std::to_string(t) + "\n";
  EXPECT_EQ(out, want);
  // the next launch has the whole FIFO again
  tag = 4;
  const std::string again = printed([&] {
    launch("each_thread", 1, 4, {&tag});
    ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  });
  EXPECT_EQ(again, "4:0:0\n4:0:1\n4:0:2\n4:0:3\n");
}

} // namespace
