// Writes the seeds of remote_object_fuzz, import_file_fuzz and capture_file_fuzz with hone's own
// encoders (remote_object::encode, export_file::write, capture_files::write), so that the seeds
// are exactly what honed publishes, `honectl export` writes and honed persists: make_seeds
// SEEDS_DIR (tests/fuzz/seeds). The content is the kernel the fatbin seeds hold (axpy, nvcc 13.0
// PTX for sm_90, seeds/fatbin/nvcc_sm90.ptx) as a submitted variant, and a capture of one launch
// of it as the shim takes it (two buffers, one read and one written).
#include "daemon/capture_files.hpp"
#include "store/export_file.hpp"
#include "store/records.hpp"
#include "store/remote_object.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

using namespace hone;
using namespace hone::store;
namespace fs = std::filesystem;

namespace {

// The key remote_object_fuzz signs and verifies with.
const remote_object::FleetKey k_key{"hone fuzz fleet key: not a secret, 48 bytes long"};

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "make_seeds: %s\n", what.c_str());
  std::exit(1);
}

std::string read(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) die("cannot read " + file.string());
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void put(const fs::path& file, const std::string& bytes) {
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary) << bytes;
  std::printf("%s: %zu bytes\n", file.c_str(), bytes.size());
}

std::string record(const VariantRecord& v) {
  auto bytes = records::encode(v);
  if (!bytes) die("encode: " + bytes.error().message);
  return *bytes;
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 2) die("usage: make_seeds SEEDS_DIR");
  const fs::path seeds = argv[1];
  const std::string ptx = read(seeds / "fatbin" / "nvcc_sm90.ptx");
  const std::string cubin = read(seeds / "fatbin" / "nvcc_sm90.cubin");

  // The application's kernel is the sm_90 cubin's axpy; the variant a submitted PTX of it.
  VariantRecord v;
  v.kernel = KernelKey{ImageHash::of(cubin.data(), cubin.size()), "axpy"};
  v.arch = "sm_90";
  v.driver_major = 13;
  v.strategy = "submit";
  v.format = proto::ImageFormat::ptx;
  v.image = ptx + '\0';
  v.entry = "axpy";
  v.jit_options = {"CU_JIT_OPTIMIZATION_LEVEL=4"};
  v.guard.block = {256, 1, 1};
  v.guard.scalars.push_back(ScalarGuard{3, 20, std::string("\x00\x10\x00\x00", 4)});
  v.state = VariantState::verified;
  v.speedup = 1.31;
  v.noise = 0.02;
  v.verdict = "verified";
  v.evidence_json = R"({"inputs":1,"compared":["y"],"median_ns":[5120,3904]})";
  v.created = 1764930000;
  v.id = variant_id_of(v);
  VariantRecord withdrawn = v;
  withdrawn.jit_options.clear();
  withdrawn.state = VariantState::disabled;
  withdrawn.verdict = "disabled by an operator";
  withdrawn.id = variant_id_of(withdrawn);
  const std::vector<std::string> one = {record(v)};
  const std::vector<std::string> two = {record(v), record(withdrawn)};

  // Each seed is checked to decode as the fleet decodes it: a seed the parser refuses at once
  // would leave the fuzzer nothing deeper to mutate.
  auto object = [&](const char* name, const std::vector<std::string>& records, bool sign) {
    const std::string bytes = remote_object::encode(records, sign ? &k_key : nullptr);
    auto d = remote_object::decode(bytes, &k_key, sign, uint64_t(1) << 20);
    if (!d || d->records != records || d->signed_by_fleet != sign) {
      die(std::string(name) + " does not decode");
    }
    put(seeds / "remote" / name, bytes);
  };
  object("signed_one_variant", one, true);
  object("signed_withdrawn", two, true);
  object("unsigned_one_variant", one, false);
  object("unsigned_empty", {}, false);

  const fs::path scratch = fs::temp_directory_path() / ("hone-make-seeds-" + std::to_string(getpid()));
  fs::create_directories(scratch);
  for (auto& [name, records] : {std::pair{"one_variant.hone", one}, {"two_variants.hone", two},
                                {"empty.hone", std::vector<std::string>{}}}) {
    if (auto w = export_file::write(scratch / name, records); !w) die("export: " + w.error().message);
    const std::string bytes = read(scratch / name);
    auto parsed = export_file::parse(bytes);
    if (!parsed || parsed->size() != records.size()) die(std::string(name) + " does not parse");
    put(seeds / "import" / name, bytes);
  }

  // One launch of axpy(float a, const float* x, float* y, int n) over 64 floats: x read, y
  // written, both captured before and y after, as the shim lays the data out.
  Capture c;
  c.request = 7;
  c.kernel = 2;
  c.key = v.kernel;
  c.grid = {1, 1, 1};
  c.block = {64, 1, 1};
  c.params = {{0, 4}, {8, 8}, {16, 8}, {24, 4}};
  c.param_bytes.assign(28, '\0');
  const float a = 2.0f;
  const uint64_t x = 0x7f0000000000, y = 0x7f0000001000;
  const int32_t n = 64;
  std::memcpy(c.param_bytes.data(), &a, 4);
  std::memcpy(c.param_bytes.data() + 8, &x, 8);
  std::memcpy(c.param_bytes.data() + 16, &y, 8);
  std::memcpy(c.param_bytes.data() + 24, &n, 4);
  c.buffers.push_back(CaptureBuffer{1, 0, x, x, 256, 0, ~0ull});
  c.buffers.push_back(CaptureBuffer{2, 0, y, y, 256, 256, 512});
  c.data_bytes = 768;
  c.arch = "sm_90";
  c.pointers_from_analysis = true;
  std::string data(768, '\0');
  for (int i = 0; i < 64; ++i) {
    const float xi = float(i), yi = 1.0f, out = a * xi + yi;
    std::memcpy(data.data() + 4 * i, &xi, 4);
    std::memcpy(data.data() + 256 + 4 * i, &yi, 4);
    std::memcpy(data.data() + 512 + 4 * i, &out, 4);
  }
  const int fd = ::memfd_create("make-seeds", MFD_CLOEXEC);
  if (fd < 0 || ::write(fd, data.data(), data.size()) != ssize_t(data.size())) die("memfd");
  const fs::path captures = scratch / "captures";
  auto file = daemon::capture_files::write(captures, c, fd);
  if (!file) die("capture: " + file.error().message);
  const std::string bytes = read(*file);
  std::vector<std::string> problems;
  auto loaded = daemon::capture_files::load_all(captures, &problems);
  if (loaded.size() != 1 || !problems.empty() || loaded[0].meta.data_bytes != data.size()) {
    die("the capture file does not load");
  }
  put(seeds / "capture" / "axpy_64_floats.cap", bytes);
  ::close(fd);
  fs::remove_all(scratch);
  return 0;
}
