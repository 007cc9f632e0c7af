// Restoring a capture's device allocations in the worker (DESIGN.md, "Validation"): each one at
// its original device address where the driver allows it (VMM: reserve exactly that range, so
// pointers stored inside buffers stay valid), or else anywhere; guard zones filled with a pattern
// around each, checked after every run; outputs poisoned on request.
#pragma once

#include "common/capture.hpp"
#include "daemon/worker/device.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hone::worker {

// One device allocation of the application that a capture's pointers point into.
struct CapturedAllocation {
  uint64_t base = 0; // where it lived in the application
  uint64_t size = 0;
  std::string_view before;       // its bytes before the launch (in the capture data)
  std::vector<uint32_t> buffers; // indices of the Capture::buffers that point into it
};

// The distinct allocations of `capture`, in order of first mention. Buffers that share a base
// must agree on its size and bytes; distinct allocations must not overlap.
Result<std::vector<CapturedAllocation>> collect_allocations(const Capture& capture,
                                                            std::string_view data);

// Relocated allocations get at least this much guard on each side.
inline constexpr uint64_t k_relocation_guard = 4096;

// What a restore writes over the bytes the original is known to write: the captured bytes, the
// poison, or a second poison that catches what the first cannot (a byte the original writes as
// 0xFF and a candidate leaves alone).
enum class Fill : uint8_t { clean, poison, poison_alt };
inline constexpr uint8_t k_poison = 0xFF;
inline constexpr uint8_t k_poison_alt = 0x5A;

class Placement {
public:
  // Allocate device memory for every allocation: at its original address when
  // `original_addresses` and the device has VMM and the range is free there, else anywhere.
  static Result<std::unique_ptr<Placement>>
  place(Device& device, const std::vector<CapturedAllocation>& allocs, bool original_addresses);
  ~Placement();
  Placement(const Placement&) = delete;
  Placement& operator=(const Placement&) = delete;

  // Device address of allocation `a` in this worker.
  uint64_t base(size_t a) const;
  bool at_original(size_t a) const;
  bool any_relocated() const;
  // Guard bytes in front of allocation `a` and after it (the smaller side).
  uint64_t guard_bytes(size_t a) const;

  // Poison [offset, offset + length) of allocation `a` in every poisoned restore.
  void poison(size_t a, uint64_t offset, uint64_t length);
  uint64_t poisoned_bytes(size_t a) const { return m_poisoned_bytes[a]; }

  // Write every region: the guard pattern and each allocation's captured bytes, with the poisoned
  // bytes as `fill` says.
  Result<void> restore(Fill fill);

  struct Snapshot {
    std::vector<std::string> regions;
  };
  // Every region's bytes, guards included.
  Result<Snapshot> snapshot() const;
  // The bytes of allocation `a` in `s`.
  std::string_view data(const Snapshot& s, size_t a) const;

  struct GuardHit {
    size_t allocation = 0; // the allocation nearest to the first changed guard byte
    int64_t offset = 0;    // of that byte from the allocation's base (negative: in front of it)
    uint64_t bytes = 0;    // changed guard bytes in all
  };
  // The guard bytes `s` shows changed, if any.
  std::optional<GuardHit> guard_hit(const Snapshot& s) const;

  // Refill every guard zone with the pattern XORed with `mask` (0: the usual pattern) in every
  // later restore, and check guards against it. A candidate whose result changes with the guard
  // bytes reads outside its buffers.
  void set_guard_mask(uint8_t mask);

  // "VMM granularity 2097152" or "relocated (no VMM)": how the allocations were placed.
  const std::string& how() const { return m_how; }

private:
  struct Region {
    uint64_t address = 0;
    uint64_t size = 0;
    bool vmm = false;
    CUmemGenericAllocationHandle handle = 0;
    std::string clean;        // guard pattern + captured bytes
    std::string poisoned;     // clean + poison; empty until something is poisoned
    std::string poisoned_alt; // clean + the second poison
    std::vector<size_t> allocations;
  };
  struct Slot {
    size_t region = 0;
    uint64_t offset = 0; // of the allocation in its region
    bool original = false;
  };

  explicit Placement(Device& d) : m_device(d) {}
  bool try_original(const std::vector<CapturedAllocation>& allocs);
  Result<void> relocate(const std::vector<CapturedAllocation>& allocs, size_t a);
  void release(Region& r);
  // Calls fn(from, to) for each guard range of region `r` (its bytes outside its allocations).
  template <class Fn> void for_each_guard(const Region& r, Fn&& fn) const;

  Device& m_device;
  std::vector<Region> m_regions;
  std::vector<Slot> m_slots;
  std::vector<uint64_t> m_sizes;
  std::vector<uint64_t> m_poisoned_bytes;
  std::string m_how;
  uint8_t m_guard_mask = 0;
};

} // namespace hone::worker
