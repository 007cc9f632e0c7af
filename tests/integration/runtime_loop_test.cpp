// hone on CUDA runtime-API programs (nvcc, -cudart shared, <<<>>>), with real processes on the
// emulated device and its runtime (emu/runtime): the shim identifies their kernels from the
// fatbins they register and counts them exactly; a hot kernel with no source is captured,
// specialized at PTX level, validated, swapped into the running program and served, and
// `honectl disable` puts the original back. The program checks every launch on the host.
#include "daemon_process.hpp"

#include "common/identity.hpp"
#include "cuda/fatbin.hpp"

#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <regex>
#include <span>
#include <sstream>
#include <thread>

using namespace hone;
using namespace hone::test;
using namespace std::chrono_literals;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// hone_rt::bucket<unsigned>(unsigned*, const unsigned*, unsigned, unsigned, unsigned)
constexpr const char* k_bucket = "_ZN7hone_rt6bucketIjEEvPT_PKS1_jjj";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string agent_config() {
  return emu_agent_config(HONE_EMU_LIBRARY_DIR);
}

std::unique_ptr<DaemonProcess> start_daemon(const std::string& config) {
  DaemonOptions o;
  o.config = config;
  o.env.emplace("HONE_EMU_INSTRUCTION_BUDGET", "400000000");
  auto d = DaemonProcess::start(std::move(o));
  if (!d) {
    ADD_FAILURE() << d.error().message;
    return nullptr;
  }
  return std::move(*d);
}

AppOptions app(const std::string& name, const std::string& socket, std::vector<std::string> args) {
  AppOptions o;
  o.program = std::string(HONE_TESTAPP_DIR) + "/" + name;
  o.args = std::move(args);
  o.socket = socket;
  o.shim = HONE_SHIM_LIBRARY;
  o.driver_dir = HONE_EMU_LIBRARY_DIR; // the emulated libcuda.so.1 and libcudart.so.13
  o.env["HONE_LOG"] = "info";
  return o;
}

uint64_t field(const json& kernel, const char* name) {
  return kernel.is_null() ? 0 : kernel.value(name, uint64_t(0));
}

void expect_correct(BackgroundApp& a) {
  RunResult r = a.finish();
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("mismatches 0"), std::string::npos) << r.out << r.err;
}

} // namespace

// The workload as an nvcc program: every kernel known by the ImageHash of the fatbin it
// registered (what cudart hands cuLibraryLoadData), counted exactly, results as without hone.
TEST(RuntimeApp, KernelsAreIdentifiedFromTheRegisteredFatbinAndCountedExactly) {
  // The program's .nv_fatbin section holds two containers: a placeholder ELF and the one its
  // translation unit registers (__fatBinC_Wrapper_t::data points there), which carries the PTX.
  std::string section = read_file(HONE_TESTAPP_RUNTIME_SHARED_FATBIN);
  auto parsed = cuda::parse_fatbin(
      std::span(reinterpret_cast<const uint8_t*>(section.data()), section.size()));
  ASSERT_TRUE(parsed) << parsed.error().message;
  std::optional<cuda::FatbinContainer> registered;
  for (const auto& e : parsed->entries) {
    if (e.kind != cuda::EntryKind::ptx) continue;
    ASSERT_FALSE(registered && registered->offset != parsed->containers[e.container].offset);
    registered = parsed->containers[e.container];
  }
  ASSERT_TRUE(registered) << "no PTX in the program's fatbin";
  ImageHash image = ImageHash::of(section.data() + registered->offset,
                                  registered->header_size + registered->fat_size);

  RunOptions plain;
  plain.env["LD_LIBRARY_PATH"] = HONE_EMU_LIBRARY_DIR;
  RunResult base = run_program({HONE_TESTAPP_RUNTIME_SHARED}, plain);
  ASSERT_EQ(base.exit_code, 0) << base.out << base.err;
  ASSERT_NE(base.out.find("workload: check ok"), std::string::npos) << base.out;

  DaemonOptions o;
  o.config = "[server]\nreport_interval_ms = 200\n[optimizer]\nenabled = false\n";
  auto d = DaemonProcess::start(std::move(o));
  ASSERT_TRUE(d) << d.error().message;
  BackgroundApp a(app("hone-testapp-runtime-shared", (*d)->socket(), {}));
  RunResult r = a.finish();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, base.out);
  Ctl ctl((*d)->socket());
  const std::pair<const char*, uint64_t> expected[] = {
      {"saxpy", 7}, {"_Z8mix_bitsPjji", 5}, {"_ZN9hone_test4blurEPKiPii", 3}};
  for (const auto& [name, launches] : expected) {
    SCOPED_TRACE(name);
    json k;
    ASSERT_TRUE(wait_for([&] { return field(k = ctl.kernel(name), "launches") == launches; }, 30s))
        << ctl.request({{"cmd", "kernels"}}).dump(2);
    EXPECT_EQ(k.value("image", ""), image.hex());
    EXPECT_EQ(k.value("format", ""), "fatbin");
  }
}

// The whole loop on a runtime-API program, through each way it can launch: a `<<<>>>` or
// cudaLaunchKernel launch (both reach the driver as a CUkernel in the current context) on the
// legacy default stream, the per-thread default stream of a --default-stream per-thread build,
// or a created stream.
struct LoopCase {
  const char* name;
  const char* program;
  std::vector<std::string> args;
};
void PrintTo(const LoopCase& c, std::ostream* os) {
  *os << c.name;
}

class RuntimeLoop : public ::testing::TestWithParam<LoopCase> {};

TEST_P(RuntimeLoop, PtxLevelCandidateIsValidatedSwappedServedAndDisabled) {
  auto d = start_daemon(agent_config());
  ASSERT_TRUE(d);
  // A million keys, each mixed twice: the kernel is not launch-bound.
  std::vector<std::string> args{"--seconds", "300", "--n", "1048576", "--rounds", "2"};
  args.insert(args.end(), GetParam().args.begin(), GetParam().args.end());
  BackgroundApp a(app(GetParam().program, d->socket(), args));
  Ctl ctl(d->socket());

  // No source: the kernel came in a fatbin, so specialization works on its PTX.
  json variant;
  ASSERT_TRUE(wait_for(
      [&] { return !(variant = ctl.verified_variant(k_bucket, "specialize")).is_null(); }, 300s))
      << ctl.request({{"cmd", "jobs"}}).dump(2) << d->log();
  EXPECT_GT(variant.value("speedup", 0.0), 1.05) << variant.dump(2);
  // Stored for the device the program named once it initialized CUDA (its hello came first).
  EXPECT_EQ(variant.value("arch", ""), "sm_90") << variant.dump(2);
  json jobs = ctl.request({{"cmd", "jobs"}});
  bool ptx_level = false;
  for (const auto& j : jobs["result"]["jobs"]) {
    std::string what = j.value("description", "");
    if (j.value("strategy", "") == "specialize" && j.value("verdict", "") == "verified" &&
        what.find("PTX level") != std::string::npos && what.find("reduced") != std::string::npos) {
      ptx_level = true;
    }
  }
  EXPECT_TRUE(ptx_level) << jobs.dump(2);
  json kernel = ctl.kernel(k_bucket);
  EXPECT_EQ(kernel.value("source_known", true), false) << kernel.dump(2);
  EXPECT_EQ(kernel.value("format", ""), "fatbin") << kernel.dump(2);

  // Swapped into the running program and serving its launches.
  ASSERT_TRUE(wait_for([&] { return field(ctl.kernel(k_bucket), "variant_launches") > 0; }, 60s))
      << ctl.kernel(k_bucket).dump(2) << d->log();

  // honectl disable: the original runs again. Once the shim has heard (the next launches), the
  // variant's count stops while the program keeps launching.
  RunResult disabled = run_honectl({"--socket", d->socket(), "disable", k_bucket});
  ASSERT_EQ(disabled.exit_code, 0) << disabled.out << disabled.err;
  json before;
  ASSERT_TRUE(wait_for(
      [&] {
        json k1 = ctl.kernel(k_bucket);
        std::this_thread::sleep_for(300ms); // a report interval: let counts move if they move
        json k2 = ctl.kernel(k_bucket);
        before = k2;
        return field(k2, "launches") > field(k1, "launches") &&
               field(k2, "variant_launches") == field(k1, "variant_launches");
      },
      30s))
      << ctl.kernel(k_bucket).dump(2);
  uint64_t launches = field(before, "launches");
  ASSERT_TRUE(
      wait_for([&] { return field(ctl.kernel(k_bucket), "launches") > launches + 10; }, 60s));
  EXPECT_EQ(field(ctl.kernel(k_bucket), "variant_launches"), field(before, "variant_launches"))
      << "the variant kept serving after disable";

  expect_correct(a);
}

INSTANTIATE_TEST_SUITE_P(
    Launches, RuntimeLoop,
    ::testing::Values(
        LoopCase{"chevron_legacy", "hone-testapp-serve-rt", {}},
        LoopCase{"api_per_thread_build", "hone-testapp-serve-rt-pt", {"--launch", "api"}},
        LoopCase{"chevron_created_stream", "hone-testapp-serve-rt-pt", {"--stream", "created"}}),
    [](const ::testing::TestParamInfo<LoopCase>& i) { return std::string(i.param.name); });

// A program that brings NVIDIA's runtime (nvcc's default, -cudart static) cannot run on the
// emulated device: its CUDA calls fail, and the emulated driver says how to build it instead.
TEST(RuntimeApp, StaticRuntimeFailsWithAMessageThatSaysToBuildShared) {
  RunOptions plain;
  plain.env["LD_LIBRARY_PATH"] = HONE_EMU_LIBRARY_DIR;
  RunResult r = run_program({HONE_TESTAPP_RUNTIME}, plain);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("cudaErrorNotSupported"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("nvcc -cudart shared"), std::string::npos) << r.err;
}

// A kernel whose fatbin carries SASS only (what most of PyTorch and cuBLAS ship for sm_90): the
// emulated device cannot run it, and a runtime-API program says so with a clear error...
TEST(RuntimeApp, SassOnlyProgramFailsWithNoKernelImageOnTheEmulatedDevice) {
  RunOptions plain;
  plain.env["LD_LIBRARY_PATH"] = HONE_EMU_LIBRARY_DIR;
  RunResult r = run_program(
      {std::string(HONE_TESTAPP_DIR) + "/hone-testapp-serve-rt-sass", "--iterations", "1"}, plain);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.out.find("cudaErrorNoKernelImageForDevice"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("code=compute_90"), std::string::npos) << r.err;
}

// ...and on a GPU, where it runs, hone observes it and its strategies that need PTX skip it, with
// the reason where an operator looks (`honectl show`). A process speaking the shim's protocol
// reports the kernel and hands over the image as the shim does.
TEST(RuntimeApp, SassOnlyKernelIsSkippedByPtxStrategiesWithTheReasonInShow) {
  std::string fatbin = read_file(HONE_TESTAPP_SASS_FATBIN);
  auto size = cuda::image_size(fatbin.data(), fatbin.size());
  ASSERT_TRUE(size) << size.error().message;
  fatbin.resize(*size);
  ImageHash image = ImageHash::of(fatbin.data(), fatbin.size());
  auto d = start_daemon(agent_config());
  ASSERT_TRUE(d);
  auto shim = connect_as(d->socket(), proto::ClientKind::shim);
  ASSERT_TRUE(shim) << shim.error().message;
  proto::Kernels ks;
  ks.kernels.push_back(
      {1, KernelKey{image, k_bucket}, proto::ImageFormat::fatbin, fatbin.size(), false});
  ASSERT_TRUE(shim->send(proto::frame_of(proto::MsgType::kernels, 2, ks)));
  proto::Stats st;
  st.uptime_ns = 1'000'000;
  proto::KernelStats k;
  k.id = 1;
  k.launches = 500;
  k.grid = {32, 1, 1};
  k.block = {128, 1, 1};
  st.kernels = {k};
  ASSERT_TRUE(shim->send(proto::frame_of(proto::MsgType::stats, 3, st)));
  // The daemon asks for the image; answer it with the bytes in a memfd.
  bool answered = false;
  for (int i = 0; i < 20 && !answered; ++i) {
    auto f = shim->receive(5s);
    ASSERT_TRUE(f) << f.error().message << d->log();
    if (f->fd >= 0) ::close(f->fd);
    if (f->header.type != proto::MsgType::image_request) continue;
    int fd = ::memfd_create("image", MFD_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, fatbin.data(), fatbin.size()), ssize_t(fatbin.size()));
    proto::Image msg;
    msg.image = image;
    msg.available = true;
    msg.format = proto::ImageFormat::fatbin;
    msg.size = fatbin.size();
    ASSERT_TRUE(shim->send(proto::frame_of(proto::MsgType::image, 4, msg, proto::k_flag_fd), fd));
    ::close(fd);
    answered = true;
  }
  ASSERT_TRUE(answered) << d->log();
  Ctl ctl(d->socket());
  json shown;
  ASSERT_TRUE(wait_for(
      [&] {
        shown = ctl.request({{"cmd", "show"}, {"target", k_bucket}});
        return shown["result"].value("skipped", json::object()).size() >= 4;
      },
      30s))
      << shown.dump(2) << d->log();
  const json& kernel = shown["result"];
  EXPECT_EQ(kernel.value("ptx", ""), "none: a fatbin with SASS only (sm_90)") << kernel.dump(2);
  for (const char* s : {"specialize", "launch_bounds", "readonly", "rejit"}) {
    EXPECT_EQ(kernel["skipped"].value(s, ""), "no PTX: a fatbin with SASS only (sm_90)")
        << s << "\n"
        << kernel.dump(2);
  }
  RunResult table = run_honectl({"--socket", d->socket(), "show", k_bucket});
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("none: a fatbin with SASS only (sm_90)"), std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("skipped by specialize"), std::string::npos) << table.out;
}
