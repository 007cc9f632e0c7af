// hone on CUDA runtime-API programs (nvcc, -cudart shared, <<<>>>), with real processes on the
// emulated device and its runtime (emu/runtime): the shim identifies their kernels from the
// fatbins they register and counts them exactly; a hot kernel with no source is captured,
// specialized at PTX level, validated, swapped into the running program and served, and
// `honectl disable` puts the original back. The program checks every launch on the host.
#include "daemon_process.hpp"
#include "llm_server.hpp"

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

std::unique_ptr<DaemonProcess> start_daemon(const std::string& config,
                                            std::map<std::string, std::string> env = {}) {
  DaemonOptions o;
  o.config = config;
  o.env = std::move(env);
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
        return shown["result"].value("skipped", json::object()).size() >= 5;
      },
      30s))
      << shown.dump(2) << d->log();
  const json& kernel = shown["result"];
  EXPECT_EQ(kernel.value("ptx", ""), "none: a fatbin with SASS only (sm_90)") << kernel.dump(2);
  for (const char* s : {"specialize", "launch_bounds", "launch_shape", "readonly", "rejit"}) {
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

// ---- coverage: what hone has to work from ------------------------------------------------------
//
// HONE_TEST_HIDE_PTX_ARCH=90 hides the fatbins' compute_90 PTX from honed's strategies, while the
// emulated device still runs it: a kernel is then "newer-arch PTX only" or "SASS only" to the
// strategies, as it is on a GPU for what PyTorch or vLLM ship, and every candidate is validated
// against the original as it runs.

namespace {

const std::map<std::string, std::string> k_hide_90 = {{"HONE_TEST_HIDE_PTX_ARCH", "90"}};

// The coverage entry of `kind` in a status or kernels reply.
json coverage_kind(const json& coverage, const std::string& kind) {
  for (const auto& k : coverage.value("kinds", json::array())) {
    if (k.value("kind", "") == kind) return k;
  }
  return nullptr;
}

// honed's status once some GPU time is estimated (the shim's timed launches have come in), so
// that coverage has shares.
json status_with_time(Ctl& ctl) {
  json status;
  wait_for(
      [&] {
        status = ctl.request({{"cmd", "status"}})["result"];
        return status["coverage"].value("est_gpu_ns", 0) > 0;
      },
      60s);
  return status;
}

// Run `program` until hone has classified its kernel; the kernel's JSON.
json classified(Ctl& ctl) {
  json k;
  wait_for([&] { return !(k = ctl.kernel(k_bucket)).is_null() && k.value("code", "unknown") != "unknown"; },
           120s);
  return k;
}

} // namespace

// compute_100 PTX beside sm_90 SASS: retargeted to sm_90, it is the PTX the strategies work on;
// a specialization of it is validated against the original, swapped in and served.
TEST(Coverage, NewerArchPtxIsRetargetedAndAVariantOfItServes) {
  auto d = start_daemon(agent_config(), k_hide_90);
  ASSERT_TRUE(d);
  BackgroundApp a(app("hone-testapp-serve-rt-newer", d->socket(),
                      {"--seconds", "300", "--n", "1048576", "--rounds", "2"}));
  Ctl ctl(d->socket());
  json k = classified(ctl);
  EXPECT_EQ(k.value("code", ""), "ptx_newer") << k.dump(2);
  EXPECT_EQ(k.value("workable", false), true) << k.dump(2);
  EXPECT_EQ(k.value("ptx", ""), "compute_100 PTX retargeted to sm_90") << k.dump(2);

  json variant;
  ASSERT_TRUE(wait_for(
      [&] { return !(variant = ctl.verified_variant(k_bucket, "specialize")).is_null(); }, 300s))
      << ctl.request({{"cmd", "jobs"}}).dump(2) << d->log();
  ASSERT_TRUE(wait_for([&] { return field(ctl.kernel(k_bucket), "variant_launches") > 0; }, 60s))
      << ctl.kernel(k_bucket).dump(2);

  json status = status_with_time(ctl);
  json newer = coverage_kind(status["coverage"], "ptx_newer");
  EXPECT_EQ(newer.value("kernels", 0), 1) << status["coverage"].dump(2);
  EXPECT_NEAR(newer.value("share", 0.0), 1.0, 1e-9) << status["coverage"].dump(2);
  EXPECT_NEAR(status["coverage"].value("workable_share", 0.0), 1.0, 1e-9);
  RunResult table = run_honectl({"--socket", d->socket(), "kernels"});
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("ptx_newer"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("100% of the estimated GPU time is in kernels hone can work on "
                           "(ptx_newer 100%)"),
            std::string::npos)
      << table.out;
  RunResult st = run_honectl({"--socket", d->socket(), "status"});
  EXPECT_NE(st.out.find("coverage"), std::string::npos) << st.out;
  expect_correct(a);
}

// compute_100a PTX with tcgen05, which sm_90 lacks: refused with the instruction named; the
// kernel is covered by nothing hone can work on, and the strategies that need PTX say why.
TEST(Coverage, NewerArchPtxWithAnInstructionSm90LacksIsNotRetargeted) {
  auto d = start_daemon(agent_config(), k_hide_90);
  ASSERT_TRUE(d);
  BackgroundApp a(app("hone-testapp-serve-rt-sm100a", d->socket(),
                      {"--seconds", "300", "--n", "65536", "--rounds", "2"}));
  Ctl ctl(d->socket());
  json k = classified(ctl);
  EXPECT_EQ(k.value("code", ""), "ptx_newer") << k.dump(2);
  EXPECT_EQ(k.value("workable", true), false) << k.dump(2);
  const std::string why = k.value("ptx", "");
  EXPECT_NE(why.find("not retargetable to sm_90"), std::string::npos) << why;
  EXPECT_NE(why.find("tcgen05"), std::string::npos) << why;
  json shown;
  ASSERT_TRUE(wait_for(
      [&] {
        shown = ctl.request({{"cmd", "show"}, {"target", k_bucket}})["result"];
        return shown.value("skipped", json::object()).contains("specialize");
      },
      60s))
      << shown.dump(2);
  EXPECT_NE(shown["skipped"].value("specialize", "").find("tcgen05"), std::string::npos)
      << shown.dump(2);
  json status = status_with_time(ctl);
  EXPECT_EQ(status["coverage"].value("workable_share", 1.0), 0.0) << status["coverage"].dump(2);
  RunResult table = run_honectl({"--socket", d->socket(), "kernels"});
  EXPECT_NE(table.out.find("ptx_newer (refused)"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("0% of the estimated GPU time is in kernels hone can work on (not: "
                           "ptx_newer 100%)"),
            std::string::npos)
      << table.out;
  expect_correct(a);
}

// SASS only to the strategies, but the PTX it was compiled from is in a Triton-style cache: the
// shim finds it by the cubin's bytes, and a specialization of it is verified and served.
TEST(Coverage, TritonCacheEntryIsFoundAndItsPtxUsed) {
  const std::string program = std::string(HONE_TESTAPP_DIR) + "/hone-testapp-serve-rt-triton";
  TempDir dir;
  const fs::path section = dir.path() / "section.fatbin";
  ASSERT_EQ(std::system(("objcopy -O binary --only-section=.nv_fatbin " + program + " " +
                         section.string())
                            .c_str()),
            0);
  std::string bytes = read_file(section);
  auto fatbin = cuda::parse_fatbin(
      std::span(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()));
  ASSERT_TRUE(fatbin) << fatbin.error().message;
  std::optional<std::vector<std::uint8_t>> cubin;
  std::optional<std::string> ptx;
  for (const auto& e : fatbin->entries) {
    if (e.kind == cuda::EntryKind::elf && e.arch == 90) {
      auto image = cuda::entry_image(e);
      ASSERT_TRUE(image) << image.error().message;
      cubin = *image;
    }
    if (e.kind == cuda::EntryKind::ptx && e.arch == 90) {
      auto text = cuda::entry_ptx(e);
      ASSERT_TRUE(text) << text.error().message;
      ptx = *text;
    }
  }
  ASSERT_TRUE(cubin && ptx);
  // Triton's layout: a directory per compiled kernel, NAME.cubin beside NAME.ptx; other
  // kernels' entries around it.
  const fs::path cache = dir.path() / "triton-cache";
  fs::create_directories(cache / "0b1f0c6e9a" );
  fs::create_directories(cache / "7d2a5be33c");
  std::ofstream(cache / "0b1f0c6e9a" / "other.cubin") << "not this one";
  std::ofstream(cache / "0b1f0c6e9a" / "other.ptx") << "// not this one";
  std::ofstream(cache / "7d2a5be33c" / "bucket.cubin", std::ios::binary)
      .write(reinterpret_cast<const char*>(cubin->data()), std::streamsize(cubin->size()));
  std::ofstream(cache / "7d2a5be33c" / "bucket.ptx") << *ptx;
  std::ofstream(cache / "7d2a5be33c" / "bucket.json") << R"({"name": "bucket"})";

  auto d = start_daemon(agent_config(), k_hide_90);
  ASSERT_TRUE(d);
  AppOptions o = app("hone-testapp-serve-rt-triton", d->socket(),
                     {"--seconds", "300", "--n", "1048576", "--rounds", "2"});
  o.env["TRITON_CACHE_DIR"] = cache.string();
  BackgroundApp a(o);
  Ctl ctl(d->socket());
  json k = classified(ctl);
  EXPECT_EQ(k.value("code", ""), "triton") << k.dump(2) << d->log();
  EXPECT_EQ(k.value("workable", false), true) << k.dump(2);
  EXPECT_NE(k.value("ptx", "").find("Triton cache"), std::string::npos) << k.dump(2);
  EXPECT_NE(d->log().find((cache / "7d2a5be33c" / "bucket.cubin").string()), std::string::npos)
      << d->log();
  json variant;
  ASSERT_TRUE(wait_for(
      [&] { return !(variant = ctl.verified_variant(k_bucket, "specialize")).is_null(); }, 300s))
      << ctl.request({{"cmd", "jobs"}}).dump(2) << d->log();
  ASSERT_TRUE(wait_for([&] { return field(ctl.kernel(k_bucket), "variant_launches") > 0; }, 60s))
      << ctl.kernel(k_bucket).dump(2);
  json status = status_with_time(ctl);
  EXPECT_NEAR(coverage_kind(status["coverage"], "triton").value("share", 0.0), 1.0, 1e-9)
      << status["coverage"].dump(2);
  expect_correct(a);
}

// Without the cache, the same program is SASS only: nothing for the strategies, said as such.
TEST(Coverage, SassOnlyIsReportedAsNothingToWorkOn) {
  auto d = start_daemon(agent_config(), k_hide_90);
  ASSERT_TRUE(d);
  AppOptions o = app("hone-testapp-serve-rt-triton", d->socket(),
                     {"--seconds", "300", "--n", "65536", "--rounds", "2"});
  TempDir empty;
  o.env["TRITON_CACHE_DIR"] = empty.path().string();
  BackgroundApp a(o);
  Ctl ctl(d->socket());
  json k = classified(ctl);
  EXPECT_EQ(k.value("code", ""), "sass") << k.dump(2);
  EXPECT_EQ(k.value("workable", true), false) << k.dump(2);
  EXPECT_EQ(k.value("ptx", ""), "none: a fatbin with SASS only (sm_90)") << k.dump(2);
  json status = status_with_time(ctl);
  EXPECT_NEAR(coverage_kind(status["coverage"], "sass").value("share", 0.0), 1.0, 1e-9)
      << status["coverage"].dump(2);
  EXPECT_EQ(status["coverage"].value("workable_share", 1.0), 0.0);
  expect_correct(a);
}

// A collective kernel (NCCL's, or a server's custom all-reduce) waits on other GPUs: hone never
// asks for its image or its launches, and says why.
TEST(Coverage, CollectiveKernelsAreNeverCapturedOrOptimized) {
  auto d = start_daemon(agent_config());
  ASSERT_TRUE(d);
  auto shim = connect_as(d->socket(), proto::ClientKind::shim);
  ASSERT_TRUE(shim) << shim.error().message;
  const std::string name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
  const std::string image_bytes = "\x7f" "ELF, never asked for";
  ImageHash image = ImageHash::of(image_bytes.data(), image_bytes.size());
  proto::Kernels ks;
  ks.kernels.push_back(
      {1, KernelKey{image, name}, proto::ImageFormat::cubin, image_bytes.size(), false});
  ASSERT_TRUE(shim->send(proto::frame_of(proto::MsgType::kernels, 2, ks)));
  proto::Stats st;
  st.uptime_ns = 1'000'000;
  proto::KernelStats k;
  k.id = 1;
  k.launches = 5000;
  k.sampled = 50;
  k.sampled_ns = 50 * 20000; // 20 us a launch
  k.grid = {32, 1, 1};
  k.block = {512, 1, 1};
  st.kernels = {k};
  ASSERT_TRUE(shim->send(proto::frame_of(proto::MsgType::stats, 3, st)));
  Ctl ctl(d->socket());
  json kernel;
  ASSERT_TRUE(wait_for(
      [&] { return (kernel = ctl.kernel(name)).value("code", "unknown") == "collective"; }, 30s))
      << kernel.dump(2) << d->log();
  EXPECT_EQ(kernel.value("workable", true), false);
  EXPECT_NE(kernel.value("ptx", "").find("never captured"), std::string::npos) << kernel.dump(2);
  // Nothing is asked of the process for it: no image, no capture.
  for (int i = 0; i < 10; ++i) {
    auto f = shim->receive(300ms);
    if (!f) continue;
    if (f->fd >= 0) ::close(f->fd);
    EXPECT_NE(f->header.type, proto::MsgType::image_request);
    EXPECT_NE(f->header.type, proto::MsgType::capture_request);
  }
  json status = status_with_time(ctl);
  EXPECT_NEAR(coverage_kind(status["coverage"], "collective").value("share", 0.0), 1.0, 1e-9)
      << status["coverage"].dump(2);
}

// agent.llm.sass_kernels: a SASS-only kernel (the compute_90 PTX hidden, no Triton cache) is
// rewritten by the model from what it is observed to do; the rewrite relies on the captured scalar
// values (1024 buckets, 2 rounds), is validated on the captured launches, and serves only launches
// with those values. The coverage counts the kernel as one hone can work on.
TEST(Coverage, SassOnlyKernelIsRewrittenFromItsBehaviourWhenEnabled) {
  LlmServer llm;
  const std::string rewrite =
      "Going by the name and the launches, a hash bucketing with the captured constants:\n\n"
      "```cuda\n"
      "extern \"C\" __global__ void hone_candidate(unsigned* out, const unsigned* keys,\n"
      "                                            unsigned n, unsigned buckets, unsigned rounds)\n"
      "{\n"
      "    asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");\n"
      "    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "    if (i >= n) return;\n"
      "    unsigned h = keys[i], slot = 0;\n"
      "#pragma unroll\n"
      "    for (unsigned r = 0; r < 2u; ++r) {\n"
      "        h = h * 2654435761u + r;\n"
      "        h ^= h >> 13;\n"
      "        slot = ((slot + h) & 1023u) + (h >> 10);\n"
      "    }\n"
      "    out[i] = slot;\n"
      "}\n"
      "```\n";
  llm.push(LlmResponse::chat(rewrite, 900));
  std::string config = agent_config() + "\n[agent.llm]\nenabled = true\nbase_url = \"" +
                       llm.base_url() +
                       "\"\nmodel = \"scripted\"\nmax_turns = 1\nsass_kernels = true\n"
                       "request_timeout_s = 30\n";
  auto d = start_daemon(config, k_hide_90);
  ASSERT_TRUE(d);
  AppOptions o = app("hone-testapp-serve-rt-triton", d->socket(),
                     {"--seconds", "300", "--n", "1048576", "--rounds", "2", "--buckets", "1024"});
  TempDir empty;
  o.env["TRITON_CACHE_DIR"] = empty.path().string();
  BackgroundApp a(o);
  Ctl ctl(d->socket());
  json k = classified(ctl);
  EXPECT_EQ(k.value("code", ""), "sass") << k.dump(2);
  EXPECT_EQ(k.value("workable", false), true) << k.dump(2);
  json variant;
  ASSERT_TRUE(wait_for(
      [&] { return !(variant = ctl.verified_variant(k_bucket, "llm")).is_null(); }, 300s))
      << ctl.request({{"cmd", "jobs"}}).dump(2) << d->log();
  ASSERT_TRUE(wait_for([&] { return field(ctl.kernel(k_bucket), "variant_launches") > 0; }, 60s))
      << ctl.kernel(k_bucket).dump(2);
  // The prompt had the behaviour, not the code; the variant is guarded by the scalar values.
  ASSERT_GE(llm.requests().size(), 1u);
  const std::string prompt = llm.requests()[0].body;
  EXPECT_NE(prompt.find("machine code only"), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("hone_rt::bucket<unsigned int>"), std::string::npos) << prompt;
  json shown = ctl.request({{"cmd", "show"}, {"target", variant.value("id", "")}})["result"];
  EXPECT_EQ(shown["guard"].value("scalars", 0), 3) << shown["guard"].dump(2); // n, buckets, rounds
  EXPECT_EQ(shown["guard"]["block"], json::array({128, 1, 1})) << shown["guard"].dump(2);
  json status = status_with_time(ctl);
  EXPECT_NEAR(status["coverage"].value("workable_share", 0.0), 1.0, 1e-9)
      << status["coverage"].dump(2);
  expect_correct(a);
}
