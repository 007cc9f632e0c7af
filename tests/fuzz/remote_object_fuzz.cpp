// libFuzzer target: a fleet object as a remote returns it (store/remote_object.*: bytes from the
// network, from whoever can write the remote). Each input is decoded as honed's fleet thread does
// (daemon/fleet.cpp): without a fleet key, with one, and with require_signature, under a size
// limit; each record then decoded as a variant and checked against its id. The input is also
// repaired and decoded again: its export payload re-sealed (reseal.hpp) and, when its flags say
// signed, signed with the fuzzer's key, so that mutations get past the signature and checksums to
// the framing and records behind them.
//
// Nothing may crash or over-read, and the decoders must agree with each other: require_signature
// with a key accepts exactly the objects that decode as signed by that key, never without a key;
// an object over the size limit is refused; what decodes with and without a key holds the same
// records; a record that decodes re-encodes to its own bytes.
#include "reseal.hpp"
#include "store/export_file.hpp"
#include "store/records.hpp"
#include "store/remote_object.hpp"

#include <sodium.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

using namespace hone::store;

namespace {

// The fleet key the seeds in seeds/remote/signed_* were signed with (made by remote_object::encode).
const remote_object::FleetKey k_key{"hone fuzz fleet key: not a secret, 48 bytes long"};
constexpr uint64_t k_max_bytes = uint64_t(64) << 20;
constexpr size_t k_header = 8 + 4 + 4 + remote_object::k_mac_bytes;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "remote_object_fuzz: %s\n", what);
  std::abort();
}

// What the fleet does with a decoded object's records (Fleet::lookup): each must decode and be
// what its id says. The checks on kernel, target and state compare fields and parse nothing.
void adopt(const remote_object::Decoded& d) {
  for (const std::string& bytes : d.records) {
    auto v = records::decode_variant(bytes);
    if (!v) return; // the whole object is refused
    (void)(v->id == variant_id_of(*v));
    auto again = records::encode(*v);
    if (again && *again != bytes) fail("a record decodes but encodes to other bytes");
  }
}

void decode_every_way(std::string_view object) {
  auto plain = remote_object::decode(object, nullptr, false, k_max_bytes);
  auto keyed = remote_object::decode(object, &k_key, false, k_max_bytes);
  auto strict = remote_object::decode(object, &k_key, true, k_max_bytes);
  auto keyless_strict = remote_object::decode(object, nullptr, true, k_max_bytes);
  if (keyless_strict) fail("require_signature without a key accepted an object");
  if (plain && plain->signed_by_fleet) fail("signed_by_fleet without a key");
  if (strict && !strict->signed_by_fleet) fail("require_signature accepted an unverified object");
  if (bool(strict) != (keyed && keyed->signed_by_fleet)) {
    fail("require_signature disagrees with the signature check");
  }
  if (plain && keyed && plain->records != keyed->records) fail("the key changed the records");
  if (!object.empty() && remote_object::decode(object, &k_key, false, object.size() - 1)) {
    fail("an object over the size limit was accepted");
  }
  if (keyed) adopt(*keyed);
  if (plain) adopt(*plain);
}

// `object` with its payload re-sealed and, where its flags ask for it, its signature made with
// k_key over its first 16 bytes and the payload (as remote_object::encode signs).
std::string repaired(std::string_view object) {
  if (object.size() < k_header) return std::string(object);
  std::string out(object.substr(0, k_header));
  out += hone::fuzz::reseal_export(std::string(object.substr(k_header)));
  uint32_t flags = 0;
  std::memcpy(&flags, out.data() + 12, 4);
  if (flags & 1) {
    crypto_auth_hmacsha256_state st;
    crypto_auth_hmacsha256_init(&st, reinterpret_cast<const unsigned char*>(k_key.secret.data()),
                                k_key.secret.size());
    crypto_auth_hmacsha256_update(&st, reinterpret_cast<const unsigned char*>(out.data()), 16);
    crypto_auth_hmacsha256_update(&st, reinterpret_cast<const unsigned char*>(out.data()) + k_header,
                                  out.size() - k_header);
    crypto_auth_hmacsha256_final(&st, reinterpret_cast<unsigned char*>(out.data()) + 16);
  }
  return out;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (sodium_init() < 0) fail("sodium_init failed");
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  decode_every_way(in);
  const std::string fixed = repaired(in);
  decode_every_way(fixed);
  // A repaired object with the right header, signed with the key, must pass require_signature
  // whenever its payload parses: the signature check and the payload's parser are independent.
  uint32_t format = 0, flags = 0;
  if (fixed.size() >= k_header) {
    std::memcpy(&format, fixed.data() + 8, 4);
    std::memcpy(&flags, fixed.data() + 12, 4);
  }
  if (fixed.size() >= k_header && fixed.compare(0, 8, remote_object::k_magic) == 0 &&
      format == remote_object::k_format && flags == 1 &&
      export_file::parse(std::string_view(fixed).substr(k_header)) &&
      !remote_object::decode(fixed, &k_key, true, k_max_bytes)) {
    fail("a signed object with a sound payload was refused");
  }
  return 0;
}
