#include "emu/memory.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <cuda.h>
#include <sys/mman.h>
#include <unistd.h>

namespace hone::emu {

namespace {

uint64_t mapped_size(uint64_t size) {
  const uint64_t page = 4096;
  return (size + page - 1) / page * page;
}

uint64_t host_page_size() {
  static const uint64_t page = [] {
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? uint64_t(p) : uint64_t(4096);
  }();
  return page;
}

bool power_of_two(uint64_t v) {
  return v != 0 && (v & (v - 1)) == 0;
}

Error invalid(const std::string& what) {
  return make_error(what, CUDA_ERROR_INVALID_VALUE);
}

// Turn [va, va + size) back into reserved address space: inaccessible, backed by nothing.
bool reserve_pages(uint64_t va, uint64_t size) {
  void* p = mmap(reinterpret_cast<void*>(va), size, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  return p != MAP_FAILED;
}

int host_protection(Access a) {
  switch (a) {
  case Access::read: return PROT_READ;
  case Access::read_write: return PROT_READ | PROT_WRITE;
  case Access::none: break;
  }
  return PROT_NONE;
}

} // namespace

const Allocation* AllocationTable::find(uint64_t addr) const {
  auto it = std::upper_bound(m_sorted.begin(), m_sorted.end(), addr,
                             [](uint64_t a, const Allocation& al) { return a < al.base; });
  if (it == m_sorted.begin()) return nullptr;
  --it;
  return addr < it->base + std::max<uint64_t>(it->size, 1) ? &*it : nullptr;
}

Result<uint64_t> Memory::allocate(uint64_t size, AllocKind kind, const void* owner, bool managed,
                                  uint64_t pool) {
  if (size == 0) return make_error("cannot allocate 0 bytes", CUDA_ERROR_INVALID_VALUE);
  {
    std::lock_guard lock(m_mutex);
    if (size > k_total_bytes || m_used + size > k_total_bytes) {
      return make_error("out of emulated device memory: " + std::to_string(size) +
                            " bytes requested, " + std::to_string(k_total_bytes - m_used) +
                            " free",
                        CUDA_ERROR_OUT_OF_MEMORY);
    }
  }
  // mmap gives zeroed, page-aligned memory whose pages are only committed when touched.
  void* p = mmap(nullptr, mapped_size(size), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    return make_error("host mmap of " + std::to_string(size) + " bytes failed: " +
                          std::strerror(errno),
                      CUDA_ERROR_OUT_OF_MEMORY);
  }
  auto base = reinterpret_cast<uint64_t>(p);
  std::lock_guard lock(m_mutex);
  Allocation a{base, size, kind, owner};
  a.managed = managed;
  a.pool = pool;
  m_allocs[base] = a;
  m_used += size;
  m_snapshot.reset();
  return base;
}

Result<void> Memory::adopt(uint64_t base, uint64_t size, bool read_only, const void* owner) {
  if (base == 0 || size == 0 || base + size < base) {
    return make_error("cannot register an empty or wrapping range", CUDA_ERROR_INVALID_VALUE);
  }
  std::lock_guard lock(m_mutex);
  // Overlap with the allocation below `base + size` that starts last, if it reaches in.
  auto it = m_allocs.lower_bound(base + size);
  if (it != m_allocs.begin()) {
    --it;
    if (it->second.base + std::max<uint64_t>(it->second.size, 1) > base) {
      return make_error("the range overlaps memory the driver already knows",
                        CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    }
  }
  Allocation a{base, size, AllocKind::registered, owner};
  a.read_only = read_only;
  m_allocs[base] = a;
  m_snapshot.reset();
  return ok();
}

bool Memory::release(uint64_t base) {
  Allocation a;
  {
    std::lock_guard lock(m_mutex);
    auto it = m_allocs.find(base);
    if (it == m_allocs.end() || it->second.kind == AllocKind::mapped) return false;
    a = it->second;
    m_allocs.erase(it);
    if (a.kind != AllocKind::registered) m_used -= a.size;
    m_snapshot.reset();
  }
  // Registered memory is the application's: it stays mapped.
  if (a.kind != AllocKind::registered) munmap(reinterpret_cast<void*>(a.base), mapped_size(a.size));
  return true;
}

void Memory::release_owner(const void* owner) {
  std::vector<uint64_t> bases;
  {
    std::lock_guard lock(m_mutex);
    for (const auto& [b, a] : m_allocs) {
      if (a.owner == owner && a.kind != AllocKind::mapped) bases.push_back(b);
    }
    // Virtual memory: the reservations (with whatever is mapped in them) and the references.
    for (auto it = m_reservations.begin(); it != m_reservations.end();) {
      if (it->second.owner != owner) {
        ++it;
        continue;
      }
      const uint64_t base = it->first, end = base + it->second.size;
      for (auto m = m_mappings.lower_bound(base); m != m_mappings.end() && m->first < end;) {
        uint64_t va = m->first;
        ++m;
        unmap_one(va);
      }
      munmap(reinterpret_cast<void*>(base), it->second.size);
      it = m_reservations.erase(it);
    }
    std::vector<uint64_t> ids;
    for (auto& [id, p] : m_physical) {
      if (p.owner == owner) {
        p.refs = 0;
        ids.push_back(id);
      }
    }
    for (uint64_t id : ids) collect_physical(id);
  }
  for (auto b : bases) release(b);
}

std::optional<Allocation> Memory::find(uint64_t addr) const {
  std::lock_guard lock(m_mutex);
  auto it = m_allocs.upper_bound(addr);
  if (it == m_allocs.begin()) return std::nullopt;
  --it;
  if (addr >= it->second.base + std::max<uint64_t>(it->second.size, 1)) return std::nullopt;
  return it->second;
}

bool Memory::covers(uint64_t addr, uint64_t len, bool writable) const {
  if (len == 0 || addr + len < addr) return false;
  std::lock_guard lock(m_mutex);
  auto it = m_allocs.upper_bound(addr);
  if (it == m_allocs.begin()) return false;
  --it;
  const Allocation* a = &it->second;
  if (addr >= a->base + std::max<uint64_t>(a->size, 1)) return false;
  if (a->contains(addr, len)) return !(writable && a->read_only);
  if (a->kind != AllocKind::mapped) return false;
  // The reservation the first mapping lies in: the others must lie in it too.
  auto r = m_reservations.upper_bound(a->base);
  if (r == m_reservations.begin()) return false;
  --r;
  const uint64_t reservation_end = r->first + r->second.size;
  const uint64_t end = addr + len;
  while (true) {
    if (writable && a->read_only) return false;
    if (a->end() >= end) return true;
    auto next = m_allocs.find(a->end());
    if (next == m_allocs.end() || next->second.kind != AllocKind::mapped ||
        next->second.end() > reservation_end)
      return false;
    a = &next->second;
  }
}

std::shared_ptr<const AllocationTable> Memory::snapshot() const {
  std::lock_guard lock(m_mutex);
  if (!m_snapshot) {
    std::vector<Allocation> v;
    v.reserve(m_allocs.size());
    for (const auto& [b, a] : m_allocs) v.push_back(a);
    m_snapshot = std::make_shared<const AllocationTable>(std::move(v));
  }
  return m_snapshot;
}

uint64_t Memory::used_bytes() const {
  std::lock_guard lock(m_mutex);
  return m_used;
}

// --- virtual memory management ------------------------------------------------------------------

Result<uint64_t> Memory::reserve(uint64_t size, uint64_t alignment, uint64_t hint,
                                 const void* owner) {
  const uint64_t page = host_page_size();
  if (size == 0 || size % page != 0)
    return invalid("reservation size " + std::to_string(size) + " is not a multiple of the " +
                   std::to_string(page) + "-byte host page");
  if (alignment != 0 && !power_of_two(alignment))
    return invalid("alignment " + std::to_string(alignment) + " is not a power of two");
  if (hint % page != 0) return invalid("hint address is not page-aligned");
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  uint64_t base = 0;
  if (hint != 0 && (alignment == 0 || hint % alignment == 0) && hint + size > hint) {
    // Only where nothing is mapped: MAP_FIXED_NOREPLACE fails with EEXIST otherwise. A kernel
    // older than 4.17 takes the flag as a plain hint; an address elsewhere is given back.
    void* p = mmap(reinterpret_cast<void*>(hint), size, PROT_NONE, flags | MAP_FIXED_NOREPLACE,
                   -1, 0);
    if (p != MAP_FAILED && reinterpret_cast<uint64_t>(p) == hint) {
      base = hint;
    } else if (p != MAP_FAILED) {
      munmap(p, size);
    }
  }
  if (base == 0) {
    const uint64_t align = std::max<uint64_t>(alignment, k_vmm_granularity);
    if (size > UINT64_MAX - align) return invalid("reservation size too large");
    const uint64_t span = size + align;
    void* p = mmap(nullptr, span, PROT_NONE, flags, -1, 0);
    if (p == MAP_FAILED) {
      return make_error("cannot reserve " + std::to_string(size) + " bytes of address space: " +
                            std::strerror(errno),
                        CUDA_ERROR_OUT_OF_MEMORY);
    }
    const uint64_t start = reinterpret_cast<uint64_t>(p);
    base = (start + align - 1) / align * align;
    if (base > start) munmap(p, base - start);
    if (start + span > base + size)
      munmap(reinterpret_cast<void*>(base + size), start + span - (base + size));
  }
  std::lock_guard lock(m_mutex);
  m_reservations[base] = Reservation{size, owner};
  return base;
}

Result<void> Memory::free_reservation(uint64_t base, uint64_t size) {
  std::lock_guard lock(m_mutex);
  auto it = m_reservations.find(base);
  if (it == m_reservations.end()) return invalid("no reservation starts at this address");
  if (it->second.size != size) return invalid("size differs from the reservation's");
  auto m = m_mappings.lower_bound(base);
  if (m != m_mappings.end() && m->first < base + size)
    return invalid("the reservation still has mappings (cuMemUnmap them first)");
  munmap(reinterpret_cast<void*>(base), size);
  m_reservations.erase(it);
  return ok();
}

Result<void> Memory::create_physical(uint64_t id, uint64_t size, const void* owner) {
  if (size == 0 || size % k_vmm_granularity != 0)
    return invalid("size " + std::to_string(size) + " is not a multiple of the granularity");
  {
    std::lock_guard lock(m_mutex);
    if (size > k_total_bytes || m_used + size > k_total_bytes) {
      return make_error("out of emulated device memory: " + std::to_string(size) +
                            " bytes requested, " + std::to_string(k_total_bytes - m_used) +
                            " free",
                        CUDA_ERROR_OUT_OF_MEMORY);
    }
  }
  // A memfd: the pages are shared by every mapping of it and only committed when touched.
  int fd = memfd_create("hone-emu-vmm", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, off_t(size)) != 0) {
    std::string why = std::strerror(errno);
    if (fd >= 0) close(fd);
    return make_error("cannot create " + std::to_string(size) + " bytes of memory: " + why,
                      CUDA_ERROR_OUT_OF_MEMORY);
  }
  std::lock_guard lock(m_mutex);
  m_physical[id] = Physical{fd, size, 1, 0, owner};
  m_used += size;
  return ok();
}

Result<void> Memory::release_physical(uint64_t id) {
  std::lock_guard lock(m_mutex);
  auto it = m_physical.find(id);
  if (it == m_physical.end() || it->second.refs == 0) return invalid("unknown allocation handle");
  --it->second.refs;
  collect_physical(id);
  return ok();
}

Result<uint64_t> Memory::retain_physical(uint64_t addr) {
  std::lock_guard lock(m_mutex);
  auto it = m_mappings.upper_bound(addr);
  if (it == m_mappings.begin()) return invalid("nothing is mapped at this address");
  --it;
  if (addr - it->first >= it->second.size) return invalid("nothing is mapped at this address");
  ++m_physical.at(it->second.physical).refs;
  return it->second.physical;
}

std::optional<uint64_t> Memory::physical_size(uint64_t id) const {
  std::lock_guard lock(m_mutex);
  auto it = m_physical.find(id);
  if (it == m_physical.end() || it->second.refs == 0) return std::nullopt;
  return it->second.size;
}

bool Memory::physical_alive(uint64_t id) const {
  std::lock_guard lock(m_mutex);
  return m_physical.count(id) != 0;
}

Result<void> Memory::map(uint64_t va, uint64_t size, uint64_t offset, uint64_t id) {
  const uint64_t g = k_vmm_granularity;
  if (size == 0 || size % g != 0 || va % g != 0 || offset % g != 0)
    return invalid("address, size and offset must be multiples of the granularity");
  std::lock_guard lock(m_mutex);
  auto p = m_physical.find(id);
  if (p == m_physical.end() || p->second.refs == 0) return invalid("unknown allocation handle");
  if (offset > p->second.size || size > p->second.size - offset)
    return invalid("offset + size exceed the allocation");
  auto r = m_reservations.upper_bound(va);
  if (r == m_reservations.begin()) return invalid("the range is not reserved");
  --r;
  if (va - r->first > r->second.size || size > r->second.size - (va - r->first))
    return invalid("the range is not inside one reservation");
  auto m = m_mappings.lower_bound(va);
  if (m != m_mappings.end() && m->first < va + size) return invalid("the range is already mapped");
  if (m != m_mappings.begin() && std::prev(m)->first + std::prev(m)->second.size > va)
    return invalid("the range is already mapped");
  void* q = mmap(reinterpret_cast<void*>(va), size, PROT_NONE, MAP_SHARED | MAP_FIXED,
                 p->second.fd, off_t(offset));
  if (q == MAP_FAILED) {
    std::string why = std::strerror(errno);
    reserve_pages(va, size);
    return make_error("host mmap of the allocation failed: " + why, CUDA_ERROR_OUT_OF_MEMORY);
  }
  m_mappings[va] = Mapping{size, id, Access::none, r->second.owner};
  ++p->second.mappings;
  return ok();
}

std::vector<uint64_t> Memory::whole_mappings(uint64_t va, uint64_t size) const {
  std::vector<uint64_t> out;
  uint64_t at = va;
  for (auto m = m_mappings.find(va); m != m_mappings.end() && m->first == at && at - va < size;
       ++m) {
    out.push_back(m->first);
    at += m->second.size;
  }
  if (size == 0 || at - va != size) out.clear();
  return out;
}

void Memory::unmap_one(uint64_t va) {
  auto m = m_mappings.find(va);
  if (m == m_mappings.end()) return;
  if (m_allocs.erase(va) != 0) m_snapshot.reset();
  reserve_pages(va, m->second.size);
  uint64_t id = m->second.physical;
  m_mappings.erase(m);
  auto p = m_physical.find(id);
  if (p != m_physical.end()) {
    --p->second.mappings;
    collect_physical(id);
  }
}

void Memory::collect_physical(uint64_t id) {
  auto p = m_physical.find(id);
  if (p == m_physical.end() || p->second.refs != 0 || p->second.mappings != 0) return;
  close(p->second.fd);
  m_used -= p->second.size;
  m_physical.erase(p);
}

Result<void> Memory::unmap(uint64_t va, uint64_t size) {
  std::lock_guard lock(m_mutex);
  auto list = whole_mappings(va, size);
  if (list.empty()) return invalid("the range is not exactly a set of whole mappings");
  for (uint64_t m : list) unmap_one(m);
  return ok();
}

Result<void> Memory::set_access(uint64_t va, uint64_t size, Access access) {
  std::lock_guard lock(m_mutex);
  auto list = whole_mappings(va, size);
  if (list.empty()) return invalid("the range is not exactly a set of whole mappings");
  for (uint64_t at : list) {
    Mapping& m = m_mappings.at(at);
    if (mprotect(reinterpret_cast<void*>(at), m.size, host_protection(access)) != 0)
      return make_error(std::string("mprotect failed: ") + std::strerror(errno),
                        CUDA_ERROR_OUT_OF_MEMORY);
    m.access = access;
    if (access == Access::none) {
      m_allocs.erase(at);
    } else {
      m_allocs[at] = Allocation{at, m.size, AllocKind::mapped, m.owner, access == Access::read};
    }
  }
  m_snapshot.reset();
  return ok();
}

std::optional<Access> Memory::access(uint64_t addr) const {
  std::lock_guard lock(m_mutex);
  auto it = m_mappings.upper_bound(addr);
  if (it == m_mappings.begin()) return std::nullopt;
  --it;
  if (addr - it->first >= it->second.size) return std::nullopt;
  return it->second.access;
}

Memory& memory() {
  static Memory* m = new Memory(); // never destroyed: kernels may run during exit
  return *m;
}

} // namespace hone::emu
