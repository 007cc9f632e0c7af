// The emulated device runs every kernel of the CUDA corpus correctly.
//
// Each (kernel, compiler, architecture) is a test case: the PTX nvcc or NVRTC produced for that
// architecture is loaded (cuModuleLoadData, cuModuleLoadDataEx or cuLibraryLoadData, by
// architecture), the kernel is launched at several shapes (cuLaunchKernel with kernelParams or a
// packed `extra` buffer, and cuLaunchKernelEx, in turn) and every output is compared with its host
// reference (tests/support/corpus_launch.hpp says how, per kernel). This is an ordinary driver-API
// program: linked against the emulated libcuda here, it would check a real GPU's driver the same
// way.

#include "corpus.hpp"
#include "corpus_launch.hpp"

#include <cuda.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace {

using hone::test::CorpusBuild;
using hone::test::CorpusKernel;

struct Case {
  const CorpusKernel* kernel;
  CorpusBuild build;
};

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const auto& k : hone::test::corpus_kernels()) {
    for (const char* compiler : {"nvcc", "nvrtc"}) {
      for (const char* arch : {"90", "80", "75"}) cases.push_back({&k, {k.file, compiler, arch}});
    }
  }
  return cases;
}

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.kernel->entry << " (" << c.build.compiler << ", sm_" << c.build.arch << ")";
}

std::string case_name(const testing::TestParamInfo<Case>& info) {
  std::string entry = info.param.kernel->entry;
  if (entry == "_Z10fill_valueIfEvPT_S0_i") entry = "fill_value_float"; // the one mangled entry
  return entry + "_" + info.param.build.compiler + "_sm" + info.param.build.arch;
}

// The device's primary context, current on the calling thread. A kernel that faulted leaves it
// unusable (sticky errors); it is reset then, so one failure does not fail every later case.
CUresult use_primary_context() {
  static CUdevice device = 0;
  static CUresult status = [] {
    CUresult r = cuInit(0);
    if (r == CUDA_SUCCESS) r = cuDeviceGet(&device, 0);
    return r;
  }();
  if (status != CUDA_SUCCESS) return status;
  CUcontext ctx = nullptr;
  if (cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx != nullptr &&
      cuCtxSynchronize() == CUDA_SUCCESS) {
    return CUDA_SUCCESS;
  }
  if (ctx != nullptr) {
    cuDevicePrimaryCtxReset(device);
    cuDevicePrimaryCtxRelease(device);
  }
  CUresult r = cuDevicePrimaryCtxRetain(&ctx, device);
  if (r == CUDA_SUCCESS) r = cuCtxSetCurrent(ctx);
  return r;
}

// A kernel's CUfunction, from a module or a library, and how it was loaded.
struct LoadedKernel {
  CUmodule module = nullptr;
  CUlibrary library = nullptr;
  CUfunction function = nullptr;
  std::string how;
  CUresult unload() const { return library ? cuLibraryUnload(library) : cuModuleUnload(module); }
};

// sm_90: cuModuleLoadData. sm_80: cuModuleLoadDataEx with JIT log buffers. sm_75: the CUDA 12
// library API, cuLibraryLoadData then cuLibraryGetKernel and cuKernelGetFunction.
CUresult load(const Case& c, const std::string& ptx, LoadedKernel& out) {
  const char* entry = c.kernel->entry.c_str();
  CUresult r;
  if (c.build.arch == "80") {
    out.how = "cuModuleLoadDataEx";
    static thread_local char info[4096], error[4096];
    CUjit_option options[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                              CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void* values[] = {info, reinterpret_cast<void*>(uintptr_t(sizeof info)), error,
                      reinterpret_cast<void*>(uintptr_t(sizeof error))};
    r = cuModuleLoadDataEx(&out.module, ptx.c_str(), 4, options, values);
    if (r != CUDA_SUCCESS) return r;
  } else if (c.build.arch == "75") {
    out.how = "cuLibraryLoadData";
    r = cuLibraryLoadData(&out.library, ptx.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0);
    if (r != CUDA_SUCCESS) return r;
    CUkernel kernel = nullptr;
    out.how = std::string("cuLibraryGetKernel(") + entry + ")";
    r = cuLibraryGetKernel(&kernel, out.library, entry);
    if (r != CUDA_SUCCESS) return r;
    out.how = "cuKernelGetFunction";
    return cuKernelGetFunction(&out.function, kernel);
  } else {
    out.how = "cuModuleLoadData";
    r = cuModuleLoadData(&out.module, ptx.c_str());
    if (r != CUDA_SUCCESS) return r;
  }
  out.how = std::string("cuModuleGetFunction(") + entry + ")";
  return cuModuleGetFunction(&out.function, out.module, entry);
}

class EmuCorpus : public testing::TestWithParam<Case> {};

TEST_P(EmuCorpus, MatchesHostReference) {
  const Case& c = GetParam();
  const auto& module_ptx = hone::test::compiled(c.build);
  ASSERT_TRUE(module_ptx.error.empty()) << module_ptx.error;
  CUresult r = use_primary_context();
  ASSERT_EQ(r, CUDA_SUCCESS) << "no context: " << hone::test::cu_error_text(r);

  // Each architecture's PTX goes through a different loading path of the driver API.
  LoadedKernel loaded;
  r = load(c, module_ptx.ptx, loaded);
  ASSERT_EQ(r, CUDA_SUCCESS) << loaded.how << " with " << module_ptx.path << ": "
                             << hone::test::cu_error_text(r);
  CUfunction function = loaded.function;

  auto result = hone::test::run_corpus_kernel(*c.kernel, function);
  EXPECT_EQ(loaded.unload(), CUDA_SUCCESS) << loaded.how;

  std::string report;
  for (const auto& line : result.failures) report += "\n  " + line;
  EXPECT_TRUE(result.passed()) << c.kernel->entry << " from " << module_ptx.path << report
                               << "\n  comparison: " << c.kernel->comparison;
  EXPECT_GT(result.totals.launches, 0u);
  if (result.tolerance_used > 0)
    RecordProperty("tolerance_used", std::to_string(result.tolerance_used));
}

INSTANTIATE_TEST_SUITE_P(Corpus, EmuCorpus, testing::ValuesIn(all_cases()), case_name);

// Every kernel the corpus annotates has a launcher here, under its own file, and nothing else.
TEST(EmuCorpusCoverage, EveryAnnotatedKernelHasALauncher) {
  std::set<std::string> annotated;
  for (const auto& file : hone::test::corpus_files()) {
    for (const auto& e : hone::test::expectations(file)) {
      annotated.insert(e.entry);
      const CorpusKernel* k = hone::test::find_corpus_kernel(e.entry);
      ASSERT_NE(k, nullptr) << "no launcher for " << e.entry << " (tests/kernels/" << file
                            << ".cu)";
      EXPECT_EQ(k->file, file) << e.entry;
    }
  }
  std::set<std::string> launched;
  for (const auto& k : hone::test::corpus_kernels()) {
    EXPECT_TRUE(launched.insert(k.entry).second) << "two launchers for " << k.entry;
    EXPECT_TRUE(annotated.count(k.entry))
        << "launcher for " << k.entry << ", which the corpus does not annotate";
    EXPECT_FALSE(k.comparison.empty()) << k.entry;
  }
  EXPECT_EQ(annotated.size(), 56u);
  EXPECT_EQ(launched, annotated);
}

} // namespace
