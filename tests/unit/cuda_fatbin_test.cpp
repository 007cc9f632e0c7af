// Tests for cuda/fatbin: image detection and sizing, fatbin parsing, LZ4/zstd decoding, PTX
// selection, and robustness against truncated and corrupted input.
//
// Real fatbins are made at test time with the toolkit's nvcc (HONE_NVCC), once per compression
// variant, and checked against `nvcc -ptx` for the same kernel; synthetic containers cover what
// nvcc does not emit (unknown kinds, odd layouts, malformed fields).
#include "cuda/fatbin.hpp"
#include "cuda/triton_cache.hpp"

#include <fatbinary_section.h>
#include <lz4.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#ifndef HONE_NVCC
#define HONE_NVCC "nvcc"
#endif

namespace hone::cuda {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

constexpr const char* k_kernel = R"(
extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
)";

// sm_75 cubin + compute_75 PTX + compute_90 PTX.
constexpr const char* k_gencode = "-gencode arch=compute_75,code=[sm_75,compute_75] "
                                  "-gencode arch=compute_90,code=compute_90";

struct Variant {
  const char* name;
  const char* flags;
  bool needs_compress_mode;
};

const Variant k_variants[] = {
    {"plain", "", false},
    {"compress_all", "-Xfatbin -compress-all", false},
    {"mode_default", "-Xfatbin -compress-all --compress-mode=default", true},
    {"mode_size", "-Xfatbin -compress-all --compress-mode=size", true},
    {"mode_speed", "-Xfatbin -compress-all --compress-mode=speed", true},
    {"mode_balance", "-Xfatbin -compress-all --compress-mode=balance", true},
    {"mode_none", "--compress-mode=none", true},
};

Bytes read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string read_text(const fs::path& path) {
  const Bytes bytes = read_file(path);
  return std::string(bytes.begin(), bytes.end());
}

std::string shell_quote(const fs::path& path) {
  return "'" + path.string() + "'";
}

// The fatbins, made once for the whole test program: nvcc runs in parallel (about a second each).
struct Corpus {
  fs::path dir;
  std::string nvcc = std::getenv("HONE_NVCC") ? std::getenv("HONE_NVCC") : HONE_NVCC;
  bool have_nvcc = false;
  bool have_compress_mode = false;
  std::string problem; // why nvcc could not be used

  Corpus() {
    char pattern[] = "/tmp/hone_fatbin_test_XXXXXX";
    if (const char* made = ::mkdtemp(pattern)) dir = made;
    if (dir.empty()) {
      problem = "cannot create a temporary directory";
      return;
    }
    const fs::path help = dir / "nvcc_help.txt";
    if (std::system((shell_quote(nvcc) + " --help > " + shell_quote(help) + " 2>&1").c_str()) !=
        0) {
      problem = "nvcc (" + nvcc + ") does not run; set HONE_NVCC to the toolkit's nvcc";
      return;
    }
    have_nvcc = true;
    have_compress_mode = read_text(help).find("--compress-mode") != std::string::npos;
    std::ofstream(dir / "k.cu") << k_kernel;
    std::string script = "cd " + shell_quote(dir) + " && {";
    for (const Variant& v : k_variants) {
      if (v.needs_compress_mode && !have_compress_mode) continue;
      script += " " + shell_quote(nvcc) + " -fatbin " + k_gencode + " " + v.flags + " k.cu -o " +
                v.name + ".fatbin > " + v.name + ".log 2>&1 &";
    }
    for (const char* arch : {"75", "90"}) {
      script += " " + shell_quote(nvcc) + " -ptx -arch=compute_" + arch + " k.cu -o k" + arch +
                ".ptx > ptx" + arch + ".log 2>&1 &";
    }
    script += " wait; }";
    if (std::system(script.c_str()) != 0) problem = "nvcc runs failed: " + script;
  }
  ~Corpus() {
    std::error_code ignored;
    if (!dir.empty()) fs::remove_all(dir, ignored);
  }

  Bytes fatbin(const std::string& name) const { return read_file(dir / (name + ".fatbin")); }
  std::string log(const std::string& name) const { return read_text(dir / (name + ".log")); }
  std::string ptx(const std::string& arch) const { return read_text(dir / ("k" + arch + ".ptx")); }
};

const Corpus& corpus() {
  static const Corpus instance;
  return instance;
}

#define REQUIRE_NVCC()                                                                             \
  do {                                                                                             \
    if (!corpus().have_nvcc) GTEST_SKIP() << "skipping: " << corpus().problem;                     \
  } while (0)

// fatbinary keeps PTX tokens but drops comments and rewrites whitespace, so compare token lines:
// comments removed, whitespace runs collapsed, blank lines dropped.
std::string normalize_ptx(std::string_view text) {
  std::string out;
  std::istringstream lines{std::string(text)};
  for (std::string line; std::getline(lines, line);) {
    if (auto comment = line.find("//"); comment != std::string::npos) line.resize(comment);
    std::string collapsed;
    std::istringstream words(line);
    for (std::string word; words >> word;) collapsed += (collapsed.empty() ? "" : " ") + word;
    if (!collapsed.empty()) out += collapsed + "\n";
  }
  return out;
}

std::string first_token(std::string_view text) {
  const std::string normalized = normalize_ptx(text);
  return normalized.substr(0, normalized.find(' '));
}

const FatbinEntry* find_entry(const Fatbin& fatbin, EntryKind kind, std::uint32_t arch) {
  for (const FatbinEntry& e : fatbin.entries) {
    if (e.kind == kind && e.arch == arch) return &e;
  }
  return nullptr;
}

// --- Real fatbins from nvcc --------------------------------------------------------------------

class NvccFatbinTest : public ::testing::TestWithParam<Variant> {};

TEST_P(NvccFatbinTest, EntriesDecodeToWhatNvccProduced) {
  REQUIRE_NVCC();
  const Variant& v = GetParam();
  if (v.needs_compress_mode && !corpus().have_compress_mode) {
    GTEST_SKIP() << "skipping: this nvcc has no --compress-mode";
  }
  const Bytes bytes = corpus().fatbin(v.name);
  ASSERT_FALSE(bytes.empty()) << "nvcc failed for " << v.name << ":\n" << corpus().log(v.name);

  // Image level: detected and sized from the bytes alone, as cuModuleLoadData must.
  EXPECT_EQ(detect_image_format(bytes.data(), k_unknown_size), ImageFormat::fatbin);
  auto size = image_size(bytes.data());
  ASSERT_TRUE(size) << size.error().message;
  EXPECT_EQ(*size, bytes.size());
  auto view = locate_image(bytes.data(), bytes.size());
  ASSERT_TRUE(view) << view.error().message;
  EXPECT_EQ(view->format, ImageFormat::fatbin);
  EXPECT_EQ(view->bytes.data(), bytes.data());
  EXPECT_EQ(view->bytes.size(), bytes.size());

  auto fatbin = parse_fatbin(bytes);
  ASSERT_TRUE(fatbin) << fatbin.error().message;
  ASSERT_EQ(fatbin->containers.size(), 1u);
  EXPECT_EQ(fatbin->containers[0].version, 1);
  EXPECT_EQ(fatbin->containers[0].header_size, 16);
  EXPECT_EQ(fatbin->containers[0].fat_size + 16, bytes.size());
  ASSERT_EQ(fatbin->entries.size(), 3u);

  const FatbinEntry* elf75 = find_entry(*fatbin, EntryKind::elf, 75);
  const FatbinEntry* ptx75 = find_entry(*fatbin, EntryKind::ptx, 75);
  const FatbinEntry* ptx90 = find_entry(*fatbin, EntryKind::ptx, 90);
  ASSERT_TRUE(elf75 && ptx75 && ptx90);
  EXPECT_EQ(arch_name(*elf75), "sm_75");
  EXPECT_EQ(arch_name(*ptx75), "compute_75");
  EXPECT_EQ(arch_name(*ptx90), "compute_90");

  for (const FatbinEntry& e : fatbin->entries) {
    SCOPED_TRACE(describe(e));
    EXPECT_EQ(e.container, 0u);
    EXPECT_NE(e.flags & fatbin_flags::k_64bit, 0u);
    EXPECT_NE(e.flags & fatbin_flags::k_host_linux, 0u);
    EXPECT_GE(e.header_size, 64u);
    EXPECT_TRUE(e.identifier.empty());
    if (e.compression != Compression::none) {
      EXPECT_EQ(e.payload.size(), e.compressed_size);
      EXPECT_LE(e.compressed_size, e.payload_size);
    }
    auto image = entry_image(e);
    ASSERT_TRUE(image) << image.error().message;
    if (e.compression != Compression::none) {
      EXPECT_EQ(image->size(), e.uncompressed_size);
    }
  }

  // The cubin is a whole ELF whose size its own headers give.
  auto elf = entry_image(*elf75);
  ASSERT_TRUE(elf);
  ASSERT_GE(elf->size(), 64u);
  EXPECT_EQ(std::memcmp(elf->data(),
                        "\x7f"
                        "ELF",
                        4),
            0);
  EXPECT_EQ(detect_image_format(elf->data(), elf->size()), ImageFormat::cubin);
  auto elf_size = image_size(elf->data(), elf->size());
  ASSERT_TRUE(elf_size) << elf_size.error().message;
  EXPECT_LE(*elf_size, elf->size());
  EXPECT_GT(*elf_size + 8, elf->size()); // at most the fatbin's 8-byte padding beyond it
  EXPECT_EQ(*image_size(elf->data()), *elf_size);

  // PTX: the same tokens `nvcc -ptx` printed for that arch.
  for (const auto& [entry, arch] : {std::pair{ptx75, "75"}, std::pair{ptx90, "90"}}) {
    auto text = entry_ptx(*entry);
    ASSERT_TRUE(text) << text.error().message;
    EXPECT_EQ(text->find('\0'), std::string::npos);
    EXPECT_EQ(first_token(*text), ".version");
    EXPECT_NE(text->find(std::string(".target sm_") + arch), std::string::npos);
    EXPECT_EQ(normalize_ptx(*text), normalize_ptx(corpus().ptx(arch)));
    EXPECT_EQ(detect_image_format(text->c_str(), k_unknown_size), ImageFormat::ptx);
    EXPECT_EQ(*image_size(text->c_str()), text->size() + 1);
  }

  // What each mode stores, as observed with nvcc 13.0; the point is that both decoders run.
  const std::string name = v.name;
  for (const FatbinEntry& e : fatbin->entries) {
    if (name == "mode_none") {
      EXPECT_EQ(e.compression, Compression::none);
    }
    if (name == "compress_all" || name == "mode_size") {
      EXPECT_NE(e.compression, Compression::none) << describe(e);
    }
  }
  if (name == "mode_speed") {
    EXPECT_TRUE(
        std::any_of(fatbin->entries.begin(), fatbin->entries.end(),
                    [](const FatbinEntry& e) { return e.compression == Compression::lz4; }));
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, NvccFatbinTest, ::testing::ValuesIn(k_variants),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(NvccFatbin, BothLz4AndZstdAreExercised) {
  REQUIRE_NVCC();
  if (!corpus().have_compress_mode) GTEST_SKIP() << "skipping: this nvcc has no --compress-mode";
  std::set<Compression> seen;
  for (const Variant& v : k_variants) {
    const Bytes bytes = corpus().fatbin(v.name);
    auto fatbin = parse_fatbin(bytes);
    ASSERT_TRUE(fatbin) << v.name << ": " << fatbin.error().message;
    for (const FatbinEntry& e : fatbin->entries) seen.insert(e.compression);
  }
  EXPECT_TRUE(seen.count(Compression::lz4)) << "no LZ4 entry in any nvcc fatbin";
  EXPECT_TRUE(seen.count(Compression::zstd)) << "no zstd entry in any nvcc fatbin";
  EXPECT_TRUE(seen.count(Compression::none));
}

TEST(NvccFatbin, SelectPtxPicksHighestArchNotAboveTarget) {
  REQUIRE_NVCC();
  const Bytes bytes = corpus().fatbin("plain");
  auto fatbin = parse_fatbin(bytes);
  ASSERT_TRUE(fatbin) << fatbin.error().message;
  auto arch_of = [&](std::uint32_t target) -> int {
    const FatbinEntry* e = select_ptx(*fatbin, target);
    if (e == nullptr) return -1;
    EXPECT_EQ(e->kind, EntryKind::ptx);
    return static_cast<int>(e->arch);
  };
  EXPECT_EQ(arch_of(70), -1);
  EXPECT_EQ(arch_of(75), 75);
  EXPECT_EQ(arch_of(86), 75);
  EXPECT_EQ(arch_of(89), 75);
  EXPECT_EQ(arch_of(90), 90);
  EXPECT_EQ(arch_of(120), 90);
}

TEST(NvccFatbin, WrapperIsFollowedToItsFatbin) {
  REQUIRE_NVCC();
  const Bytes bytes = corpus().fatbin("plain");
  ASSERT_FALSE(bytes.empty());
  // Aligned like the real .nv_fatbin data the wrapper points at.
  std::vector<unsigned long long> aligned((bytes.size() + 7) / 8);
  std::memcpy(aligned.data(), bytes.data(), bytes.size());
  __fatBinC_Wrapper_t wrapper{FATBINC_MAGIC, FATBINC_VERSION, aligned.data(), nullptr};

  EXPECT_EQ(detect_image_format(&wrapper, sizeof wrapper), ImageFormat::fatbin_wrapper);
  EXPECT_FALSE(image_size(&wrapper, sizeof wrapper));
  auto inner = unwrap_fatbin(&wrapper);
  ASSERT_TRUE(inner) << inner.error().message;
  EXPECT_EQ(*inner, aligned.data());
  for (std::size_t max : {sizeof wrapper, k_unknown_size}) {
    auto view = locate_image(&wrapper, max);
    ASSERT_TRUE(view) << view.error().message;
    EXPECT_EQ(view->format, ImageFormat::fatbin);
    EXPECT_EQ(static_cast<const void*>(view->bytes.data()), aligned.data());
    EXPECT_EQ(view->bytes.size(), bytes.size());
  }
  EXPECT_FALSE(locate_image(&wrapper, 12)) << "truncated wrapper must not be read";

  __fatBinC_Wrapper_t bad_version = wrapper;
  bad_version.version = 7;
  EXPECT_FALSE(locate_image(&bad_version, sizeof bad_version));
  __fatBinC_Wrapper_t null_data = wrapper;
  null_data.data = nullptr;
  auto null_view = locate_image(&null_data, sizeof null_data);
  ASSERT_FALSE(null_view);
  EXPECT_NE(null_view.error().message.find("null"), std::string::npos);
  // parse_fatbin says what to do with a wrapper instead of misreading it.
  auto misuse = parse_fatbin({reinterpret_cast<const std::uint8_t*>(&wrapper), sizeof wrapper});
  ASSERT_FALSE(misuse);
  EXPECT_NE(misuse.error().message.find("locate_image"), std::string::npos);
}

TEST(NvccFatbin, ConcatenatedContainersAreAllParsed) {
  REQUIRE_NVCC();
  const Bytes a = corpus().fatbin("plain");
  const Bytes b = corpus().fatbin("compress_all");
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  Bytes blob = a;
  blob.insert(blob.end(), b.begin(), b.end());
  blob.insert(blob.end(), 8, 0); // alignment padding between containers
  blob.insert(blob.end(), a.begin(), a.end());
  blob.insert(blob.end(), 16, 0); // trailing padding
  auto fatbin = parse_fatbin(blob);
  ASSERT_TRUE(fatbin) << fatbin.error().message;
  ASSERT_EQ(fatbin->containers.size(), 3u);
  EXPECT_EQ(fatbin->containers[1].offset, a.size());
  EXPECT_EQ(fatbin->containers[2].offset, a.size() + b.size() + 8);
  ASSERT_EQ(fatbin->entries.size(), 9u);
  for (std::size_t i = 0; i < 9; ++i) EXPECT_EQ(fatbin->entries[i].container, i / 3);
  for (const FatbinEntry& e : fatbin->entries) EXPECT_TRUE(entry_image(e)) << describe(e);
  // The size of the image at the start is the first container only (cuModuleLoadData).
  EXPECT_EQ(*image_size(blob.data(), blob.size()), a.size());

  Bytes garbage = a;
  garbage.insert(garbage.end(), {0, 0, 'x', 'y', 'z'});
  auto bad = parse_fatbin(garbage);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("offset " + std::to_string(a.size() + 2)), std::string::npos)
      << bad.error().message;
}

// --- Robustness: truncation and corruption never crash, hang or over-read ----------------------

// Exercise every reader on `bytes`; any outcome but a crash (or a sanitizer report) passes. Returns
// whether the container parsed.
bool exercise(const Bytes& bytes) {
  // A copy sized exactly, so ASan sees any read past the end.
  auto exact = std::make_unique<std::uint8_t[]>(std::max<std::size_t>(bytes.size(), 1));
  std::copy(bytes.begin(), bytes.end(), exact.get());
  (void)detect_image_format(exact.get(), bytes.size());
  (void)image_size(exact.get(), bytes.size());
  (void)locate_image(exact.get(), bytes.size());
  auto fatbin = parse_fatbin({exact.get(), bytes.size()});
  if (!fatbin) {
    EXPECT_FALSE(fatbin.error().message.empty());
    return false;
  }
  const std::uint8_t* begin = exact.get();
  const std::uint8_t* end = begin + bytes.size();
  for (const FatbinEntry& e : fatbin->entries) {
    EXPECT_TRUE(e.payload.empty() || (e.payload.data() >= begin && e.payload.data() <= end &&
                                      e.payload.size() <= std::size_t(end - e.payload.data())));
    auto image = entry_image(e);
    if (image && e.kind == EntryKind::elf) {
      (void)image_size(image->data(), image->size());
      (void)detect_image_format(image->data(), image->size());
    }
    if (e.kind == EntryKind::ptx) (void)entry_ptx(e);
    (void)describe(e);
  }
  (void)select_ptx(*fatbin, 90);
  return true;
}

std::vector<std::string> robustness_variants() {
  std::vector<std::string> names = {"plain", "compress_all"};
  if (corpus().have_compress_mode) names.push_back("mode_speed");
  return names;
}

TEST(NvccFatbinRobustness, EveryTruncationIsAnError) {
  REQUIRE_NVCC();
  for (const std::string& name : robustness_variants()) {
    SCOPED_TRACE(name);
    const Bytes bytes = corpus().fatbin(name);
    ASSERT_FALSE(bytes.empty());
    for (std::size_t length = 0; length < bytes.size(); ++length) {
      const Bytes prefix(bytes.begin(), bytes.begin() + length);
      EXPECT_FALSE(exercise(prefix)) << "prefix of " << length << " bytes parsed";
      auto size = image_size(prefix.data(), length);
      EXPECT_FALSE(size && length >= 16) << "prefix of " << length << " bytes sized";
    }
    EXPECT_TRUE(exercise(bytes));
  }
}

TEST(NvccFatbinRobustness, TruncatedCubinsAreNotOverRead) {
  REQUIRE_NVCC();
  const Bytes bytes = corpus().fatbin("plain");
  auto fatbin = parse_fatbin(bytes);
  ASSERT_TRUE(fatbin);
  const FatbinEntry* elf = find_entry(*fatbin, EntryKind::elf, 75);
  ASSERT_TRUE(elf);
  auto image = entry_image(*elf);
  ASSERT_TRUE(image);
  const std::size_t full = *image_size(image->data(), image->size());
  for (std::size_t length = 0; length < full; ++length) {
    auto exact = std::make_unique<std::uint8_t[]>(std::max<std::size_t>(length, 1));
    std::copy_n(image->begin(), length, exact.get());
    EXPECT_FALSE(image_size(exact.get(), length)) << length;
  }
}

TEST(NvccFatbinRobustness, EveryHeaderByteCorrupted) {
  REQUIRE_NVCC();
  for (const std::string& name : robustness_variants()) {
    SCOPED_TRACE(name);
    const Bytes bytes = corpus().fatbin(name);
    auto fatbin = parse_fatbin(bytes);
    ASSERT_TRUE(fatbin);
    std::vector<std::size_t> positions;
    for (std::size_t i = 0; i < 16; ++i) positions.push_back(i);
    for (const FatbinEntry& e : fatbin->entries) {
      for (std::size_t i = 0; i < e.header_size; ++i) positions.push_back(e.offset + i);
    }
    for (std::size_t pos : positions) {
      for (std::uint8_t value : {0x00, 0x01, 0x7f, 0x80, 0xff}) {
        Bytes corrupt = bytes;
        corrupt[pos] = value;
        exercise(corrupt);
        corrupt[pos] = static_cast<std::uint8_t>(bytes[pos] ^ value);
        exercise(corrupt);
      }
    }
  }
}

TEST(NvccFatbinRobustness, EveryCompressedPayloadByteCorrupted) {
  REQUIRE_NVCC();
  for (const std::string& name : robustness_variants()) {
    const Bytes bytes = corpus().fatbin(name);
    auto fatbin = parse_fatbin(bytes);
    ASSERT_TRUE(fatbin);
    for (const FatbinEntry& e : fatbin->entries) {
      if (e.compression == Compression::none) continue;
      SCOPED_TRACE(name + " " + describe(e));
      for (std::size_t i = 0; i < e.payload.size(); ++i) {
        for (std::uint8_t flip : {0x01, 0x10, 0xff}) {
          Bytes payload(e.payload.begin(), e.payload.end());
          payload[i] ^= flip;
          FatbinEntry corrupt = e;
          corrupt.payload = payload;
          auto image = entry_image(corrupt);
          if (image) {
            EXPECT_EQ(image->size(), e.uncompressed_size);
          }
        }
      }
    }
  }
}

TEST(NvccFatbinRobustness, RandomCorruption) {
  REQUIRE_NVCC();
  std::mt19937 rng(20240613); // fixed: a failure must reproduce
  for (const std::string& name : robustness_variants()) {
    SCOPED_TRACE(name);
    const Bytes bytes = corpus().fatbin(name);
    ASSERT_FALSE(bytes.empty());
    std::uniform_int_distribution<std::size_t> pos(0, bytes.size() - 1);
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_int_distribution<int> count(1, 8);
    for (int iteration = 0; iteration < 3000; ++iteration) {
      Bytes corrupt = bytes;
      for (int k = count(rng); k > 0; --k) corrupt[pos(rng)] = static_cast<std::uint8_t>(byte(rng));
      exercise(corrupt);
    }
  }
}

// --- Synthetic containers: layouts nvcc does not produce ----------------------------------------

void put16(Bytes& b, std::size_t at, std::uint16_t v) {
  for (int i = 0; i < 2; ++i) b[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
}
void put32(Bytes& b, std::size_t at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
}
void put64(Bytes& b, std::size_t at, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) b[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
}

struct SyntheticEntry {
  std::uint16_t kind = 1;
  std::uint32_t arch = 80;
  std::uint64_t flags = fatbin_flags::k_64bit | fatbin_flags::k_host_linux;
  std::string payload;
  std::string identifier;
  std::string options;
  std::uint32_t compressed_size = 0;
  std::uint64_t uncompressed_size = 0;
};

SyntheticEntry synthetic(std::uint16_t kind, std::uint32_t arch, std::string payload) {
  SyntheticEntry entry;
  entry.kind = kind;
  entry.arch = arch;
  entry.payload = std::move(payload);
  return entry;
}

std::size_t pad8(std::size_t n) {
  return (n + 7) / 8 * 8;
}

// Lays an entry out as fatbinary does: 64-byte header, then identifier, options descriptor and
// options in the header's tail (offsets from the entry start), then the payload padded to 8.
Bytes make_entry(const SyntheticEntry& s) {
  std::size_t header = 64;
  const std::size_t identifier_at = header;
  header += pad8(s.identifier.size());
  const std::size_t descriptor_at = header;
  if (!s.options.empty()) header += 8;
  const std::size_t options_at = header;
  header += pad8(s.options.size());
  Bytes b(header + pad8(s.payload.size()), 0);
  put16(b, 0x00, s.kind);
  put16(b, 0x02, 0x0101);
  put32(b, 0x04, static_cast<std::uint32_t>(header));
  put64(b, 0x08, pad8(s.payload.size()));
  put32(b, 0x10, s.compressed_size);
  put32(b, 0x14, s.options.empty() ? 0 : static_cast<std::uint32_t>(descriptor_at));
  put16(b, 0x18, 0);
  put16(b, 0x1A, 8);
  put32(b, 0x1C, s.arch);
  put32(b, 0x20, s.identifier.empty() ? 0 : static_cast<std::uint32_t>(identifier_at));
  put32(b, 0x24, static_cast<std::uint32_t>(s.identifier.size()));
  put64(b, 0x28, s.flags);
  put64(b, 0x38, s.uncompressed_size);
  std::copy(s.identifier.begin(), s.identifier.end(), b.begin() + identifier_at);
  if (!s.options.empty()) {
    put32(b, descriptor_at, static_cast<std::uint32_t>(options_at));
    put32(b, descriptor_at + 4, static_cast<std::uint32_t>(s.options.size()));
    std::copy(s.options.begin(), s.options.end(), b.begin() + options_at);
  }
  std::copy(s.payload.begin(), s.payload.end(), b.begin() + header);
  return b;
}

Bytes make_container(const std::vector<SyntheticEntry>& entries) {
  Bytes body;
  for (const SyntheticEntry& e : entries) {
    const Bytes b = make_entry(e);
    body.insert(body.end(), b.begin(), b.end());
  }
  Bytes out(16, 0);
  put32(out, 0, k_fatbin_magic);
  put16(out, 4, 1);
  put16(out, 6, 16);
  put64(out, 8, body.size());
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

const std::string k_ptx_text = "\n.version 8.0\n.target sm_80\n.address_size 64\n";

TEST(SyntheticFatbin, IdentifierOptionsAndUnknownKinds) {
  SyntheticEntry ptx = synthetic(1, 80, k_ptx_text + std::string(1, '\0'));
  ptx.identifier = "kernel.cu";
  ptx.options = "-O2  ";
  const SyntheticEntry other = synthetic(0x10, 90, "opaque");
  const Bytes bytes = make_container({ptx, other});
  auto fatbin = parse_fatbin(bytes);
  ASSERT_TRUE(fatbin) << fatbin.error().message;
  ASSERT_EQ(fatbin->entries.size(), 2u);
  const FatbinEntry& p = fatbin->entries[0];
  EXPECT_EQ(p.kind, EntryKind::ptx);
  EXPECT_EQ(p.identifier, "kernel.cu");
  EXPECT_EQ(std::string(p.options.begin(), p.options.end()), "-O2  ");
  EXPECT_EQ(p.version_major, 8);
  EXPECT_EQ(*entry_ptx(p), k_ptx_text);
  EXPECT_NE(describe(p).find("kernel.cu"), std::string::npos);
  const FatbinEntry& o = fatbin->entries[1];
  EXPECT_EQ(o.kind, EntryKind::other);
  EXPECT_EQ(o.raw_kind, 0x10);
  EXPECT_EQ(arch_name(o), "kind16_90");
  EXPECT_FALSE(entry_ptx(o));
  EXPECT_EQ(select_ptx(*fatbin, 90), &fatbin->entries[0]);
}

TEST(SyntheticFatbin, SelectPtxHonoursArchAndFamilySpecificCode) {
  const std::string payload = k_ptx_text + std::string(1, '\0');
  auto ptx = [&](std::uint32_t arch, std::uint64_t extra) {
    SyntheticEntry entry = synthetic(1, arch, payload);
    entry.flags = fatbin_flags::k_64bit | extra;
    return entry;
  };
  const Bytes bytes = make_container({ptx(80, 0), ptx(90, fatbin_flags::k_arch_specific),
                                      ptx(90, 0), ptx(100, fatbin_flags::k_family_specific)});
  auto fatbin = parse_fatbin(bytes);
  ASSERT_TRUE(fatbin) << fatbin.error().message;
  auto pick = [&](std::uint32_t target) { return select_ptx(*fatbin, target); };
  EXPECT_EQ(pick(90), &fatbin->entries[1]);  // compute_90a beats compute_90 on sm_90
  EXPECT_EQ(pick(100), &fatbin->entries[3]); // compute_100f on sm_100
  EXPECT_EQ(pick(103), &fatbin->entries[3]); // ... and on sm_103, same family
  EXPECT_EQ(pick(120), &fatbin->entries[2]); // not on sm_120; 90a not off sm_90
  EXPECT_EQ(pick(89), &fatbin->entries[0]);
  EXPECT_EQ(arch_name(fatbin->entries[1]), "compute_90a");
  EXPECT_EQ(arch_name(fatbin->entries[3]), "compute_100f");
}

TEST(SyntheticFatbin, MalformedFieldsAreErrors) {
  SyntheticEntry good = synthetic(1, 80, k_ptx_text);
  good.identifier = "a.cu";
  good.options = "-O3";
  const Bytes base = make_container({good});
  ASSERT_TRUE(parse_fatbin(base));
  const std::size_t e = 16; // first entry
  struct Case {
    const char* what;
    std::function<void(Bytes&)> corrupt;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"version", [](Bytes& b) { put16(b, 4, 2); }, "version 2"},
      {"container header size", [](Bytes& b) { put16(b, 6, 8); }, "header size 8"},
      {"fat size", [](Bytes& b) { put64(b, 8, ~std::uint64_t{0}); }, "truncated"},
      {"entry header size small", [&](Bytes& b) { put32(b, e + 4, 16); }, "header size 16"},
      {"entry header size huge", [&](Bytes& b) { put32(b, e + 4, 0xFFFFFFF0u); }, "outside"},
      {"payload size", [&](Bytes& b) { put64(b, e + 8, 1u << 20); }, "runs past"},
      {"identifier", [&](Bytes& b) { put32(b, e + 0x24, 4096); }, "identifier"},
      {"options descriptor", [&](Bytes& b) { put32(b, e + 0x14, 4096); }, "options"},
      {"both codecs",
       [&](Bytes& b) { put64(b, e + 0x28, fatbin_flags::k_lz4 | fatbin_flags::k_zstd); }, "both"},
      {"compressed size",
       [&](Bytes& b) {
         put64(b, e + 0x28, fatbin_flags::k_lz4);
         put32(b, e + 0x10, 1u << 20);
       },
       "compressed size"},
      {"magic", [](Bytes& b) { b[0] = 'Q'; }, "magic"},
  };
  for (const Case& c : cases) {
    Bytes bytes = base;
    c.corrupt(bytes);
    auto result = parse_fatbin(bytes);
    ASSERT_FALSE(result) << c.what;
    EXPECT_NE(result.error().message.find(c.message), std::string::npos)
        << c.what << ": " << result.error().message;
  }
  EXPECT_FALSE(parse_fatbin(std::span<const std::uint8_t>{}));
  // A fat size that leaves part of an entry header in the container.
  Bytes short_fat = base;
  put64(short_fat, 8, 40);
  short_fat.resize(16 + 40);
  auto short_result = parse_fatbin(short_fat);
  ASSERT_FALSE(short_result);
  EXPECT_NE(short_result.error().message.find("truncated entry header"), std::string::npos);
}

TEST(SyntheticFatbin, DeclaredSizesAreBoundedBeforeAllocation) {
  // Claims of gigabytes from a few bytes of payload must fail fast, not allocate.
  SyntheticEntry lz4 = synthetic(2, 80,
                                 "\x10"
                                 "x");
  lz4.flags = fatbin_flags::k_lz4;
  lz4.compressed_size = 2;
  lz4.uncompressed_size = std::uint64_t{1} << 40;
  SyntheticEntry zstd = lz4;
  zstd.flags = fatbin_flags::k_zstd;
  const Bytes bytes = make_container({lz4, zstd});
  auto fatbin = parse_fatbin(bytes);
  ASSERT_TRUE(fatbin) << fatbin.error().message;
  for (const FatbinEntry& e : fatbin->entries) EXPECT_FALSE(entry_image(e)) << describe(e);
  auto refused = entry_image(fatbin->entries[1], nullptr);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("zstd"), std::string::npos);
}

// --- Decoders -----------------------------------------------------------------------------------

Bytes bytes_of(std::initializer_list<int> values) {
  Bytes out;
  for (int v : values) out.push_back(static_cast<std::uint8_t>(v));
  return out;
}

std::string lz4(const Bytes& in, std::uint64_t expected) {
  auto out = lz4_block_decode(in, expected);
  return out ? std::string(out->begin(), out->end()) : "error: " + out.error().message;
}

TEST(Lz4Block, DecodesLiteralsMatchesAndLongLengths) {
  EXPECT_EQ(lz4(bytes_of({0x50, 'h', 'e', 'l', 'l', 'o'}), 5), "hello");
  // Overlapping match (offset 1 repeats one byte), then the final literals. The block format
  // (lz4_Block_format.md, "End of block conditions") wants the last 5 bytes to be literals and the
  // last match to start 12 bytes before the end, as every encoder's blocks (and nvcc's) do;
  // liblz4 refuses a block that breaks them.
  EXPECT_EQ(lz4(bytes_of({0x13, 'a', 0x01, 0x00, 0x50, 'b', 'c', 'd', 'e', 'f'}), 13),
            "aaaaaaaabcdef");
  EXPECT_FALSE(lz4_block_decode(bytes_of({0x13, 'a', 0x01, 0x00, 0x00}), 8));
  // Literal length 15 + 5 extension.
  Bytes long_literals = bytes_of({0xF0, 0x05});
  for (int i = 0; i < 20; ++i) long_literals.push_back(static_cast<std::uint8_t>('a' + i));
  EXPECT_EQ(lz4(long_literals, 20), "abcdefghijklmnopqrst");
  // Match length 15 + 255 + 10 + 4 at offset 2 repeats "xy", then five literals.
  std::string xy;
  for (int i = 0; i < 2 + 284; ++i) xy += (i % 2 == 0) ? 'x' : 'y';
  EXPECT_EQ(lz4(bytes_of({0x2F, 'x', 'y', 0x02, 0x00, 0xFF, 0x0A, 0x50, '!', '!', '!', '!', '!'}),
                291),
            xy + "!!!!!");
  EXPECT_EQ(lz4({}, 0), "");
}

TEST(Lz4Block, RejectsCorruptBlocks) {
  // liblz4 says only where in the input it stopped, not why: every refusal names the block as
  // corrupt (or longer than declared) with that offset.
  auto error = [](const Bytes& in, std::uint64_t expected) {
    auto out = lz4_block_decode(in, expected);
    return out ? std::string("decoded") : out.error().message;
  };
  auto corrupt = [&](const Bytes& in, std::uint64_t expected) {
    const std::string message = error(in, expected);
    return message.rfind("corrupt LZ4 block", 0) == 0 &&
           message.find("input offset") != std::string::npos;
  };
  EXPECT_TRUE(corrupt(bytes_of({0x13, 'a', 0x00, 0x00, 0x00}), 8)); // match offset 0
  EXPECT_TRUE(corrupt(bytes_of({0x13, 'a', 0x02, 0x00, 0x00}), 8)); // before the output start
  EXPECT_TRUE(corrupt(bytes_of({0x13, 'a', 0x01}), 8));             // truncated match offset
  EXPECT_TRUE(corrupt(bytes_of({0x50, 'h', 'i'}), 5));              // literals past the end
  EXPECT_TRUE(corrupt(bytes_of({0x13, 'a', 0x01, 0x00}), 8));       // ends with a match
  EXPECT_TRUE(corrupt(bytes_of({0xF0, 0xFF, 0xFF}), 600));          // literal length past the end
  // More than declared fails inside liblz4, before anything is written past the output.
  const std::string longer = error(bytes_of({0x50, 'h', 'e', 'l', 'l', 'o'}), 4);
  EXPECT_NE(longer.find("more than the declared 4 bytes"), std::string::npos) << longer;
  // Fewer than declared is refused with both sizes: the entry's size is exact.
  EXPECT_NE(error(bytes_of({0x50, 'h', 'e', 'l', 'l', 'o'}), 6).find("decodes to 5 bytes"),
            std::string::npos);
  EXPECT_NE(error(bytes_of({0x50, 'h', 'e', 'l', 'l', 'o'}), 5000).find("cannot hold"),
            std::string::npos);
  EXPECT_FALSE(lz4_block_decode({}, 1));
}

// Issue 33: a block for an entry that declares 0 bytes has no output storage (a null pointer);
// the hand-written decoder passed it to memcpy, which UBSan reported. The one empty block (a
// token with no literals) decodes to nothing; anything else is refused without touching it.
TEST(Lz4Block, DeclaredSizeZero) {
  EXPECT_EQ(lz4(bytes_of({0x00}), 0), "");
  EXPECT_EQ(lz4({}, 0), "");
  EXPECT_FALSE(lz4_block_decode(bytes_of({0x10, 'x'}), 0));
  EXPECT_FALSE(lz4_block_decode(bytes_of({0x00, 0x00}), 0));
}

// liblz4's own encoder round-trips through the decoder at the exact size, long matches included.
TEST(Lz4Block, DecodesWhatLiblz4Encodes) {
  std::mt19937 rng(33);
  for (std::size_t size : {1u, 15u, 16u, 300u, 65536u, 300000u}) {
    std::string text;
    while (text.size() < size) text += std::to_string(rng() % 97) + " ";
    text.resize(size);
    Bytes packed(static_cast<std::size_t>(LZ4_compressBound(static_cast<int>(size))));
    const int n = LZ4_compress_default(text.data(), reinterpret_cast<char*>(packed.data()),
                                       static_cast<int>(size), static_cast<int>(packed.size()));
    ASSERT_GT(n, 0);
    packed.resize(static_cast<std::size_t>(n));
    EXPECT_EQ(lz4(packed, size), text) << size;
    EXPECT_FALSE(lz4_block_decode(packed, size - 1)) << size;
    EXPECT_FALSE(lz4_block_decode(packed, size + 1)) << size;
    EXPECT_FALSE(lz4_block_decode(std::span(packed).first(packed.size() - 1), size)) << size;
  }
}

TEST(ZstdDecode, RejectsGarbageAndSizeMismatch) {
  EXPECT_FALSE(zstd_decode(bytes_of({1, 2, 3, 4, 5, 6, 7, 8}), 8));
  EXPECT_FALSE(zstd_decode({}, 0));
  if (!corpus().have_nvcc) return;
  const Bytes bytes = corpus().fatbin("compress_all");
  auto fatbin = parse_fatbin(bytes);
  ASSERT_TRUE(fatbin);
  for (const FatbinEntry& e : fatbin->entries) {
    if (e.compression != Compression::zstd) continue;
    EXPECT_TRUE(zstd_decode(e.payload, e.uncompressed_size));
    EXPECT_FALSE(zstd_decode(e.payload, e.uncompressed_size - 1));
    EXPECT_FALSE(zstd_decode(e.payload, e.uncompressed_size + 1));
    EXPECT_FALSE(zstd_decode(e.payload.first(e.payload.size() / 2), e.uncompressed_size));
  }
}

// --- Format detection and sizing without nvcc --------------------------------------------------

// An exactly sized heap copy, so ASan reports any read past `text`.
std::unique_ptr<char[]> exact_copy(std::string_view text) {
  auto out = std::make_unique<char[]>(text.size());
  std::memcpy(out.get(), text.data(), text.size());
  return out;
}

TEST(ImageFormatDetection, RecognisesEachFormat) {
  const std::string ptx = "//\n// Generated\n/* block\ncomment */\n\t.version 8.5\n.target sm_90\n";
  EXPECT_EQ(detect_image_format(ptx.c_str(), k_unknown_size), ImageFormat::ptx);
  EXPECT_EQ(detect_image_format(ptx.c_str(), ptx.size()), ImageFormat::ptx);
  EXPECT_EQ(detect_image_format(ptx.c_str(), 20), ImageFormat::unknown); // .version cut off
  EXPECT_EQ(detect_image_format(".versionX 8.0", k_unknown_size), ImageFormat::unknown);
  EXPECT_EQ(detect_image_format("/* unterminated .version 8.0", k_unknown_size),
            ImageFormat::unknown);
  EXPECT_EQ(detect_image_format("hello", k_unknown_size), ImageFormat::unknown);
  EXPECT_EQ(detect_image_format(nullptr, 100), ImageFormat::unknown);
  EXPECT_EQ(detect_image_format("\x7f"
                                "ELF",
                                4),
            ImageFormat::cubin);
  EXPECT_EQ(detect_image_format("\x7f"
                                "ELF",
                                3),
            ImageFormat::unknown);
  EXPECT_EQ(detect_image_format("\x50\xed\x55\xba", 4), ImageFormat::fatbin);
  EXPECT_EQ(detect_image_format("\xb1\x43\x62\x46", 4), ImageFormat::fatbin_wrapper);
  // Short strings that begin like a magic are not read past their NUL, even with no size.
  for (std::string_view s :
       {std::string_view("\0", 1), std::string_view("P\0", 2),
        std::string_view("\x7f"
                         "E\0",
                         3),
        std::string_view("/\0", 2), std::string_view("/*\0", 3), std::string_view(".ver\0", 5)}) {
    auto copy = exact_copy(s);
    EXPECT_EQ(detect_image_format(copy.get(), k_unknown_size), ImageFormat::unknown);
    EXPECT_FALSE(image_size(copy.get()));
    EXPECT_FALSE(locate_image(copy.get()));
  }
  EXPECT_EQ(to_string(ImageFormat::cubin), "cubin");
}

TEST(ImageSize, PtxIsTextPlusNul) {
  const std::string ptx = ".version 8.0\n.target sm_80\n";
  auto copy = exact_copy(std::string_view(ptx.c_str(), ptx.size() + 1));
  EXPECT_EQ(*image_size(copy.get()), ptx.size() + 1);
  EXPECT_EQ(*image_size(copy.get(), ptx.size() + 1), ptx.size() + 1);
  // Without a NUL in the readable range, the whole range is the text.
  auto unterminated = exact_copy(ptx);
  EXPECT_EQ(*image_size(unterminated.get(), ptx.size()), ptx.size());
  auto view = locate_image(copy.get());
  ASSERT_TRUE(view);
  EXPECT_EQ(view->format, ImageFormat::ptx);
  EXPECT_EQ(view->bytes.size(), ptx.size() + 1);
  auto unknown = image_size("garbage!", 8);
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("67 61 72"), std::string::npos);
  EXPECT_FALSE(image_size(nullptr, 0));
}

TEST(ImageSize, FatbinHeaderDeclaresTheSize) {
  const Bytes bytes = make_container({synthetic(1, 80, k_ptx_text)});
  EXPECT_EQ(*image_size(bytes.data()), bytes.size());
  EXPECT_EQ(*image_size(bytes.data(), bytes.size()), bytes.size());
  EXPECT_FALSE(image_size(bytes.data(), bytes.size() - 1));
  Bytes huge = bytes;
  put64(huge, 8, ~std::uint64_t{0} - 4); // header + fat size overflows
  EXPECT_FALSE(image_size(huge.data(), huge.size()));
  EXPECT_FALSE(image_size(huge.data(), k_unknown_size));
}

TEST(ImageSize, Elf32AndExtendedNumbering) {
  // ELF32 header alone: no tables.
  Bytes elf32(52, 0);
  std::memcpy(elf32.data(),
              "\x7f"
              "ELF",
              4);
  elf32[4] = 1; // ELFCLASS32
  elf32[5] = 1; // little-endian
  put16(elf32, 0x28, 52);
  EXPECT_EQ(*image_size(elf32.data(), elf32.size()), 52u);

  // ELF64 with one PROGBITS section [64, 64 + 100) and its header table at 200 (2 entries, the
  // count given through section 0, gABI extended numbering).
  Bytes elf64(200 + 2 * 64, 0);
  std::memcpy(elf64.data(),
              "\x7f"
              "ELF",
              4);
  elf64[4] = 2;
  elf64[5] = 1;
  put64(elf64, 0x28, 200);     // e_shoff
  put16(elf64, 0x34, 64);      // e_ehsize
  put16(elf64, 0x3A, 64);      // e_shentsize
  put16(elf64, 0x3C, 0);       // e_shnum: see section 0
  put64(elf64, 200 + 0x20, 2); // section 0 sh_size = number of sections
  put32(elf64, 264 + 4, 1);    // SHT_PROGBITS
  put64(elf64, 264 + 0x18, 64);
  put64(elf64, 264 + 0x20, 100);
  EXPECT_EQ(*image_size(elf64.data(), elf64.size()), elf64.size());
  put64(elf64, 264 + 0x20, 1000); // section past the readable range
  EXPECT_FALSE(image_size(elf64.data(), elf64.size()));
  elf64[5] = 2; // big-endian
  EXPECT_FALSE(image_size(elf64.data(), elf64.size()));
}


// --- Triton's cache (cuda/triton_cache.hpp) -----------------------------------------------------

TEST(TritonCache, TheCubinOfAFatbinIsFoundByItsBytesWithThePtxBesideIt) {
  REQUIRE_NVCC();
  const Bytes fatbin = corpus().fatbin("mode_default");
  auto cubins = image_cubins(ImageFormat::fatbin, fatbin, &zstd_decode);
  ASSERT_EQ(cubins.size(), 1u); // the sm_75 ELF
  // Without a zstd decoder the compressed entry is skipped, not misread.
  auto parsed = parse_fatbin(std::span<const std::uint8_t>(fatbin));
  ASSERT_TRUE(parsed);
  const FatbinEntry* elf = find_entry(*parsed, EntryKind::elf, 75);
  ASSERT_NE(elf, nullptr);
  EXPECT_EQ(image_cubins(ImageFormat::fatbin, fatbin, nullptr).size(),
            elf->compression == Compression::zstd ? 0u : 1u);

  const fs::path root = corpus().dir / "triton-cache";
  fs::create_directories(root / "aa11");
  fs::create_directories(root / "bb22");
  fs::create_directories(root / "cc33");
  // Same size, other bytes: not a match.
  Bytes other = cubins[0];
  other.back() ^= 0x5a;
  std::ofstream(root / "aa11" / "axpy.cubin", std::ios::binary)
      .write(reinterpret_cast<const char*>(other.data()), std::streamsize(other.size()));
  std::ofstream(root / "aa11" / "axpy.ptx") << "// the wrong one";
  std::ofstream(root / "bb22" / "axpy.cubin", std::ios::binary)
      .write(reinterpret_cast<const char*>(cubins[0].data()), std::streamsize(cubins[0].size()));
  std::ofstream(root / "bb22" / "axpy.ptx") << corpus().ptx("75");
  std::ofstream(root / "bb22" / "axpy.json") << "{}";
  std::ofstream(root / "cc33" / "stray.txt") << "nothing";

  auto found = find_triton_ptx(root.string(), cubins);
  ASSERT_TRUE(found) << found.error().message;
  ASSERT_TRUE(*found);
  EXPECT_EQ((*found)->cubin_path, (root / "bb22" / "axpy.cubin").string());
  EXPECT_EQ((*found)->ptx_path, (root / "bb22" / "axpy.ptx").string());
  EXPECT_EQ((*found)->ptx, corpus().ptx("75"));

  // A cubin image is its own cubin.
  auto direct = find_triton_ptx(root.string(), image_cubins(ImageFormat::cubin, cubins[0], nullptr));
  ASSERT_TRUE(direct && *direct);
  EXPECT_EQ((*direct)->cubin_path, (root / "bb22" / "axpy.cubin").string());

  // The matching cubin without its PTX: nothing to use.
  fs::remove(root / "bb22" / "axpy.ptx");
  auto no_ptx = find_triton_ptx(root.string(), cubins);
  ASSERT_TRUE(no_ptx);
  EXPECT_FALSE(*no_ptx);
  // PTX images have no cubin; a missing cache is an error that says which directory.
  EXPECT_TRUE(image_cubins(ImageFormat::ptx, cubins[0], nullptr).empty());
  auto missing = find_triton_ptx((root / "absent").string(), cubins);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("absent"), std::string::npos);
}

TEST(TritonCache, TheDirectoryComesFromTheEnvironment) {
  const char* old_dir = std::getenv("TRITON_CACHE_DIR");
  const char* old_home = std::getenv("HOME");
  std::string saved_dir = old_dir ? old_dir : "", saved_home = old_home ? old_home : "";
  ::setenv("TRITON_CACHE_DIR", "/srv/triton", 1);
  EXPECT_EQ(triton_cache_dir(), "/srv/triton");
  ::unsetenv("TRITON_CACHE_DIR");
  ::setenv("HOME", "/home/svc", 1);
  EXPECT_EQ(triton_cache_dir(), "/home/svc/.triton/cache");
  ::unsetenv("HOME");
  EXPECT_EQ(triton_cache_dir(), "");
  if (old_dir) ::setenv("TRITON_CACHE_DIR", saved_dir.c_str(), 1);
  if (old_home) ::setenv("HOME", saved_home.c_str(), 1);
}

} // namespace
} // namespace hone::cuda
