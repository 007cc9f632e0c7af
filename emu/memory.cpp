#include "emu/memory.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <cuda.h>
#include <sys/mman.h>

namespace hone::emu {

namespace {

uint64_t mapped_size(uint64_t size) {
  const uint64_t page = 4096;
  return (size + page - 1) / page * page;
}

} // namespace

const Allocation* AllocationTable::find(uint64_t addr) const {
  auto it = std::upper_bound(m_sorted.begin(), m_sorted.end(), addr,
                             [](uint64_t a, const Allocation& al) { return a < al.base; });
  if (it == m_sorted.begin()) return nullptr;
  --it;
  return addr < it->base + std::max<uint64_t>(it->size, 1) ? &*it : nullptr;
}

Result<uint64_t> Memory::allocate(uint64_t size, AllocKind kind, const void* owner) {
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
  m_allocs[base] = Allocation{base, size, kind, owner};
  m_used += size;
  m_snapshot.reset();
  return base;
}

bool Memory::release(uint64_t base) {
  Allocation a;
  {
    std::lock_guard lock(m_mutex);
    auto it = m_allocs.find(base);
    if (it == m_allocs.end()) return false;
    a = it->second;
    m_allocs.erase(it);
    m_used -= a.size;
    m_snapshot.reset();
  }
  munmap(reinterpret_cast<void*>(a.base), mapped_size(a.size));
  return true;
}

void Memory::release_owner(const void* owner) {
  std::vector<uint64_t> bases;
  {
    std::lock_guard lock(m_mutex);
    for (const auto& [b, a] : m_allocs) {
      if (a.owner == owner) bases.push_back(b);
    }
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

Memory& memory() {
  static Memory* m = new Memory(); // never destroyed: kernels may run during exit
  return *m;
}

} // namespace hone::emu
