// The emulated device's cost model behaves the way a GPU does, in direction (emu/README.md, "Cost
// model: kernels"). Each test launches kernels that do the same instructions, differing in one
// property, and compares the modeled times events report; none pins an exact figure.
//
// The kernels are CUDA C++ compiled by NVRTC at test time; only the public driver API is used.

#include "cuda/nvrtc.hpp"

#include <cuda.h>
#include <unistd.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

const char* k_source = R"(
// Each thread sums `reps` loads of x, `stride` elements apart (wrapping in `mask + 1`): stride 0
// reads one element again and again (L1 hits), a stride of 64 a new sector every time.
extern "C" __global__ void reread(const float* x, float* y, int reps, int stride, int mask) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float acc = 0.f;
  int at = i & mask;
  for (int k = 0; k < reps; ++k) {
    acc += x[at];
    at = (at + stride) & mask;
  }
  y[i] = acc;
}

// Dependent loads: each step needs the last one's value (latency-bound). The lanes of a warp
// walk together, one sector per step.
extern "C" __global__ void chase(const int* next, int* out, int steps, int mask) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int p = ((i >> 5) * 4096) & mask;
  for (int k = 0; k < steps; ++k) p = next[p];
  out[i] = p;
}

// Shared-memory traffic with lanes `stride` words apart: 1 is conflict-free, 32 puts every lane
// of a warp in one bank, 33 is the padded layout.
extern "C" __global__ void banks(float* out, int stride, int reps) {
  __shared__ float s[32 * 33];
  volatile float* vs = s; // every access happens, none is kept in a register
  int lane = threadIdx.x & 31;
  int at = (lane * stride) % (32 * 33);
  vs[at] = float(lane);
  __syncwarp();
  float acc = 0.f;
  for (int k = 0; k < reps; ++k) {
    acc += vs[at];
    vs[at] = acc;
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

// The same arithmetic with a barrier per step or without.
extern "C" __global__ void steps(float* out, int reps, int sync) {
  __shared__ float s[256];
  float acc = float(threadIdx.x);
  for (int k = 0; k < reps; ++k) {
    acc = acc * 0.5f + 1.f;
    if (sync) __syncthreads();
  }
  s[threadIdx.x] = acc;
  out[blockIdx.x * blockDim.x + threadIdx.x] = s[threadIdx.x];
}

// Many values live at once (64 accumulators), or few.
extern "C" __global__ void wide(const float* x, float* y, int n) {
  float a[64];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll
  for (int k = 0; k < 64; ++k) a[k] = x[(i + k) % n];
  float acc = 0.f;
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int k = 0; k < 64; ++k) acc = acc * a[k] + a[63 - k];
  y[i % n] = acc;
}
extern "C" __global__ void __launch_bounds__(256, 8) wide_limited(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  y[i % n] = x[i % n] * 2.f;
}
)";

class CostModel : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
    CUdevice dev;
    ASSERT_EQ(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxCreate(&m_ctx, nullptr, 0, dev), CUDA_SUCCESS);
    auto out = hone::cuda::nvrtc_compile(k_source, "cost_model.cu", {"--gpu-architecture=compute_90"});
    ASSERT_TRUE(out) << out.error().message;
    ASSERT_EQ(cuModuleLoadData(&m_module, out->ptx.c_str()), CUDA_SUCCESS);
    ASSERT_EQ(cuEventCreate(&m_start, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuEventCreate(&m_end, 0), CUDA_SUCCESS);
  }

  void TearDown() override {
    for (CUdeviceptr p : m_buffers) cuMemFree(p);
    if (m_ctx) cuCtxDestroy(m_ctx);
  }

  CUfunction fn(const char* name) {
    CUfunction f = nullptr;
    EXPECT_EQ(cuModuleGetFunction(&f, m_module, name), CUDA_SUCCESS) << name;
    return f;
  }

  // A table of 2^20 ints where each entry sends a walk 64 KB further (a new sector every step).
  CUdeviceptr chase_table(int& mask) {
    const int n = 1 << 20;
    mask = n - 1;
    std::vector<int> next(n);
    for (int j = 0; j < n; ++j) next[j] = (j + 16384 + 16) & mask;
    CUdeviceptr p = buffer(n * sizeof(int));
    EXPECT_EQ(cuMemcpyHtoD(p, next.data(), n * sizeof(int)), CUDA_SUCCESS);
    return p;
  }

  CUdeviceptr buffer(size_t bytes) {
    CUdeviceptr p = 0;
    EXPECT_EQ(cuMemAlloc(&p, bytes), CUDA_SUCCESS);
    EXPECT_EQ(cuMemsetD8(p, 0, bytes), CUDA_SUCCESS);
    m_buffers.push_back(p);
    return p;
  }

  // The modeled time of one launch, in microseconds.
  double time_us(CUfunction f, unsigned grid, unsigned block, std::vector<void*> args,
                 unsigned shared = 0) {
    EXPECT_EQ(cuEventRecord(m_start, nullptr), CUDA_SUCCESS);
    CUresult r = cuLaunchKernel(f, grid, 1, 1, block, 1, 1, shared, nullptr, args.data(), nullptr);
    EXPECT_EQ(r, CUDA_SUCCESS);
    EXPECT_EQ(cuEventRecord(m_end, nullptr), CUDA_SUCCESS);
    EXPECT_EQ(cuEventSynchronize(m_end), CUDA_SUCCESS);
    float ms = 0;
    EXPECT_EQ(cuEventElapsedTime(&ms, m_start, m_end), CUDA_SUCCESS);
    return ms * 1000.0;
  }

  CUcontext m_ctx = nullptr;
  CUmodule m_module = nullptr;
  CUevent m_start = nullptr, m_end = nullptr;
  std::vector<CUdeviceptr> m_buffers;
};

TEST_F(CostModel, AnL1HitCostsLessThanAMiss) {
  const int n = 1 << 20, threads = 132 * 256;
  CUdeviceptr x = buffer(n * sizeof(float)), y = buffer(threads * sizeof(float));
  int reps = 64, mask = n - 1;
  int same = 0, spread = 64; // 64 floats: a new 256-byte span, never a sector seen before
  double hit = time_us(fn("reread"), 132, 256, {&x, &y, &reps, &same, &mask});
  double miss = time_us(fn("reread"), 132, 256, {&x, &y, &reps, &spread, &mask});
  EXPECT_LT(hit * 1.5, miss) << "hits " << hit << " us, misses " << miss << " us";
}

TEST_F(CostModel, MoreResidentWarpsHideMoreLatency) {
  // 40 KB of shared memory per block leaves room for 5 blocks of 256 threads per SM, not 8:
  // the same grid needs more waves, each waiting out the same chain of loads.
  CUfunction f = fn("chase");
  const unsigned grid = 132 * 8 * 2, block = 256;
  int mask = 0;
  CUdeviceptr next = chase_table(mask), out = buffer(size_t(grid) * block * sizeof(int));
  int steps = 32;
  double many = time_us(f, grid, block, {&next, &out, &steps, &mask});
  double few = time_us(f, grid, block, {&next, &out, &steps, &mask}, 40 * 1024);
  EXPECT_LT(many * 1.3, few) << "64 warps per SM " << many << " us, 40 warps " << few << " us";
}

TEST_F(CostModel, ABankConflictCostsMore) {
  CUfunction f = fn("banks");
  CUdeviceptr out = buffer(132 * 8 * 256 * sizeof(float));
  int reps = 64, one = 1, same_bank = 32, padded = 33;
  double clean = time_us(f, 132 * 8, 256, {&out, &one, &reps});
  double conflicted = time_us(f, 132 * 8, 256, {&out, &same_bank, &reps});
  double pad = time_us(f, 132 * 8, 256, {&out, &padded, &reps});
  EXPECT_LT(clean * 2, conflicted) << "stride 1 " << clean << " us, stride 32 " << conflicted;
  EXPECT_LT(pad * 2, conflicted) << "stride 33 " << pad << " us, stride 32 " << conflicted;
}

TEST_F(CostModel, BarriersCostTime) {
  CUfunction f = fn("steps");
  CUdeviceptr out = buffer(132 * 8 * 256 * sizeof(float));
  int reps = 64, with = 1, without = 0;
  double synced = time_us(f, 132 * 8, 256, {&out, &reps, &with});
  double free_running = time_us(f, 132 * 8, 256, {&out, &reps, &without});
  EXPECT_LT(free_running, synced);
}

TEST_F(CostModel, RegistersComeFromPtxas) {
  // A kernel that keeps 64 values live gets far more registers than one limited by launch
  // bounds to 8 blocks of 256 threads per SM (at most 32), and occupancy follows.
  int wide_regs = 0, limited_regs = 0;
  ASSERT_EQ(cuFuncGetAttribute(&wide_regs, CU_FUNC_ATTRIBUTE_NUM_REGS, fn("wide")), CUDA_SUCCESS);
  ASSERT_EQ(cuFuncGetAttribute(&limited_regs, CU_FUNC_ATTRIBUTE_NUM_REGS, fn("wide_limited")),
            CUDA_SUCCESS);
  EXPECT_GT(wide_regs, 64);
  EXPECT_LE(limited_regs, 32);
  EXPECT_GT(limited_regs, 0);
}

// PTX newer than the toolkit's ptxas (CUDA 13.1 writes .version 9.1; CUDA 13.0's ptxas refuses it
// with "current version is '9.0'") still gets ptxas's counts: the module is compiled again
// declaring the newest version ptxas knows. The same kernel as `.version 9.1` gets what it gets as
// the version NVRTC wrote, not the 32 registers assumed without a count.
TEST_F(CostModel, PtxNewerThanPtxasStillGetsItsRegisters) {
  auto out = hone::cuda::nvrtc_compile(k_source, "cost_model.cu", {"--gpu-architecture=compute_90"});
  ASSERT_TRUE(out) << out.error().message;
  std::string ptx = out->ptx;
  const auto at = ptx.find(".version ");
  ASSERT_NE(at, std::string::npos);
  const auto end = ptx.find('\n', at);
  ptx.replace(at, end - at, ".version 9.1");
  // ptxas itself, not a report a cache kept from another run
  ASSERT_EQ(setenv("HONE_EMU_CACHE_DIR", "off", 1), 0);
  CUmodule newer = nullptr;
  ASSERT_EQ(cuModuleLoadData(&newer, ptx.c_str()), CUDA_SUCCESS);
  CUfunction f = nullptr;
  ASSERT_EQ(cuModuleGetFunction(&f, newer, "wide"), CUDA_SUCCESS);
  int newer_regs = 0, regs = 0;
  ASSERT_EQ(cuFuncGetAttribute(&newer_regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f), CUDA_SUCCESS);
  ASSERT_EQ(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, fn("wide")), CUDA_SUCCESS);
  EXPECT_EQ(newer_regs, regs);
  EXPECT_GT(newer_regs, 64); // not the 32 assumed without ptxas
  unsetenv("HONE_EMU_CACHE_DIR");
  cuModuleUnload(newer);
}

TEST_F(CostModel, TheScheduleNeverChangesTheTime) {
  CUfunction f = fn("chase");
  const unsigned grid = 264, block = 256;
  int mask = 0;
  CUdeviceptr next = chase_table(mask), out = buffer(size_t(grid) * block * sizeof(int));
  int steps = 16;
  ASSERT_EQ(unsetenv("HONE_EMU_SCHEDULE_SEED"), 0);
  const double fixed = time_us(f, grid, block, {&next, &out, &steps, &mask});
  for (const char* seed : {"1", "77", "123456789"}) {
    ASSERT_EQ(setenv("HONE_EMU_SCHEDULE_SEED", seed, 1), 0);
    EXPECT_EQ(time_us(f, grid, block, {&next, &out, &steps, &mask}), fixed) << "seed " << seed;
  }
  unsetenv("HONE_EMU_SCHEDULE_SEED");
}

// ptxas reports are kept on disk between runs: a module loaded again reads its counts from the
// cache (a planted report proves which was read), and a file that is not a report is ignored and
// replaced by ptxas's.
TEST(CostModelCache, PtxasReportsAreReadBackAndBadFilesIgnored) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("hone-emu-cache-test-" + std::to_string(getpid()));
  fs::remove_all(dir);
  ASSERT_EQ(setenv("HONE_EMU_CACHE_DIR", dir.c_str(), 1), 0);
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  CUdevice dev = 0;
  ASSERT_EQ(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
  CUcontext ctx = nullptr;
  ASSERT_EQ(cuCtxCreate(&ctx, nullptr, 0, dev), CUDA_SUCCESS);
  const std::string ptx = ".version 8.0\n.target sm_90\n.address_size 64\n"
                          ".visible .entry cached_k(.param .u64 p)\n{\n.reg .b64 %rd<3>;\n"
                          "ld.param.u64 %rd1, [p];\ncvta.to.global.u64 %rd2, %rd1;\n"
                          "st.global.u32 [%rd2], 7;\nret;\n}\n";
  auto registers = [&] {
    CUmodule m = nullptr;
    EXPECT_EQ(cuModuleLoadData(&m, ptx.c_str()), CUDA_SUCCESS);
    CUfunction f = nullptr;
    EXPECT_EQ(cuModuleGetFunction(&f, m, "cached_k"), CUDA_SUCCESS);
    int n = -1;
    EXPECT_EQ(cuFuncGetAttribute(&n, CU_FUNC_ATTRIBUTE_NUM_REGS, f), CUDA_SUCCESS);
    cuModuleUnload(m);
    return n;
  };
  auto files = [&] {
    std::vector<fs::path> out;
    if (fs::exists(dir))
      for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path());
    return out;
  };
  const int fresh = registers();
  ASSERT_GT(fresh, 0);
  ASSERT_LT(fresh, 200);
  auto written = files();
  ASSERT_EQ(written.size(), 1u);
  EXPECT_EQ(fs::status(dir).permissions() & fs::perms::all, fs::perms::owner_all);

  // A planted report is what the next load reads.
  {
    std::ofstream o(written[0], std::ios::trunc);
    o << "hone-emu ptxas report v1\n"
         "ptxas info    : Compiling entry function 'cached_k' for 'sm_90'\n"
         "ptxas info    : Used 200 registers, used 0 barriers\n";
  }
  EXPECT_EQ(registers(), 200);

  // Not a report: ignored, and ptxas's report takes its place.
  {
    std::ofstream o(written[0], std::ios::trunc);
    o << "garbage\n";
  }
  EXPECT_EQ(registers(), fresh);
  std::ifstream in(written[0]);
  std::string first;
  std::getline(in, first);
  EXPECT_EQ(first, "hone-emu ptxas report v1");

  // "off": no cache is read or written.
  fs::remove_all(dir);
  ASSERT_EQ(setenv("HONE_EMU_CACHE_DIR", "off", 1), 0);
  EXPECT_EQ(registers(), fresh);
  EXPECT_TRUE(files().empty());
  unsetenv("HONE_EMU_CACHE_DIR");
  cuCtxDestroy(ctx);
  fs::remove_all(dir);
}

} // namespace
