// Fuzz the store's record decoders and the export-file parser (store/records.*,
// store/export_file.*): any bytes decode or give an error, never crash or over-read. The input is
// tried as it is and re-sealed with a correct checksum, so the fuzzer gets past the checksum to the
// decoders behind it. Whatever decodes and can be encoded again must encode to exactly the same
// bytes (the encoding is canonical: the store's checksums and the export file rely on it).
#include "store/export_file.hpp"
#include "store/records.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#define XXH_INLINE_ALL
#include <xxhash.h>

using namespace hone::store;

namespace {

template <class Decode> void check_canonical(std::string_view sealed, Decode decode) {
  auto rec = decode(sealed);
  if (!rec) return;
  auto again = records::encode(*rec);
  if (!again) return; // decodable but not writable (e.g. an empty name): the store never wrote it
  if (*again != sealed) {
    std::fprintf(stderr, "record decodes but encodes to other bytes (%zu vs %zu)\n", again->size(),
                 sealed.size());
    std::abort();
  }
}

void all_decoders(std::string_view bytes) {
  check_canonical(bytes, records::decode_image);
  check_canonical(bytes, records::decode_kernel);
  check_canonical(bytes, records::decode_variant);
  if (auto q = records::decode_quarantine(bytes); q && records::encode(*q) != bytes) std::abort();
  if (auto v = records::decode_variant(bytes)) (void)variant_id_of(*v);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  all_decoders(in);

  std::string sealed(in);
  uint64_t sum = records::checksum64(sealed);
  sealed.append(reinterpret_cast<const char*>(&sum), 8);
  all_decoders(sealed);

  (void)export_file::parse(in);
  // As an export file with the right trailer: the framing behind the checksum.
  std::string file(in);
  XXH128_hash_t h = XXH3_128bits(file.data(), file.size());
  file.append(reinterpret_cast<const char*>(&h.low64), 8);
  file.append(reinterpret_cast<const char*>(&h.high64), 8);
  if (auto recs = export_file::parse(file))
    for (auto r : *recs) all_decoders(r);
  return 0;
}
