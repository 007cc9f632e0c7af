// Shadow inputs (DESIGN.md, "Shadow inputs"): one launch of a kernel as the application made it —
// its shape, its parameter bytes, and for every pointer parameter the device allocation it points
// into — the range of it the launch touches where a bounds probe ran (shim/README.md, "Bounded
// captures"), else all of it — copied just before the launch (and optionally just after it).
//
// The metadata travels in frames; the bytes live in a sealed memfd. Captures are production data:
// never logged, kept in memory unless the operator opts in, dropped when no longer needed.
#pragma once

#include "common/identity.hpp"
#include "common/wire.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace hone {

struct ParamSlot {
  uint32_t offset = 0; // in the parameter buffer
  uint32_t size = 0;
  friend bool operator==(const ParamSlot&, const ParamSlot&) = default;
};

// One device allocation a pointer parameter points into, captured whole, or by the range of it a
// bounds probe saw the launch touch (shim/README.md, "Bounded captures"): then `base` and `size`
// are the range's, `alloc_base` and `alloc_size` the allocation's, and the pointer may lie
// outside the range (anywhere in the allocation). The worker restores the range at the same
// offset from the pointer, with guard zones around it.
struct CaptureBuffer {
  uint32_t param = 0;        // index of the parameter holding the pointer
  uint32_t field = 0;        // byte offset of the pointer inside that parameter (structs)
  uint64_t pointer = 0;      // the pointer value the kernel received
  uint64_t base = 0;         // the allocation it points into (cuMemGetAddressRange)
  uint64_t size = 0;
  uint64_t before = 0;       // offset in the capture data of the bytes before the launch
  uint64_t after = ~0ull;    // offset of the bytes after the launch; ~0 when not captured
  // Several pointers may point into one allocation: each is listed, `before` shared.
  bool bounded = false;      // base/size are a range of the allocation below, not all of it
  uint64_t alloc_base = 0;   // the whole allocation (bounded only; 0 when whole)
  uint64_t alloc_size = 0;
  // The allocation, whether captured by a range or whole.
  uint64_t allocation_base() const { return bounded ? alloc_base : base; }
  uint64_t allocation_size() const { return bounded ? alloc_size : size; }
  // Offset of the captured range in its allocation.
  uint64_t range_offset() const { return bounded ? base - alloc_base : 0; }
  friend bool operator==(const CaptureBuffer&, const CaptureBuffer&) = default;
};

enum class CaptureStatus : uint8_t {
  ok = 0,
  too_large = 1,   // over the per-capture or total size cap: skipped
  failed = 2,      // a driver call failed; nothing captured
  unsupported = 3, // e.g. the stream was being captured into a graph
};

struct Capture {
  uint64_t request = 0;      // the daemon's request id
  uint64_t kernel = 0;       // the shim's kernel id
  KernelKey key;
  CaptureStatus status = CaptureStatus::ok;
  std::string reason;        // why, when status is not ok
  std::array<uint32_t, 3> grid{};
  std::array<uint32_t, 3> block{};
  uint32_t shared_bytes = 0;
  std::vector<ParamSlot> params;
  std::string param_bytes;   // the whole parameter buffer, laid out as `params` says
  std::vector<CaptureBuffer> buffers;
  uint64_t data_bytes = 0;   // size of the capture data (the memfd)
  std::string arch;          // sm_90: where it was captured
  bool pointers_from_analysis = false; // pointer parameters known from the PTX, not guessed
  // Why the buffers were captured whole, when a bounds probe was wanted and could not run (empty
  // when bounded, or when the shim was told to capture whole allocations).
  std::string whole_why;
};

void encode(wire::Writer& w, const Capture& c);
bool decode(wire::Reader& r, Capture& c);

} // namespace hone
