// How the store lays out its bytes: column family names, keys, and the versioned, checksummed
// record encoding (store/README.md has the tables). Internal to store/ and its tests; the daemon
// uses store.hpp only.
#pragma once

#include "store/store.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace hone::store::records {

// Column families. `variant_index` holds one empty-valued key per variant under its kernel, so
// variants_of() reads a key range instead of every variant.
inline constexpr const char* k_cf_images = "images";
inline constexpr const char* k_cf_kernels = "kernels";
inline constexpr const char* k_cf_variants = "variants";
inline constexpr const char* k_cf_variant_index = "variant_index";
inline constexpr const char* k_cf_meta = "meta";
inline constexpr const char* k_cf_quarantine = "quarantine";

// Keys of the `meta` column family. schema_version: u32 little-endian.
inline constexpr std::string_view k_meta_schema = "schema_version";
inline constexpr std::string_view k_meta_created = "created";           // i64 LE, unix seconds
inline constexpr std::string_view k_meta_hone_version = "hone_version"; // of the last writer

// The first byte of every record value. A record with another value is not one this build wrote.
constexpr uint8_t k_record_format = 1;

// The second byte: what the record holds, so a value copied into the wrong family is caught.
enum class Kind : uint8_t { image = 1, kernel = 2, variant = 3, quarantine = 4 };

// Limits the decoder enforces and the encoder checks first, so nothing is ever written that could
// not be read back.
constexpr uint32_t k_max_blob = 1u << 30;      // an image, a variant's image, evidence: 1 GiB
constexpr uint32_t k_max_text = 1u << 16;      // names, arch, strategy, verdict, one option
constexpr uint32_t k_max_items = 1u << 16;     // jit options, tried strategies, headers
constexpr uint32_t k_max_guard_scalars = 4096; // common/guard.hpp's decoder limit
constexpr uint32_t k_max_guard_bytes = 4096;

// 16 bytes, high half first (big-endian), so hex(key) == hash.hex() and keys sort like hex.
std::string image_key(const ImageHash& hash);
std::string variant_key(const VariantId& id);
// image_key(image) followed by the entry name.
std::string kernel_key(const KernelKey& key);
// image_key, u32 big-endian entry length, entry, then variant_key: the prefix up to the entry is
// exact (no entry name is a prefix of another's key range).
std::string variant_index_prefix(const KernelKey& kernel);
std::string variant_index_key(const KernelKey& kernel, const VariantId& id);
// The variant id a variant_index key ends with (nullopt when the key is too short).
std::optional<VariantId> variant_of_index_key(std::string_view key);
std::optional<VariantId> variant_of_key(std::string_view key);

// Lowercase hex of raw bytes.
std::string hex(std::string_view bytes);

// A record that was moved out of its column family because it could not be trusted.
struct QuarantineEntry {
  std::string column_family;
  std::string key; // the raw key it had
  std::string reason;
  int64_t when = 0;  // unix seconds
  std::string value; // the raw bytes it had, for forensics
};

// Encoders fail only on a record that breaks the limits above (or has an empty identity).
Result<std::string> encode(const ImageRecord& r);
Result<std::string> encode(const KernelRecord& r);
Result<std::string> encode(const VariantRecord& r);
std::string encode(const QuarantineEntry& q);

// Decoders check the checksum, the format byte, the kind, every length and enum, and that the
// whole value was consumed. The error says which check failed.
Result<ImageRecord> decode_image(std::string_view value);
Result<KernelRecord> decode_kernel(std::string_view value);
Result<VariantRecord> decode_variant(std::string_view value);
Result<QuarantineEntry> decode_quarantine(std::string_view value);

// xxh3-64 of `bytes`, as the records and the export file use it.
uint64_t checksum64(std::string_view bytes);

} // namespace hone::store::records
