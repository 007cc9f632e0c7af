// The CUDA corpus (tests/kernels) compiled at test time by nvcc and by NVRTC for sm_75, sm_80 and
// sm_90: every module round-trips through the parser and printer, the printed PTX assembles with
// ptxas, and the analysis of every kernel matches the corpus's `hone-expect` annotations.
#include "corpus.hpp"
#include "ptx/analysis.hpp"
#include "ptx/parser.hpp"
#include "ptx/printer.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;
using namespace hone;
using namespace hone::test;

namespace {

std::string expected_access(const ptx::ParamInfo& p) {
  if (p.aggregate && p.is_pointer()) {
    std::string s = "struct(";
    for (size_t i = 0; i < p.pointers.size(); ++i) {
      if (i) s += ",";
      s += std::to_string(p.pointers[i].offset) + ":" + ptx::access_string(p.pointers[i].access);
    }
    return s + ")";
  }
  return p.is_pointer() ? ptx::access_string(p.access()) : "-";
}

class CorpusModule : public ::testing::TestWithParam<CorpusBuild> {};

TEST_P(CorpusModule, RoundTripsAssemblesAndAnalyzes) {
  const CorpusBuild& b = GetParam();
  const CompiledModule& cm = compiled(b);
  ASSERT_TRUE(cm.error.empty()) << cm.error;

  auto module = ptx::parse(cm.ptx, cm.path);
  ASSERT_TRUE(module.has_value()) << module.error().message;

  // print(parse(x)) parses to the same IR, and printing is a fixed point.
  std::string printed = ptx::print(*module);
  auto again = ptx::parse(printed, cm.path + " (printed)");
  ASSERT_TRUE(again.has_value()) << again.error().message;
  EXPECT_TRUE(*again == *module) << "printed module parses to a different IR";
  EXPECT_EQ(ptx::print(*again), printed);

  // ptxas assembles the printed module for the architecture it was written for.
  std::string printed_path = cm.path + ".printed.ptx";
  {
    std::ofstream out(printed_path);
    out << printed;
  }
  auto ptxas = run_command({HONE_PTXAS, "-arch=sm_" + b.arch, printed_path, "-o", "/dev/null"});
  EXPECT_EQ(ptxas.status, 0) << "ptxas rejected " << printed_path << ":\n" << ptxas.output;

  // The analysis of each annotated kernel.
  auto infos = ptx::analyze(*module);
  const auto& expects = expectations(b.file);
  ASSERT_FALSE(expects.empty()) << "no hone-expect annotations in " << b.file;
  for (const auto& e : expects) {
    auto it = std::find_if(infos.begin(), infos.end(),
                           [&](const ptx::EntryInfo& i) { return i.name == e.entry; });
    ASSERT_NE(it, infos.end()) << "entry " << e.entry << " missing from " << cm.path;
    ASSERT_EQ(it->params.size(), e.params.size()) << e.entry;
    for (size_t i = 0; i < e.params.size(); ++i) {
      EXPECT_EQ(expected_access(it->params[i]), e.params[i].second)
          << e.entry << " parameter " << e.params[i].first << " (" << it->params[i].name << ")";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Corpus, CorpusModule, ::testing::ValuesIn(all_builds()),
                         [](const ::testing::TestParamInfo<CorpusBuild>& info) {
                           return info.param.id();
                         });

TEST(Corpus, HasAtLeastThirtyKernels) {
  size_t kernels = 0;
  for (const auto& f : corpus_files()) kernels += expectations(f).size();
  EXPECT_GE(kernels, 30u);
}

} // namespace
