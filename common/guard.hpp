// When a variant may serve a launch (DESIGN.md, "Hot swap"): the launch shape and the bytes of the
// scalar parameters it was specialized for. Checked by the shim on every launch of a swapped
// kernel, so it is plain data: compare a few integers and bytes.
#pragma once

#include "common/wire.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace hone {

struct ScalarGuard {
  uint32_t param = 0;        // index of the parameter (kernelParams launches)
  uint32_t offset = 0;       // its byte offset in the parameter buffer (extra-buffer launches)
  std::string bytes;         // the exact bytes the parameter must hold
  friend bool operator==(const ScalarGuard&, const ScalarGuard&) = default;
};

struct Guard {
  std::array<uint32_t, 3> block{0, 0, 0}; // required block shape; 0 means any
  std::vector<ScalarGuard> scalars;
  bool no_alias = false; // pointer parameters must not overlap (read-only cache variants)

  bool any() const { return block == std::array<uint32_t, 3>{0, 0, 0} && scalars.empty() && !no_alias; }
  friend bool operator==(const Guard&, const Guard&) = default;
};

inline void encode(wire::Writer& w, const Guard& g) {
  for (auto v : g.block) w.u32(v);
  w.u32(uint32_t(g.scalars.size()));
  for (const auto& s : g.scalars) {
    w.u32(s.param);
    w.u32(s.offset);
    w.str(s.bytes);
  }
  w.boolean(g.no_alias);
}

inline bool decode(wire::Reader& r, Guard& g) {
  for (auto& v : g.block) v = r.u32();
  uint32_t n = r.count(4096, 12);
  g.scalars.resize(n);
  for (auto& s : g.scalars) {
    s.param = r.u32();
    s.offset = r.u32();
    s.bytes = r.str(4096);
    if (!r.ok()) break;
  }
  g.no_alias = r.boolean();
  return r.ok();
}

} // namespace hone
