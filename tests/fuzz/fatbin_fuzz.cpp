// libFuzzer target: CUDA module images as any local client of honed hands them over (the shim
// forwards what the application loads; cuda/fatbin.hpp). The input is an image with a known
// length: its format, its size and its view (detect_image_format, image_size, locate_image); the
// same bytes as a C string, as cuModuleLoadData passes PTX; then as a fatbin: every container and
// entry (parse_fatbin), every entry decompressed (entry_image, entry_ptx: LZ4 through liblz4, zstd
// through libzstd) and looked at again as an image, the PTX a driver would pick (select_ptx) and
// the cubins the shim hands the Triton cache lookup (image_cubins). Finally the whole input as one
// raw LZ4 block and one zstd frame, so the decoders also meet bytes no fatbin header vouches for.
//
// Nothing may crash, over-read or allocate without bound, and what succeeds must be consistent:
// sizes within the input, views inside it, decompressed images of exactly the declared size.
#include "cuda/fatbin.hpp"
#include "cuda/triton_cache.hpp"

#include <lz4.h>
#include <zstd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>

using namespace hone::cuda;

namespace {

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fatbin_fuzz: %s\n", what);
  std::abort();
}

bool inside(std::span<const std::uint8_t> part, std::span<const std::uint8_t> whole) {
  return part.empty() || (part.data() >= whole.data() &&
                          part.data() + part.size() <= whole.data() + whole.size());
}

// An image of known length: what the shim does for cuModuleLoadDataEx with a size, and what honed
// does with the image bytes a client sent.
void as_image(std::span<const std::uint8_t> bytes) {
  const ImageFormat format = detect_image_format(bytes.data(), bytes.size());
  (void)to_string(format);
  auto size = image_size(bytes.data(), bytes.size());
  if (size && *size > bytes.size()) fail("image_size beyond the readable bytes");
  if (format == ImageFormat::fatbin_wrapper) {
    // A wrapper holds a raw pointer that the driver (and locate_image) follows; following one
    // from fuzzed bytes would read anywhere. Only the unwrapping itself is checked.
    (void)unwrap_fatbin(bytes.data(), bytes.size());
    if (size) fail("image_size accepted a wrapper");
    return;
  }
  auto view = locate_image(bytes.data(), bytes.size());
  if (view) {
    if (!inside(view->bytes, bytes)) fail("locate_image outside the input");
    if (view->format != format) fail("locate_image changed the format");
  }
}

// The same bytes as a NUL-terminated string of unknown length (cuModuleLoadData). Only PTX and
// unrecognised data are sized that way: a cubin or fatbin of unknown length is trusted to be as
// long as its headers say, as the driver trusts it, so it cannot be fuzzed without a length.
void as_c_string(std::span<const std::uint8_t> bytes) {
  std::string text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  const std::size_t length = std::strlen(text.c_str());
  const ImageFormat format = detect_image_format(text.c_str(), k_unknown_size);
  if (format != ImageFormat::ptx && format != ImageFormat::unknown) return;
  auto size = image_size(text.c_str(), k_unknown_size);
  if (format == ImageFormat::ptx && (!size || *size != length + 1)) fail("PTX size is not strlen + 1");
  if (format == ImageFormat::unknown && size) fail("an unknown format was sized");
}

void check_entry(const FatbinEntry& e, std::span<const std::uint8_t> bytes) {
  if (!inside(e.payload, bytes) || !inside(e.options, bytes)) fail("entry view outside the input");
  (void)arch_name(e);
  (void)describe(e);
  auto image = entry_image(e);
  if (image) {
    const std::uint64_t expected =
        e.compression == Compression::none ? e.payload.size() : e.uncompressed_size;
    if (image->size() != expected) fail("entry image is not its declared size");
    // A decompressed entry is an image in its own right (a cubin or PTX the worker loads).
    as_image(*image);
  }
  auto without_zstd = entry_image(e, nullptr);
  if (e.compression == Compression::zstd && without_zstd) fail("zstd decoded without a decoder");
  if (e.compression != Compression::zstd && bool(without_zstd) != bool(image)) {
    fail("the zstd decoder changed a non-zstd entry");
  }
  auto ptx = entry_ptx(e);
  if (ptx && (e.kind != EntryKind::ptx || ptx->find('\0') != std::string::npos)) {
    fail("entry_ptx gave PTX for a non-PTX entry or with a NUL");
  }
}

void as_fatbin(std::span<const std::uint8_t> bytes) {
  auto fatbin = parse_fatbin(bytes);
  if (!fatbin) return;
  if (fatbin->containers.empty()) fail("a fatbin without containers");
  for (const FatbinEntry& e : fatbin->entries) {
    if (e.container >= fatbin->containers.size()) fail("entry of a missing container");
    check_entry(e, bytes);
  }
  for (std::uint32_t target : {0u, 75u, 86u, 90u, 100u, 103u, 120u, 0xFFFFFFFFu}) {
    const FatbinEntry* e = select_ptx(*fatbin, target);
    if (e && (e->kind != EntryKind::ptx || e->arch > target)) fail("select_ptx picked a misfit");
  }
  // As the shim calls it (it links no zstd); with a decoder it repeats entry_image's work.
  (void)image_cubins(ImageFormat::fatbin, bytes, nullptr);
}

// The decoders on the raw input. liblz4 itself says how long the block decodes (into a bounded
// scratch buffer); lz4_block_decode at exactly that size must give the same bytes if it accepts
// the block (with an exact capacity liblz4 also enforces the format's end-of-block rules, so a
// block that breaks them decodes only into a larger buffer), and must refuse one byte more.
void as_compressed(std::span<const std::uint8_t> bytes) {
  static char scratch[1 << 20];
  const int capacity = static_cast<int>(std::min<std::size_t>(bytes.size() * 255, sizeof scratch));
  const int n = bytes.empty() ? -1
                              : LZ4_decompress_safe(reinterpret_cast<const char*>(bytes.data()),
                                                    scratch, static_cast<int>(bytes.size()),
                                                    capacity);
  if (n > 0) {
    auto out = lz4_block_decode(bytes, static_cast<std::uint64_t>(n));
    if (out && (out->size() != std::size_t(n) || std::memcmp(out->data(), scratch, std::size_t(n)))) {
      fail("lz4_block_decode disagrees with liblz4");
    }
    if (lz4_block_decode(bytes, static_cast<std::uint64_t>(n) + 1)) fail("LZ4 block over-declared");
  }
  (void)lz4_block_decode(bytes, bytes.size());
  (void)lz4_block_decode(bytes, 0);

  const unsigned long long content = ZSTD_getFrameContentSize(bytes.data(), bytes.size());
  if (content != ZSTD_CONTENTSIZE_ERROR && content != ZSTD_CONTENTSIZE_UNKNOWN &&
      content <= (1u << 20)) {
    auto out = zstd_decode(bytes, content);
    if (out && out->size() != content) fail("zstd_decode gave another size");
  }
  (void)zstd_decode(bytes, bytes.size());
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::uint8_t> bytes(data, size);
  as_image(bytes);
  as_c_string(bytes);
  as_fatbin(bytes);
  as_compressed(bytes);
  return 0;
}
