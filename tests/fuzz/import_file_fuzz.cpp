// libFuzzer target: an export file as `honectl import FILE` has honed read it (RocksDbStore::
// import_variants): the whole file read from disk (export_file::read_all), its framing and
// checksum (export_file::parse), each record decoded as a variant (records::decode_variant), its
// id checked against its content (variant_id_of), and the variant encoded again as `imported` for
// the store. store_record_fuzz covers the decoders on loose records; this target adds the file
// read, real export files as seeds, and records re-sealed inside a re-sealed file (reseal.hpp), so
// that mutations of a real variant reach decode_variant and the re-encoding.
//
// Nothing may crash or over-read; a variant that decodes and passes the id check must encode as
// `imported` and decode back to the same bytes.
#include "reseal.hpp"
#include "scratch_dir.hpp"
#include "store/export_file.hpp"
#include "store/records.hpp"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

using namespace hone::store;

namespace {

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "import_file_fuzz: %s\n", what);
  std::abort();
}

void import(std::string_view bytes) {
  auto records = export_file::parse(bytes);
  if (!records) return;
  for (std::string_view r : *records) {
    auto v = records::decode_variant(r);
    if (!v || variant_id_of(*v) != v->id) continue; // rejected, as import_variants does
    v->state = VariantState::imported;
    auto stored = records::encode(*v);
    if (!stored) continue; // decodable but not writable: import fails it with the store's error
    auto again = records::decode_variant(*stored);
    if (!again) fail("an imported variant does not decode from what the store would hold");
    if (again->state != VariantState::imported || again->id != v->id) fail("the variant changed");
    auto twice = records::encode(*again);
    if (!twice || *twice != *stored) fail("an imported variant's encoding is not canonical");
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  // As honed reads it: from the file honectl passes, whatever its bytes.
  const auto file = hone::fuzz::scratch_dir() / "variants.hone";
  if (FILE* f = std::fopen(file.c_str(), "wb")) {
    const bool written = std::fwrite(in.data(), 1, in.size(), f) == in.size();
    if (std::fclose(f) != 0 || !written) fail("cannot write the scratch file");
  }
  auto bytes = export_file::read_all(file);
  if (!bytes || *bytes != in) fail("read_all did not give the file's bytes back");
  import(*bytes);
  import(hone::fuzz::reseal_export(std::string(in)));
  return 0;
}
