#include "shim/pointer_fields.hpp"

#include "ptx/analysis.hpp"
#include "ptx/parser.hpp"

#include <algorithm>

namespace hone::shim {

std::optional<std::vector<PointerField>> pointer_fields(const KernelKey& key) {
  // The image's PTX, or for a cubin the JIT linker made, the PTX input that defines the entry.
  auto bytes = registry().entry_ptx(key);
  if (!bytes) return std::nullopt;
  auto module = ptx::parse(std::string_view(*bytes), "pointer_fields");
  if (!module) return std::nullopt;
  const ptx::Function* f = module->function(key.entry);
  if (!f || !f->is_entry) return std::nullopt;
  ptx::EntryInfo info = ptx::analyze_entry(*module, *f);
  std::vector<PointerField> out;
  for (uint32_t i = 0; i < info.params.size(); ++i) {
    const auto& p = info.params[i];
    for (const auto& u : p.pointers) out.push_back({i, u.offset, p.offset + u.offset, true});
    // read through its address: any other aligned 8-byte field may be a pointer
    if (p.address_taken) {
      for (uint32_t field = 0; field + 8 <= p.size; field += 8) {
        bool listed = std::any_of(p.pointers.begin(), p.pointers.end(),
                                  [&](const ptx::PointerUse& u) { return u.offset == field; });
        if (!listed) out.push_back({i, field, p.offset + field, false});
      }
    }
  }
  return out;
}

} // namespace hone::shim
