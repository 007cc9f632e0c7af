// Device memory of the emulated device.
//
// Device addresses are host addresses: an allocation is host memory (mmap), and a kernel's global
// access is a host access once it has been checked against the live allocations. Kernels check
// against an immutable snapshot of the table taken at launch, so lookups take no lock.
//
// Virtual memory management (cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess) works the
// same way on the host's own address space: a reservation is a PROT_NONE mapping, a physical
// allocation is a memfd, and cuMemMap maps the memfd MAP_SHARED|MAP_FIXED over the reserved pages,
// so two mappings of one allocation alias as they do on a GPU. A mapping enters the allocation
// table (kind `mapped`) only once access is granted, so kernels fault on it until then.
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
  mapped,     // a cuMemMap mapping with access granted (cuMemSetAccess)
  registered, // host memory of the application's own, registered (cuMemHostRegister): never freed
};

// What cuMemSetAccess grants on a mapping.
enum class Access : uint8_t { none, read, read_write };

struct Allocation {
  uint64_t base = 0;
  uint64_t size = 0;      // as requested
  AllocKind kind = AllocKind::device;
  const void* owner = nullptr; // the context (or module) that frees it with itself
  bool read_only = false;      // a mapping with read access only: writes fault
  bool managed = false;        // managed memory (cuMemAllocManaged, a .managed module variable)
  uint64_t pool = 0;           // the memory pool of a stream-ordered allocation (cuMemAllocAsync)

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
  // is CUDA_ERROR_OUT_OF_MEMORY when the device or the host is out of memory. `managed` and
  // `pool` are recorded with it (Allocation).
  Result<uint64_t> allocate(uint64_t size, AllocKind kind, const void* owner, bool managed = false,
                            uint64_t pool = 0);
  // Make [base, base + size) of the process's own host memory an allocation (kind registered,
  // read-only when asked): kernels and copies may use it; it counts against no capacity and is
  // never unmapped. CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED when it overlaps an allocation.
  Result<void> adopt(uint64_t base, uint64_t size, bool read_only, const void* owner);
  // Forget the allocation whose base is `base` (unmapping it unless it is registered memory);
  // false when there is none (or it is a mapping).
  bool release(uint64_t base);
  // Free every allocation `owner` holds: what allocate() made, and every reservation (with the
  // mappings in it) and physical allocation reference of virtual memory management.
  void release_owner(const void* owner);
  // The allocation holding `addr`.
  std::optional<Allocation> find(uint64_t addr) const;
  // Whether every byte of [addr, addr + len) (len > 0) is device-accessible memory, writable
  // when `writable`: inside one allocation, or inside mappings with access granted that follow
  // each other without a gap in one reservation (a GPU's copy engines see a virtual range; a pool
  // that maps one reservation piece by piece hands out buffers that straddle two mappings).
  bool covers(uint64_t addr, uint64_t len, bool writable) const;
  // The table as of now, for a launch.
  std::shared_ptr<const AllocationTable> snapshot() const;
  uint64_t used_bytes() const;

  // --- virtual memory management (emu/README.md, "Virtual memory management") ---------------
  // Errors carry the CUresult the driver returns (CUDA_ERROR_INVALID_VALUE unless said).

  // Mapping sizes, mapping addresses and physical sizes are multiples of this: 2 MiB, what sm_90
  // GPUs report as both the minimum and the recommended granularity.
  static constexpr uint64_t k_vmm_granularity = 2ull << 20;

  // Reserve `size` bytes of address space (a multiple of the host page size). A non-zero `hint`
  // (page-aligned, and aligned to `alignment` if given) is where the reservation lands when that
  // range is entirely free; otherwise it lands elsewhere, aligned to `alignment` (a power of two;
  // 0: the granularity). CUDA_ERROR_OUT_OF_MEMORY when the host has no room.
  Result<uint64_t> reserve(uint64_t size, uint64_t alignment, uint64_t hint, const void* owner);
  // Free the reservation made at exactly `base` with exactly `size`; nothing may be mapped in it.
  Result<void> free_reservation(uint64_t base, uint64_t size);
  // Physical memory of `size` bytes (a multiple of the granularity), zero-filled, named `id`, with
  // one reference. CUDA_ERROR_OUT_OF_MEMORY beyond the device's capacity.
  Result<void> create_physical(uint64_t id, uint64_t size, const void* owner);
  // Drop a reference to `id`. Its memory is freed once no reference and no mapping is left.
  Result<void> release_physical(uint64_t id);
  // A new reference to the physical allocation mapped at `addr` (any address inside a mapping).
  Result<uint64_t> retain_physical(uint64_t addr);
  // The size of `id` while it has references, or nullopt (unknown, or released).
  std::optional<uint64_t> physical_size(uint64_t id) const;
  // Whether `id` still exists (referenced, or mapped somewhere).
  bool physical_alive(uint64_t id) const;
  // Map `size` bytes of `id` from `offset` at `va`, inside one reservation, over nothing mapped.
  // The mapping starts with no access.
  Result<void> map(uint64_t va, uint64_t size, uint64_t offset, uint64_t id);
  // Unmap the mappings that make up exactly [va, va + size); the range is reserved again.
  Result<void> unmap(uint64_t va, uint64_t size);
  // Grant `access` on the mappings that make up exactly [va, va + size).
  Result<void> set_access(uint64_t va, uint64_t size, Access access);
  // The access granted on the mapping holding `addr`, or nullopt when nothing is mapped there.
  std::optional<Access> access(uint64_t addr) const;

private:
  struct Reservation {
    uint64_t size = 0;
    const void* owner = nullptr;
  };
  struct Physical {
    int fd = -1;
    uint64_t size = 0;
    uint64_t refs = 0;     // cuMemCreate and cuMemRetainAllocationHandle, less cuMemRelease
    uint64_t mappings = 0; // live cuMemMap mappings of it
    const void* owner = nullptr;
  };
  struct Mapping {
    uint64_t size = 0;
    uint64_t physical = 0;
    Access access = Access::none;
    const void* owner = nullptr; // its reservation's
  };

  // The mappings that make up exactly [va, va + size), in order, or an empty list. Locked.
  std::vector<uint64_t> whole_mappings(uint64_t va, uint64_t size) const;
  // Unmap one mapping, leaving its pages reserved. Locked.
  void unmap_one(uint64_t va);
  // Free `id` if nothing holds it any more. Locked.
  void collect_physical(uint64_t id);

  mutable std::mutex m_mutex;
  std::map<uint64_t, Allocation> m_allocs;
  uint64_t m_used = 0;
  mutable std::shared_ptr<const AllocationTable> m_snapshot;
  std::map<uint64_t, Reservation> m_reservations;    // by base
  std::map<uint64_t, Mapping> m_mappings;            // by address
  std::map<uint64_t, Physical> m_physical;           // by id
};

// The process-wide device memory.
Memory& memory();

} // namespace hone::emu
