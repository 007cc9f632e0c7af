// The RocksDB backend of Store (store/README.md has the layout and the durability choices).
#include "store/export_file.hpp"
#include "store/records.hpp"
#include "store/store.hpp"

#include <rocksdb/cache.h>
#include <rocksdb/convenience.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>

namespace hone::store {

namespace {

namespace fs = std::filesystem;
namespace rec = records;

// What makes a directory a hone store at all (schema 0 had these four) ...
const std::vector<std::string> k_required_cfs = {rec::k_cf_images, rec::k_cf_kernels,
                                                 rec::k_cf_variants, rec::k_cf_meta};
// ... and what schema 1 has. RocksDB's own "default" family is always there and unused.
const std::vector<std::string> k_schema_cfs = {rec::k_cf_images,   rec::k_cf_kernels,
                                               rec::k_cf_variants, rec::k_cf_variant_index,
                                               rec::k_cf_meta,     rec::k_cf_quarantine};

int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string le32(uint32_t v) {
  return std::string(reinterpret_cast<const char*>(&v), 4);
}
std::string le64(int64_t v) {
  return std::string(reinterpret_cast<const char*>(&v), 8);
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A file RocksDB itself creates in its directory (a creation interrupted before CURRENT was
// written leaves some of these): a directory holding only such files may become a store.
bool is_rocksdb_file(std::string_view n) {
  if (n == "LOCK" || n == "LOG" || n == "IDENTITY" || n == "CURRENT") return true;
  if (n == "lost+found") return true; // the state directory may be a file system of its own
  auto after = [&](std::string_view prefix) -> std::optional<std::string_view> {
    if (n.substr(0, prefix.size()) != prefix) return std::nullopt;
    return n.substr(prefix.size());
  };
  auto numbered = [&](std::string_view suffix) {
    return n.size() > suffix.size() && n.substr(n.size() - suffix.size()) == suffix &&
           all_digits(n.substr(0, n.size() - suffix.size()));
  };
  if (after("LOG.old.")) return true;
  if (auto rest = after("MANIFEST-")) return all_digits(*rest);
  if (auto rest = after("OPTIONS-")) return all_digits(*rest) || rest->ends_with(".dbtmp");
  return numbered(".log") || numbered(".sst") || numbered(".blob") || numbered(".dbtmp");
}

rocksdb::CompressionType best_compression() {
  auto have = rocksdb::GetSupportedCompressions();
  for (auto c : {rocksdb::kZSTD, rocksdb::kLZ4Compression, rocksdb::kSnappyCompression})
    if (std::find(have.begin(), have.end(), c) != have.end()) return c;
  return rocksdb::kNoCompression;
}

// Tuned for a small daemon store: tens of MiB, few writes a second, values from a few bytes
// (kernels) to megabytes (images, variants).
rocksdb::DBOptions db_options(bool create_db, bool create_cfs) {
  rocksdb::DBOptions o;
  o.create_if_missing = create_db;
  o.create_missing_column_families = create_cfs;
  o.paranoid_checks = true; // a damaged file fails the open or the read, it is never skipped
  // The WAL is on (it is what makes every write batch atomic across a crash). Point-in-time
  // recovery replays it up to the first torn record, so a crash loses at most unsynced writes
  // and never leaves a partial batch.
  o.wal_recovery_mode = rocksdb::WALRecoveryMode::kPointInTimeRecovery;
  o.max_total_wal_size = 32 << 20;
  o.max_open_files = 256;
  o.max_background_jobs = 2;
  o.keep_log_file_num = 4;
  o.max_log_file_size = 1 << 20;
  o.bytes_per_sync = 1 << 20;
  return o;
}

rocksdb::ColumnFamilyOptions cf_options(const std::shared_ptr<rocksdb::Cache>& cache) {
  rocksdb::ColumnFamilyOptions o;
  o.write_buffer_size = 4 << 20;
  o.max_write_buffer_number = 2;
  o.target_file_size_base = 16 << 20;
  o.max_bytes_for_level_base = 64 << 20;
  o.compression = best_compression();
  o.bottommost_compression = o.compression;
  // Every SST file written by a flush or compaction is read back and checked once: cheap at this
  // size, and a bad write is caught before the data it replaced is gone.
  o.paranoid_file_checks = true;
  rocksdb::BlockBasedTableOptions t;
  t.block_cache = cache;
  t.block_size = 16 << 10;
  t.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(t));
  return o;
}

// Variants are written with sync: they are the product of minutes of validation and
// benchmarking, they are written a few times an hour, and a variant the daemon has told a process
// about must still be there after a power cut. Kernels and images are written without sync: they
// are counters and observations the shims report again, and they change every few seconds.
// Either way the WAL makes each write atomic and keeps writes in order (a synced write also
// makes every earlier write durable).
rocksdb::WriteOptions sync_write() {
  rocksdb::WriteOptions w;
  w.sync = true;
  return w;
}
rocksdb::WriteOptions async_write() {
  return rocksdb::WriteOptions{};
}

rocksdb::ReadOptions reads() {
  rocksdb::ReadOptions r;
  r.verify_checksums = true;
  return r;
}
rocksdb::ReadOptions scans() {
  rocksdb::ReadOptions r = reads();
  r.fill_cache = false;
  return r;
}

// Does `key` start with `prefix`?
bool has_prefix(const rocksdb::Slice& key, std::string_view prefix) {
  return key.size() >= prefix.size() && std::memcmp(key.data(), prefix.data(), prefix.size()) == 0;
}

class RocksDbStore final : public Store {
public:
  RocksDbStore(fs::path dir, bool read_only) : m_dir(std::move(dir)), m_read_only(read_only) {
    m_cache = rocksdb::NewLRUCache(8 << 20);
  }
  ~RocksDbStore() override { close(); }

  // What Store::open found in the directory.
  enum class Found {
    nothing, // no database: create one
    store,   // a hone store (schema 0 or later)
    partial, // only hone's families, not all of them: a first creation was interrupted
  };
  Result<void> start(Found found, const std::vector<std::string>& existing_cfs);

  uint32_t schema_version() const override { return m_schema; }

  Result<void> put_image(const ImageRecord& image) override;
  Result<std::optional<ImageRecord>> get_image(const ImageHash& hash) override;
  Result<void> put_kernel(const KernelRecord& kernel) override;
  Result<std::optional<KernelRecord>> get_kernel(const KernelKey& key) override;
  Result<std::vector<KernelRecord>> kernels() override;
  Result<void> put_variant(const VariantRecord& variant) override;
  Result<std::optional<VariantRecord>> get_variant(const VariantId& id) override;
  Result<std::vector<VariantRecord>> variants() override;
  Result<std::vector<VariantRecord>> variants_of(const KernelKey& kernel) override;
  Result<void> delete_variant(const VariantId& id) override;
  Result<std::vector<QuarantinedRecord>> quarantined() override;
  Result<uint32_t> export_variants(const fs::path& file, const std::string& arch) override;
  Result<ImportReport> import_variants(const fs::path& file) override;
  uint64_t size_bytes() override;
  Result<void> flush() override;

private:
  // A record that failed its checks, on its way to quarantine.
  struct Bad {
    rocksdb::ColumnFamilyHandle* cf;
    std::string key;
    std::string value;
    std::string reason;
  };

  // Opens `cfs` (every family the database has, plus any of ours to create when writable).
  Result<void> open_db(bool read_only, bool create_db, const std::vector<std::string>& cfs);
  void close();
  Result<uint32_t> read_schema();
  // Is every open family empty? (An interrupted creation wrote nothing yet.)
  Result<bool> all_empty();
  Result<void> create_schema();
  Result<void> migrate(uint32_t from);
  Result<void> migrate_0_to_1();

  Error db_error(const std::string& what, const rocksdb::Status& s) const;
  Error read_only_error(const char* what) const;
  std::string name_of(rocksdb::ColumnFamilyHandle* cf) const { return cf->GetName(); }

  // Reads one value; nullopt when absent.
  Result<std::optional<std::string>> read(rocksdb::ColumnFamilyHandle* cf, const std::string& key);
  // The record checks beyond decoding: the key it is stored under is the one it names.
  static Result<VariantRecord> check_variant(std::string_view key, std::string_view value);
  static Result<KernelRecord> check_kernel(std::string_view key, std::string_view value);
  static Result<ImageRecord> check_image(std::string_view key, std::string_view value);

  // Moves bad records to quarantine (each only if it still holds the bytes that failed), in one
  // synced batch. In a read-only store they stay where they are.
  Result<void> quarantine(const std::vector<Bad>& bad);
  // Adds the move of one bad record to `batch`; the caller holds m_write.
  void quarantine_into(rocksdb::WriteBatch& batch, const Bad& bad);
  // The error get_* returns for a record that failed its checks.
  Error corrupt_error(const std::string& what, const Bad& bad, const Result<void>& moved) const;

  fs::path m_dir;
  bool m_read_only;
  uint32_t m_schema = 0;
  std::shared_ptr<rocksdb::Cache> m_cache;
  std::unique_ptr<rocksdb::DB> m_db;
  std::map<std::string, rocksdb::ColumnFamilyHandle*> m_handles; // every open family; owned
  rocksdb::ColumnFamilyHandle* m_images = nullptr;
  rocksdb::ColumnFamilyHandle* m_kernels = nullptr;
  rocksdb::ColumnFamilyHandle* m_variants = nullptr;
  rocksdb::ColumnFamilyHandle* m_index = nullptr;
  rocksdb::ColumnFamilyHandle* m_meta = nullptr;
  rocksdb::ColumnFamilyHandle* m_quarantine = nullptr;
  // Serializes every write. RocksDB needs no lock of ours for single writes; this one makes
  // "re-read, then move to quarantine" and "read the old variant, then delete it with its index
  // entry" atomic against other writers of this process.
  std::mutex m_write;
  std::atomic<uint64_t> m_quarantine_seq{0};
};

Error RocksDbStore::db_error(const std::string& what, const rocksdb::Status& s) const {
  std::string msg = "store " + m_dir.string() + ": " + what + ": " + s.ToString();
  if (s.IsCorruption())
    msg += " (the store's files are damaged: run `honectl doctor`, or stop honed and move " +
           m_dir.string() + " aside to start a fresh store)";
  else if (s.IsIOError())
    msg += " (check the disk, free space and permissions of " + m_dir.string() + ")";
  return make_error(std::move(msg));
}

Error RocksDbStore::read_only_error(const char* what) const {
  return make_error("store " + m_dir.string() + " is open read-only: cannot " + what);
}

Result<void> RocksDbStore::open_db(bool read_only, bool create_db,
                                   const std::vector<std::string>& cfs) {
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  descriptors.reserve(cfs.size());
  for (const auto& name : cfs) descriptors.emplace_back(name, cf_options(m_cache));
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  rocksdb::Status s;
  if (read_only)
    s = rocksdb::DB::OpenForReadOnly(db_options(false, false), m_dir.string(), descriptors,
                                     &handles, &db);
  else
    s = rocksdb::DB::Open(db_options(create_db, true), m_dir.string(), descriptors, &handles, &db);
  if (!s.ok()) {
    // RocksDB's LOCK is an fcntl lock: held by another process ("Resource temporarily
    // unavailable") or by another Store of this process ("lock hold by current process").
    if (s.IsIOError() && s.ToString().find("lock") != std::string::npos)
      return make_error("another honed is using " + m_dir.string() + " (" + s.ToString() +
                        "): stop it first, or open the store read-only (honectl doctor) to "
                        "inspect it while it runs");
    return db_error("cannot open", s);
  }
  m_db.reset(db);
  for (auto* h : handles) m_handles[h->GetName()] = h;
  auto find = [&](const char* name) {
    auto it = m_handles.find(name);
    return it == m_handles.end() ? nullptr : it->second;
  };
  m_images = find(rec::k_cf_images);
  m_kernels = find(rec::k_cf_kernels);
  m_variants = find(rec::k_cf_variants);
  m_index = find(rec::k_cf_variant_index);
  m_meta = find(rec::k_cf_meta);
  m_quarantine = find(rec::k_cf_quarantine);
  return ok();
}

void RocksDbStore::close() {
  if (!m_db) return;
  for (auto& [name, h] : m_handles) m_db->DestroyColumnFamilyHandle(h);
  m_handles.clear();
  m_images = m_kernels = m_variants = m_index = m_meta = m_quarantine = nullptr;
  m_db->Close();
  m_db.reset();
}

Result<uint32_t> RocksDbStore::read_schema() {
  auto v = read(m_meta, std::string(rec::k_meta_schema));
  if (!v) return v.error();
  if (!*v) return uint32_t(0); // schema 0 had no version key
  if ((*v)->size() != 4)
    return make_error("store " + m_dir.string() + ": its schema version is " +
                      std::to_string((*v)->size()) +
                      " bytes instead of 4: the store is damaged (move it aside to start fresh)");
  uint32_t version = 0;
  std::memcpy(&version, (*v)->data(), 4);
  return version;
}

Result<void> RocksDbStore::create_schema() {
  rocksdb::WriteBatch b;
  b.Put(m_meta, std::string(rec::k_meta_schema), le32(k_schema_version));
  b.Put(m_meta, std::string(rec::k_meta_created), le64(now_seconds()));
  b.Put(m_meta, std::string(rec::k_meta_hone_version), HONE_VERSION);
  auto s = m_db->Write(sync_write(), &b);
  if (!s.ok()) return db_error("writing the schema version", s);
  m_schema = k_schema_version;
  return ok();
}

Result<bool> RocksDbStore::all_empty() {
  for (auto& [name, h] : m_handles) {
    std::unique_ptr<rocksdb::Iterator> it(m_db->NewIterator(scans(), h));
    it->SeekToFirst();
    if (!it->status().ok()) return db_error("reading " + name, it->status());
    if (it->Valid()) return false;
  }
  return true;
}

Result<void> RocksDbStore::start(Found found, const std::vector<std::string>& existing_cfs) {
  std::vector<std::string> cfs = existing_cfs;
  if (found == Found::nothing) {
    cfs = k_schema_cfs;
    cfs.insert(cfs.begin(), rocksdb::kDefaultColumnFamilyName);
    if (auto r = open_db(false, true, cfs); !r) return r;
    return create_schema();
  }

  if (found == Found::partial) {
    // RocksDB creates the database, then the families one by one, then hone writes the schema:
    // a crash in between leaves some of hone's families, all empty. Finish the creation; anything
    // else with only some of the families is not ours to touch.
    if (auto r = open_db(true, false, cfs); !r) return r;
    auto empty = all_empty();
    if (!empty) return empty.error();
    close();
    std::string have;
    for (const auto& c : cfs) have += (have.empty() ? "" : ", ") + c;
    if (!*empty)
      return make_error(m_dir.string() + " holds a RocksDB database that is not a hone store (" +
                        "column families: " + have + ", with data; a hone store has images, " +
                        "kernels, variants and meta). Point state_dir at another directory");
    if (m_read_only)
      return make_error("the store in " + m_dir.string() +
                        " was never completely created: start honed once to finish it");
    for (const auto& name : k_schema_cfs)
      if (std::find(cfs.begin(), cfs.end(), name) == cfs.end()) cfs.push_back(name);
    if (auto r = open_db(false, false, cfs); !r) return r;
    return create_schema();
  }

  // The schema is read through a read-only open first, so a store this build must refuse is left
  // exactly as it was found (a read-write open would replay and rewrite its log).
  if (auto r = open_db(true, false, cfs); !r) return r;
  auto schema = read_schema();
  if (!schema) return schema.error();
  if (*schema > k_schema_version)
    return make_error("store " + m_dir.string() + " has schema version " + std::to_string(*schema) +
                      ", newer than this hone understands (" + std::to_string(k_schema_version) +
                      "): it was written by a newer hone. Upgrade hone, or point state_dir at "
                      "another directory; the store was left untouched");
  if (m_read_only) {
    if (*schema < k_schema_version)
      return make_error("store " + m_dir.string() + " has schema version " +
                        std::to_string(*schema) + " and needs migrating to " +
                        std::to_string(k_schema_version) +
                        ": start honed once (it migrates on a read-write open), then retry");
    for (const auto& name : k_schema_cfs)
      if (!m_handles.contains(name))
        return make_error("store " + m_dir.string() + " has schema version " +
                          std::to_string(*schema) + " but no column family '" + name +
                          "': the store is damaged (move it aside to start fresh)");
    m_schema = *schema;
    return ok();
  }
  close();

  // Read-write: open every family there is (RocksDB requires it) plus any of ours a migration
  // will fill.
  for (const auto& name : k_schema_cfs)
    if (std::find(cfs.begin(), cfs.end(), name) == cfs.end()) cfs.push_back(name);
  if (auto r = open_db(false, false, cfs); !r) return r;
  schema = read_schema(); // again, now under the lock
  if (!schema) return schema.error();
  if (*schema > k_schema_version)
    return make_error("store " + m_dir.string() + " has schema version " + std::to_string(*schema) +
                      ", newer than this hone understands (" + std::to_string(k_schema_version) +
                      "): upgrade hone");
  m_schema = *schema;
  if (m_schema < k_schema_version) return migrate(m_schema);
  return ok();
}

// Migrations run one step at a time, each in one atomic batch that also writes the new version,
// so an interrupted migration is simply run again on the next open.
Result<void> RocksDbStore::migrate(uint32_t from) {
  for (uint32_t v = from; v < k_schema_version; ++v) {
    Result<void> r;
    switch (v) {
    case 0:
      r = migrate_0_to_1();
      break;
    default:
      return make_error("store " + m_dir.string() + ": no migration from schema " +
                        std::to_string(v) + " (this is a bug in hone)");
    }
    if (!r) return r;
  }
  return ok();
}

// Schema 0 had images, kernels, variants and meta but no variant index and no quarantine (both
// families were created by the open). Build the index from the variants; a variant that fails its
// checks goes to quarantine instead.
Result<void> RocksDbStore::migrate_0_to_1() {
  std::lock_guard lock(m_write);
  rocksdb::WriteBatch b;
  {
    std::unique_ptr<rocksdb::Iterator> it(m_db->NewIterator(scans(), m_index));
    for (it->SeekToFirst(); it->Valid(); it->Next()) b.Delete(m_index, it->key());
    if (!it->status().ok())
      return db_error("migrating to schema 1: reading the index", it->status());
  }
  std::unique_ptr<rocksdb::Iterator> it(m_db->NewIterator(scans(), m_variants));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    std::string key = it->key().ToString();
    auto v = check_variant(key, it->value().ToStringView());
    if (v)
      b.Put(m_index, rec::variant_index_key(v->kernel, v->id), "");
    else
      quarantine_into(b, Bad{m_variants, key, it->value().ToString(),
                             "found during migration to schema 1: " + v.error().message});
  }
  if (!it->status().ok()) return db_error("migrating to schema 1: reading variants", it->status());
  it.reset();
  b.Put(m_meta, std::string(rec::k_meta_schema), le32(1));
  b.Put(m_meta, std::string(rec::k_meta_hone_version), HONE_VERSION);
  auto s = m_db->Write(sync_write(), &b);
  if (!s.ok()) return db_error("migrating to schema 1", s);
  m_schema = 1;
  return ok();
}

Result<std::optional<std::string>> RocksDbStore::read(rocksdb::ColumnFamilyHandle* cf,
                                                      const std::string& key) {
  std::string value;
  auto s = m_db->Get(reads(), cf, key, &value);
  if (s.IsNotFound()) return std::optional<std::string>();
  if (!s.ok()) return db_error("reading " + name_of(cf) + " " + rec::hex(key), s);
  return std::optional<std::string>(std::move(value));
}

Result<VariantRecord> RocksDbStore::check_variant(std::string_view key, std::string_view value) {
  auto v = rec::decode_variant(value);
  if (!v) return v;
  if (rec::variant_key(v->id) != key)
    return make_error("record names variant " + v->id.hex() + " but is stored under " +
                      rec::hex(key));
  if (variant_id_of(*v) != v->id)
    return make_error("record content does not hash to its id " + v->id.hex());
  return v;
}

Result<KernelRecord> RocksDbStore::check_kernel(std::string_view key, std::string_view value) {
  auto k = rec::decode_kernel(value);
  if (!k) return k;
  if (rec::kernel_key(k->key) != key)
    return make_error("record names kernel " + k->key.str() + " but is stored under " +
                      rec::hex(key));
  return k;
}

Result<ImageRecord> RocksDbStore::check_image(std::string_view key, std::string_view value) {
  auto i = rec::decode_image(value);
  if (!i) return i;
  if (rec::image_key(i->hash) != key)
    return make_error("record names image " + i->hash.hex() + " but is stored under " +
                      rec::hex(key));
  return i;
}

void RocksDbStore::quarantine_into(rocksdb::WriteBatch& batch, const Bad& bad) {
  rec::QuarantineEntry q;
  q.column_family = name_of(bad.cf);
  q.key = bad.key;
  q.reason = bad.reason;
  q.when = now_seconds();
  q.value = bad.value;
  // family, NUL, key, then a sequence number: the same key quarantined twice keeps both reports.
  uint64_t seq = uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count()) +
                 m_quarantine_seq.fetch_add(1);
  std::string qkey = q.column_family + '\0' + bad.key;
  for (int i = 7; i >= 0; --i) qkey.push_back(char(uint8_t(seq >> (8 * i))));
  batch.Put(m_quarantine, qkey, rec::encode(q));
  batch.Delete(bad.cf, bad.key);
  if (bad.cf == m_variants) {
    // The variant's kernel may be unreadable, so its index entry is found by the id it ends with.
    std::unique_ptr<rocksdb::Iterator> it(m_db->NewIterator(scans(), m_index));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      auto k = it->key();
      if (k.size() >= 16 && std::string_view(k.data() + k.size() - 16, 16) == bad.key)
        batch.Delete(m_index, k);
    }
  }
}

Result<void> RocksDbStore::quarantine(const std::vector<Bad>& bad) {
  if (bad.empty()) return ok();
  if (m_read_only) return read_only_error("move damaged records to quarantine");
  std::lock_guard lock(m_write);
  rocksdb::WriteBatch b;
  for (const auto& one : bad) {
    // Only what is still there and still the same bytes: another writer may have replaced it.
    auto now = read(one.cf, one.key);
    if (!now) return now.error();
    if (*now && **now == one.value) quarantine_into(b, one);
  }
  if (b.Count() == 0) return ok();
  auto s = m_db->Write(sync_write(), &b);
  if (!s.ok()) return db_error("moving damaged records to quarantine", s);
  return ok();
}

Error RocksDbStore::corrupt_error(const std::string& what, const Bad& bad,
                                  const Result<void>& moved) const {
  std::string msg = "store " + m_dir.string() + ": " + what + " is damaged (" + bad.reason + ")";
  if (moved)
    msg += m_read_only ? "; the store is open read-only, so it was left in place"
                       : "; it was moved to quarantine and will not be used (honectl doctor "
                         "lists it)";
  else
    msg += "; moving it to quarantine failed too: " + moved.error().message;
  return make_error(std::move(msg));
}

// --- images and kernels ---------------------------------------------------------------------

Result<void> RocksDbStore::put_image(const ImageRecord& image) {
  if (m_read_only) return read_only_error("write an image");
  auto value = rec::encode(image);
  if (!value) return make_error("image " + image.hash.hex() + ": " + value.error().message);
  std::lock_guard lock(m_write);
  auto s = m_db->Put(async_write(), m_images, rec::image_key(image.hash), *value);
  if (!s.ok()) return db_error("writing image " + image.hash.hex(), s);
  return ok();
}

Result<std::optional<ImageRecord>> RocksDbStore::get_image(const ImageHash& hash) {
  std::string key = rec::image_key(hash);
  auto value = read(m_images, key);
  if (!value) return value.error();
  if (!*value) return std::optional<ImageRecord>();
  auto image = check_image(key, **value);
  if (image) return std::optional<ImageRecord>(std::move(*image));
  Bad bad{m_images, key, std::move(**value), image.error().message};
  auto moved = m_read_only ? ok() : quarantine({bad});
  return corrupt_error("image " + hash.hex(), bad, moved);
}

Result<void> RocksDbStore::put_kernel(const KernelRecord& kernel) {
  if (m_read_only) return read_only_error("write a kernel");
  auto value = rec::encode(kernel);
  if (!value) return make_error("kernel " + kernel.key.str() + ": " + value.error().message);
  std::lock_guard lock(m_write);
  auto s = m_db->Put(async_write(), m_kernels, rec::kernel_key(kernel.key), *value);
  if (!s.ok()) return db_error("writing kernel " + kernel.key.str(), s);
  return ok();
}

Result<std::optional<KernelRecord>> RocksDbStore::get_kernel(const KernelKey& key) {
  std::string k = rec::kernel_key(key);
  auto value = read(m_kernels, k);
  if (!value) return value.error();
  if (!*value) return std::optional<KernelRecord>();
  auto kernel = check_kernel(k, **value);
  if (kernel) return std::optional<KernelRecord>(std::move(*kernel));
  Bad bad{m_kernels, k, std::move(**value), kernel.error().message};
  auto moved = m_read_only ? ok() : quarantine({bad});
  return corrupt_error("kernel " + key.str(), bad, moved);
}

Result<std::vector<KernelRecord>> RocksDbStore::kernels() {
  std::vector<KernelRecord> out;
  std::vector<Bad> bad;
  std::unique_ptr<rocksdb::Iterator> it(m_db->NewIterator(scans(), m_kernels));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    auto k = check_kernel(it->key().ToStringView(), it->value().ToStringView());
    if (k)
      out.push_back(std::move(*k));
    else
      bad.push_back({m_kernels, it->key().ToString(), it->value().ToString(), k.error().message});
  }
  if (!it->status().ok()) return db_error("listing kernels", it->status());
  it.reset();
  if (!m_read_only)
    if (auto r = quarantine(bad); !r) return r.error();
  return out;
}

// --- variants -------------------------------------------------------------------------------

Result<void> RocksDbStore::put_variant(const VariantRecord& variant) {
  if (m_read_only) return read_only_error("write a variant");
  VariantId want = variant_id_of(variant);
  if (variant.id != want)
    return make_error("variant " + variant.id.hex() + " of " + variant.kernel.str() +
                      ": its id does not match its content (variant_id_of gives " + want.hex() +
                      "); set id = variant_id_of(variant) after the last change to what it hashes");
  auto value = rec::encode(variant);
  if (!value) return make_error("variant " + variant.id.hex() + ": " + value.error().message);
  std::lock_guard lock(m_write);
  rocksdb::WriteBatch b;
  b.Put(m_variants, rec::variant_key(variant.id), *value);
  b.Put(m_index, rec::variant_index_key(variant.kernel, variant.id), "");
  auto s = m_db->Write(sync_write(), &b);
  if (!s.ok()) return db_error("writing variant " + variant.id.hex(), s);
  return ok();
}

Result<std::optional<VariantRecord>> RocksDbStore::get_variant(const VariantId& id) {
  std::string key = rec::variant_key(id);
  auto value = read(m_variants, key);
  if (!value) return value.error();
  if (!*value) return std::optional<VariantRecord>();
  auto variant = check_variant(key, **value);
  if (variant) return std::optional<VariantRecord>(std::move(*variant));
  Bad bad{m_variants, key, std::move(**value), variant.error().message};
  auto moved = m_read_only ? ok() : quarantine({bad});
  return corrupt_error("variant " + id.hex(), bad, moved);
}

Result<std::vector<VariantRecord>> RocksDbStore::variants() {
  std::vector<VariantRecord> out;
  std::vector<Bad> bad;
  std::unique_ptr<rocksdb::Iterator> it(m_db->NewIterator(scans(), m_variants));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    auto v = check_variant(it->key().ToStringView(), it->value().ToStringView());
    if (v)
      out.push_back(std::move(*v));
    else
      bad.push_back({m_variants, it->key().ToString(), it->value().ToString(), v.error().message});
  }
  if (!it->status().ok()) return db_error("listing variants", it->status());
  it.reset();
  if (!m_read_only)
    if (auto r = quarantine(bad); !r) return r.error();
  return out;
}

Result<std::vector<VariantRecord>> RocksDbStore::variants_of(const KernelKey& kernel) {
  std::string prefix = rec::variant_index_prefix(kernel);
  std::vector<VariantId> ids;
  {
    std::unique_ptr<rocksdb::Iterator> it(m_db->NewIterator(scans(), m_index));
    for (it->Seek(prefix); it->Valid() && has_prefix(it->key(), prefix); it->Next())
      if (it->key().size() == prefix.size() + 16)
        if (auto id = rec::variant_of_index_key(it->key().ToStringView())) ids.push_back(*id);
    if (!it->status().ok())
      return db_error("listing the variants of " + kernel.str(), it->status());
  }
  std::vector<VariantRecord> out;
  std::vector<Bad> bad;
  for (const auto& id : ids) {
    std::string key = rec::variant_key(id);
    auto value = read(m_variants, key);
    if (!value) return value.error();
    if (!*value) continue; // removed between the index scan and this read
    auto v = check_variant(key, **value);
    if (!v)
      bad.push_back({m_variants, key, std::move(**value), v.error().message});
    else if (v->kernel == kernel)
      out.push_back(std::move(*v));
  }
  if (!m_read_only)
    if (auto r = quarantine(bad); !r) return r.error();
  return out;
}

Result<void> RocksDbStore::delete_variant(const VariantId& id) {
  if (m_read_only) return read_only_error("delete a variant");
  std::string key = rec::variant_key(id);
  std::lock_guard lock(m_write);
  auto value = read(m_variants, key);
  if (!value) return value.error();
  if (!*value) return ok(); // deleting what is not there is not an error
  rocksdb::WriteBatch b;
  auto v = check_variant(key, **value);
  if (v) {
    b.Delete(m_variants, key);
    b.Delete(m_index, rec::variant_index_key(v->kernel, id));
  } else {
    // Gone from the variants either way; the damaged bytes are kept for the report.
    quarantine_into(b, Bad{m_variants, key, std::move(**value),
                           "found while deleting it: " + v.error().message});
  }
  auto s = m_db->Write(sync_write(), &b);
  if (!s.ok()) return db_error("deleting variant " + id.hex(), s);
  return ok();
}

Result<std::vector<QuarantinedRecord>> RocksDbStore::quarantined() {
  std::vector<QuarantinedRecord> out;
  std::unique_ptr<rocksdb::Iterator> it(m_db->NewIterator(scans(), m_quarantine));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    auto q = rec::decode_quarantine(it->value().ToStringView());
    if (q)
      out.push_back({q->column_family, rec::hex(q->key), q->reason, q->when});
    else
      out.push_back({rec::k_cf_quarantine, rec::hex(it->key().ToStringView()),
                     "the quarantine report itself is unreadable: " + q.error().message, 0});
  }
  if (!it->status().ok()) return db_error("listing quarantined records", it->status());
  return out;
}

// --- export and import ----------------------------------------------------------------------

Result<uint32_t> RocksDbStore::export_variants(const fs::path& file, const std::string& arch) {
  auto all = variants();
  if (!all) return all.error();
  std::vector<std::string> records;
  for (const auto& v : *all) {
    if (v.state != VariantState::verified || (!arch.empty() && v.arch != arch)) continue;
    auto value = rec::encode(v);
    if (!value) return make_error("exporting variant " + v.id.hex() + ": " + value.error().message);
    records.push_back(std::move(*value));
  }
  if (auto r = export_file::write(file, records); !r)
    return make_error("cannot export to " + file.string() + ": " + r.error().message);
  return uint32_t(records.size());
}

Result<ImportReport> RocksDbStore::import_variants(const fs::path& file) {
  if (m_read_only) return read_only_error("import variants");
  auto bytes = export_file::read_all(file);
  if (!bytes) return make_error("cannot import " + file.string() + ": " + bytes.error().message);
  auto records = export_file::parse(*bytes);
  if (!records)
    return make_error("cannot import " + file.string() + ": " + records.error().message +
                      "; nothing was imported");

  ImportReport report;
  std::vector<VariantRecord> incoming;
  for (size_t i = 0; i < records->size(); ++i) {
    auto v = rec::decode_variant((*records)[i]);
    if (v && variant_id_of(*v) != v->id)
      v = make_error("its content does not hash to its id " + v->id.hex());
    if (!v) {
      ++report.rejected;
      report.problems.push_back("record " + std::to_string(i) + ": " + v.error().message);
      continue;
    }
    incoming.push_back(std::move(*v));
  }

  std::lock_guard lock(m_write);
  rocksdb::WriteBatch b;
  std::set<VariantId> seen;
  for (auto& v : incoming) {
    std::string key = rec::variant_key(v.id);
    if (!seen.insert(v.id).second) {
      ++report.already_present; // twice in the same file
      continue;
    }
    auto existing = read(m_variants, key);
    if (!existing) return existing.error();
    if (*existing) {
      auto old = check_variant(key, **existing);
      if (old) {
        ++report.already_present;
        continue;
      }
      // A damaged local copy: keep it for the report, and take the sound one from the file.
      quarantine_into(b, Bad{m_variants, key, std::move(**existing),
                             "found while importing a sound copy: " + old.error().message});
      report.problems.push_back("variant " + v.id.hex() +
                                ": the local copy was damaged and was replaced");
    }
    v.state = VariantState::imported;
    auto value = rec::encode(v);
    if (!value) {
      ++report.rejected;
      report.problems.push_back("variant " + v.id.hex() + ": " + value.error().message);
      continue;
    }
    b.Put(m_variants, key, *value);
    b.Put(m_index, rec::variant_index_key(v.kernel, v.id), "");
    ++report.imported;
  }
  if (b.Count() > 0) {
    auto s = m_db->Write(sync_write(), &b);
    if (!s.ok()) return db_error("importing " + file.string() + " (nothing was imported)", s);
  }
  return report;
}

// --- size and flush -------------------------------------------------------------------------

uint64_t RocksDbStore::size_bytes() {
  uint64_t total = 0;
  for (const char* property : {"rocksdb.total-sst-files-size", "rocksdb.cur-size-all-mem-tables",
                               "rocksdb.total-blob-file-size"}) {
    uint64_t v = 0;
    if (m_db->GetAggregatedIntProperty(property, &v)) total += v;
  }
  return total;
}

Result<void> RocksDbStore::flush() {
  if (m_read_only) return ok(); // nothing of ours is buffered
  std::vector<rocksdb::ColumnFamilyHandle*> all;
  for (auto& [name, h] : m_handles) all.push_back(h);
  rocksdb::FlushOptions f;
  f.wait = true;
  auto s = m_db->Flush(f, all);
  if (!s.ok()) return db_error("flushing", s);
  s = m_db->FlushWAL(true);
  if (!s.ok()) return db_error("syncing the write-ahead log", s);
  return ok();
}

} // namespace

Result<std::unique_ptr<Store>> Store::open(const fs::path& dir, const OpenOptions& options) {
  std::error_code ec;
  auto st = fs::status(dir, ec);
  bool exists = fs::exists(st);
  if (exists && !fs::is_directory(st))
    return make_error("store " + dir.string() + " is not a directory: point state_dir at one");
  bool existing_db = exists && fs::exists(dir / "CURRENT", ec);

  if (!existing_db) {
    if (options.read_only || !options.create_if_missing)
      return make_error("there is no hone store in " + dir.string() +
                        (options.read_only ? " (start honed once to create it)"
                                           : " (and creating one was not allowed)"));
    if (exists) {
      std::vector<std::string> foreign;
      for (const auto& entry : fs::directory_iterator(dir, ec)) {
        std::string name = entry.path().filename().string();
        if (!is_rocksdb_file(name)) foreign.push_back(name);
      }
      if (ec) return make_error("cannot list " + dir.string() + ": " + ec.message());
      if (!foreign.empty()) {
        std::sort(foreign.begin(), foreign.end());
        std::string names;
        for (size_t i = 0; i < foreign.size() && i < 3; ++i)
          names += (i ? ", '" : "'") + foreign[i] + "'";
        if (foreign.size() > 3) names += ", ...";
        return make_error(dir.string() + " is not a hone store: it holds other files (" + names +
                          "). Point state_dir at an empty or new directory");
      }
    }
    if (!exists) {
      fs::create_directories(dir, ec);
      if (ec)
        return make_error("cannot create the store directory " + dir.string() + ": " +
                          ec.message());
      // It holds other programs' kernels and captured evidence: not for every local user.
      fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec,
                      ec);
    }
  }

  std::vector<std::string> cfs;
  auto found = existing_db ? RocksDbStore::Found::store : RocksDbStore::Found::nothing;
  if (existing_db) {
    auto s = rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), dir.string(), &cfs);
    if (!s.ok())
      return make_error("cannot read the store in " + dir.string() + ": " + s.ToString() +
                        " (if it is damaged, stop honed and move it aside to start fresh)");
    std::vector<std::string> missing;
    for (const auto& name : k_required_cfs)
      if (std::find(cfs.begin(), cfs.end(), name) == cfs.end()) missing.push_back(name);
    bool only_ours = std::all_of(cfs.begin(), cfs.end(), [](const std::string& c) {
      return c == rocksdb::kDefaultColumnFamilyName ||
             std::find(k_schema_cfs.begin(), k_schema_cfs.end(), c) != k_schema_cfs.end();
    });
    if (!missing.empty() && only_ours) {
      found = RocksDbStore::Found::partial;
    } else if (!missing.empty()) {
      std::string have;
      for (const auto& c : cfs) have += (have.empty() ? "" : ", ") + c;
      return make_error(dir.string() + " holds a RocksDB database that is not a hone store (its " +
                        "column families: " + have + "; a hone store has images, kernels, " +
                        "variants and meta). Point state_dir at another directory");
    }
  }

  auto store = std::make_unique<RocksDbStore>(dir, options.read_only);
  if (auto r = store->start(found, cfs); !r) return r.error();
  return std::unique_ptr<Store>(std::move(store));
}

} // namespace hone::store
