// What the remote tier stores (store/README.md, "Remote objects"): verified variants of one kernel
// on one architecture and driver major, as the export file's bytes, behind a header that can carry
// a fleet key's HMAC-SHA256. A fetched object is never trusted: decode() checks the size, the
// header, the signature where one is required, and the export file's checksum, and what it returns
// are candidates for this host's own validation, not variants to serve.
#pragma once

#include "common/identity.hpp"
#include "common/result.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hone::store::remote_object {

inline constexpr std::string_view k_magic = "HONEFLT1";
constexpr uint32_t k_format = 1;
constexpr size_t k_mac_bytes = 32; // HMAC-SHA256

// The object's name in a remote: the kernel, the architecture and the driver major, hashed (hex,
// with the format in front so that a later format never reads an earlier one's objects).
std::string key(const KernelKey& kernel, const std::string& arch, uint32_t driver_major);

// A fleet signing key: at least 32 bytes, read from a file only its owner can read.
struct FleetKey {
  std::string secret;
};
Result<FleetKey> read_key(const std::string& path);

// The object for `records` (variant records as the store encodes them), signed when `key` is given.
std::string encode(const std::vector<std::string>& records, const FleetKey* key);

struct Decoded {
  bool signed_by_fleet = false;        // a signature made with this host's fleet key was checked
  std::vector<std::string> records;    // still encoded: decode_variant() each
};

// Checks and splits a fetched object. With `key`, a signed object's signature must verify; with
// `require_signature`, an unsigned one is refused too. Errors say which check failed.
Result<Decoded> decode(std::string_view bytes, const FleetKey* key, bool require_signature,
                       uint64_t max_bytes);

} // namespace hone::store::remote_object
