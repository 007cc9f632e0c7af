// The guard a variant's launch must pass (DESIGN.md, "Hot swap"), checked on a launch's arguments:
// by the launch hooks for each launch of a served kernel, and by the graph tracking for each
// kernel node it would point at a variant.
#pragma once

#include "shim/cuda_abi.hpp"
#include "shim/launch_args.hpp"
#include "shim/real.hpp"
#include "shim/registry.hpp"

#include <cstring>

namespace hone::shim {

// Do the launch's pointer fields lie in pairwise distinct allocations? (a no_alias guard: a
// variant reading through ld.global.nc would miss the launch's writes to an aliased buffer)
// A null pointer points nowhere and is skipped, and so is a field that may hold data (of a
// parameter read through its address) whose value is in no allocation; any other pointer the
// driver cannot place fails the guard. Stack only: Swap::k_max_alias_fields bounds the fields.
__attribute__((noinline)) inline bool pointers_distinct(const Swap& s, const LaunchArgs& a) {
  using GetRange = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);
  auto range = real_as<GetRange>(Fn::cuMemGetAddressRange_v2);
  if (!range || s.alias_fields.size() > Swap::k_max_alias_fields) return false;
  const uint8_t* buffer = nullptr;
  size_t size = 0;
  if (!a.params && !extra_buffer(a.extra, &buffer, &size)) return false;
  CUdeviceptr bases[Swap::k_max_alias_fields];
  size_t n = 0;
  for (const PointerField& f : s.alias_fields) {
    CUdeviceptr pointer;
    if (a.params) {
      if (!a.params[f.param]) return false;
      std::memcpy(&pointer, static_cast<const uint8_t*>(a.params[f.param]) + f.field,
                  sizeof pointer);
    } else {
      if (f.offset + sizeof pointer > size) return false;
      std::memcpy(&pointer, buffer + f.offset, sizeof pointer);
    }
    if (!pointer) continue;
    CUdeviceptr base = 0;
    size_t bytes = 0;
    if (range(&base, &bytes, pointer) != CUDA_SUCCESS) {
      if (f.certain) return false;
      continue;
    }
    for (size_t i = 0; i < n; ++i) {
      if (bases[i] == base) return false;
    }
    bases[n++] = base;
  }
  return true;
}

// Does this launch pass the variant's guard? (DESIGN.md, "Hot swap")
inline bool guard_passes(const Swap& s, const LaunchArgs& a) {
  for (int i = 0; i < 3; ++i) {
    if (s.guard.block[size_t(i)] && s.guard.block[size_t(i)] != a.block[i]) return false;
  }
  if (s.guard.reshape_block) {
    unsigned grid[3], block[3];
    if (!reshaped(s.guard, a.grid, a.block, grid, block)) return false;
  }
  if (!s.guard.scalars.empty()) {
    const uint8_t* buffer = nullptr;
    size_t size = 0;
    if (!a.params && !extra_buffer(a.extra, &buffer, &size)) return false;
    for (const auto& sc : s.guard.scalars) {
      const void* p;
      if (a.params) {
        p = a.params[sc.param];
      } else {
        if (sc.offset + sc.bytes.size() > size) return false;
        p = buffer + sc.offset;
      }
      if (!p || std::memcmp(p, sc.bytes.data(), sc.bytes.size()) != 0) return false;
    }
  }
  if (s.kernel_handle) {
    // a CUkernel launches in the current context; the variant was loaded for one context
    CUcontext ctx = nullptr;
    auto get = real_as<CUresult (*)(CUcontext*)>(Fn::cuCtxGetCurrent);
    if (!get || get(&ctx) != CUDA_SUCCESS || ctx != s.context) return false;
  }
  // last: the one check that costs driver calls
  return !s.guard.no_alias || pointers_distinct(s, a);
}

} // namespace hone::shim
