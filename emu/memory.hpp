// Device memory of the emulated device.
//
// Device addresses are host addresses: an allocation is host memory (mmap), and a kernel's global
// access is a host access once it has been checked against the live allocations. Kernels check
// against an immutable snapshot of the table taken at launch, so lookups take no lock.
#pragma once

#include "common/result.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace hone::emu {

enum class AllocKind : uint8_t {
  device,     // cuMemAlloc
  host,       // cuMemAllocHost / cuMemHostAlloc: pinned host memory, also visible to kernels
  global_var, // a module's .global variable
  const_var,  // a module's .const variable: kernels may only read it
};

struct Allocation {
  uint64_t base = 0;
  uint64_t size = 0;      // as requested
  AllocKind kind = AllocKind::device;
  const void* owner = nullptr; // the context (or module) that frees it with itself

  uint64_t end() const { return base + size; }
  bool contains(uint64_t addr, uint64_t len) const {
    return addr >= base && len <= size && addr - base <= size - len;
  }
};

// Every live allocation, sorted by base, as of one moment.
class AllocationTable {
public:
  explicit AllocationTable(std::vector<Allocation> sorted) : m_sorted(std::move(sorted)) {}
  // The allocation holding `addr`, or nullptr.
  const Allocation* find(uint64_t addr) const;
  const std::vector<Allocation>& all() const { return m_sorted; }

private:
  std::vector<Allocation> m_sorted;
};

class Memory {
public:
  // Capacity the emulated device reports (cuDeviceTotalMem, cuMemGetInfo).
  static constexpr uint64_t k_total_bytes = 80ull << 30;

  // Allocate `size` bytes (size 0 is an error), zero-filled, aligned to 256 bytes. The error code
  // is CUDA_ERROR_OUT_OF_MEMORY when the device or the host is out of memory.
  Result<uint64_t> allocate(uint64_t size, AllocKind kind, const void* owner);
  // Free the allocation whose base is `base`; false when there is none.
  bool release(uint64_t base);
  // Free every allocation `owner` holds.
  void release_owner(const void* owner);
  // The allocation holding `addr`.
  std::optional<Allocation> find(uint64_t addr) const;
  // The table as of now, for a launch.
  std::shared_ptr<const AllocationTable> snapshot() const;
  uint64_t used_bytes() const;

private:
  mutable std::mutex m_mutex;
  std::map<uint64_t, Allocation> m_allocs;
  uint64_t m_used = 0;
  mutable std::shared_ptr<const AllocationTable> m_snapshot;
};

// The process-wide device memory.
Memory& memory();

} // namespace hone::emu
