// Comparing a buffer the candidate left with the one the original left: element by element, by
// the element type the original's PTX uses through the pointer (DESIGN.md, "Validation").
#pragma once

#include "common/job.hpp"
#include "ptx/ir.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hone::worker {

// How an allocation is compared: floating-point (within a tolerance when the job allows one) or
// exactly.
enum class Dtype : uint8_t { exact, f16, bf16, f32, f64 };
const char* to_string(Dtype d);

// How its elements are printed in a mismatch message.
enum class Display : uint8_t { bytes, u8, u16, u32, u64, s8, s16, s32, s64, f16, bf16, f32, f64 };

struct ElementType {
  Dtype dtype = Dtype::exact;
  Display display = Display::bytes;
  uint32_t size = 1;
};

// The element type of an allocation from the PTX types of the loads, stores and atomics through
// the pointers into it: one floating-point type and nothing else makes it that type; one integer
// size is shown as that integer; anything else (mixed, unknown, escaping pointers) is exact bytes.
ElementType element_type(const std::vector<ptx::Type>& types);

struct CompareSpec {
  ElementType type;
  uint64_t origin = 0; // byte offset of element 0 (where the kernel's pointer points)
  const Tolerance* tolerance = nullptr; // floating-point elements within it; nullptr: bitwise
  // A second run of the original where it is nondeterministic: an element may also differ from
  // `want` by twice the original's own spread there.
  std::string_view spread;
};

struct Difference {
  uint64_t compared_bytes = 0;
  uint64_t elements = 0;  // compared
  uint64_t differing = 0; // elements (or stray bytes) that differ
  bool any() const { return differing != 0; }
  // The first difference: element index from `origin` (a byte offset when `in_bytes`), values.
  int64_t first_index = 0;
  bool in_bytes = false;
  std::string got;
  std::string want;
  double max_abs_err = 0; // over the floating-point elements, differing or not
  double max_rel_err = 0;
};

// Compare `got` with `want` (the same size).
Difference compare(std::string_view want, std::string_view got, const CompareSpec& spec);

// Every whole element in [from, to) of `bytes` (elements of `type` laid from `origin`) has the
// same bytes, and there is at least one.
bool constant_elements(std::string_view bytes, const ElementType& type, uint64_t origin,
                       uint64_t from, uint64_t to);

// "element 17: got 1.5 (0x3fc00000), want 2.25 (0x40100000) (12 of 4096 elements differ)".
std::string describe(const Difference& d);

} // namespace hone::worker
