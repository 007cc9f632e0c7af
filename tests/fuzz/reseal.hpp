// For the fuzz targets that read export files (import_file_fuzz, remote_object_fuzz): checksums
// put right, so that mutated bytes get past them to the parsers behind. A mutation almost never
// keeps a checksum valid, and a parser that only ever sees bad checksums is not being fuzzed.
#pragma once

#include "store/export_file.hpp"
#include "store/records.hpp"

#include <cstdint>
#include <cstring>
#include <string>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace hone::fuzz {

// `file` (export-file bytes: store/README.md, "Export file") with each record's trailing xxh3-64
// and the file's trailing xxh3-128 recomputed, as far as its framing can be followed. Bytes that
// are not an export file come back with only the file checksum changed (if there is room for it).
inline std::string reseal_export(std::string file) {
  constexpr size_t k_header = 8 + 4 + 4, k_trailer = 16;
  if (file.size() < k_header + k_trailer) return file;
  const size_t body = file.size() - k_trailer;
  uint32_t count = 0;
  std::memcpy(&count, file.data() + 12, 4);
  size_t pos = k_header;
  for (uint32_t i = 0; i < count && body - pos >= 8; ++i) {
    uint64_t len = 0;
    std::memcpy(&len, file.data() + pos, 8);
    pos += 8;
    if (len > body - pos) break;
    if (len >= 8) {
      const uint64_t sum = store::records::checksum64(std::string_view(file).substr(pos, len - 8));
      std::memcpy(file.data() + pos + len - 8, &sum, 8);
    }
    pos += size_t(len);
  }
  const XXH128_hash_t h = XXH3_128bits(file.data(), body);
  std::memcpy(file.data() + body, &h.low64, 8);
  std::memcpy(file.data() + body + 8, &h.high64, 8);
  return file;
}

} // namespace hone::fuzz
