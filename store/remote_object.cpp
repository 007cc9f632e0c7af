#include "store/remote_object.hpp"

#include "common/wire.hpp"
#include "store/export_file.hpp"

#include <sodium.h>
#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <iterator>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace hone::store::remote_object {

namespace {

// magic, format (u32 LE), flags (u32 LE: bit 0 signed), HMAC-SHA256 (zeros when unsigned)
constexpr size_t k_header = 8 + 4 + 4 + k_mac_bytes;
constexpr uint32_t k_flag_signed = 1;

void init_sodium() {
  static const int once = sodium_init();
  (void)once;
}

// The HMAC covers everything but itself: the header's first 16 bytes and the payload.
void mac(const FleetKey& key, std::string_view head16, std::string_view payload,
         unsigned char out[k_mac_bytes]) {
  init_sodium();
  crypto_auth_hmacsha256_state st;
  crypto_auth_hmacsha256_init(&st, reinterpret_cast<const unsigned char*>(key.secret.data()),
                              key.secret.size());
  crypto_auth_hmacsha256_update(&st, reinterpret_cast<const unsigned char*>(head16.data()),
                                head16.size());
  crypto_auth_hmacsha256_update(&st, reinterpret_cast<const unsigned char*>(payload.data()),
                                payload.size());
  crypto_auth_hmacsha256_final(&st, out);
}

// The header both kinds share: magic, format, flags, HMAC. Returns the payload and whether a
// signature made with `key` was checked; refuses by the same rules for objects and tombstones.
struct Checked {
  std::string_view payload;
  bool signed_by_fleet = false;
};

Result<Checked> check_header(std::string_view bytes, std::string_view magic, uint32_t want_format,
                             const FleetKey* key, bool require_signature, const char* what) {
  const std::string a = what;
  if (bytes.size() < k_header || bytes.substr(0, magic.size()) != magic) {
    return make_error("not a hone remote " + a + " (no " + std::string(magic) + " header)");
  }
  uint32_t format = 0, flags = 0;
  std::memcpy(&format, bytes.data() + 8, 4);
  std::memcpy(&flags, bytes.data() + 12, 4);
  if (format != want_format) {
    return make_error("a remote " + a + " of format " + std::to_string(format) +
                      "; this build reads " + std::to_string(want_format));
  }
  if (flags & ~k_flag_signed) return make_error("a remote " + a + " with unknown flags");
  Checked c;
  c.payload = bytes.substr(k_header);
  const bool is_signed = flags & k_flag_signed;
  if (!is_signed && require_signature) {
    return make_error("an unsigned " + a + ", refused: require_signature is set");
  }
  if (is_signed && key) {
    unsigned char want[k_mac_bytes];
    mac(*key, bytes.substr(0, 16), c.payload, want);
    if (sodium_memcmp(want, bytes.data() + 16, k_mac_bytes) != 0) {
      return make_error("the " + a + "'s signature does not verify with this host's fleet key " +
                        "(tampered, or signed with another key)");
    }
    c.signed_by_fleet = true;
  } else if (is_signed && require_signature) {
    return make_error("a signed " + a + ", but this host has no fleet key to check it with");
  }
  return c;
}

std::string with_header(std::string_view magic, uint32_t format, const std::string& payload,
                        const FleetKey* key) {
  std::string out(magic);
  uint32_t flags = key ? k_flag_signed : 0;
  out.append(reinterpret_cast<const char*>(&format), 4);
  out.append(reinterpret_cast<const char*>(&flags), 4);
  unsigned char m[k_mac_bytes] = {};
  if (key) mac(*key, out, payload, m);
  out.append(reinterpret_cast<const char*>(m), k_mac_bytes);
  out += payload;
  return out;
}

} // namespace

std::string key(const KernelKey& kernel, const std::string& arch, uint32_t driver_major) {
  std::string id = "hone-remote-object/1\n" + kernel.str() + "\n" + arch + "\n" +
                   std::to_string(driver_major);
  XXH128_hash_t h = XXH3_128bits(id.data(), id.size());
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return "v1-" + std::string(buf);
}

Result<FleetKey> read_key(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return make_error("the fleet key " + path + " cannot be read");
  if (st.st_mode & 077) {
    return make_error("the fleet key " + path + " is readable by others: chmod 600 it");
  }
  std::ifstream in(path, std::ios::binary);
  std::string secret((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  if (secret.size() < 32) {
    return make_error("the fleet key " + path + " holds " + std::to_string(secret.size()) +
                      " bytes; it needs at least 32 (for instance: head -c 32 /dev/urandom | "
                      "base64 > " + path + ")");
  }
  return FleetKey{std::move(secret)};
}

std::string encode(const std::vector<std::string>& records, const FleetKey* key) {
  return with_header(k_magic, k_format, export_file::encode(records), key);
}

Result<Decoded> decode(std::string_view bytes, const FleetKey* key, bool require_signature,
                       uint64_t max_bytes) {
  if (bytes.size() > max_bytes) {
    return make_error("the object has " + std::to_string(bytes.size()) +
                      " bytes, over the limit of " + std::to_string(max_bytes));
  }
  auto c = check_header(bytes, k_magic, k_format, key, require_signature, "object");
  if (!c) return c.error();
  Decoded d;
  d.signed_by_fleet = c->signed_by_fleet;
  auto records = export_file::parse(c->payload);
  if (!records) return make_error("the object's payload: " + records.error().message);
  for (auto r : *records) d.records.emplace_back(r);
  return d;
}

// ---- tombstones -----------------------------------------------------------------------------------

std::string tombstone_key(const KernelKey& kernel, const std::string& arch, uint32_t driver_major,
                          const VariantId& variant) {
  return key(kernel, arch, driver_major) + ".withdrawn." + variant.hex();
}

// payload: variant id (lo, hi), kernel image (lo, hi), entry, arch, driver major, when, reason,
// host (common/wire.hpp encoding), then the xxh3-64 of everything before it.
std::string encode_tombstone(const Tombstone& t, const FleetKey* key) {
  wire::Writer w;
  w.u64(t.variant.h.lo);
  w.u64(t.variant.h.hi);
  w.u64(t.kernel.image.lo);
  w.u64(t.kernel.image.hi);
  w.str(t.kernel.entry);
  w.str(t.arch);
  w.u32(t.driver_major);
  w.i64(t.when);
  w.str(std::string_view(t.reason).substr(0, k_max_reason_bytes));
  w.str(std::string_view(t.host).substr(0, k_max_host_bytes));
  uint64_t sum = XXH3_64bits(w.out().data(), w.size());
  w.u64(sum);
  return with_header(k_tombstone_magic, k_tombstone_format, w.out(), key);
}

Result<DecodedTombstone> decode_tombstone(std::string_view bytes, const FleetKey* key,
                                          bool require_signature, const Tombstone& expected) {
  if (bytes.size() > k_max_tombstone_bytes) {
    return make_error("the tombstone has " + std::to_string(bytes.size()) +
                      " bytes, over the limit of " + std::to_string(k_max_tombstone_bytes));
  }
  auto c = check_header(bytes, k_tombstone_magic, k_tombstone_format, key, require_signature,
                        "tombstone");
  if (!c) return c.error();
  std::string_view p = c->payload;
  if (p.size() < 8) return make_error("the tombstone is truncated");
  uint64_t sum = 0;
  std::memcpy(&sum, p.data() + p.size() - 8, 8);
  p.remove_suffix(8);
  if (XXH3_64bits(p.data(), p.size()) != sum) {
    return make_error("the tombstone's checksum does not match (damaged)");
  }
  wire::Reader r(p);
  DecodedTombstone d;
  d.signed_by_fleet = c->signed_by_fleet;
  Tombstone& t = d.tombstone;
  t.variant.h.lo = r.u64();
  t.variant.h.hi = r.u64();
  t.kernel.image.lo = r.u64();
  t.kernel.image.hi = r.u64();
  t.kernel.entry = r.str(64 << 10);
  t.arch = r.str(256);
  t.driver_major = r.u32();
  t.when = r.i64();
  t.reason = r.str(uint32_t(k_max_reason_bytes));
  t.host = r.str(uint32_t(k_max_host_bytes));
  if (!r.ok()) return make_error(std::string("the tombstone does not decode: ") + r.error());
  if (r.remaining() != 0) return make_error("the tombstone has bytes after its fields");
  if (t.variant != expected.variant || t.kernel != expected.kernel || t.arch != expected.arch ||
      t.driver_major != expected.driver_major) {
    return make_error("the tombstone names variant " + t.variant.hex() + " of " + t.kernel.entry +
                      " (" + t.arch + "), not the one it is stored for");
  }
  return d;
}

} // namespace hone::store::remote_object
