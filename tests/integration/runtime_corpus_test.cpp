// The runtime-API corpus (tests/runtime: nvcc programs built with -cudart shared) on the emulated
// device and its runtime (emu/runtime), each program three ways: alone; under libhone.so with no
// daemon to talk to (the shim runs fail-open); and under libhone.so attached to the in-process test
// daemon, which must hear of the program's kernels, known by the fatbin they came in. Every run
// must exit 0, print `<name>: ok`, and print exactly what the program printed alone.
#include "daemon_process.hpp"
#include "test_server.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

using namespace hone;
using namespace hone::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> corpus_programs() {
  std::vector<std::string> out;
  std::stringstream s(HONE_RUNTIME_CORPUS);
  for (std::string name; std::getline(s, name, ',');) {
    if (!name.empty()) out.push_back(name);
  }
  return out;
}

std::string program_path(const std::string& name) {
  return std::string(HONE_RUNTIME_CORPUS_DIR) + "/" + name;
}

RunOptions on_the_emulated_device() {
  RunOptions o;
  o.timeout = 120s;
  o.env["LD_LIBRARY_PATH"] = HONE_EMU_LIBRARY_DIR;
  o.env["LD_PRELOAD"] = "";
  o.env["HONE_LOG"] = "warn";
  return o;
}

RunOptions under_the_shim(const std::string& socket) {
  RunOptions o = on_the_emulated_device();
  o.env["LD_PRELOAD"] = HONE_SHIM_LIBRARY;
  o.env["HONE_SOCKET"] = socket;
  o.env["HONE_REPORT_MS"] = "100";
  o.env["HONE_SAMPLE_EVERY"] = "2";
  return o;
}

std::string describe(const RunResult& r) {
  return "exit " + std::to_string(r.exit_code) + (r.timed_out ? " (timed out)" : "") +
         "\n--- stdout\n" + r.out + "--- stderr\n" + r.err;
}

class RuntimeCorpus : public ::testing::TestWithParam<std::string> {};

} // namespace

TEST(RuntimeCorpusList, HasTheKindsOfProgramsRealCodeHas) {
  auto programs = corpus_programs();
  EXPECT_GE(programs.size(), 15u);
  for (const auto& p : programs) EXPECT_TRUE(fs::exists(program_path(p))) << p;
}

TEST_P(RuntimeCorpus, RunsTheSameWithAndWithoutTheShim) {
  const std::string name = GetParam();
  const std::string program = program_path(name);
  RunResult alone = run_program({program}, on_the_emulated_device());
  ASSERT_EQ(alone.exit_code, 0) << describe(alone);
  ASSERT_NE(alone.out.find(name + ": ok"), std::string::npos) << describe(alone);

  // No daemon: the shim stays out of the way.
  TempDir dir("hone-rt-corpus");
  RunResult fail_open = run_program({program}, under_the_shim((dir.path() / "none.sock").string()));
  EXPECT_EQ(fail_open.exit_code, 0) << describe(fail_open);
  EXPECT_EQ(fail_open.out, alone.out);

  // A daemon: the same output, and the program's kernels reported from the fatbin it registered.
  TestServer server;
  RunResult attached = run_program({program}, under_the_shim(server.socket_path()));
  EXPECT_EQ(attached.exit_code, 0) << describe(attached);
  EXPECT_EQ(attached.out, alone.out);
  ASSERT_TRUE(server.wait_until(
      [&](const ServerLog& log) {
        for (const auto& c : log.connections) {
          if (c.hello && c.goodbye && !c.kernels.empty()) return true;
        }
        return false;
      },
      10s))
      << "the daemon never heard of " << name << "'s kernels: " <<
      [&] {
        std::string d;
        for (const auto& c : server.snapshot().connections) {
          d += "\n  connection: hello " + std::to_string(c.hello.has_value()) + ", goodbye " +
               std::to_string(c.goodbye) + ", kernels " + std::to_string(c.kernels.size()) +
               ", closed " + std::to_string(c.closed) + " " + c.protocol_error;
        }
        return d;
      }()
      << describe(attached);
  ServerLog log = server.snapshot();
  uint64_t launches = 0;
  for (const auto& c : log.connections) {
    if (!c.hello) continue;
    EXPECT_TRUE(c.protocol_error.empty()) << c.protocol_error;
    for (const auto& k : c.kernels) {
      EXPECT_EQ(k.format, proto::ImageFormat::fatbin) << k.key.entry;
      EXPECT_FALSE(k.key.image.empty()) << k.key.entry;
    }
    for (const auto& [key, st] : c.stats_by_key()) launches += st.launches;
  }
  EXPECT_GT(launches, 0u);
}

INSTANTIATE_TEST_SUITE_P(Programs, RuntimeCorpus, ::testing::ValuesIn(corpus_programs()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// The per-thread default stream build really calls the runtime's per-thread entry points, and every
// program binds its runtime calls to libcudart.so.13 (the version node hone's runtime defines).
TEST(RuntimeCorpusList, ProgramsBindTheSharedRuntimeAndThePerThreadBuildItsPtszEntryPoints) {
  RunResult pt = run_program({"/usr/bin/objdump", "-T", program_path("per_thread")});
  ASSERT_EQ(pt.exit_code, 0) << pt.err;
  EXPECT_NE(pt.out.find("(libcudart.so.13) cudaLaunchKernel_ptsz"), std::string::npos) << pt.out;
  EXPECT_NE(pt.out.find("(libcudart.so.13) cudaMemcpy_ptds"), std::string::npos) << pt.out;
  for (const auto& name : corpus_programs()) {
    RunResult r = run_program({"/usr/bin/objdump", "-T", program_path(name)});
    EXPECT_NE(r.out.find("(libcudart.so.13) __cudaRegisterFatBinary"), std::string::npos) << name;
  }
}
