// The RocksDB store (store/): records, keys, durability across SIGKILL, corruption handling,
// schema versions, export and import.
#include "store/export_file.hpp"
#include "store/records.hpp"
#include "store/store.hpp"

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <functional>
#include <map>
#include <poll.h>
#include <random>
#include <set>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

extern char** environ;

namespace hone::store {
namespace {

namespace fs = std::filesystem;
namespace rec = records;

// --- fixtures -------------------------------------------------------------------------------

class TempDir {
public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "hone-store-test-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) std::abort();
    m_path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(m_path, ec);
  }
  const fs::path& path() const { return m_path; }
  fs::path operator/(const std::string& name) const { return m_path / name; }

private:
  fs::path m_path;
};

std::unique_ptr<Store> open_store(const fs::path& dir, OpenOptions o = {}) {
  auto s = Store::open(dir, o);
  EXPECT_TRUE(s) << s.error().message;
  return s ? std::move(*s) : nullptr;
}

KernelKey kernel_key(uint64_t n, std::string entry = "kern") {
  return KernelKey{ImageHash{n, n * 31 + 7}, std::move(entry)};
}

VariantRecord make_variant(const KernelKey& kernel, int n, const std::string& arch = "sm_90",
                           VariantState state = VariantState::verified) {
  VariantRecord v;
  v.kernel = kernel;
  v.arch = arch;
  v.driver_major = 13;
  v.strategy = n % 2 ? "rejit" : "specialize";
  v.format = proto::ImageFormat::ptx;
  v.image =
      ".version 8.0\n// variant " + std::to_string(n) + "\n" + std::string(size_t(n % 7) * 10, 'x');
  v.image.push_back('\0');
  v.entry = kernel.entry + "_v" + std::to_string(n);
  v.jit_options = {"CU_JIT_OPTIMIZATION_LEVEL=4", "n=" + std::to_string(n)};
  v.guard.block = {128, 1, 1};
  v.guard.scalars = {ScalarGuard{2, 8, std::string("\x01\x00\x00\x00", 4)}};
  v.guard.no_alias = n % 3 == 0;
  v.state = state;
  v.speedup = 1.25 + n;
  v.noise = 0.01;
  v.verdict = "verified";
  v.evidence_json = R"({"inputs":3,"n":)" + std::to_string(n) + "}";
  v.created = 1700000000 + n;
  v.id = variant_id_of(v);
  return v;
}

KernelRecord make_kernel(const KernelKey& key) {
  KernelRecord k;
  k.key = key;
  k.format = proto::ImageFormat::fatbin;
  k.image_size = 12345;
  k.source_known = true;
  k.state = KernelState::optimizing;
  k.disabled = true;
  k.launches = 1ull << 40;
  k.est_gpu_ns = 99;
  k.first_seen = -5;
  k.last_seen = 1700000000;
  k.tried = {"rejit", "llm"};
  return k;
}

ImageRecord make_image(uint64_t n, bool with_source) {
  ImageRecord i;
  i.bytes = "image bytes " + std::to_string(n) + std::string("\0\x01\xff", 3);
  i.hash = ImageHash::of(i.bytes.data(), i.bytes.size());
  i.format = proto::ImageFormat::cubin;
  i.first_seen = 1234;
  if (with_source) {
    proto::SourceInfo s;
    s.name = "k.cu";
    s.source = "__global__ void k() {}";
    s.headers = {{"a.h", "#define A 1"}, {"b.h", ""}};
    s.options = {"--gpu-architecture=sm_90", "-lineinfo"};
    i.source = s;
  }
  return i;
}

// Records have no operator==: their encodings are compared, which covers every field.
template <class R> std::string bytes_of(const R& r) {
  auto e = rec::encode(r);
  EXPECT_TRUE(e) << e.error().message;
  return e ? *e : std::string();
}

std::set<VariantId> ids_of(const std::vector<VariantRecord>& vs) {
  std::set<VariantId> out;
  for (const auto& v : vs) out.insert(v.id);
  return out;
}

// RocksDB opened directly, with whatever column families the directory has: for fixtures and
// damage the Store API cannot make.
class RawDb {
public:
  // Opens an existing database, or creates one with `create_cfs` (plus "default").
  explicit RawDb(const fs::path& dir, std::vector<std::string> create_cfs = {}) {
    rocksdb::DBOptions o;
    std::vector<std::string> names;
    if (create_cfs.empty()) {
      auto s = rocksdb::DB::ListColumnFamilies(o, dir.string(), &names);
      EXPECT_TRUE(s.ok()) << s.ToString();
    } else {
      o.create_if_missing = true;
      o.create_missing_column_families = true;
      names = {rocksdb::kDefaultColumnFamilyName};
      names.insert(names.end(), create_cfs.begin(), create_cfs.end());
    }
    std::vector<rocksdb::ColumnFamilyDescriptor> d;
    for (const auto& n : names) d.emplace_back(n, rocksdb::ColumnFamilyOptions());
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* db = nullptr;
    auto s = rocksdb::DB::Open(o, dir.string(), d, &handles, &db);
    EXPECT_TRUE(s.ok()) << s.ToString();
    m_db.reset(db);
    for (auto* h : handles) m_cf[h->GetName()] = h;
  }
  ~RawDb() {
    for (auto& [n, h] : m_cf) m_db->DestroyColumnFamilyHandle(h);
    if (m_db) m_db->Close();
  }
  bool has(const std::string& cf) const { return m_cf.contains(cf); }
  std::optional<std::string> get(const std::string& cf, const std::string& key) {
    std::string v;
    auto s = m_db->Get(rocksdb::ReadOptions(), m_cf.at(cf), key, &v);
    if (s.IsNotFound()) return std::nullopt;
    EXPECT_TRUE(s.ok()) << s.ToString();
    return v;
  }
  void put(const std::string& cf, const std::string& key, const std::string& value) {
    auto s = m_db->Put(rocksdb::WriteOptions(), m_cf.at(cf), key, value);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  void del(const std::string& cf, const std::string& key) {
    auto s = m_db->Delete(rocksdb::WriteOptions(), m_cf.at(cf), key);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }

private:
  std::unique_ptr<rocksdb::DB> m_db;
  std::map<std::string, rocksdb::ColumnFamilyHandle*> m_cf;
};

std::string le32(uint32_t v) {
  return std::string(reinterpret_cast<const char*>(&v), 4);
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void write_file(const fs::path& p, const std::string& data) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << data;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// A child process (tests/store_crash_helper) with its stdout on a pipe.
class Child {
public:
  explicit Child(std::vector<std::string> args) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) std::abort();
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    std::string exe = std::string(HONE_BINARY_DIR) + "/tests/store_crash_helper";
    args.insert(args.begin(), exe);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int rc = posix_spawn(&m_pid, exe.c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(fds[1]);
    m_fd = fds[0];
    EXPECT_EQ(rc, 0) << "cannot start " << exe << ": " << std::strerror(rc);
    if (rc != 0) m_pid = -1;
  }
  ~Child() {
    kill();
    if (m_fd >= 0) ::close(m_fd);
  }
  // Reads what is available, waiting at most `ms`; false at end of output.
  bool pump(int ms) {
    pollfd p{m_fd, POLLIN, 0};
    if (::poll(&p, 1, ms) <= 0) return true;
    char buf[4096];
    ssize_t n = ::read(m_fd, buf, sizeof buf);
    if (n <= 0) return false;
    m_out.append(buf, size_t(n));
    return true;
  }
  // Waits (with a deadline) until the output holds `lines` complete lines.
  bool wait_lines(size_t lines, int deadline_ms) {
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(deadline_ms);
    while (size_t(std::count(m_out.begin(), m_out.end(), '\n')) < lines) {
      if (std::chrono::steady_clock::now() > end) return false;
      if (!pump(20)) return size_t(std::count(m_out.begin(), m_out.end(), '\n')) >= lines;
    }
    return true;
  }
  void kill() {
    if (m_pid <= 0) return;
    ::kill(m_pid, SIGKILL);
    int status = 0;
    ::waitpid(m_pid, &status, 0);
    m_pid = -1;
  }
  // After kill(): everything it wrote, complete lines only.
  std::vector<std::string> lines() {
    while (pump(1000)) {
    }
    std::vector<std::string> out;
    size_t start = 0;
    for (size_t nl; (nl = m_out.find('\n', start)) != std::string::npos; start = nl + 1)
      out.push_back(m_out.substr(start, nl - start));
    return out;
  }
  const std::string& output() const { return m_out; }

private:
  pid_t m_pid = -1;
  int m_fd = -1;
  std::string m_out;
};

// --- round trips ----------------------------------------------------------------------------

TEST(Store, CreatesAFreshStoreAtTheCurrentSchema) {
  TempDir tmp;
  auto store = open_store(tmp / "state");
  ASSERT_TRUE(store);
  EXPECT_EQ(store->schema_version(), k_schema_version);
  auto v = store->variants();
  ASSERT_TRUE(v);
  EXPECT_TRUE(v->empty());
}

TEST(Store, ImageRoundTrip) {
  TempDir tmp;
  auto store = open_store(tmp.path());
  ASSERT_TRUE(store);
  for (bool with_source : {false, true}) {
    ImageRecord img = make_image(with_source ? 2 : 1, with_source);
    ASSERT_TRUE(store->put_image(img));
    auto got = store->get_image(img.hash);
    ASSERT_TRUE(got) << got.error().message;
    ASSERT_TRUE(got->has_value());
    EXPECT_EQ(bytes_of(**got), bytes_of(img));
    EXPECT_EQ((*got)->source.has_value(), with_source);
    if (with_source) {
      EXPECT_EQ((*got)->source->headers.size(), 2u);
    }
  }
  auto missing = store->get_image(ImageHash{1, 2});
  ASSERT_TRUE(missing);
  EXPECT_FALSE(missing->has_value());
}

// The PTX of a SASS image from Triton's cache is kept with the image; a record written before
// the field existed (it ends after first_seen) still reads, without it.
TEST(Store, ImageWithTritonPtxRoundTripsAndOlderRecordsStillRead) {
  TempDir tmp;
  auto store = open_store(tmp.path());
  ASSERT_TRUE(store);
  ImageRecord img = make_image(3, false);
  img.triton = proto::Image::Triton{"/home/svc/.triton/cache/ab12/k.cubin", ".version 8.4\n"};
  ASSERT_TRUE(store->put_image(img));
  auto got = store->get_image(img.hash);
  ASSERT_TRUE(got && got->has_value());
  ASSERT_TRUE((*got)->triton.has_value());
  EXPECT_EQ((*got)->triton->cubin_path, img.triton->cubin_path);
  EXPECT_EQ((*got)->triton->ptx, img.triton->ptx);

  ImageRecord plain = make_image(4, true);
  auto older = rec::encode(plain); // no Triton field: as an older honed wrote it
  ASSERT_TRUE(older);
  auto decoded = rec::decode_image(*older);
  ASSERT_TRUE(decoded) << decoded.error().message;
  EXPECT_FALSE(decoded->triton.has_value());
  EXPECT_EQ(bytes_of(*decoded), *older);

  // A record that says "no Triton field" in a byte of its own is not one the store writes: it
  // would not encode back to the same bytes (found by the store_record fuzzer).
  std::string odd = older->substr(0, older->size() - 8) + std::string(1, '\0');
  uint64_t sum = rec::checksum64(odd);
  odd.append(reinterpret_cast<const char*>(&sum), 8);
  EXPECT_FALSE(rec::decode_image(odd));
}

// The inputs of the JIT link that made a cubin are kept with the image, with or without a Triton
// field before them; a record that says "no Triton field" with nothing after it is refused.
TEST(Store, ImageWithLinkInputsRoundTrips) {
  TempDir tmp;
  auto store = open_store(tmp.path());
  ASSERT_TRUE(store);
  for (bool with_triton : {false, true}) {
    ImageRecord img = make_image(with_triton ? 6 : 5, true);
    img.format = proto::ImageFormat::cubin;
    if (with_triton) img.triton = proto::Image::Triton{"/t/k.cubin", ".version 8.4\n"};
    proto::Image::Linked linked;
    linked.inputs.push_back({1, "shared.cl", ".version 9.0\n", 13, true});
    linked.inputs.push_back({0, "other.cubin", "", 0, false});
    img.linked = linked;
    ASSERT_TRUE(store->put_image(img));
    auto got = store->get_image(img.hash);
    ASSERT_TRUE(got && got->has_value()) << with_triton;
    EXPECT_EQ((*got)->triton.has_value(), with_triton);
    ASSERT_TRUE((*got)->linked.has_value());
    ASSERT_EQ((*got)->linked->inputs.size(), 2u);
    EXPECT_EQ((*got)->linked->inputs[0].name, "shared.cl");
    EXPECT_EQ((*got)->linked->inputs[0].ptx, ".version 9.0\n");
    EXPECT_EQ((*got)->linked->inputs[0].ptx_size, 13u);
    EXPECT_TRUE((*got)->linked->inputs[0].from_nvrtc);
    EXPECT_EQ((*got)->linked->inputs[1].type, 0u);
    auto encoded = rec::encode(**got);
    ASSERT_TRUE(encoded);
    auto decoded = rec::decode_image(*encoded);
    ASSERT_TRUE(decoded) << decoded.error().message;
    EXPECT_EQ(bytes_of(*decoded), *encoded);
  }
}

TEST(Store, KernelRoundTripAndListing) {
  TempDir tmp;
  auto store = open_store(tmp.path());
  ASSERT_TRUE(store);
  std::vector<KernelRecord> ks = {make_kernel(kernel_key(1, "a")), make_kernel(kernel_key(1, "ab")),
                                  make_kernel(kernel_key(2, "a"))};
  for (const auto& k : ks) ASSERT_TRUE(store->put_kernel(k));
  for (const auto& k : ks) {
    auto got = store->get_kernel(k.key);
    ASSERT_TRUE(got) << got.error().message;
    ASSERT_TRUE(got->has_value());
    EXPECT_EQ(bytes_of(**got), bytes_of(k));
  }
  // An update replaces the record.
  ks[0].launches = 7;
  ks[0].state = KernelState::verified;
  ASSERT_TRUE(store->put_kernel(ks[0]));
  auto all = store->kernels();
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 3u);
  auto it = std::find_if(all->begin(), all->end(), [&](auto& k) { return k.key == ks[0].key; });
  ASSERT_NE(it, all->end());
  EXPECT_EQ(it->launches, 7u);
  EXPECT_STREQ(to_string(it->state), "verified");

  KernelRecord nameless;
  EXPECT_FALSE(store->put_kernel(nameless));
}

TEST(Store, VariantRoundTrip) {
  TempDir tmp;
  auto store = open_store(tmp.path());
  ASSERT_TRUE(store);
  VariantRecord v = make_variant(kernel_key(1), 1);
  ASSERT_TRUE(store->put_variant(v));
  auto got = store->get_variant(v.id);
  ASSERT_TRUE(got) << got.error().message;
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ(bytes_of(**got), bytes_of(v));
  EXPECT_EQ((*got)->guard, v.guard);
  EXPECT_EQ((*got)->speedup, v.speedup);
  EXPECT_EQ((*got)->image, v.image);

  // State, speedup and evidence are not part of the id: updating them keeps the id.
  v.state = VariantState::disabled;
  v.evidence_json = "{}";
  EXPECT_EQ(variant_id_of(v), v.id);
  ASSERT_TRUE(store->put_variant(v));
  got = store->get_variant(v.id);
  ASSERT_TRUE(got && got->has_value());
  EXPECT_EQ((*got)->state, VariantState::disabled);
  EXPECT_STREQ(to_string((*got)->state), "disabled");
}

TEST(Store, VariantIdCoversEveryIdentityField) {
  VariantRecord base = make_variant(kernel_key(1), 4);
  std::vector<std::function<void(VariantRecord&)>> changes = {
      [](auto& v) { v.kernel.entry += "x"; },
      [](auto& v) { v.kernel.image.lo ^= 1; },
      [](auto& v) { v.arch = "sm_80"; },
      [](auto& v) { v.driver_major = 12; },
      [](auto& v) { v.strategy = "llm"; },
      [](auto& v) { v.format = proto::ImageFormat::cubin; },
      [](auto& v) { v.image.back() = 'y'; },
      [](auto& v) { v.entry += "2"; },
      [](auto& v) { v.jit_options.pop_back(); },
      [](auto& v) { std::swap(v.jit_options[0], v.jit_options[1]); },
      [](auto& v) { v.guard.block[1] = 2; },
      [](auto& v) { v.guard.no_alias = !v.guard.no_alias; },
      [](auto& v) { v.guard.scalars[0].offset = 16; }};
  std::set<VariantId> ids{variant_id_of(base)};
  for (auto& change : changes) {
    VariantRecord v = base;
    change(v);
    ids.insert(variant_id_of(v));
  }
  EXPECT_EQ(ids.size(), changes.size() + 1);
  // The same inputs give the same id (no pointers, padding or clock in it).
  EXPECT_EQ(variant_id_of(make_variant(kernel_key(1), 4)), variant_id_of(base));
}

TEST(Store, PutVariantRefusesAnIdThatDoesNotMatchTheContent) {
  TempDir tmp;
  auto store = open_store(tmp.path());
  ASSERT_TRUE(store);
  VariantRecord v = make_variant(kernel_key(1), 1);
  v.image += "changed after the id was computed";
  auto r = store->put_variant(v);
  ASSERT_FALSE(r);
  EXPECT_TRUE(contains(r.error().message, "does not match its content")) << r.error().message;
  auto all = store->variants();
  ASSERT_TRUE(all);
  EXPECT_TRUE(all->empty());
}

TEST(Store, VariantsOfUsesTheIndexAndKeepsKernelsApart) {
  TempDir tmp;
  auto store = open_store(tmp.path());
  ASSERT_TRUE(store);
  // Same image, one entry name a prefix of the other; and another image.
  KernelKey a = kernel_key(1, "k"), ab = kernel_key(1, "k2"), other = kernel_key(2, "k");
  std::set<VariantId> of_a, of_ab, of_other;
  for (int n = 0; n < 5; ++n) {
    auto v = make_variant(a, n);
    ASSERT_TRUE(store->put_variant(v));
    of_a.insert(v.id);
  }
  for (int n = 0; n < 3; ++n) {
    auto v = make_variant(ab, n);
    ASSERT_TRUE(store->put_variant(v));
    of_ab.insert(v.id);
    auto w = make_variant(other, n, "sm_80");
    ASSERT_TRUE(store->put_variant(w));
    of_other.insert(w.id);
  }
  auto got_a = store->variants_of(a), got_ab = store->variants_of(ab),
       got_other = store->variants_of(other), none = store->variants_of(kernel_key(3));
  ASSERT_TRUE(got_a && got_ab && got_other && none);
  EXPECT_EQ(ids_of(*got_a), of_a);
  EXPECT_EQ(ids_of(*got_ab), of_ab);
  EXPECT_EQ(ids_of(*got_other), of_other);
  EXPECT_TRUE(none->empty());
  auto all = store->variants();
  ASSERT_TRUE(all);
  EXPECT_EQ(all->size(), 11u);
}

TEST(Store, DeleteVariantRemovesItAndItsIndexEntry) {
  TempDir tmp;
  auto store = open_store(tmp.path());
  ASSERT_TRUE(store);
  auto v1 = make_variant(kernel_key(1), 1), v2 = make_variant(kernel_key(1), 2);
  ASSERT_TRUE(store->put_variant(v1));
  ASSERT_TRUE(store->put_variant(v2));
  ASSERT_TRUE(store->delete_variant(v1.id));
  auto got = store->get_variant(v1.id);
  ASSERT_TRUE(got);
  EXPECT_FALSE(got->has_value());
  auto of = store->variants_of(v1.kernel);
  ASSERT_TRUE(of);
  EXPECT_EQ(ids_of(*of), std::set<VariantId>{v2.id});
  EXPECT_TRUE(store->delete_variant(v1.id)) << "deleting an absent variant is not an error";
  store.reset();
  RawDb raw(tmp.path());
  EXPECT_FALSE(raw.get(rec::k_cf_variant_index, rec::variant_index_key(v1.kernel, v1.id)));
  EXPECT_TRUE(raw.get(rec::k_cf_variant_index, rec::variant_index_key(v2.kernel, v2.id)));
}

TEST(Store, SizeFlushAndReopen) {
  TempDir tmp;
  std::vector<VariantRecord> vs;
  {
    auto store = open_store(tmp.path());
    ASSERT_TRUE(store);
    uint64_t empty = store->size_bytes();
    std::mt19937_64 rng(1);
    for (int n = 0; n < 8; ++n) {
      auto v = make_variant(kernel_key(uint64_t(n)), n);
      v.image.resize(64 << 10);
      for (auto& c : v.image) c = char(rng()); // incompressible
      v.id = variant_id_of(v);
      ASSERT_TRUE(store->put_variant(v));
      vs.push_back(v);
    }
    ASSERT_TRUE(store->put_kernel(make_kernel(kernel_key(1))));
    uint64_t before_flush = store->size_bytes();
    EXPECT_GT(before_flush, empty + 8 * (64 << 10) / 2);
    ASSERT_TRUE(store->flush());
    uint64_t after_flush = store->size_bytes();
    EXPECT_GE(after_flush, 8u * (64 << 10)); // now in SST files
    EXPECT_LT(after_flush, 4u * 8 * (64 << 10));
  }
  auto store = open_store(tmp.path());
  ASSERT_TRUE(store);
  EXPECT_EQ(store->schema_version(), k_schema_version);
  for (const auto& v : vs) {
    auto got = store->get_variant(v.id);
    ASSERT_TRUE(got && got->has_value());
    EXPECT_EQ(bytes_of(**got), bytes_of(v));
  }
  auto k = store->get_kernel(kernel_key(1));
  ASSERT_TRUE(k && k->has_value());
  EXPECT_GT(store->size_bytes(), 8u * (64 << 10));
}

TEST(Store, RecordLimitsAreCheckedBeforeWriting) {
  TempDir tmp;
  auto store = open_store(tmp.path());
  ASSERT_TRUE(store);
  VariantRecord v = make_variant(kernel_key(1), 1);
  v.guard.scalars.resize(rec::k_max_guard_scalars + 1);
  v.id = variant_id_of(v);
  auto r = store->put_variant(v);
  ASSERT_FALSE(r);
  EXPECT_TRUE(contains(r.error().message, "guard")) << r.error().message;
}

// --- opening --------------------------------------------------------------------------------

TEST(StoreOpen, RefusesADirectoryWithUnrelatedFiles) {
  TempDir tmp;
  write_file(tmp / "notes.txt", "hello");
  fs::create_directory(tmp / "photos");
  auto s = Store::open(tmp.path());
  ASSERT_FALSE(s);
  EXPECT_TRUE(contains(s.error().message, "is not a hone store")) << s.error().message;
  EXPECT_TRUE(contains(s.error().message, "notes.txt")) << s.error().message;
  EXPECT_FALSE(fs::exists(tmp / "CURRENT")) << "nothing may be created there";
}

TEST(StoreOpen, RefusesARocksDbDatabaseThatIsNotAStore) {
  TempDir tmp;
  { RawDb raw(tmp.path(), {"users", "orders"}); }
  auto s = Store::open(tmp.path());
  ASSERT_FALSE(s);
  EXPECT_TRUE(contains(s.error().message, "not a hone store")) << s.error().message;
  EXPECT_TRUE(contains(s.error().message, "users")) << s.error().message;
}

TEST(StoreOpen, FinishesACreationThatWasInterrupted) {
  TempDir tmp;
  // RocksDB made the database and two of hone's families, then the process died.
  { RawDb raw(tmp.path(), {rec::k_cf_images, rec::k_cf_meta}); }
  auto ro = Store::open(tmp.path(), {.read_only = true});
  ASSERT_FALSE(ro);
  EXPECT_TRUE(contains(ro.error().message, "never completely created")) << ro.error().message;
  auto store = open_store(tmp.path());
  ASSERT_TRUE(store);
  EXPECT_EQ(store->schema_version(), k_schema_version);
  ASSERT_TRUE(store->put_variant(make_variant(kernel_key(1), 1)));
}

TEST(StoreOpen, RefusesARocksDbDatabaseWithDataInItsDefaultFamily) {
  TempDir tmp;
  {
    RawDb raw(tmp.path(), {rec::k_cf_meta});
    raw.put(rocksdb::kDefaultColumnFamilyName, "user", "data");
  }
  auto s = Store::open(tmp.path());
  ASSERT_FALSE(s);
  EXPECT_TRUE(contains(s.error().message, "not a hone store")) << s.error().message;
  EXPECT_EQ(RawDb(tmp.path()).get(rocksdb::kDefaultColumnFamilyName, "user"), "data");
}

TEST(StoreOpen, RefusesAFile) {
  TempDir tmp;
  write_file(tmp / "file", "x");
  auto s = Store::open(tmp / "file");
  ASSERT_FALSE(s);
  EXPECT_TRUE(contains(s.error().message, "not a directory")) << s.error().message;
}

TEST(StoreOpen, ReadOnlyNeedsAStoreAndRefusesWrites) {
  TempDir tmp;
  auto none = Store::open(tmp / "absent", {.read_only = true});
  ASSERT_FALSE(none);
  EXPECT_TRUE(contains(none.error().message, "no hone store")) << none.error().message;
  EXPECT_FALSE(fs::exists(tmp / "absent"));
  auto no_create = Store::open(tmp / "absent", {.create_if_missing = false});
  ASSERT_FALSE(no_create);

  auto v = make_variant(kernel_key(1), 1);
  {
    auto store = open_store(tmp / "s");
    ASSERT_TRUE(store && store->put_variant(v));
  }
  auto ro = open_store(tmp / "s", {.read_only = true});
  ASSERT_TRUE(ro);
  auto got = ro->get_variant(v.id);
  ASSERT_TRUE(got && got->has_value());
  auto w = ro->put_variant(v);
  ASSERT_FALSE(w);
  EXPECT_TRUE(contains(w.error().message, "read-only")) << w.error().message;
  EXPECT_FALSE(ro->put_kernel(make_kernel(kernel_key(1))));
  EXPECT_FALSE(ro->delete_variant(v.id));
  EXPECT_TRUE(ro->flush());
  EXPECT_GT(ro->size_bytes(), 0u);
}

TEST(StoreOpen, ALockHeldByAnotherProcessIsReportedAndReadOnlyStillWorks) {
  TempDir tmp;
  auto v = make_variant(kernel_key(1), 1);
  {
    auto store = open_store(tmp.path());
    ASSERT_TRUE(store && store->put_variant(v));
  }
  Child holder({"hold", tmp.path().string()});
  ASSERT_TRUE(holder.wait_lines(1, 10000)) << holder.output();
  ASSERT_EQ(holder.output(), "ready\n");

  auto s = Store::open(tmp.path());
  ASSERT_FALSE(s);
  EXPECT_TRUE(contains(s.error().message, "another honed is using " + tmp.path().string()))
      << s.error().message;

  auto ro = open_store(tmp.path(), {.read_only = true});
  ASSERT_TRUE(ro);
  auto got = ro->get_variant(v.id);
  ASSERT_TRUE(got && got->has_value());

  holder.kill();
  EXPECT_TRUE(open_store(tmp.path()));
}

TEST(StoreOpen, ASecondOpenInTheSameProcessIsRefused) {
  TempDir tmp;
  auto first = open_store(tmp.path());
  ASSERT_TRUE(first);
  auto second = Store::open(tmp.path());
  ASSERT_FALSE(second);
  EXPECT_TRUE(contains(second.error().message, "another honed is using")) << second.error().message;
}

// --- schema ---------------------------------------------------------------------------------

TEST(StoreSchema, ANewerSchemaIsRefusedAndLeftUntouched) {
  TempDir tmp;
  { ASSERT_TRUE(open_store(tmp.path())); }
  { RawDb(tmp.path()).put(rec::k_cf_meta, std::string(rec::k_meta_schema), le32(99)); }
  for (bool read_only : {false, true}) {
    auto s = Store::open(tmp.path(), {.read_only = read_only});
    ASSERT_FALSE(s);
    const auto& m = s.error().message;
    EXPECT_TRUE(contains(m, "schema version 99")) << m;
    EXPECT_TRUE(contains(m, "understands (1)")) << m;
    EXPECT_TRUE(contains(m, "Upgrade hone")) << m;
  }
  EXPECT_EQ(RawDb(tmp.path()).get(rec::k_cf_meta, std::string(rec::k_meta_schema)), le32(99));
}

TEST(StoreSchema, ADamagedSchemaKeyIsReported) {
  TempDir tmp;
  { ASSERT_TRUE(open_store(tmp.path())); }
  { RawDb(tmp.path()).put(rec::k_cf_meta, std::string(rec::k_meta_schema), "x"); }
  auto s = Store::open(tmp.path());
  ASSERT_FALSE(s);
  EXPECT_TRUE(contains(s.error().message, "damaged")) << s.error().message;
}

// Schema 0: images, kernels, variants and meta, no version key, no index, no quarantine.
void make_v0_store(const fs::path& dir, const std::vector<VariantRecord>& vs,
                   std::optional<uint32_t> explicit_version, bool corrupt_last) {
  RawDb raw(dir, {rec::k_cf_images, rec::k_cf_kernels, rec::k_cf_variants, rec::k_cf_meta});
  for (size_t i = 0; i < vs.size(); ++i) {
    std::string value = *rec::encode(vs[i]);
    if (corrupt_last && i + 1 == vs.size()) value[value.size() / 2] ^= 0x40;
    raw.put(rec::k_cf_variants, rec::variant_key(vs[i].id), value);
  }
  raw.put(rec::k_cf_kernels, rec::kernel_key(vs[0].kernel),
          *rec::encode(make_kernel(vs[0].kernel)));
  if (explicit_version)
    raw.put(rec::k_cf_meta, std::string(rec::k_meta_schema), le32(*explicit_version));
}

TEST(StoreSchema, SchemaZeroMigratesToOne) {
  for (std::optional<uint32_t> explicit_version :
       {std::optional<uint32_t>{}, std::optional<uint32_t>{0}}) {
    TempDir tmp;
    KernelKey k = kernel_key(5);
    std::vector<VariantRecord> vs = {make_variant(k, 1), make_variant(k, 2),
                                     make_variant(kernel_key(6), 3), make_variant(k, 4)};
    make_v0_store(tmp.path(), vs, explicit_version, /*corrupt_last=*/true);

    // Diagnostics cannot migrate: a read-only open says what to do.
    auto ro = Store::open(tmp.path(), {.read_only = true});
    ASSERT_FALSE(ro);
    EXPECT_TRUE(contains(ro.error().message, "needs migrating")) << ro.error().message;

    {
      auto store = open_store(tmp.path());
      ASSERT_TRUE(store);
      EXPECT_EQ(store->schema_version(), 1u);
      auto of = store->variants_of(k); // served by the index the migration built
      ASSERT_TRUE(of);
      EXPECT_EQ(ids_of(*of), (std::set<VariantId>{vs[0].id, vs[1].id}));
      auto q = store->quarantined();
      ASSERT_TRUE(q);
      ASSERT_EQ(q->size(), 1u);
      EXPECT_EQ((*q)[0].key_hex, vs[3].id.hex());
      EXPECT_TRUE(contains((*q)[0].reason, "migration")) << (*q)[0].reason;
      auto kern = store->get_kernel(k);
      ASSERT_TRUE(kern && kern->has_value());
    }
    RawDb raw(tmp.path());
    EXPECT_TRUE(raw.has(rec::k_cf_variant_index) && raw.has(rec::k_cf_quarantine));
    EXPECT_EQ(raw.get(rec::k_cf_meta, std::string(rec::k_meta_schema)), le32(1));
  }
}

// --- corruption -----------------------------------------------------------------------------

TEST(StoreCorruption, ADamagedVariantIsQuarantinedAndNeverServed) {
  TempDir tmp;
  KernelKey k = kernel_key(1);
  auto good = make_variant(k, 1), bad = make_variant(k, 2), bad2 = make_variant(k, 3);
  {
    auto store = open_store(tmp.path());
    ASSERT_TRUE(store);
    for (auto& v : {good, bad, bad2}) ASSERT_TRUE(store->put_variant(v));
  }
  {
    RawDb raw(tmp.path());
    std::string key = rec::variant_key(bad.id);
    std::string value = *raw.get(rec::k_cf_variants, key);
    value[value.size() / 2] ^= 0x01; // one bit in the image
    raw.put(rec::k_cf_variants, key, value);
    // A sound checksum over wrong content: the format byte of another build, re-sealed.
    std::string key2 = rec::variant_key(bad2.id);
    std::string v2 = *raw.get(rec::k_cf_variants, key2);
    v2[0] = 9;
    uint64_t sum = rec::checksum64(std::string_view(v2).substr(0, v2.size() - 8));
    std::memcpy(v2.data() + v2.size() - 8, &sum, 8);
    raw.put(rec::k_cf_variants, key2, v2);
  }
  auto store = open_store(tmp.path());
  ASSERT_TRUE(store);
  auto got = store->get_variant(bad.id);
  ASSERT_FALSE(got);
  EXPECT_TRUE(contains(got.error().message, "checksum")) << got.error().message;
  EXPECT_TRUE(contains(got.error().message, "quarantine")) << got.error().message;
  // It is gone from the variants, from the index, and from every listing.
  got = store->get_variant(bad.id);
  ASSERT_TRUE(got);
  EXPECT_FALSE(got->has_value());
  auto all = store->variants(); // finds and moves bad2
  ASSERT_TRUE(all);
  EXPECT_EQ(ids_of(*all), std::set<VariantId>{good.id});
  auto of = store->variants_of(k);
  ASSERT_TRUE(of);
  EXPECT_EQ(ids_of(*of), std::set<VariantId>{good.id});

  auto q = store->quarantined();
  ASSERT_TRUE(q);
  ASSERT_EQ(q->size(), 2u);
  std::map<std::string, QuarantinedRecord> by_key;
  for (auto& r : *q) by_key[r.key_hex] = r;
  ASSERT_TRUE(by_key.contains(bad.id.hex()));
  ASSERT_TRUE(by_key.contains(bad2.id.hex()));
  EXPECT_EQ(by_key[bad.id.hex()].column_family, "variants");
  EXPECT_TRUE(contains(by_key[bad.id.hex()].reason, "checksum")) << by_key[bad.id.hex()].reason;
  EXPECT_TRUE(contains(by_key[bad2.id.hex()].reason, "record format 9"))
      << by_key[bad2.id.hex()].reason;
  EXPECT_GT(by_key[bad.id.hex()].when, 1600000000);

  // The move was one batch: record gone, index entry gone, report there — also after a reopen.
  store.reset();
  RawDb raw(tmp.path());
  EXPECT_FALSE(raw.get(rec::k_cf_variants, rec::variant_key(bad.id)));
  EXPECT_FALSE(raw.get(rec::k_cf_variant_index, rec::variant_index_key(k, bad.id)));
  EXPECT_TRUE(raw.get(rec::k_cf_variant_index, rec::variant_index_key(k, good.id)));
}

TEST(StoreCorruption, ReadOnlyReportsADamagedVariantWithoutMovingIt) {
  TempDir tmp;
  auto v = make_variant(kernel_key(1), 1);
  { ASSERT_TRUE(open_store(tmp.path())->put_variant(v)); }
  {
    RawDb raw(tmp.path());
    std::string value = *raw.get(rec::k_cf_variants, rec::variant_key(v.id));
    value.resize(value.size() - 3); // truncated
    raw.put(rec::k_cf_variants, rec::variant_key(v.id), value);
  }
  auto ro = open_store(tmp.path(), {.read_only = true});
  ASSERT_TRUE(ro);
  auto got = ro->get_variant(v.id);
  ASSERT_FALSE(got);
  EXPECT_TRUE(contains(got.error().message, "left in place")) << got.error().message;
  auto all = ro->variants();
  ASSERT_TRUE(all);
  EXPECT_TRUE(all->empty());
}

TEST(StoreCorruption, DamagedKernelsAndImagesAreQuarantinedToo) {
  TempDir tmp;
  auto k1 = make_kernel(kernel_key(1)), k2 = make_kernel(kernel_key(2));
  auto img = make_image(1, true);
  {
    auto store = open_store(tmp.path());
    ASSERT_TRUE(store);
    ASSERT_TRUE(store->put_kernel(k1) && store->put_kernel(k2) && store->put_image(img));
  }
  {
    RawDb raw(tmp.path());
    raw.put(rec::k_cf_kernels, rec::kernel_key(k2.key), "garbage");
    // A sound record under the wrong key.
    raw.put(rec::k_cf_images, rec::image_key(img.hash), *rec::encode(make_image(2, false)));
  }
  auto store = open_store(tmp.path());
  ASSERT_TRUE(store);
  auto ks = store->kernels();
  ASSERT_TRUE(ks);
  ASSERT_EQ(ks->size(), 1u);
  EXPECT_EQ((*ks)[0].key, k1.key);
  auto i = store->get_image(img.hash);
  ASSERT_FALSE(i);
  EXPECT_TRUE(contains(i.error().message, "stored under")) << i.error().message;
  auto q = store->quarantined();
  ASSERT_TRUE(q);
  std::set<std::string> families;
  for (auto& r : *q) families.insert(r.column_family);
  EXPECT_EQ(families, (std::set<std::string>{"kernels", "images"}));
}

TEST(StoreCorruption, EveryFlippedByteAndTruncationOfARecordIsCaught) {
  auto v = make_variant(kernel_key(1), 3);
  std::string value = *rec::encode(v);
  for (size_t i = 0; i < value.size(); ++i) {
    for (uint8_t mask : {0x01, 0x80}) {
      std::string bad = value;
      bad[i] = char(bad[i] ^ mask);
      EXPECT_FALSE(rec::decode_variant(bad)) << "flip at " << i;
    }
  }
  for (size_t n = 0; n < value.size(); ++n) EXPECT_FALSE(rec::decode_variant(value.substr(0, n)));
  EXPECT_FALSE(rec::decode_kernel(value)) << "a variant is not a kernel";
  // Random bytes with a valid checksum exercise the bounds-checked decoder behind the checksum.
  std::mt19937_64 rng(7);
  for (int round = 0; round < 2000; ++round) {
    std::string junk = value.substr(0, 2 + rng() % (value.size() - 10));
    for (size_t j = 2; j < junk.size(); ++j)
      if (rng() % 8 == 0) junk[j] = char(rng());
    uint64_t sum = rec::checksum64(junk);
    junk.append(reinterpret_cast<const char*>(&sum), 8);
    (void)rec::decode_variant(junk); // must not crash or over-read (ASan builds check)
  }
}

// Damage inside an SST file: a clean error at open or read, never a crash, never wrong data.
TEST(StoreCorruption, ADamagedSstFileGivesACleanError) {
  TempDir tmp;
  std::vector<VariantRecord> vs;
  std::mt19937_64 rng(3);
  {
    auto store = open_store(tmp.path());
    ASSERT_TRUE(store);
    for (int n = 0; n < 40; ++n) {
      auto v = make_variant(kernel_key(uint64_t(n)), n);
      v.image.resize(8 << 10);
      for (auto& c : v.image) c = char(rng());
      v.id = variant_id_of(v);
      ASSERT_TRUE(store->put_variant(v));
      vs.push_back(v);
    }
    ASSERT_TRUE(store->flush());
  }
  fs::path biggest;
  for (const auto& e : fs::directory_iterator(tmp.path()))
    if (e.path().extension() == ".sst" &&
        (biggest.empty() || e.file_size() > fs::file_size(biggest)))
      biggest = e.path();
  ASSERT_FALSE(biggest.empty());
  {
    std::string sst = read_file(biggest);
    ASSERT_GT(sst.size(), 100000u);
    for (size_t i = sst.size() / 4; i < sst.size() / 2; i += 512) sst[i] = char(sst[i] ^ 0x5a);
    write_file(biggest, sst);
  }
  auto opened = Store::open(tmp.path());
  if (!opened) {
    const auto& m = opened.error().message;
    EXPECT_TRUE(contains(m, "Corruption") || contains(m, "damaged")) << m;
    std::printf("[          ] refused at open: %s\n", m.c_str());
    return;
  }
  auto& store = *opened;
  int errors = 0;
  std::string first_error;
  for (const auto& v : vs) {
    auto got = store->get_variant(v.id);
    if (!got) {
      ++errors;
      if (first_error.empty()) first_error = got.error().message;
      continue;
    }
    if (got->has_value()) {
      EXPECT_EQ(bytes_of(**got), bytes_of(v)) << "wrong data served";
    }
  }
  auto all = store->variants();
  if (all) {
    for (const auto& v : *all) EXPECT_EQ(variant_id_of(v), v.id);
  } else {
    ++errors;
  }
  EXPECT_GT(errors, 0) << "damage in the data blocks went unnoticed";
  std::printf("[          ] %d errors, the first: %s\n", errors, first_error.c_str());
  EXPECT_TRUE(first_error.empty() || contains(first_error, "Corruption") ||
              contains(first_error, "damaged"))
      << first_error;
}

// --- crashes --------------------------------------------------------------------------------

// The same bytes store_crash_helper.cpp writes.
std::string pattern(uint64_t seed, uint64_t i, size_t size) {
  std::string s(size, '\0');
  for (size_t k = 0; k < size; ++k) s[k] = char((k * 131 + i * 7 + seed * 13) & 0xff);
  return s;
}

TEST(StoreCrash, SigkillDuringWritesNeverLosesOrDamagesConfirmedRecords) {
  TempDir tmp;
  fs::path dir = tmp / "state";
  std::set<std::string> confirmed;
  size_t last_count = 0;
  std::mt19937 rng(12345);
  constexpr int k_iterations = 24;
  int killed_mid_write = 0;
  for (int iter = 0; iter < k_iterations; ++iter) {
    {
      Child child({"write", dir.string(), std::to_string(iter)});
      if (iter % 4 == 0) {
        // Now and then while it creates, opens or recovers the store.
        std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 15));
      } else {
        ASSERT_TRUE(child.wait_lines(1, 20000))
            << "the writer confirmed nothing: " << child.output();
        auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(rng() % 60);
        while (std::chrono::steady_clock::now() < until) child.pump(5);
        ++killed_mid_write;
      }
      child.kill();
      for (const auto& line : child.lines()) {
        ASSERT_EQ(line.size(), 32u) << "helper said: " << line;
        confirmed.insert(line);
      }
    }

    auto store = open_store(dir);
    ASSERT_TRUE(store) << "iteration " << iter;
    auto all = store->variants();
    ASSERT_TRUE(all) << all.error().message;
    auto q = store->quarantined();
    ASSERT_TRUE(q);
    EXPECT_TRUE(q->empty()) << "iteration " << iter << ": " << (*q)[0].reason;

    std::set<std::string> present;
    std::set<KernelKey> kernels;
    for (const auto& v : *all) {
      present.insert(v.id.hex());
      kernels.insert(v.kernel);
      unsigned long long seed = 0, i = 0;
      ASSERT_EQ(std::sscanf(v.evidence_json.c_str(), "{\"seed\":%llu,\"i\":%llu}", &seed, &i), 2);
      ASSERT_EQ(v.image, pattern(seed, i, v.image.size())) << "variant " << v.id.hex();
    }
    for (const auto& id : confirmed) EXPECT_TRUE(present.contains(id)) << "lost confirmed " << id;
    EXPECT_GE(all->size(), last_count) << "iteration " << iter;
    EXPECT_GE(all->size(), confirmed.size());
    last_count = all->size();

    // The index agrees with the records.
    std::set<std::string> indexed;
    for (const auto& k : kernels) {
      auto of = store->variants_of(k);
      ASSERT_TRUE(of);
      for (const auto& v : *of) indexed.insert(v.id.hex());
    }
    EXPECT_EQ(indexed, present);
    auto ks = store->kernels();
    ASSERT_TRUE(ks) << ks.error().message;
    for (const auto& k : *ks) EXPECT_EQ(k.tried.size(), 2u);
    if (testing::Test::HasFailure()) break;
  }
  EXPECT_GE(killed_mid_write, 18);
  EXPECT_GE(confirmed.size(), size_t(killed_mid_write));
  std::printf("[          ] %d kills, %zu confirmed variants, %zu present\n", k_iterations,
              confirmed.size(), last_count);
}

// --- export and import ----------------------------------------------------------------------

struct ExportFixture {
  TempDir tmp;
  std::vector<VariantRecord> verified_90, verified_80, others;
  fs::path file = tmp / "variants.hone";

  ExportFixture() {
    auto store = open_store(tmp / "a");
    for (int n = 0; n < 4; ++n) verified_90.push_back(make_variant(kernel_key(1), n, "sm_90"));
    for (int n = 0; n < 2; ++n) verified_80.push_back(make_variant(kernel_key(2), n, "sm_80"));
    others.push_back(make_variant(kernel_key(1), 10, "sm_90", VariantState::rejected));
    others.push_back(make_variant(kernel_key(1), 11, "sm_90", VariantState::imported));
    others.push_back(make_variant(kernel_key(1), 12, "sm_90", VariantState::disabled));
    for (auto* set : {&verified_90, &verified_80, &others})
      for (auto& v : *set) EXPECT_TRUE(store->put_variant(v));
    auto n = store->export_variants(file);
    EXPECT_TRUE(n) << n.error().message;
    EXPECT_EQ(n ? *n : 0u, 6u);
  }
};

TEST(StoreExport, RoundTripIntoASecondStore) {
  ExportFixture fx;
  auto b = open_store(fx.tmp / "b");
  ASSERT_TRUE(b);
  auto report = b->import_variants(fx.file);
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_EQ(report->imported, 6u);
  EXPECT_EQ(report->already_present, 0u);
  EXPECT_EQ(report->rejected, 0u);
  EXPECT_TRUE(report->problems.empty());

  auto all = b->variants();
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 6u);
  for (auto* set : {&fx.verified_90, &fx.verified_80}) {
    for (const auto& v : *set) {
      auto got = b->get_variant(v.id);
      ASSERT_TRUE(got && got->has_value());
      EXPECT_EQ((*got)->state, VariantState::imported);
      VariantRecord same = **got;
      same.state = v.state;
      EXPECT_EQ(bytes_of(same), bytes_of(v)) << "content, evidence and id survive the trip";
    }
  }
  auto of = b->variants_of(kernel_key(2));
  ASSERT_TRUE(of);
  EXPECT_EQ(of->size(), 2u);

  // Again: everything is already there.
  auto again = b->import_variants(fx.file);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->imported, 0u);
  EXPECT_EQ(again->already_present, 6u);

  // Exported files leave nothing else behind.
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(fx.tmp.path())) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b", "variants.hone"}));
}

TEST(StoreExport, OnlyOneArchWhenAsked) {
  ExportFixture fx;
  auto a = open_store(fx.tmp / "a");
  ASSERT_TRUE(a);
  fs::path f80 = fx.tmp / "sm80.hone";
  auto n = a->export_variants(f80, "sm_80");
  ASSERT_TRUE(n);
  EXPECT_EQ(*n, 2u);
  auto b = open_store(fx.tmp / "b");
  auto report = b->import_variants(f80);
  ASSERT_TRUE(report);
  EXPECT_EQ(report->imported, 2u);
  auto all = b->variants();
  ASSERT_TRUE(all);
  for (const auto& v : *all) EXPECT_EQ(v.arch, "sm_80");
  // Nothing for an arch with no variants is still a valid, empty file.
  fs::path none = fx.tmp / "none.hone";
  auto zero = a->export_variants(none, "sm_100");
  ASSERT_TRUE(zero);
  EXPECT_EQ(*zero, 0u);
  auto empty_import = b->import_variants(none);
  ASSERT_TRUE(empty_import) << empty_import.error().message;
  EXPECT_EQ(empty_import->imported, 0u);
}

void expect_import_refused(const fs::path& store_dir, const fs::path& file,
                           const std::string& why) {
  auto b = open_store(store_dir);
  ASSERT_TRUE(b);
  auto report = b->import_variants(file);
  ASSERT_FALSE(report) << "imported " << report->imported << " from a bad file";
  EXPECT_TRUE(contains(report.error().message, why)) << report.error().message;
  EXPECT_TRUE(contains(report.error().message, file.string())) << report.error().message;
  auto all = b->variants();
  ASSERT_TRUE(all);
  EXPECT_TRUE(all->empty());
}

TEST(StoreExport, BadFilesImportNothingAndSayWhy) {
  ExportFixture fx;
  std::string good = read_file(fx.file);
  fs::path bad = fx.tmp / "bad.hone";

  write_file(bad, good.substr(0, good.size() - 100));
  expect_import_refused(fx.tmp / "b", bad, "truncated or damaged");
  write_file(bad, good.substr(0, 10));
  expect_import_refused(fx.tmp / "b", bad, "truncated");

  for (size_t at : {size_t(9), good.size() / 2, good.size() - 1}) {
    std::string flipped = good;
    flipped[at] = char(flipped[at] ^ 0x10);
    write_file(bad, flipped);
    expect_import_refused(fx.tmp / "b", bad, at == 9 ? "newer" : "checksum");
  }

  // A newer format, with a checksum that is right for it: refused for its version.
  std::string newer = good.substr(0, good.size() - 16);
  uint32_t v2 = export_file::k_format + 1;
  std::memcpy(newer.data() + 8, &v2, 4);
  XXH128_hash_t h = XXH3_128bits(newer.data(), newer.size());
  newer.append(reinterpret_cast<const char*>(&h.low64), 8);
  newer.append(reinterpret_cast<const char*>(&h.high64), 8);
  write_file(bad, newer);
  expect_import_refused(fx.tmp / "b", bad,
                        "export format version 2, newer than this hone reads (1)");

  write_file(bad, "");
  expect_import_refused(fx.tmp / "b", bad, "empty");
  write_file(bad, "PK\x03\x04 this is a zip file, not ours");
  expect_import_refused(fx.tmp / "b", bad, "not a hone export file");
  expect_import_refused(fx.tmp / "b", fx.tmp / "missing.hone", "cannot open");
}

TEST(StoreExport, ARecordThatFailsItsOwnChecksIsRejectedOthersImport) {
  TempDir tmp;
  auto v1 = make_variant(kernel_key(1), 1), v2 = make_variant(kernel_key(1), 2);
  std::string r2 = *rec::encode(v2);
  r2[r2.size() / 2] ^= 1; // this record is damaged; the file around it is sound
  fs::path file = tmp / "mixed.hone";
  ASSERT_TRUE(export_file::write(file, {*rec::encode(v1), r2}));
  auto store = open_store(tmp / "s");
  auto report = store->import_variants(file);
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_EQ(report->imported, 1u);
  EXPECT_EQ(report->rejected, 1u);
  ASSERT_EQ(report->problems.size(), 1u);
  EXPECT_TRUE(contains(report->problems[0], "record 1")) << report->problems[0];
}

TEST(StoreExport, TheFileLayoutIsTheDocumentedOne) {
  ExportFixture fx;
  std::string f = read_file(fx.file);
  ASSERT_GE(f.size(), 32u);
  EXPECT_EQ(f.substr(0, 8), "HONEVARS");
  uint32_t version = 0, count = 0;
  std::memcpy(&version, f.data() + 8, 4);
  std::memcpy(&count, f.data() + 12, 4);
  EXPECT_EQ(version, 1u);
  EXPECT_EQ(count, 6u);
  uint64_t len = 0;
  std::memcpy(&len, f.data() + 16, 8);
  auto first = rec::decode_variant(std::string_view(f).substr(24, size_t(len)));
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(first->state, VariantState::verified);
  auto parsed = export_file::parse(f);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->size(), 6u);
}

} // namespace
} // namespace hone::store
