#include "daemon/worker/restore.hpp"

#include <algorithm>
#include <cstring>

namespace hone::worker {

namespace {

// Guard zones hold this pattern, repeated from the start of each region: no kernel writes it by
// accident, and it is not the poison (0xFF) nor zeros.
constexpr unsigned char k_pattern[16] = {0xDE, 0xAD, 0xBE, 0xEF, 0x5A, 0xC3, 0x96, 0x69,
                                         0x0F, 0x1E, 0x2D, 0x3C, 0xA5, 0x4B, 0x87, 0xB4};

std::string pattern(uint64_t size) {
  std::string s(size, '\0');
  for (uint64_t i = 0; i < size; ++i) s[i] = char(k_pattern[i % 16]);
  return s;
}

uint64_t round_down(uint64_t v, uint64_t g) {
  return v / g * g;
}
uint64_t round_up(uint64_t v, uint64_t g) {
  return (v + g - 1) / g * g;
}

} // namespace

Result<std::vector<CapturedAllocation>> collect_allocations(const Capture& capture,
                                                            std::string_view data) {
  std::vector<CapturedAllocation> out;
  std::vector<uint64_t> before_at;
  for (uint32_t i = 0; i < capture.buffers.size(); ++i) {
    const auto& b = capture.buffers[i];
    if (b.size == 0) return make_error("buffer " + std::to_string(i) + " has size 0");
    if (b.before > data.size() || b.size > data.size() - b.before) {
      return make_error("buffer " + std::to_string(i) + "'s bytes lie outside the capture data");
    }
    if (b.base + b.size < b.base)
      return make_error("buffer " + std::to_string(i) + " wraps around");
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const CapturedAllocation& a) { return a.base == b.base; });
    if (it != out.end()) {
      if (it->size != b.size || before_at[size_t(it - out.begin())] != b.before) {
        return make_error("buffers " + std::to_string(it->buffers.front()) + " and " +
                          std::to_string(i) +
                          " name the same allocation with different sizes or bytes");
      }
      it->buffers.push_back(i);
      continue;
    }
    out.push_back({b.base, b.size, data.substr(b.before, b.size), {i}});
    before_at.push_back(b.before);
  }
  for (size_t i = 0; i < out.size(); ++i) {
    for (size_t j = i + 1; j < out.size(); ++j) {
      if (out[i].base < out[j].base + out[j].size && out[j].base < out[i].base + out[i].size) {
        return make_error("the allocations of buffers " + std::to_string(out[i].buffers.front()) +
                          " and " + std::to_string(out[j].buffers.front()) + " overlap");
      }
    }
  }
  return out;
}

Result<std::unique_ptr<Placement>> Placement::place(Device& device,
                                                    const std::vector<CapturedAllocation>& allocs,
                                                    bool original_addresses) {
  std::unique_ptr<Placement> p(new Placement(device));
  p->m_slots.resize(allocs.size());
  p->m_poisoned_bytes.assign(allocs.size(), 0);
  for (const auto& a : allocs) p->m_sizes.push_back(a.size);
  std::vector<bool> placed(allocs.size(), false);
  if (original_addresses && device.vmm() && !allocs.empty()) {
    p->try_original(allocs);
  } else {
    p->m_how = original_addresses ? "relocated: the driver or device has no VMM"
                                  : "relocated: original addresses not requested";
  }
  for (const auto& r : p->m_regions) {
    for (size_t a : r.allocations) placed[a] = true;
  }
  for (size_t a = 0; a < allocs.size(); ++a) {
    if (placed[a]) continue;
    if (auto r = p->relocate(allocs, a); !r) return r.error();
  }
  return p;
}

bool Placement::try_original(const std::vector<CapturedAllocation>& allocs) {
  const auto& api = m_device.api();
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = int(m_device.device());
  size_t g = 0;
  if (api.cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) !=
          CUDA_SUCCESS ||
      g == 0) {
    m_how = "relocated: the driver gave no VMM granularity";
    return false;
  }
  m_how = "VMM, granularity " + std::to_string(g);
  // One reservation per cluster of allocations whose ranges, rounded to the granularity and
  // widened by one granule of guard on each side, touch (small allocations share pages).
  std::vector<size_t> order(allocs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t x, size_t y) { return allocs[x].base < allocs[y].base; });
  struct Cluster {
    uint64_t start, end;
    std::vector<size_t> members;
  };
  std::vector<Cluster> clusters;
  for (size_t a : order) {
    // No room for a guard granule below or above (addresses from a hostile bundle): relocate it.
    if (allocs[a].base < g || allocs[a].base + allocs[a].size > ~uint64_t(0) - 3 * g) continue;
    uint64_t lo = round_down(allocs[a].base, g);
    uint64_t hi = round_up(allocs[a].base + allocs[a].size, g);
    uint64_t start = lo - g, end = hi + g;
    if (!clusters.empty() && start <= clusters.back().end) {
      clusters.back().end = std::max(clusters.back().end, end);
      clusters.back().members.push_back(a);
    } else {
      clusters.push_back({start, end, {a}});
    }
  }
  bool all = true;
  for (const auto& c : clusters) {
    uint64_t size = c.end - c.start;
    CUdeviceptr got = 0;
    if (api.cuMemAddressReserve(&got, size, g, CUdeviceptr(c.start), 0) != CUDA_SUCCESS) {
      all = false;
      continue;
    }
    if (got != c.start) { // a hint, not a promise: the range is taken
      api.cuMemAddressFree(got, size);
      all = false;
      continue;
    }
    CUmemGenericAllocationHandle h = 0;
    if (api.cuMemCreate(&h, size, &prop, 0) != CUDA_SUCCESS) {
      api.cuMemAddressFree(got, size);
      all = false;
      continue;
    }
    if (api.cuMemMap(got, size, 0, h, 0) != CUDA_SUCCESS) {
      api.cuMemRelease(h);
      api.cuMemAddressFree(got, size);
      all = false;
      continue;
    }
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (api.cuMemSetAccess(got, size, &access, 1) != CUDA_SUCCESS) {
      api.cuMemUnmap(got, size);
      api.cuMemRelease(h);
      api.cuMemAddressFree(got, size);
      all = false;
      continue;
    }
    Region r;
    r.address = c.start;
    r.size = size;
    r.vmm = true;
    r.handle = h;
    r.clean = pattern(size);
    for (size_t a : c.members) {
      uint64_t off = allocs[a].base - c.start;
      std::memcpy(r.clean.data() + off, allocs[a].before.data(), allocs[a].size);
      m_slots[a] = {m_regions.size(), off, true};
      r.allocations.push_back(a);
    }
    m_regions.push_back(std::move(r));
  }
  if (!all) m_how += "; some ranges were taken, those allocations were relocated";
  return all;
}

Result<void> Placement::relocate(const std::vector<CapturedAllocation>& allocs, size_t a) {
  const auto& api = m_device.api();
  Region r;
  r.size = k_relocation_guard + allocs[a].size + k_relocation_guard;
  CUdeviceptr p = 0;
  if (auto res = HONE_CU(api, cuMemAlloc, &p, size_t(r.size)); !res) {
    return make_error("allocating " + std::to_string(r.size) +
                          " bytes to restore a buffer: " + res.error().message,
                      res.error().code);
  }
  r.address = p;
  r.clean = pattern(r.size);
  std::memcpy(r.clean.data() + k_relocation_guard, allocs[a].before.data(), allocs[a].size);
  r.allocations.push_back(a);
  m_slots[a] = {m_regions.size(), k_relocation_guard, p + k_relocation_guard == allocs[a].base};
  m_regions.push_back(std::move(r));
  return ok();
}

void Placement::release(Region& r) {
  const auto& api = m_device.api();
  if (r.vmm) {
    api.cuMemUnmap(r.address, r.size);
    api.cuMemRelease(r.handle);
    api.cuMemAddressFree(r.address, r.size);
  } else if (r.address) {
    api.cuMemFree(r.address);
  }
  r.address = 0;
}

Placement::~Placement() {
  for (auto& r : m_regions) release(r);
}

uint64_t Placement::base(size_t a) const {
  return m_regions[m_slots[a].region].address + m_slots[a].offset;
}

bool Placement::at_original(size_t a) const {
  return m_slots[a].original;
}

bool Placement::any_relocated() const {
  return std::any_of(m_slots.begin(), m_slots.end(), [](const Slot& s) { return !s.original; });
}

uint64_t Placement::guard_bytes(size_t a) const {
  const Region& r = m_regions[m_slots[a].region];
  uint64_t front = m_slots[a].offset;
  uint64_t back = r.size - m_slots[a].offset - m_sizes[a];
  // Another allocation of the same reservation may be nearer than the reservation's ends.
  for (size_t b : r.allocations) {
    if (b == a) continue;
    uint64_t ob = m_slots[b].offset;
    if (ob >= m_slots[a].offset + m_sizes[a])
      back = std::min(back, ob - m_slots[a].offset - m_sizes[a]);
    if (ob + m_sizes[b] <= m_slots[a].offset)
      front = std::min(front, m_slots[a].offset - ob - m_sizes[b]);
  }
  return std::min(front, back);
}

void Placement::poison(size_t a, uint64_t offset, uint64_t length) {
  Region& r = m_regions[m_slots[a].region];
  if (r.poisoned.empty()) {
    r.poisoned = r.clean;
    r.poisoned_alt = r.clean;
  }
  offset = std::min(offset, m_sizes[a]);
  length = std::min(length, m_sizes[a] - offset);
  std::memset(r.poisoned.data() + m_slots[a].offset + offset, k_poison, length);
  std::memset(r.poisoned_alt.data() + m_slots[a].offset + offset, k_poison_alt, length);
  m_poisoned_bytes[a] += length;
}

Result<void> Placement::restore(Fill fill) {
  for (const auto& r : m_regions) {
    const std::string* image = &r.clean;
    if (fill == Fill::poison && !r.poisoned.empty()) image = &r.poisoned;
    if (fill == Fill::poison_alt && !r.poisoned_alt.empty()) image = &r.poisoned_alt;
    if (auto res = m_device.upload(r.address, image->data(), image->size()); !res) return res;
  }
  return ok();
}

Result<Placement::Snapshot> Placement::snapshot() const {
  Snapshot s;
  for (const auto& r : m_regions) {
    std::string bytes(r.size, '\0');
    if (auto res = m_device.download(bytes.data(), r.address, r.size); !res) return res.error();
    s.regions.push_back(std::move(bytes));
  }
  return s;
}

std::string_view Placement::data(const Snapshot& s, size_t a) const {
  return std::string_view(s.regions[m_slots[a].region]).substr(m_slots[a].offset, m_sizes[a]);
}

template <class Fn> void Placement::for_each_guard(const Region& r, Fn&& fn) const {
  std::vector<std::pair<uint64_t, uint64_t>> used;
  for (size_t a : r.allocations) used.push_back({m_slots[a].offset, m_slots[a].offset + m_sizes[a]});
  std::sort(used.begin(), used.end());
  uint64_t at = 0;
  for (const auto& [lo, hi] : used) {
    if (at < lo) fn(at, lo);
    at = std::max(at, hi);
  }
  if (at < r.size) fn(at, r.size);
}

void Placement::set_guard_mask(uint8_t mask) {
  const uint8_t flip = uint8_t(mask ^ m_guard_mask);
  m_guard_mask = mask;
  if (!flip) return;
  for (auto& r : m_regions) {
    for_each_guard(r, [&](uint64_t from, uint64_t to) {
      for (std::string* image : {&r.clean, &r.poisoned, &r.poisoned_alt}) {
        if (image->empty()) continue;
        for (uint64_t i = from; i < to; ++i) (*image)[i] = char(uint8_t((*image)[i]) ^ flip);
      }
    });
  }
}

std::optional<Placement::GuardHit> Placement::guard_hit(const Snapshot& s) const {
  std::optional<GuardHit> hit;
  uint64_t changed = 0;
  for (size_t ri = 0; ri < m_regions.size(); ++ri) {
    const Region& r = m_regions[ri];
    const std::string& got = s.regions[ri];
    // The guard bytes are the region's bytes outside its allocations.
    std::vector<std::pair<uint64_t, uint64_t>> used;
    for (size_t a : r.allocations)
      used.push_back({m_slots[a].offset, m_slots[a].offset + m_sizes[a]});
    std::sort(used.begin(), used.end());
    uint64_t at = 0;
    auto scan = [&](uint64_t from, uint64_t to) {
      if (from >= to) return;
      if (std::memcmp(got.data() + from, r.clean.data() + from, to - from) == 0) return;
      for (uint64_t i = from; i < to; ++i) {
        if (got[i] == r.clean[i]) continue;
        ++changed;
        if (hit) continue;
        // Nearest allocation of the region.
        size_t best = r.allocations.front();
        int64_t best_off = 0;
        uint64_t best_dist = ~0ull;
        for (size_t a : r.allocations) {
          uint64_t lo = m_slots[a].offset, hi = lo + m_sizes[a];
          uint64_t dist = i < lo ? lo - i : i - hi + 1;
          if (dist < best_dist) {
            best_dist = dist;
            best = a;
            best_off = int64_t(i) - int64_t(lo);
          }
        }
        hit = GuardHit{best, best_off, 0};
      }
    };
    for (const auto& [lo, hi] : used) {
      scan(at, lo);
      at = std::max(at, hi);
    }
    scan(at, r.size);
  }
  if (hit) hit->bytes = changed;
  return hit;
}

} // namespace hone::worker
