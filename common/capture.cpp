#include "common/capture.hpp"

namespace hone {

namespace {
constexpr uint32_t k_max_params = 4096;
constexpr uint32_t k_max_buffers = 4096;
} // namespace

void encode(wire::Writer& w, const Capture& c) {
  w.u64(c.request);
  w.u64(c.kernel);
  w.u64(c.key.image.lo);
  w.u64(c.key.image.hi);
  w.str(c.key.entry);
  w.u8(uint8_t(c.status));
  w.str(c.reason);
  for (auto v : c.grid) w.u32(v);
  for (auto v : c.block) w.u32(v);
  w.u32(c.shared_bytes);
  w.u32(uint32_t(c.params.size()));
  for (const auto& p : c.params) {
    w.u32(p.offset);
    w.u32(p.size);
  }
  w.str(c.param_bytes);
  w.u32(uint32_t(c.buffers.size()));
  for (const auto& b : c.buffers) {
    w.u32(b.param);
    w.u32(b.field);
    w.u64(b.pointer);
    w.u64(b.base);
    w.u64(b.size);
    w.u64(b.before);
    w.u64(b.after);
  }
  w.u64(c.data_bytes);
  w.str(c.arch);
  // Flags: bit 0 pointers_from_analysis, bit 1 the bounds section follows. A capture written
  // before bounded captures existed has 0 or 1 here and no section: its buffers are whole.
  w.u8(uint8_t((c.pointers_from_analysis ? 1 : 0) | 2));
  for (const auto& b : c.buffers) {
    w.boolean(b.bounded);
    if (!b.bounded) continue;
    w.u64(b.alloc_base);
    w.u64(b.alloc_size);
  }
  w.str(c.whole_why);
}

bool decode(wire::Reader& r, Capture& c) {
  c.request = r.u64();
  c.kernel = r.u64();
  c.key.image.lo = r.u64();
  c.key.image.hi = r.u64();
  c.key.entry = r.str(64u << 10);
  uint8_t status = r.u8();
  if (status > 3) r.fail("unknown capture status");
  c.status = CaptureStatus(status);
  c.reason = r.str(4096);
  for (auto& v : c.grid) v = r.u32();
  for (auto& v : c.block) v = r.u32();
  c.shared_bytes = r.u32();
  uint32_t np = r.count(k_max_params, 8);
  c.params.resize(np);
  for (auto& p : c.params) {
    p.offset = r.u32();
    p.size = r.u32();
  }
  c.param_bytes = r.str(64u << 10);
  uint32_t nb = r.count(k_max_buffers, 48);
  c.buffers.resize(nb);
  for (auto& b : c.buffers) {
    b.param = r.u32();
    b.field = r.u32();
    b.pointer = r.u64();
    b.base = r.u64();
    b.size = r.u64();
    b.before = r.u64();
    b.after = r.u64();
  }
  c.data_bytes = r.u64();
  c.arch = r.str(32);
  uint8_t flags = r.u8();
  if (flags > 3) r.fail("unknown capture flags");
  c.pointers_from_analysis = (flags & 1) != 0;
  for (auto& b : c.buffers) {
    b.bounded = (flags & 2) ? r.boolean() : false;
    b.alloc_base = b.bounded ? r.u64() : 0;
    b.alloc_size = b.bounded ? r.u64() : 0;
  }
  if (flags & 2) c.whole_why = r.str(4096);
  if (!r.ok()) return false;
  // Everything the metadata says must lie where it says.
  for (const auto& p : c.params) {
    if (uint64_t(p.offset) + p.size > c.param_bytes.size()) {
      r.fail("parameter outside the parameter bytes");
      return false;
    }
  }
  for (const auto& b : c.buffers) {
    if (b.param >= c.params.size() || uint64_t(b.field) + 8 > c.params[b.param].size) {
      r.fail("buffer names a pointer outside its parameter");
      return false;
    }
    if (b.pointer < b.allocation_base() ||
        b.pointer - b.allocation_base() > b.allocation_size()) {
      r.fail("buffer pointer outside its allocation");
      return false;
    }
    if (b.bounded && (b.base < b.alloc_base || b.size > b.alloc_size ||
                      b.base - b.alloc_base > b.alloc_size - b.size)) {
      r.fail("buffer range outside its allocation");
      return false;
    }
    auto within = [&](uint64_t off) { return off <= c.data_bytes && b.size <= c.data_bytes - off; };
    if (!within(b.before) || (b.after != ~0ull && !within(b.after))) {
      r.fail("buffer bytes outside the capture data");
      return false;
    }
  }
  return true;
}

} // namespace hone
