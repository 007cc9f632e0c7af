#include "store/remote_object.hpp"

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
  std::string payload = export_file::encode(records);
  std::string out(k_magic);
  uint32_t format = k_format, flags = key ? k_flag_signed : 0;
  out.append(reinterpret_cast<const char*>(&format), 4);
  out.append(reinterpret_cast<const char*>(&flags), 4);
  unsigned char m[k_mac_bytes] = {};
  if (key) mac(*key, out, payload, m);
  out.append(reinterpret_cast<const char*>(m), k_mac_bytes);
  out += payload;
  return out;
}

Result<Decoded> decode(std::string_view bytes, const FleetKey* key, bool require_signature,
                       uint64_t max_bytes) {
  if (bytes.size() > max_bytes) {
    return make_error("the object has " + std::to_string(bytes.size()) +
                      " bytes, over the limit of " + std::to_string(max_bytes));
  }
  if (bytes.size() < k_header || bytes.substr(0, k_magic.size()) != k_magic) {
    return make_error("not a hone remote object (no HONEFLT1 header)");
  }
  uint32_t format = 0, flags = 0;
  std::memcpy(&format, bytes.data() + 8, 4);
  std::memcpy(&flags, bytes.data() + 12, 4);
  if (format != k_format) {
    return make_error("a remote object of format " + std::to_string(format) + "; this build reads " +
                      std::to_string(k_format));
  }
  if (flags & ~k_flag_signed) return make_error("a remote object with unknown flags");
  std::string_view payload = bytes.substr(k_header);
  Decoded d;
  const bool is_signed = flags & k_flag_signed;
  if (!is_signed && require_signature) {
    return make_error("an unsigned object, refused: require_signature is set");
  }
  if (is_signed && key) {
    unsigned char want[k_mac_bytes];
    mac(*key, bytes.substr(0, 16), payload, want);
    if (sodium_memcmp(want, bytes.data() + 16, k_mac_bytes) != 0) {
      return make_error("the object's signature does not verify with this host's fleet key "
                        "(tampered, or signed with another key)");
    }
    d.signed_by_fleet = true;
  } else if (is_signed && require_signature) {
    return make_error("a signed object, but this host has no fleet key to check it with");
  }
  auto records = export_file::parse(payload);
  if (!records) return make_error("the object's payload: " + records.error().message);
  for (auto r : *records) d.records.emplace_back(r);
  return d;
}

} // namespace hone::store::remote_object
