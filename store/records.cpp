#include "store/records.hpp"

#include "common/wire.hpp"

#include <bit>
#include <cstring>

// Header-only xxHash, as common/identity.cpp uses it: nothing to link.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace hone::store {

const char* to_string(KernelState s) {
  switch (s) {
  case KernelState::observed:
    return "observed";
  case KernelState::queued:
    return "queued";
  case KernelState::capturing:
    return "capturing";
  case KernelState::optimizing:
    return "optimizing";
  case KernelState::verified:
    return "verified";
  case KernelState::rejected:
    return "rejected";
  case KernelState::disabled:
    return "disabled";
  }
  return "unknown";
}

const char* to_string(VariantState s) {
  switch (s) {
  case VariantState::verified:
    return "verified";
  case VariantState::rejected:
    return "rejected";
  case VariantState::disabled:
    return "disabled";
  case VariantState::imported:
    return "imported";
  }
  return "unknown";
}

namespace {

// Feeds the canonical encoding of a variant's identity into a streaming xxh3-128, with the same
// little-endian, length-prefixed framing as wire::Writer, without copying the (possibly large)
// image into one buffer first.
class IdHasher {
public:
  IdHasher() { XXH3_128bits_reset(&m_state); }
  void raw(const void* p, size_t n) { XXH3_128bits_update(&m_state, p, n); }
  void u8(uint8_t v) { raw(&v, 1); }
  void u32(uint32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void str(std::string_view s) {
    u32(uint32_t(s.size()));
    raw(s.data(), s.size());
  }
  ImageHash digest() {
    XXH128_hash_t h = XXH3_128bits_digest(&m_state);
    return ImageHash{h.low64, h.high64};
  }

private:
  XXH3_state_t m_state;
};

} // namespace

VariantId variant_id_of(const VariantRecord& v) {
  // Domain tag and layout version: changing what goes into an id means a new tag, since ids are
  // compared across hosts and exports.
  static constexpr std::string_view k_tag = "hone.variant_id/1";
  IdHasher h;
  h.str(k_tag);
  h.u64(v.kernel.image.lo);
  h.u64(v.kernel.image.hi);
  h.str(v.kernel.entry);
  h.str(v.arch);
  h.u32(v.driver_major);
  h.str(v.strategy);
  h.u8(uint8_t(v.format));
  h.str(v.image);
  h.str(v.entry);
  h.u32(uint32_t(v.jit_options.size()));
  for (const auto& o : v.jit_options) h.str(o); // order kept: a later option overrides an earlier
  wire::Writer g;
  encode(g, v.guard);
  h.str(g.out());
  return VariantId{h.digest()};
}

namespace records {

uint64_t checksum64(std::string_view bytes) {
  return XXH3_64bits(bytes.data(), bytes.size());
}

namespace {

void put_be64(std::string& out, uint64_t v) {
  for (int i = 7; i >= 0; --i) out.push_back(char(uint8_t(v >> (8 * i))));
}
uint64_t get_be64(std::string_view in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | uint8_t(in[size_t(i)]);
  return v;
}
void put_be32(std::string& out, uint32_t v) {
  for (int i = 3; i >= 0; --i) out.push_back(char(uint8_t(v >> (8 * i))));
}

void put_hash(wire::Writer& w, const ImageHash& h) {
  w.u64(h.lo);
  w.u64(h.hi);
}
ImageHash get_hash(wire::Reader& r) {
  ImageHash h;
  h.lo = r.u64();
  h.hi = r.u64();
  return h;
}
void put_f64(wire::Writer& w, double d) {
  w.u64(std::bit_cast<uint64_t>(d));
}
double get_f64(wire::Reader& r) {
  return std::bit_cast<double>(r.u64());
}

// Every encoder starts with these two bytes and ends with seal().
wire::Writer start(Kind kind) {
  wire::Writer w;
  w.u8(k_record_format);
  w.u8(uint8_t(kind));
  return w;
}
std::string seal(wire::Writer& w) {
  w.u64(checksum64(w.out()));
  return std::move(w.out());
}

// Checks the frame of a value and returns its payload (between the kind byte and the checksum).
Result<std::string_view> open_frame(std::string_view value, Kind kind) {
  if (value.size() < 2 + 8)
    return make_error("record is " + std::to_string(value.size()) + " bytes, too short to be one");
  std::string_view body = value.substr(0, value.size() - 8);
  uint64_t stored = 0;
  std::memcpy(&stored, value.data() + body.size(), 8);
  if (stored != checksum64(body)) return make_error("record checksum mismatch");
  if (uint8_t(body[0]) != k_record_format)
    return make_error("record format " + std::to_string(uint8_t(body[0])) +
                      " is not the one this build reads (" + std::to_string(k_record_format) + ")");
  if (uint8_t(body[1]) != uint8_t(kind))
    return make_error("record kind " + std::to_string(uint8_t(body[1])) + " where " +
                      std::to_string(uint8_t(kind)) + " was expected");
  return body.substr(2);
}

Result<void> close_frame(const wire::Reader& r, const char* what) {
  if (!r.ok()) return make_error(std::string(what) + " record does not decode: " + r.error());
  if (r.remaining() != 0)
    return make_error(std::string(what) + " record has " + std::to_string(r.remaining()) +
                      " trailing bytes");
  return ok();
}

Result<void> check_len(std::string_view s, uint32_t max, const char* field) {
  if (s.size() > max)
    return make_error(std::string(field) + " is " + std::to_string(s.size()) +
                      " bytes, over the store's limit of " + std::to_string(max));
  return ok();
}

#define STORE_TRY(expr)                                                                            \
  do {                                                                                             \
    auto hone_try_r = (expr);                                                                      \
    if (!hone_try_r) return hone_try_r.error();                                                    \
  } while (0)

Result<void> check_list(const std::vector<std::string>& items, uint32_t max_items,
                        uint32_t max_each, const char* field) {
  if (items.size() > max_items)
    return make_error(std::string(field) + " has " + std::to_string(items.size()) +
                      " entries, over the store's limit of " + std::to_string(max_items));
  for (const auto& s : items) STORE_TRY(check_len(s, max_each, field));
  return ok();
}

bool format_ok(uint8_t f) {
  return f <= uint8_t(proto::ImageFormat::fatbin);
}

} // namespace

std::string image_key(const ImageHash& hash) {
  std::string k;
  k.reserve(16);
  put_be64(k, hash.hi);
  put_be64(k, hash.lo);
  return k;
}

std::string variant_key(const VariantId& id) {
  return image_key(id.h);
}

std::string kernel_key(const KernelKey& key) {
  return image_key(key.image) + key.entry;
}

std::string variant_index_prefix(const KernelKey& kernel) {
  std::string k = image_key(kernel.image);
  put_be32(k, uint32_t(kernel.entry.size()));
  k += kernel.entry;
  return k;
}

std::string variant_index_key(const KernelKey& kernel, const VariantId& id) {
  return variant_index_prefix(kernel) + variant_key(id);
}

std::optional<VariantId> variant_of_key(std::string_view key) {
  if (key.size() != 16) return std::nullopt;
  return VariantId{ImageHash{get_be64(key.substr(8)), get_be64(key.substr(0, 8))}};
}

std::optional<VariantId> variant_of_index_key(std::string_view key) {
  if (key.size() < 16 + 4 + 16) return std::nullopt;
  return variant_of_key(key.substr(key.size() - 16));
}

std::string hex(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s;
  s.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    s.push_back(digits[c >> 4]);
    s.push_back(digits[c & 0xf]);
  }
  return s;
}

// --- images ---------------------------------------------------------------------------------

Result<std::string> encode(const ImageRecord& r) {
  if (r.hash.empty()) return make_error("image record has no hash");
  STORE_TRY(check_len(r.bytes, k_max_blob, "image bytes"));
  if (r.source) {
    STORE_TRY(check_len(r.source->name, k_max_text, "source name"));
    STORE_TRY(check_len(r.source->source, k_max_blob, "source text"));
    if (r.source->headers.size() > k_max_items) return make_error("source has too many headers");
    for (const auto& [name, text] : r.source->headers) {
      STORE_TRY(check_len(name, k_max_text, "header name"));
      STORE_TRY(check_len(text, k_max_blob, "header text"));
    }
    STORE_TRY(check_list(r.source->options, k_max_items, k_max_text, "NVRTC options"));
  }
  auto w = start(Kind::image);
  put_hash(w, r.hash);
  w.u8(uint8_t(r.format));
  w.str(r.bytes);
  w.boolean(r.source.has_value());
  if (r.source) {
    w.str(r.source->name);
    w.str(r.source->source);
    w.u32(uint32_t(r.source->headers.size()));
    for (const auto& [name, text] : r.source->headers) {
      w.str(name);
      w.str(text);
    }
    w.u32(uint32_t(r.source->options.size()));
    for (const auto& o : r.source->options) w.str(o);
  }
  w.i64(r.first_seen);
  // Added after the first schema: a record without them (an older honed's) ends before. The
  // Triton field is written when it is present or the link's inputs follow it.
  if (r.triton || r.linked) {
    w.boolean(r.triton.has_value());
    if (r.triton) {
      STORE_TRY(check_len(r.triton->cubin_path, k_max_text, "Triton cubin path"));
      STORE_TRY(check_len(r.triton->ptx, k_max_blob, "Triton PTX"));
      w.str(r.triton->cubin_path);
      w.str(r.triton->ptx);
    }
  }
  if (r.linked) {
    if (r.linked->inputs.size() > k_max_items) return make_error("link has too many inputs");
    w.boolean(true);
    w.u32(uint32_t(r.linked->inputs.size()));
    for (const auto& in : r.linked->inputs) {
      STORE_TRY(check_len(in.name, k_max_text, "link input name"));
      STORE_TRY(check_len(in.ptx, k_max_blob, "link input PTX"));
      w.u8(in.type);
      w.str(in.name);
      w.str(in.ptx);
      w.u64(in.ptx_size);
      w.boolean(in.from_nvrtc);
    }
  }
  return seal(w);
}

Result<ImageRecord> decode_image(std::string_view value) {
  auto payload = open_frame(value, Kind::image);
  if (!payload) return payload.error();
  wire::Reader r(*payload);
  ImageRecord rec;
  rec.hash = get_hash(r);
  uint8_t format = r.u8();
  if (!format_ok(format)) r.fail("image format out of range");
  rec.format = proto::ImageFormat(format);
  rec.bytes = r.str(k_max_blob);
  if (r.boolean()) {
    proto::SourceInfo s;
    s.name = r.str(k_max_text);
    s.source = r.str(k_max_blob);
    uint32_t n = r.count(k_max_items, 8);
    for (uint32_t i = 0; i < n && r.ok(); ++i) {
      std::string name = r.str(k_max_text);
      std::string text = r.str(k_max_blob);
      s.headers.emplace_back(std::move(name), std::move(text));
    }
    n = r.count(k_max_items, 4);
    for (uint32_t i = 0; i < n && r.ok(); ++i) s.options.push_back(r.str(k_max_text));
    rec.source = std::move(s);
  }
  rec.first_seen = r.i64();
  if (r.ok() && r.remaining() > 0) {
    // Written when present or when the link's inputs follow: a record that says "absent" with
    // nothing after it is not one the store wrote (and would not encode back to the same bytes).
    if (r.boolean()) {
      proto::Image::Triton t;
      t.cubin_path = r.str(k_max_text);
      t.ptx = r.str(k_max_blob);
      rec.triton = std::move(t);
    } else if (r.ok() && r.remaining() == 0) {
      r.fail("an image record's Triton field says it is absent and nothing follows");
    }
  }
  if (r.ok() && r.remaining() > 0) {
    if (!r.boolean()) r.fail("an image record's link field says it is absent");
    proto::Image::Linked l;
    uint32_t n = r.count(k_max_items, 18);
    for (uint32_t i = 0; i < n && r.ok(); ++i) {
      proto::Image::LinkInput in;
      in.type = r.u8();
      in.name = r.str(k_max_text);
      in.ptx = r.str(k_max_blob);
      in.ptx_size = r.u64();
      in.from_nvrtc = r.boolean();
      l.inputs.push_back(std::move(in));
    }
    rec.linked = std::move(l);
  }
  STORE_TRY(close_frame(r, "image"));
  return rec;
}

// --- kernels --------------------------------------------------------------------------------

Result<std::string> encode(const KernelRecord& r) {
  if (r.key.entry.empty()) return make_error("kernel record has no entry name");
  STORE_TRY(check_len(r.key.entry, k_max_text, "entry name"));
  STORE_TRY(check_list(r.tried, k_max_items, k_max_text, "tried strategies"));
  auto w = start(Kind::kernel);
  put_hash(w, r.key.image);
  w.str(r.key.entry);
  w.u8(uint8_t(r.format));
  w.u64(r.image_size);
  w.boolean(r.source_known);
  w.u8(uint8_t(r.state));
  w.boolean(r.disabled);
  w.u64(r.launches);
  w.u64(r.est_gpu_ns);
  w.i64(r.first_seen);
  w.i64(r.last_seen);
  w.u32(uint32_t(r.tried.size()));
  for (const auto& t : r.tried) w.str(t);
  return seal(w);
}

Result<KernelRecord> decode_kernel(std::string_view value) {
  auto payload = open_frame(value, Kind::kernel);
  if (!payload) return payload.error();
  wire::Reader r(*payload);
  KernelRecord rec;
  rec.key.image = get_hash(r);
  rec.key.entry = r.str(k_max_text);
  uint8_t format = r.u8();
  if (!format_ok(format)) r.fail("image format out of range");
  rec.format = proto::ImageFormat(format);
  rec.image_size = r.u64();
  rec.source_known = r.boolean();
  uint8_t state = r.u8();
  if (state > uint8_t(KernelState::disabled)) r.fail("kernel state out of range");
  rec.state = KernelState(state);
  rec.disabled = r.boolean();
  rec.launches = r.u64();
  rec.est_gpu_ns = r.u64();
  rec.first_seen = r.i64();
  rec.last_seen = r.i64();
  uint32_t n = r.count(k_max_items, 4);
  for (uint32_t i = 0; i < n && r.ok(); ++i) rec.tried.push_back(r.str(k_max_text));
  STORE_TRY(close_frame(r, "kernel"));
  return rec;
}

// --- variants -------------------------------------------------------------------------------

Result<std::string> encode(const VariantRecord& r) {
  if (r.kernel.entry.empty()) return make_error("variant record has no kernel entry name");
  STORE_TRY(check_len(r.kernel.entry, k_max_text, "kernel entry name"));
  STORE_TRY(check_len(r.arch, k_max_text, "arch"));
  STORE_TRY(check_len(r.strategy, k_max_text, "strategy"));
  STORE_TRY(check_len(r.image, k_max_blob, "variant image"));
  STORE_TRY(check_len(r.entry, k_max_text, "variant entry name"));
  STORE_TRY(check_list(r.jit_options, k_max_items, k_max_text, "JIT options"));
  if (r.guard.scalars.size() > k_max_guard_scalars)
    return make_error("guard has " + std::to_string(r.guard.scalars.size()) +
                      " scalars, over the limit of " + std::to_string(k_max_guard_scalars));
  for (const auto& s : r.guard.scalars)
    STORE_TRY(check_len(s.bytes, k_max_guard_bytes, "guard scalar"));
  STORE_TRY(check_len(r.verdict, k_max_blob, "verdict"));
  STORE_TRY(check_len(r.evidence_json, k_max_blob, "evidence"));
  auto w = start(Kind::variant);
  put_hash(w, r.id.h);
  put_hash(w, r.kernel.image);
  w.str(r.kernel.entry);
  w.str(r.arch);
  w.u32(r.driver_major);
  w.str(r.strategy);
  w.u8(uint8_t(r.format));
  w.str(r.image);
  w.str(r.entry);
  w.u32(uint32_t(r.jit_options.size()));
  for (const auto& o : r.jit_options) w.str(o);
  encode(w, r.guard);
  w.u8(uint8_t(r.state));
  put_f64(w, r.speedup);
  put_f64(w, r.noise);
  w.str(r.verdict);
  w.str(r.evidence_json);
  w.i64(r.created);
  return seal(w);
}

Result<VariantRecord> decode_variant(std::string_view value) {
  auto payload = open_frame(value, Kind::variant);
  if (!payload) return payload.error();
  wire::Reader r(*payload);
  VariantRecord rec;
  rec.id.h = get_hash(r);
  rec.kernel.image = get_hash(r);
  rec.kernel.entry = r.str(k_max_text);
  rec.arch = r.str(k_max_text);
  rec.driver_major = r.u32();
  rec.strategy = r.str(k_max_text);
  uint8_t format = r.u8();
  if (!format_ok(format)) r.fail("image format out of range");
  rec.format = proto::ImageFormat(format);
  rec.image = r.str(k_max_blob);
  rec.entry = r.str(k_max_text);
  uint32_t n = r.count(k_max_items, 4);
  for (uint32_t i = 0; i < n && r.ok(); ++i) rec.jit_options.push_back(r.str(k_max_text));
  if (r.ok() && !decode(r, rec.guard)) r.fail("guard does not decode");
  uint8_t state = r.u8();
  if (state > uint8_t(VariantState::imported)) r.fail("variant state out of range");
  rec.state = VariantState(state);
  rec.speedup = get_f64(r);
  rec.noise = get_f64(r);
  rec.verdict = r.str(k_max_blob);
  rec.evidence_json = r.str(k_max_blob);
  rec.created = r.i64();
  STORE_TRY(close_frame(r, "variant"));
  return rec;
}

// --- quarantine -----------------------------------------------------------------------------

std::string encode(const QuarantineEntry& q) {
  auto w = start(Kind::quarantine);
  w.str(q.column_family);
  w.str(q.key);
  w.str(q.reason);
  w.i64(q.when);
  // A value too large to keep whole is cut: the report matters, the bytes are only forensics.
  w.str(std::string_view(q.value).substr(0, k_max_blob));
  return seal(w);
}

Result<QuarantineEntry> decode_quarantine(std::string_view value) {
  auto payload = open_frame(value, Kind::quarantine);
  if (!payload) return payload.error();
  wire::Reader r(*payload);
  QuarantineEntry q;
  q.column_family = r.str(k_max_text);
  q.key = r.str(k_max_blob);
  q.reason = r.str(k_max_blob);
  q.when = r.i64();
  q.value = r.str(k_max_blob);
  STORE_TRY(close_frame(r, "quarantine"));
  return q;
}

#undef STORE_TRY

} // namespace records
} // namespace hone::store
