// LZ4 block decoding for fatbin entries stored with --compress-mode=speed (flag 0x2000).
//
// fatbin entries hold one raw block (lz4/lz4 doc/lz4_Block_format.md): no LZ4 frame header, no
// checksum (verified on nvcc 13.0 output: the decoded cubin is byte-identical to the uncompressed
// one). liblz4's LZ4_decompress_safe decodes it: it never reads past the input nor writes past
// the output, whatever the input holds (lz4.h, "LZ4_decompress_safe() ... protected against
// malicious data packets"). It also holds blocks to the format's end-of-block conditions (the
// last 5 bytes are literals, the last match starts at least 12 bytes before the end), which the
// hand-written decoder it replaced did not: every encoder's blocks meet them, nvcc's included
// (the fatbin tests decode them). It is linked statically (cuda/CMakeLists.txt), so libhone.so
// carries its own hidden copy and depends on no liblz4 at run time.
#include "cuda/fatbin.hpp"

#include <lz4.h>

#include <cinttypes>
#include <climits>
#include <cstdio>
#include <new>

namespace hone::cuda {

Result<std::vector<std::uint8_t>> lz4_block_decode(std::span<const std::uint8_t> in,
                                                   std::uint64_t expected_size) {
  char buffer[200];
  // A length byte adds at most 255 output bytes, so no block expands more than 255x; a larger
  // claim is corrupt, and refusing it here avoids allocating for it.
  if (expected_size > k_max_uncompressed_size || expected_size > std::uint64_t{in.size()} * 255) {
    std::snprintf(buffer, sizeof buffer,
                  "LZ4 block of %zu bytes cannot hold the declared %" PRIu64 " bytes", in.size(),
                  expected_size);
    return Error{buffer};
  }
  // LZ4_decompress_safe takes int sizes; k_max_uncompressed_size keeps the output below INT_MAX.
  static_assert(k_max_uncompressed_size <= INT_MAX);
  if (in.size() > static_cast<std::size_t>(INT_MAX)) {
    std::snprintf(buffer, sizeof buffer, "LZ4 block of %zu bytes is larger than liblz4 decodes",
                  in.size());
    return Error{buffer};
  }
  std::vector<std::uint8_t> out;
  try {
    out.resize(static_cast<std::size_t>(expected_size));
  } catch (const std::bad_alloc&) {
    return Error{"out of memory for an LZ4 block's output"};
  }
  // Nothing declared: the output has no storage to hand liblz4 (a null pointer, where even a zero
  // offset is undefined behaviour), so the one block that decodes to nothing is checked here: a
  // single token with no literals and no match. No bytes at all count as empty too.
  if (out.empty()) {
    if (in.empty() || (in.size() == 1 && in[0] == 0)) return out;
    std::snprintf(buffer, sizeof buffer,
                  "LZ4 block of %zu bytes for an entry that declares 0 bytes", in.size());
    return Error{buffer};
  }

  // dstCapacity is exactly the declared size: a block that would decode to more fails inside
  // liblz4 before writing past it, one that decodes to less returns its shorter length.
  const int produced = LZ4_decompress_safe(reinterpret_cast<const char*>(in.data()),
                                           reinterpret_cast<char*>(out.data()),
                                           static_cast<int>(in.size()),
                                           static_cast<int>(out.size()));
  if (produced < 0) {
    // liblz4 returns -(input offset where it stopped) - 1 (lz4.c, LZ4_decompress_generic).
    std::snprintf(buffer, sizeof buffer,
                  "corrupt LZ4 block, or one that decodes to more than the declared %zu bytes "
                  "(liblz4 stopped at input offset %d of %zu)",
                  out.size(), -produced - 1, in.size());
    return Error{buffer};
  }
  if (static_cast<std::size_t>(produced) != out.size()) {
    std::snprintf(buffer, sizeof buffer, "LZ4 block decodes to %d bytes, the entry declares %zu",
                  produced, out.size());
    return Error{buffer};
  }
  return out;
}

} // namespace hone::cuda
