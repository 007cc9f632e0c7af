// ptx/bounds_probe: the instrumented copy of a kernel records, per allocation, the lowest and
// highest byte one launch touches, exactly, and leaves the application's memory as it was (its
// stores and reductions suppressed); ptxas accepts it; kernels whose memory effects it cannot see,
// or that may wait for another thread's store, are refused.
#include "cuda/nvrtc.hpp"
#include "ptx/bounds_probe.hpp"
#include "ptx/parser.hpp"

#include <cuda.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

using namespace hone;

namespace {

void check(CUresult r, const char* what) {
  ASSERT_EQ(r, CUDA_SUCCESS) << what;
}

// Row-wise scaling as llama.cpp's row kernels do it: a strided loop over columns of a row picked
// by the block, a weight vector shared by every row, a counter bumped atomically.
constexpr const char* k_source = R"(
extern "C" __global__ void rows(const float* x, float* dst, const float* w, int ncols,
                                long long stride_row, unsigned* counter) {
  const int row = blockIdx.x;
  const float* xr = x + row * stride_row;
  float* d = dst + row * ncols;
  for (int c = threadIdx.x; c < ncols; c += blockDim.x) d[c] = xr[c] * w[c];
  if (threadIdx.x == 0) atomicAdd(counter, 1u);
}
)";

std::string compile(const char* source) {
  auto compiled = cuda::nvrtc_compile(source, "k.cu", {"--gpu-architecture=compute_90"});
  EXPECT_TRUE(compiled) << (compiled ? "" : compiled.error().message);
  return compiled ? compiled->ptx : std::string();
}

struct Record {
  uint64_t base, end, lo, hi;
};

} // namespace

TEST(PtxBoundsProbe, RecordsExactRangesAndChangesNoMemory) {
  std::string ptx = compile(k_source);
  ASSERT_FALSE(ptx.empty());
  auto m = ptx::parse(ptx, "rows.ptx");
  ASSERT_TRUE(m) << m.error().message;
  auto probe = ptx::bounds_probe(*m, "rows");
  ASSERT_TRUE(probe) << probe.error().message;

  // ptxas takes it: the probe is meant for real GPUs too.
  std::string path = std::string(HONE_BINARY_DIR) + "/tests/ptx_bounds_probe.ptx";
  std::ofstream(path) << *probe;
  EXPECT_EQ(std::system((std::string(HONE_PTXAS) + " -arch=sm_90 " + path + " -o /dev/null").c_str()),
            0)
      << *probe;

  check(cuInit(0), "cuInit");
  CUdevice dev;
  check(cuDeviceGet(&dev, 0), "cuDeviceGet");
  CUcontext ctx;
  check(cuDevicePrimaryCtxRetain(&ctx, dev), "retain");
  check(cuCtxSetCurrent(ctx), "set current");
  CUmodule mod;
  check(cuModuleLoadData(&mod, probe->c_str()), "load probe");
  CUfunction fn;
  check(cuModuleGetFunction(&fn, mod, "rows"), "get function");
  CUdeviceptr table_var;
  size_t table_var_bytes = 0;
  check(cuModuleGetGlobal(&table_var, &table_var_bytes, mod,
                          std::string(ptx::k_probe_table_symbol).c_str()),
        "table symbol");
  ASSERT_EQ(table_var_bytes, 8u);

  // x: 16 rows of 256 floats, the kernel given a pointer 2 rows in; 3 rows of 100 columns.
  const int rows = 3, ncols = 100, block = 64;
  const long long stride = 256;
  CUdeviceptr x, dst, w, counter;
  check(cuMemAlloc(&x, 16 * stride * 4), "x");
  check(cuMemAlloc(&dst, 64 << 10), "dst");
  check(cuMemAlloc(&w, 4096), "w");
  check(cuMemAlloc(&counter, 256), "counter");
  std::vector<uint8_t> pattern(64 << 10);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = uint8_t(i * 7 + 3);
  check(cuMemcpyHtoD(dst, pattern.data(), pattern.size()), "fill dst");
  check(cuMemcpyHtoD(counter, pattern.data(), 256), "fill counter");

  std::vector<Record> table_host = {{x, x + 16 * stride * 4, ~0ull, 0},
                                    {dst, dst + (64 << 10), ~0ull, 0},
                                    {w, w + 4096, ~0ull, 0},
                                    {counter, counter + 256, ~0ull, 0}};
  std::vector<uint64_t> words = {table_host.size()};
  for (const auto& r : table_host) words.insert(words.end(), {r.base, r.end, r.lo, r.hi});
  CUdeviceptr table;
  check(cuMemAlloc(&table, words.size() * 8), "table");
  check(cuMemcpyHtoD(table, words.data(), words.size() * 8), "table");
  check(cuMemcpyHtoD(table_var, &table, 8), "table pointer");

  CUdeviceptr x_arg = x + 2 * stride * 4;
  int n = ncols;
  long long s = stride;
  void* args[] = {&x_arg, &dst, &w, &n, &s, &counter};
  check(cuLaunchKernel(fn, rows, 1, 1, block, 1, 1, 0, nullptr, args, nullptr), "launch");
  check(cuCtxSynchronize(), "sync");
  check(cuMemcpyDtoH(words.data(), table, words.size() * 8), "read table");

  auto range = [&](size_t i) { return std::make_pair(words[1 + 4 * i + 2], words[1 + 4 * i + 3]); };
  EXPECT_EQ(range(0), std::make_pair(uint64_t(x_arg), uint64_t(x_arg + ((rows - 1) * stride + ncols) * 4)));
  EXPECT_EQ(range(1), std::make_pair(uint64_t(dst), uint64_t(dst + rows * ncols * 4)));
  EXPECT_EQ(range(2), std::make_pair(uint64_t(w), uint64_t(w + ncols * 4)));
  EXPECT_EQ(range(3), std::make_pair(uint64_t(counter), uint64_t(counter + 4)));

  // Stores and the atomic were suppressed: dst and the counter hold what they held.
  std::vector<uint8_t> after(pattern.size());
  check(cuMemcpyDtoH(after.data(), dst, after.size()), "read dst");
  EXPECT_TRUE(after == pattern);
  check(cuMemcpyDtoH(after.data(), counter, 256), "read counter");
  EXPECT_TRUE(std::equal(after.begin(), after.begin() + 256, pattern.begin()));

  for (CUdeviceptr p : {x, dst, w, counter, table}) cuMemFree(p);
  cuModuleUnload(mod);
}

TEST(PtxBoundsProbe, RefusesWhatItCannotSee) {
  // printf: a call to vprintf, which has no body here and writes where the probe cannot see.
  std::string ptx = compile(R"(
extern "C" __global__ void talk(int* out) { printf("%d\n", out[threadIdx.x]); }
)");
  ASSERT_FALSE(ptx.empty());
  auto m = ptx::parse(ptx, "talk.ptx");
  ASSERT_TRUE(m) << m.error().message;
  auto probe = ptx::bounds_probe(*m, "talk");
  ASSERT_FALSE(probe);
  EXPECT_NE(probe.error().message.find("vprintf"), std::string::npos) << probe.error().message;

  // A texture fetch reads memory by a handle, not an address.
  ptx = compile(R"(
extern "C" __global__ void fetch(cudaTextureObject_t t, float* out) {
  out[threadIdx.x] = tex1Dfetch<float>(t, threadIdx.x);
}
)");
  m = ptx::parse(ptx, "fetch.ptx");
  ASSERT_TRUE(m) << m.error().message;
  probe = ptx::bounds_probe(*m, "fetch");
  ASSERT_FALSE(probe);
  EXPECT_NE(probe.error().message.find("cannot see"), std::string::npos) << probe.error().message;

  // Waits for another block's store (a flag polled through an atomic, or a volatile load): with
  // stores suppressed the probe would spin forever, so no probe is made.
  for (const char* wait : {"while (atomicCAS(flag, 0u, 0u) == 0u) {}",
                           "while (*(volatile unsigned*)flag == 0u) {}"}) {
    std::string src = std::string("extern \"C\" __global__ void waits(unsigned* flag, float* out) {\n"
                                  "  if (blockIdx.x == 0) { if (threadIdx.x == 0) atomicExch(flag, 1u); }\n"
                                  "  else ") + wait + "\n  out[blockIdx.x] = 1.0f;\n}\n";
    ptx = compile(src.c_str());
    m = ptx::parse(ptx, "waits.ptx");
    ASSERT_TRUE(m) << m.error().message;
    probe = ptx::bounds_probe(*m, "waits");
    ASSERT_FALSE(probe) << wait;
    EXPECT_NE(probe.error().message.find("wait"), std::string::npos) << probe.error().message;
  }

  // No such entry.
  EXPECT_FALSE(ptx::bounds_probe(*m, "nothing"));
}
