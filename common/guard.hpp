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
  // The variant runs with blocks of this many threads (x; y = z = 1) and the grid that keeps the
  // launch's thread count: grid.x * block.x = grid'.x * reshape_block. 0: as the application
  // launched it. Only for one-dimensional launches whose count divides evenly (reshaped()), and
  // only for kernels whose results cannot depend on the block size (agent/launch_shape.cpp).
  uint32_t reshape_block = 0;

  bool any() const {
    return block == std::array<uint32_t, 3>{0, 0, 0} && scalars.empty() && !no_alias &&
           reshape_block == 0;
  }
  friend bool operator==(const Guard&, const Guard&) = default;
};

// The grid and block a launch of (grid, block) runs with under `g`: unchanged without a reshape;
// false when the reshape cannot apply to this launch (not one-dimensional, or its thread count is
// not a multiple of the new block), and the variant must not serve it.
inline bool reshaped(const Guard& g, const uint32_t grid[3], const uint32_t block[3],
                     uint32_t out_grid[3], uint32_t out_block[3]) {
  for (int d = 0; d < 3; ++d) {
    out_grid[d] = grid[d];
    out_block[d] = block[d];
  }
  if (g.reshape_block == 0) return true;
  if (grid[1] != 1 || grid[2] != 1 || block[1] != 1 || block[2] != 1) return false;
  const uint64_t threads = uint64_t(grid[0]) * block[0];
  if (threads == 0 || threads % g.reshape_block != 0) return false;
  const uint64_t blocks = threads / g.reshape_block;
  if (blocks > 0x7fffffffu) return false; // gridDim.x's limit (CUDA C++ Programming Guide)
  out_grid[0] = uint32_t(blocks);
  out_block[0] = g.reshape_block;
  return true;
}

inline void encode(wire::Writer& w, const Guard& g) {
  for (auto v : g.block) w.u32(v);
  w.u32(uint32_t(g.scalars.size()));
  for (const auto& s : g.scalars) {
    w.u32(s.param);
    w.u32(s.offset);
    w.str(s.bytes);
  }
  // One byte of flags where a boolean was: bit 0 no_alias, bit 1 a reshape follows. A guard
  // without a reshape encodes as before (records and variant ids stored earlier still match).
  w.u8(uint8_t((g.no_alias ? 1 : 0) | (g.reshape_block ? 2 : 0)));
  if (g.reshape_block) w.u32(g.reshape_block);
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
  const uint8_t flags = r.u8();
  if (flags > 3) r.fail("guard flags out of range");
  g.no_alias = (flags & 1) != 0;
  g.reshape_block = 0;
  if (flags & 2) {
    g.reshape_block = r.u32();
    if (g.reshape_block == 0 || g.reshape_block > 1024) r.fail("guard reshape out of range");
  }
  return r.ok();
}

} // namespace hone
