// The emulated device's two execution paths agree bit for bit: every corpus kernel runs through the
// interpreter (HONE_EMU_EXEC=interpret) and its compiled code (HONE_EMU_EXEC=compile, emu/jit/), at
// every shape its launcher checks, with the fixed schedule and zeroed shared and local memory, and
// under a scheduling seed and a fill seed (the same number for both); every buffer read back and
// every launch's modeled time must be identical, and so must what the launcher's checks found, and
// the interpreter's run must pass the launcher's checks against its host reference. (The frozen
// reference interpreter these were once both compared with is retired: emu/README.md, "Execution
// paths".)
//
// Blocks run on one host thread here (HONE_EMU_THREADS=1, set before the driver starts its pool):
// the corpus's NONDETERMINISTIC kernels (float atomics, compaction order, CAS loops) give results
// and retry counts that depend on how blocks on several threads interleave, on either path.
#include "corpus.hpp"
#include "corpus_launch.hpp"
#include "primary_context.hpp"

#include <cuda.h>
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

const bool k_one_thread = setenv("HONE_EMU_THREADS", "1", 1) == 0;
// The driver's debug log names the path each launch ran: proof that both paths did run (read once,
// when the driver starts).
const bool k_debug_log = setenv("HONE_EMU_LOG", "debug", 1) == 0;

using hone::test::CorpusBuild;
using hone::test::CorpusKernel;
using hone::test::CorpusRunResult;

struct Case {
  const CorpusKernel* kernel;
  CorpusBuild build;
  // HONE_EMU_SCHEDULE_SEED and HONE_EMU_FILL_SEED, or nullptr for the fixed schedule and zeroed
  // memory
  const char* seed;
};

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const auto& k : hone::test::corpus_kernels()) {
    cases.push_back({&k, {k.file, "nvcc", "90"}, nullptr});
    cases.push_back({&k, {k.file, "nvcc", "90"}, "24301"});
    cases.push_back({&k, {k.file, "nvrtc", "80"}, nullptr});
  }
  return cases;
}

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.kernel->entry << " (" << c.build.compiler << ", sm_" << c.build.arch << ", seed "
      << (c.seed ? c.seed : "none") << ")";
}

std::string case_name(const testing::TestParamInfo<Case>& info) {
  std::string entry = info.param.kernel->entry;
  if (entry == "_Z10fill_valueIfEvPT_S0_i") entry = "fill_value_float";
  return entry + "_" + info.param.build.compiler + "_sm" + info.param.build.arch +
         (info.param.seed ? std::string("_seed") + info.param.seed : std::string());
}

CUresult use_context() { return hone::test::use_primary_context(); }

// One run on `path`; `log` gets what the driver wrote to stderr meanwhile.
CorpusRunResult run_with(const char* path, const Case& c, const std::string& ptx,
                         std::string& log) {
  testing::internal::CaptureStderr();
  setenv("HONE_EMU_EXEC", path, 1);
  CUmodule module = nullptr;
  CorpusRunResult result;
  CUresult r = cuModuleLoadData(&module, ptx.c_str());
  if (r != CUDA_SUCCESS) {
    result.failures.push_back("cuModuleLoadData: " + hone::test::cu_error_text(r));
    unsetenv("HONE_EMU_EXEC");
    log = testing::internal::GetCapturedStderr();
    return result;
  }
  CUfunction f = nullptr;
  r = cuModuleGetFunction(&f, module, c.kernel->entry.c_str());
  if (r == CUDA_SUCCESS) {
    result = hone::test::run_corpus_kernel(*c.kernel, f);
  } else {
    result.failures.push_back("cuModuleGetFunction: " + hone::test::cu_error_text(r));
  }
  cuModuleUnload(module);
  unsetenv("HONE_EMU_EXEC");
  log = testing::internal::GetCapturedStderr();
  return result;
}

class ExecEquivalence : public testing::TestWithParam<Case> {};

// `other` (the compiled path's run) computed, read back and modeled exactly what `ref` (the
// interpreter's) did.
void expect_same(const CorpusRunResult& ref, const CorpusRunResult& other, const char* path) {
  std::string ref_report, other_report;
  for (const auto& l : ref.failures) ref_report += "\n  " + l;
  for (const auto& l : other.failures) other_report += "\n  " + l;
  EXPECT_EQ(other_report, ref_report) << "the " << path << " path's checks differ from the interpreter's";
  EXPECT_EQ(other.totals.launches, ref.totals.launches) << path;
  EXPECT_EQ(other.totals.threads, ref.totals.threads) << path;
  ASSERT_EQ(other.readback_digests.size(), ref.readback_digests.size()) << path;
  for (size_t i = 0; i < ref.readback_digests.size(); ++i)
    EXPECT_EQ(other.readback_digests[i], ref.readback_digests[i]) << path << ": buffer read back #" << i;
  ASSERT_EQ(other.launch_ms.size(), ref.launch_ms.size()) << path;
  for (size_t i = 0; i < ref.launch_ms.size(); ++i) {
    EXPECT_EQ(std::bit_cast<uint32_t>(other.launch_ms[i]), std::bit_cast<uint32_t>(ref.launch_ms[i]))
        << "modeled time of launch #" << i << ": " << path << " " << other.launch_ms[i]
        << " ms, interpreter " << ref.launch_ms[i] << " ms";
  }
}

TEST_P(ExecEquivalence, InterpreterAndCompiledCodeMatchBitForBit) {
  const Case& c = GetParam();
  const auto& module_ptx = hone::test::compiled(c.build);
  ASSERT_TRUE(module_ptx.error.empty()) << module_ptx.error;
  ASSERT_TRUE(k_one_thread && k_debug_log);
  ASSERT_EQ(use_context(), CUDA_SUCCESS);
  if (c.seed) {
    setenv("HONE_EMU_SCHEDULE_SEED", c.seed, 1);
    setenv("HONE_EMU_FILL_SEED", c.seed, 1);
  }
  std::string interp_log, compiled_log;
  const CorpusRunResult interp = run_with("interpret", c, module_ptx.ptx, interp_log);
  const CorpusRunResult compiled = run_with("compile", c, module_ptx.ptx, compiled_log);
  unsetenv("HONE_EMU_SCHEDULE_SEED");
  unsetenv("HONE_EMU_FILL_SEED");
  // Each path ran what it was asked to: otherwise the comparisons below compare a path with
  // itself. The compiled path must have run compiled code, not only the interpreter.
  EXPECT_NE(interp_log.find("; interpreted"), std::string::npos) << interp_log.substr(0, 2000);
  EXPECT_EQ(interp_log.find("; compiled code"), std::string::npos) << interp_log.substr(0, 2000);
  EXPECT_EQ(compiled_log.find("; interpreted"), std::string::npos) << compiled_log.substr(0, 2000);
  EXPECT_NE(compiled_log.find("; compiled code, "), std::string::npos) << compiled_log.substr(0, 2000);
  EXPECT_EQ(compiled_log.find("; compiled code, 0 of"), std::string::npos)
      << "compiled code ran none of a launch: " << compiled_log.substr(0, 2000);

  EXPECT_TRUE(interp.passed()) << "the interpreter failed the launcher's checks";
  ASSERT_GT(interp.totals.launches, 0u);
  expect_same(interp, compiled, "compiled");
}

INSTANTIATE_TEST_SUITE_P(Corpus, ExecEquivalence, testing::ValuesIn(all_cases()), case_name);

} // namespace
