// The shim's bookkeeping of JIT links (shim/links.hpp): what each link state was given, as
// cuLinkComplete hands it to the registry.
#include "shim/links.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <unistd.h>

using namespace hone;
using namespace hone::shim;

namespace {
int g_a, g_b; // two link-state handles
}

TEST(ShimLinks, KeepsEachStatesInputsInOrderUntilDestroyed) {
  Links links;
  links.created(&g_a);
  links.created(&g_b);
  EXPECT_FALSE(links.inputs(&g_a).has_value()) << "no input yet";
  const char ptx[] = ".version 9.0\n.entry k()\n{\n\tret;\n}\n";
  // The size nvrtcGetPTXSize gives counts the NUL; the text is kept without it.
  links.added(&g_a, k_jit_input_ptx, "k.cl", ptx, sizeof ptx);
  links.added(&g_a, 0 /* cubin */, "helpers.cubin", "\x7f" "ELF", 4);
  links.added(&g_b, k_jit_input_ptx, nullptr, ptx, 12);

  auto a = links.inputs(&g_a);
  ASSERT_TRUE(a.has_value());
  ASSERT_EQ(a->inputs.size(), 2u);
  EXPECT_EQ(a->inputs[0].type, k_jit_input_ptx);
  EXPECT_EQ(a->inputs[0].name, "k.cl");
  EXPECT_EQ(a->inputs[0].ptx, std::string(ptx));
  EXPECT_EQ(a->inputs[0].ptx_size, sizeof ptx - 1);
  EXPECT_FALSE(a->inputs[0].from_nvrtc) << "the registry decides that";
  EXPECT_EQ(a->inputs[1].type, 0u);
  EXPECT_EQ(a->inputs[1].name, "helpers.cubin");
  EXPECT_TRUE(a->inputs[1].ptx.empty()) << "only PTX is kept as text";

  auto b = links.inputs(&g_b);
  ASSERT_TRUE(b.has_value());
  ASSERT_EQ(b->inputs.size(), 1u);
  EXPECT_EQ(b->inputs[0].ptx, std::string(ptx, 12)) << "no further than the size given";
  EXPECT_EQ(b->inputs[0].name, "");

  EXPECT_EQ(links.size(), 2u);
  links.destroyed(&g_a);
  EXPECT_FALSE(links.inputs(&g_a).has_value());
  EXPECT_TRUE(links.inputs(&g_b).has_value());
  // A handle the driver hands out again starts with no inputs.
  links.created(&g_b);
  EXPECT_FALSE(links.inputs(&g_b).has_value());
  links.destroyed(&g_b);
  EXPECT_EQ(links.size(), 0u);
}

TEST(ShimLinks, ReadsPtxFilesWithinTheirLimit) {
  const char* tmp = std::getenv("TMPDIR");
  std::string path = std::string(tmp ? tmp : "/tmp") + "/hone-links-" + std::to_string(::getpid());
  {
    std::ofstream out(path);
    out << ".version 9.0\n";
  }
  EXPECT_EQ(read_small_file(path.c_str(), 1024), ".version 9.0\n");
  EXPECT_EQ(read_small_file(path.c_str(), 4), "") << "over the limit: not read";
  EXPECT_EQ(read_small_file((path + ".absent").c_str(), 1024), "");
  EXPECT_EQ(read_small_file(nullptr, 1024), "");
  std::remove(path.c_str());
}
