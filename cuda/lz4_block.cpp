// LZ4 block decoding for fatbin entries stored with --compress-mode=speed (flag 0x2000).
//
// Format: lz4/lz4 doc/lz4_Block_format.md. A block is a run of sequences; each is a token byte
// (high nibble literal length, low nibble match length - 4, 15 meaning "more length bytes follow,
// each added, until one is not 255"), the literals, then a 2-byte little-endian match offset and
// the match length extension. The last sequence has literals only. fatbin entries hold one raw
// block: no LZ4 frame header, no checksum (verified on nvcc 13.0 output: the decoded cubin is
// byte-identical to the uncompressed one).
#include "cuda/fatbin.hpp"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <new>

namespace hone::cuda {

namespace {

Error lz4_error(const char* what, std::size_t in_pos, std::size_t out_pos) {
  char buffer[160];
  std::snprintf(buffer, sizeof buffer,
                "corrupt LZ4 block: %s (input offset %zu, output offset %zu)", what, in_pos,
                out_pos);
  return Error{buffer};
}

} // namespace

Result<std::vector<std::uint8_t>> lz4_block_decode(std::span<const std::uint8_t> in,
                                                   std::uint64_t expected_size) {
  // A length byte adds at most 255 output bytes, so no block expands more than 255x; a larger
  // claim is corrupt, and refusing it here avoids allocating for it.
  if (expected_size > k_max_uncompressed_size || expected_size > std::uint64_t{in.size()} * 255) {
    char buffer[160];
    std::snprintf(buffer, sizeof buffer,
                  "LZ4 block of %zu bytes cannot hold the declared %" PRIu64 " bytes", in.size(),
                  expected_size);
    return Error{buffer};
  }
  std::vector<std::uint8_t> out;
  try {
    out.resize(static_cast<std::size_t>(expected_size));
  } catch (const std::bad_alloc&) {
    return Error{"out of memory for an LZ4 block's output"};
  }
  if (in.empty()) return out; // expected_size is 0 here

  const std::size_t n = in.size();
  const std::size_t capacity = out.size();
  std::size_t ip = 0;
  std::size_t op = 0;
  // Adds extension bytes to `length` until one is not 255; fails past `limit` or the input end.
  auto extend = [&](std::size_t& length, std::size_t limit) -> bool {
    for (;;) {
      if (ip >= n) return false;
      const std::uint8_t b = in[ip++];
      length += b;
      if (length > limit) return false;
      if (b != 255) return true;
    }
  };
  for (;;) {
    const std::uint8_t token = in[ip++];
    std::size_t literals = token >> 4;
    if (literals == 15 && !extend(literals, capacity - op)) {
      return lz4_error("literal length runs past the input or the declared size", ip, op);
    }
    if (literals > n - ip) return lz4_error("literals run past the end of the input", ip, op);
    if (literals > capacity - op) return lz4_error("literals exceed the declared size", ip, op);
    std::memcpy(out.data() + op, in.data() + ip, literals);
    ip += literals;
    op += literals;
    if (ip == n) break; // the last sequence: literals only
    if (n - ip < 2) return lz4_error("truncated match offset", ip, op);
    const std::size_t offset = in[ip] | (std::size_t{in[ip + 1]} << 8);
    ip += 2;
    if (offset == 0 || offset > op) return lz4_error("match offset outside the output", ip, op);
    std::size_t match = token & 15;
    if (match == 15 && !extend(match, capacity - op)) {
      return lz4_error("match length runs past the input or the declared size", ip, op);
    }
    match += 4;
    if (match > capacity - op) return lz4_error("match exceeds the declared size", ip, op);
    // Byte by byte: a match may overlap its own output (offset < length repeats a pattern).
    for (std::size_t i = 0; i < match; ++i, ++op) out[op] = out[op - offset];
    if (ip == n) return lz4_error("block ends with a match, not literals", ip, op);
  }
  if (op != capacity) {
    char buffer[160];
    std::snprintf(buffer, sizeof buffer, "LZ4 block decodes to %zu bytes, the entry declares %zu",
                  op, capacity);
    return Error{buffer};
  }
  return out;
}

} // namespace hone::cuda
