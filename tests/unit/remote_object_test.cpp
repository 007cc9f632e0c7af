// The remote tier's objects (store/remote_object.*): verified variants behind a header that can
// carry a fleet key's HMAC. Whatever comes back from a remote — the object as published, tampered
// with, truncated, garbage, unsigned where a signature is required, signed with another key,
// oversized — either decodes to exactly the records that went in or is refused with the reason.
// Tombstones (a variant withdrawn from the fleet) are held to the same rules, and one stored under
// another variant's name is refused.
#include "store/records.hpp"
#include "store/remote_object.hpp"
#include "store/store.hpp"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#define XXH_INLINE_ALL
#include <xxhash.h>

using namespace hone;
using namespace hone::store;
using remote_object::FleetKey;
namespace fs = std::filesystem;

namespace {

VariantRecord variant(const std::string& entry) {
  VariantRecord v;
  v.kernel.image = ImageHash::of(entry.data(), entry.size());
  v.kernel.entry = entry;
  v.arch = "sm_90";
  v.driver_major = 13;
  v.strategy = "specialize";
  v.image = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry " + entry + "()\n{\nret;\n}\n";
  v.image.push_back('\0');
  v.entry = entry;
  v.speedup = 1.5;
  v.verdict = "verified";
  v.evidence_json = R"({"schema":"hone.evidence/1"})";
  v.created = 1764806400;
  v.id = variant_id_of(v);
  return v;
}

std::vector<std::string> encoded(const std::vector<VariantRecord>& vs) {
  std::vector<std::string> out;
  for (const auto& v : vs) {
    auto e = records::encode(v);
    EXPECT_TRUE(e);
    out.push_back(*e);
  }
  return out;
}

std::string message(const Result<remote_object::Decoded>& r) {
  return r ? std::string("decoded") : r.error().message;
}

const remote_object::FleetKey k_key{"0123456789abcdef0123456789abcdef-fleet"};
const remote_object::FleetKey k_other{"another key entirely, 32 bytes or more"};
constexpr uint64_t k_max = 1 << 20;

} // namespace

TEST(RemoteObject, KeysNameKernelArchitectureAndDriver) {
  VariantRecord v = variant("k");
  std::string a = remote_object::key(v.kernel, "sm_90", 13);
  EXPECT_EQ(a.rfind("v1-", 0), 0u) << a;
  EXPECT_EQ(a.size(), 3u + 32u);
  EXPECT_EQ(a, remote_object::key(v.kernel, "sm_90", 13));
  EXPECT_NE(a, remote_object::key(v.kernel, "sm_80", 13));
  EXPECT_NE(a, remote_object::key(v.kernel, "sm_90", 12));
  EXPECT_NE(a, remote_object::key(variant("k2").kernel, "sm_90", 13));
}

TEST(RemoteObject, RoundTripsUnsignedAndSigned) {
  auto recs = encoded({variant("a"), variant("b")});
  auto plain = remote_object::decode(remote_object::encode(recs, nullptr), nullptr, false, k_max);
  ASSERT_TRUE(plain) << message(plain);
  EXPECT_FALSE(plain->signed_by_fleet);
  EXPECT_EQ(plain->records, recs);
  auto back = records::decode_variant(plain->records[1]);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->entry, "b");

  std::string signed_object = remote_object::encode(recs, &k_key);
  auto s = remote_object::decode(signed_object, &k_key, true, k_max);
  ASSERT_TRUE(s) << message(s);
  EXPECT_TRUE(s->signed_by_fleet);
  EXPECT_EQ(s->records, recs);
}

TEST(RemoteObject, TamperedObjectsAreRefusedByChecksumOrSignature) {
  auto recs = encoded({variant("a")});
  std::string object = remote_object::encode(recs, nullptr);
  // One byte of the variant's code changed: the export checksum catches it.
  std::string tampered = object;
  size_t at = tampered.find(".entry a");
  ASSERT_NE(at, std::string::npos);
  tampered[at + 7] = 'z';
  auto r = remote_object::decode(tampered, nullptr, false, k_max);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("checksum"), std::string::npos) << r.error().message;

  // Signed: a change re-checksummed by the attacker still fails the signature.
  std::string signed_object = remote_object::encode(recs, &k_key);
  auto forged_recs = recs;
  size_t f = forged_recs[0].find(".entry a");
  forged_recs[0][f + 7] = 'z';
  std::string forged = remote_object::encode(forged_recs, nullptr);
  // ... keeping the signed header and its MAC
  forged.replace(0, 48, signed_object.substr(0, 48));
  auto fr = remote_object::decode(forged, &k_key, true, k_max);
  ASSERT_FALSE(fr);
  EXPECT_NE(fr.error().message.find("signature does not verify"), std::string::npos)
      << fr.error().message;
  // Signed with another fleet's key.
  auto other = remote_object::decode(remote_object::encode(recs, &k_other), &k_key, true, k_max);
  ASSERT_FALSE(other);
  EXPECT_NE(other.error().message.find("signature does not verify"), std::string::npos);
}

TEST(RemoteObject, RequireSignatureRefusesUnsignedAndUncheckable) {
  auto recs = encoded({variant("a")});
  auto unsigned_refused =
      remote_object::decode(remote_object::encode(recs, nullptr), &k_key, true, k_max);
  ASSERT_FALSE(unsigned_refused);
  EXPECT_NE(unsigned_refused.error().message.find("unsigned"), std::string::npos);
  auto no_key = remote_object::decode(remote_object::encode(recs, &k_key), nullptr, true, k_max);
  ASSERT_FALSE(no_key);
  EXPECT_NE(no_key.error().message.find("no fleet key"), std::string::npos);
  // Without require_signature, an unsigned object is a candidate like any other (validated here
  // before it serves).
  EXPECT_TRUE(remote_object::decode(remote_object::encode(recs, nullptr), &k_key, false, k_max));
}

TEST(RemoteObject, GarbageTruncatedOversizedAndNewerObjectsAreRefused) {
  auto recs = encoded({variant("a")});
  std::string object = remote_object::encode(recs, nullptr);
  auto says = [&](std::string_view bytes, const std::string& what, uint64_t max = k_max) {
    auto r = remote_object::decode(bytes, nullptr, false, max);
    ASSERT_FALSE(r) << what;
    EXPECT_NE(r.error().message.find(what), std::string::npos) << r.error().message;
  };
  says("", "no HONEFLT1 header");
  says("<html>503 Service Unavailable</html>", "no HONEFLT1 header");
  says(std::string(object.size(), '\0'), "no HONEFLT1 header");
  says(std::string_view(object).substr(0, 30), "no HONEFLT1 header");
  for (size_t cut : {size_t(48), size_t(60), object.size() / 2, object.size() - 1}) {
    auto r = remote_object::decode(std::string_view(object).substr(0, cut), nullptr, false, k_max);
    EXPECT_FALSE(r) << "cut at " << cut;
  }
  says(object, "over the limit", 100);
  std::string newer = object;
  newer[8] = 2;
  says(newer, "format 2");
  std::string flags = object;
  flags[12] = 4;
  says(flags, "unknown flags");
}

TEST(RemoteObject, FleetKeysComeFromPrivateFilesOfEnoughBytes) {
  std::string dir = fs::temp_directory_path() / ("hone-fleet-key-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string path = dir + "/key";
  std::ofstream(path) << "short\n";
  ::chmod(path.c_str(), 0600);
  auto shortk = remote_object::read_key(path);
  ASSERT_FALSE(shortk);
  EXPECT_NE(shortk.error().message.find("at least 32"), std::string::npos);
  std::ofstream(path) << "0123456789abcdef0123456789abcdef\n";
  ::chmod(path.c_str(), 0640);
  auto open = remote_object::read_key(path);
  ASSERT_FALSE(open);
  EXPECT_NE(open.error().message.find("chmod 600"), std::string::npos);
  ::chmod(path.c_str(), 0600);
  auto good = remote_object::read_key(path);
  ASSERT_TRUE(good) << good.error().message;
  EXPECT_EQ(good->secret, "0123456789abcdef0123456789abcdef");
  fs::remove_all(dir);
}

namespace {

remote_object::Tombstone tombstone_of(const VariantRecord& v) {
  remote_object::Tombstone t;
  t.variant = v.id;
  t.kernel = v.kernel;
  t.arch = v.arch;
  t.driver_major = v.driver_major;
  t.when = 1764806500;
  t.reason = "withdrawn by a shadow check on host gpu-7: buffer 2 differs at byte 4096";
  t.host = "gpu-7";
  return t;
}

std::string message(const Result<remote_object::DecodedTombstone>& r) {
  return r ? std::string("decoded") : r.error().message;
}

} // namespace

TEST(RemoteTombstone, KeysSitBesideTheObjectOnePerVariant) {
  VariantRecord a = variant("a"), b = variant("b");
  b.kernel = a.kernel;
  b.id = variant_id_of(b);
  std::string object = remote_object::key(a.kernel, "sm_90", 13);
  std::string ta = remote_object::tombstone_key(a.kernel, "sm_90", 13, a.id);
  EXPECT_EQ(ta.rfind(object, 0), 0u) << ta;  // the object's name, then a suffix
  EXPECT_NE(ta, object);                      // a republish of the object never writes it
  EXPECT_EQ(ta, object + ".withdrawn." + a.id.hex());
  EXPECT_NE(ta, remote_object::tombstone_key(a.kernel, "sm_90", 13, b.id));
  EXPECT_NE(ta, remote_object::tombstone_key(a.kernel, "sm_80", 13, a.id));
}

TEST(RemoteTombstone, RoundTripsUnsignedAndSigned) {
  auto t = tombstone_of(variant("a"));
  auto plain = remote_object::decode_tombstone(remote_object::encode_tombstone(t, nullptr), nullptr,
                                               false, t);
  ASSERT_TRUE(plain) << message(plain);
  EXPECT_FALSE(plain->signed_by_fleet);
  EXPECT_EQ(plain->tombstone, t);
  auto s = remote_object::decode_tombstone(remote_object::encode_tombstone(t, &k_key), &k_key,
                                           true, t);
  ASSERT_TRUE(s) << message(s);
  EXPECT_TRUE(s->signed_by_fleet);
  EXPECT_EQ(s->tombstone, t);
  // A reason longer than the limit is cut, never refused: the withdrawal is what matters.
  t.reason = std::string(10000, 'x');
  auto cut = remote_object::decode_tombstone(remote_object::encode_tombstone(t, &k_key), &k_key,
                                             true, t);
  ASSERT_TRUE(cut) << message(cut);
  EXPECT_EQ(cut->tombstone.reason.size(), remote_object::k_max_reason_bytes);
}

TEST(RemoteTombstone, TamperedUnsignedMovedAndGarbageTombstonesAreRefused) {
  auto t = tombstone_of(variant("a"));
  std::string good = remote_object::encode_tombstone(t, &k_key);
  auto says = [&](std::string_view bytes, const std::string& what, const FleetKey* key = &k_key,
                  bool require = true, const remote_object::Tombstone* expected = nullptr) {
    auto r = remote_object::decode_tombstone(bytes, key, require, expected ? *expected : t);
    ASSERT_FALSE(r) << what;
    EXPECT_NE(r.error().message.find(what), std::string::npos) << r.error().message;
  };
  // One byte of the reason changed: the signature no longer verifies.
  std::string tampered = good;
  tampered[tampered.find("gpu-7")] ^= 1;
  says(tampered, "signature does not verify");
  // Re-encoded unsigned by someone without the key, where signatures are required.
  says(remote_object::encode_tombstone(t, nullptr), "unsigned");
  // Signed with another fleet's key.
  says(remote_object::encode_tombstone(t, &k_other), "signature does not verify");
  // Signed, and no key here to check it with while signatures are required.
  says(good, "no fleet key", nullptr);
  // Without the key and without require_signature, only the checksum guards it.
  std::string plain = remote_object::encode_tombstone(t, nullptr);
  std::string damaged = plain;
  damaged[damaged.find("gpu-7")] ^= 1;
  says(damaged, "checksum", nullptr, false);
  // A sound tombstone of variant a, copied under variant b's name, withdraws nothing.
  VariantRecord b = variant("b");
  auto tb = tombstone_of(b);
  says(good, "not the one it is stored for", &k_key, true, &tb);
  // A signed object is not a tombstone, nor the other way round.
  says(remote_object::encode(encoded({variant("a")}), &k_key), "no HONETMB1 header");
  auto as_object = remote_object::decode(good, &k_key, true, k_max);
  EXPECT_FALSE(as_object);
  // Garbage, truncation, size, format and flags.
  says("", "no HONETMB1 header");
  says("<html>404</html>", "no HONETMB1 header");
  for (size_t cut : {size_t(48), size_t(60), good.size() - 1}) {
    auto r = remote_object::decode_tombstone(std::string_view(good).substr(0, cut), &k_key, true, t);
    EXPECT_FALSE(r) << "cut at " << cut;
  }
  std::string big = plain + std::string(remote_object::k_max_tombstone_bytes, '\0');
  says(big, "over the limit", nullptr, false);
  std::string newer = good;
  newer[8] = 2;
  says(newer, "format 2");
  std::string flags = good;
  flags[12] = 4;
  says(flags, "unknown flags");
  // Bytes after the fields (checksum recomputed by the writer): refused as well.
  {
    std::string extra = plain.substr(0, plain.size() - 8) + "junk";
    uint64_t sum = XXH3_64bits(extra.data() + 48, extra.size() - 48);
    extra.append(reinterpret_cast<const char*>(&sum), 8);
    says(extra, "bytes after its fields", nullptr, false);
  }
}
