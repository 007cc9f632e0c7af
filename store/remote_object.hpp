// What the remote tier stores (store/README.md, "Remote objects" and "Tombstones"): verified
// variants of one kernel on one architecture and driver major, as the export file's bytes, behind a
// header that can carry a fleet key's HMAC-SHA256; and beside that object, one tombstone per variant
// withdrawn from the fleet. A fetched object is never trusted: decode() checks the size, the header,
// the signature where one is required, and the export file's checksum, and what it returns are
// candidates for this host's own validation, not variants to serve. A tombstone is checked the same
// way, and only ever takes a variant out of service.
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

// ---- tombstones -----------------------------------------------------------------------------------

inline constexpr std::string_view k_tombstone_magic = "HONETMB1";
constexpr uint32_t k_tombstone_format = 1;
constexpr uint64_t k_max_tombstone_bytes = 64 << 10;
constexpr size_t k_max_reason_bytes = 4096; // longer reasons are cut when encoded
constexpr size_t k_max_host_bytes = 255;

// The name of `variant`'s tombstone: its kernel's object name (key()) and a suffix, so that a
// republish of the object, which writes key() only, can never overwrite or delete it.
std::string tombstone_key(const KernelKey& kernel, const std::string& arch, uint32_t driver_major,
                          const VariantId& variant);

// A variant withdrawn from the fleet. A variant id names its code, so a withdrawal is final: a
// corrected variant is a new id, and a tombstone never needs to be lifted.
struct Tombstone {
  VariantId variant;
  KernelKey kernel;
  std::string arch;
  uint32_t driver_major = 0;
  int64_t when = 0;    // unix seconds of the withdrawal
  std::string reason;  // the evidence line: "withdrawn by a shadow check on host X: ..."
  std::string host;    // the host that withdrew it
  bool operator==(const Tombstone&) const = default;
};

// The tombstone's bytes, signed when `key` is given (the same HMAC-SHA256 as objects).
std::string encode_tombstone(const Tombstone& t, const FleetKey* key);

struct DecodedTombstone {
  Tombstone tombstone;
  bool signed_by_fleet = false;
};

// Checks a fetched tombstone as decode() checks an object (size, header, signature rules, then a
// checksum and every field), and that it names what `expected` names (variant, kernel, arch,
// driver major): a tombstone copied under another variant's name is refused.
Result<DecodedTombstone> decode_tombstone(std::string_view bytes, const FleetKey* key,
                                          bool require_signature, const Tombstone& expected);

} // namespace hone::store::remote_object
