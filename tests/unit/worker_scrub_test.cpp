// The scrub (daemon/worker/scrub.hpp): its PTX as ptxas compiles it for Hopper (the frame kept),
// and its launches on the emulated device at the device's limits. What it does to a GPU's shared
// memory only a GPU shows (tests/gpu/run.sh, "scrub").
#include "common/job.hpp"
#include "cuda/driver_api.hpp"
#include "daemon/worker/device.hpp"
#include "daemon/worker/scrub.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include <sys/wait.h>

namespace hone::worker {
namespace {

const std::string k_driver = HONE_BINARY_DIR "/lib/emu/libcuda.so.1";

// Run `cmd` through the shell; its exit status and its stdout and stderr together.
std::pair<int, std::string> shell(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return {-1, "popen failed"};
  char buf[4096];
  size_t n;
  while ((n = ::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// [validation] gpu_scrub reaches the worker in the job, beside the other flags.
TEST(Scrub, TheJobCarriesWhetherToScrub) {
  for (bool scrub : {true, false}) {
    Job j;
    j.gpu_scrub = scrub;
    j.static_checks = !scrub;
    j.check = JobCheck::validate;
    auto b = decode_bundle(encode_bundle(j, {}));
    ASSERT_TRUE(b) << b.error().message;
    EXPECT_EQ(b->job.gpu_scrub, scrub);
    EXPECT_EQ(b->job.static_checks, !scrub);
    EXPECT_EQ(b->job.check, JobCheck::validate);
  }
}

TEST(Scrub, LocalFramesAreRoundedAndCapped) {
  EXPECT_EQ(scrub_local_frame(-1), 0u);
  EXPECT_EQ(scrub_local_frame(0), 0u);
  EXPECT_EQ(scrub_local_frame(1), 16u);
  EXPECT_EQ(scrub_local_frame(48), 48u);
  EXPECT_EQ(scrub_local_frame(1 << 20), k_scrub_local_max);
  EXPECT_EQ(scrub_ptx(0).find(k_scrub_local_entry), std::string::npos);
  EXPECT_NE(scrub_ptx(48).find(".b8 hone_scrub_frame[48]"), std::string::npos);
}

// The module must assemble for Hopper (the emulated device accepts some forms ptxas refuses,
// such as `.volatile` on `.local`), and the local entry's frame must come out at its declared size:
// the slots the scrub writes are laid out by it. (The stores are volatile so that no ptxas may
// drop them as dead; ptxas 13.0 keeps them either way, and the toolkit here has no disassembler
// to show more than the frame.)
TEST(Scrub, PtxasForHopperKeepsTheLocalFrame) {
  auto dir = std::filesystem::temp_directory_path() / ("hone-scrub-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  { std::ofstream(dir / "scrub.ptx") << scrub_ptx(256); }
  auto [rc, log] = shell(std::string(HONE_PTXAS) + " -arch=sm_90 -v -o " +
                         (dir / "scrub.cubin").string() + " " + (dir / "scrub.ptx").string());
  std::filesystem::remove_all(dir);
  ASSERT_EQ(rc, 0) << log;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      log, m,
      std::regex("Compiling entry function 'hone_scrub_local'[^]*?(\\d+) bytes stack frame")))
      << log;
  EXPECT_EQ(m[1], "256") << log;
}

// On the emulated device the fill seed does the scrub's work, so the worker does not scrub there;
// asked to anyway, both kernels launch at the device's limits (all the shared memory a block may
// opt in to, a local frame) and complete.
TEST(Scrub, RunsOnTheEmulatedDeviceOnlyWhenAsked) {
  auto api = cuda::DriverApi::open(k_driver);
  ASSERT_TRUE(api) << api.error().message;
  auto device = Device::open(*api);
  ASSERT_TRUE(device) << device.error().message;
  Device& d = **device;
  ASSERT_TRUE(d.emulated());
  EXPECT_FALSE(d.scrub(1, 64));
  EXPECT_NE(d.scrub_unavailable().find("fill seed"), std::string::npos) << d.scrub_unavailable();
  EXPECT_TRUE(d.scrub(1, 16, true)) << d.scrub_unavailable();
  EXPECT_TRUE(d.scrub(2, 0, true)) << d.scrub_unavailable();
  EXPECT_TRUE(d.healthy());
}

} // namespace
} // namespace hone::worker
