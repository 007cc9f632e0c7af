// zstd decoding for fatbin entries (flag 0x8000: nvcc 12.4+ default, size and balance modes).
// The only file of cuda/ that needs libzstd, so a caller that passes its own ZstdDecoder (or
// nullptr) to entry_image never pulls it in from the static library.
#include "cuda/fatbin.hpp"

#include <zstd.h>

#include <cinttypes>
#include <cstdio>
#include <new>

namespace hone::cuda {

Result<std::vector<std::uint8_t>> zstd_decode(std::span<const std::uint8_t> in,
                                              std::uint64_t expected_size) {
  char buffer[200];
  if (expected_size > k_max_uncompressed_size) {
    std::snprintf(buffer, sizeof buffer,
                  "zstd entry declares %" PRIu64 " bytes, more than the %" PRIu64 " limit",
                  expected_size, k_max_uncompressed_size);
    return Error{buffer};
  }
  if (in.empty()) return Error{"corrupt zstd data: empty"};
  // Sum the content sizes the frame headers declare and check them against the entry's claim
  // before allocating for it, so a corrupt size field cannot make us allocate a gigabyte.
  std::uint64_t declared = 0;
  bool all_known = true;
  for (std::span<const std::uint8_t> rest = in; !rest.empty();) {
    const unsigned long long content = ZSTD_getFrameContentSize(rest.data(), rest.size());
    if (content == ZSTD_CONTENTSIZE_ERROR) return Error{"corrupt zstd data: invalid frame header"};
    const std::size_t frame = ZSTD_findFrameCompressedSize(rest.data(), rest.size());
    if (ZSTD_isError(frame)) {
      std::snprintf(buffer, sizeof buffer, "corrupt zstd data: %s", ZSTD_getErrorName(frame));
      return Error{buffer};
    }
    if (content == ZSTD_CONTENTSIZE_UNKNOWN) {
      all_known = false;
    } else {
      declared += content;
      if (declared > expected_size) break;
    }
    rest = rest.subspan(frame);
  }
  if ((all_known && declared != expected_size) || declared > expected_size) {
    std::snprintf(buffer, sizeof buffer,
                  "zstd frames hold %" PRIu64 " bytes, the entry declares %" PRIu64, declared,
                  expected_size);
    return Error{buffer};
  }
  std::vector<std::uint8_t> out;
  try {
    out.resize(static_cast<std::size_t>(expected_size));
  } catch (const std::bad_alloc&) {
    return Error{"out of memory for a zstd entry's output"};
  }
  const std::size_t produced = ZSTD_decompress(out.data(), out.size(), in.data(), in.size());
  if (ZSTD_isError(produced)) {
    std::snprintf(buffer, sizeof buffer, "corrupt zstd data: %s", ZSTD_getErrorName(produced));
    return Error{buffer};
  }
  if (produced != out.size()) {
    std::snprintf(buffer, sizeof buffer, "zstd data decodes to %zu bytes, the entry declares %zu",
                  produced, out.size());
    return Error{buffer};
  }
  return out;
}

} // namespace hone::cuda
