// The daemon's persistent state (DESIGN.md, "Store"): RocksDB under the state directory, with
// column families for images, kernels, variants and meta. Every record is versioned and
// checksummed; a variant whose checksum fails is quarantined and reported, never served.
//
// The Store interface has one implementation (RocksDB, store/rocksdb_store.cpp); tests and the
// daemon use it through this header only.
#pragma once

#include "common/guard.hpp"
#include "common/identity.hpp"
#include "common/protocol.hpp"
#include "common/result.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace hone::store {

// The schema this build writes. A store with a newer one is refused; an older one is migrated.
constexpr uint32_t k_schema_version = 1;

struct ImageRecord {
  ImageHash hash;
  proto::ImageFormat format = proto::ImageFormat::unknown;
  std::string bytes;
  std::optional<proto::SourceInfo> source;
  int64_t first_seen = 0; // unix seconds
  // The PTX the application's Triton cache holds for this SASS image (proto::Image::triton).
  std::optional<proto::Image::Triton> triton;
  // What the JIT linker made this cubin from in the application (proto::Image::linked).
  std::optional<proto::Image::Linked> linked;
};

enum class KernelState : uint8_t {
  observed = 0, queued = 1, capturing = 2, optimizing = 3, verified = 4, rejected = 5,
  disabled = 6,
};
const char* to_string(KernelState s);

struct KernelRecord {
  KernelKey key;
  proto::ImageFormat format = proto::ImageFormat::unknown;
  uint64_t image_size = 0;
  bool source_known = false;
  KernelState state = KernelState::observed;
  bool disabled = false;          // operator's switch; survives restarts
  uint64_t launches = 0;          // summed over processes, all time
  uint64_t est_gpu_ns = 0;        // estimated device time, summed, all time
  int64_t first_seen = 0;
  int64_t last_seen = 0;
  std::vector<std::string> tried; // strategy ids already tried (the agent does not redo them)
};

enum class VariantState : uint8_t {
  verified = 0,  // validated and measured faster on this host
  rejected = 1,  // failed validation or was not faster (evidence says why)
  disabled = 2,  // an operator turned it off
  imported = 3,  // from another host: must be re-validated here before it serves
};
const char* to_string(VariantState s);

struct VariantRecord {
  VariantId id;
  KernelKey kernel;
  std::string arch;          // "sm_90"
  uint32_t driver_major = 0; // 13 for driver 13.x
  std::string strategy;      // "rejit", "specialize", "llm", "submit", ...
  proto::ImageFormat format = proto::ImageFormat::ptx; // of `image`
  std::string image;         // the variant's module image (PTX text with its NUL, or cubin)
  std::string entry;         // its entry name (may differ from the kernel's)
  std::vector<std::string> jit_options; // "name=value"
  Guard guard;
  VariantState state = VariantState::verified;
  double speedup = 0;        // original time / variant time, median
  double noise = 0;          // relative noise of the measurement
  std::string verdict;       // "verified", or why it was rejected
  std::string evidence_json; // inputs used, comparisons, timings
  int64_t created = 0;
};

// The id of a variant's content (kernel, target, code, entry, options, guard).
VariantId variant_id_of(const VariantRecord& v);

struct QuarantinedRecord {
  std::string column_family;
  std::string key_hex;
  std::string reason;
  int64_t when = 0;
};

struct ImportReport {
  uint32_t imported = 0;
  uint32_t already_present = 0;
  uint32_t rejected = 0;           // records that failed their checksum or decode
  std::vector<std::string> problems;
};

struct OpenOptions {
  bool create_if_missing = true;
  bool read_only = false; // honectl doctor opens the store this way
};

class Store {
public:
  virtual ~Store() = default;

  // Open (creating when allowed) the store in `dir`. Errors say what is wrong and what to do:
  // a newer schema, a directory that is not a store, a lock held by another honed.
  static Result<std::unique_ptr<Store>> open(const std::filesystem::path& dir,
                                             const OpenOptions& options = {});

  virtual uint32_t schema_version() const = 0;

  virtual Result<void> put_image(const ImageRecord& image) = 0;
  virtual Result<std::optional<ImageRecord>> get_image(const ImageHash& hash) = 0;

  virtual Result<void> put_kernel(const KernelRecord& kernel) = 0;
  virtual Result<std::optional<KernelRecord>> get_kernel(const KernelKey& key) = 0;
  virtual Result<std::vector<KernelRecord>> kernels() = 0;

  // Writes are atomic per record: a crash leaves the old record or the new one, never a mix.
  virtual Result<void> put_variant(const VariantRecord& variant) = 0;
  // A variant whose checksum or decoding fails is moved to quarantine and reported as an error;
  // it is never returned.
  virtual Result<std::optional<VariantRecord>> get_variant(const VariantId& id) = 0;
  virtual Result<std::vector<VariantRecord>> variants() = 0;
  virtual Result<std::vector<VariantRecord>> variants_of(const KernelKey& kernel) = 0;
  virtual Result<void> delete_variant(const VariantId& id) = 0;

  virtual Result<std::vector<QuarantinedRecord>> quarantined() = 0;

  // Verified variants to one versioned, checksummed file (optionally only for `arch`); imported
  // variants come in as VariantState::imported, to be re-validated before they serve.
  virtual Result<uint32_t> export_variants(const std::filesystem::path& file,
                                           const std::string& arch = {}) = 0;
  virtual Result<ImportReport> import_variants(const std::filesystem::path& file) = 0;

  virtual uint64_t size_bytes() = 0;
  virtual Result<void> flush() = 0;
};

} // namespace hone::store
