#include "common/protocol.hpp"

#include <cstring>

namespace hone::proto {

void FrameHeader::encode(char out[k_header_size]) const {
  uint16_t t = uint16_t(type);
  std::memcpy(out, &magic, 4);
  std::memcpy(out + 4, &t, 2);
  std::memcpy(out + 6, &flags, 2);
  std::memcpy(out + 8, &length, 4);
  std::memcpy(out + 12, &seq, 4);
}

std::optional<FrameHeader> FrameHeader::decode(const char in[k_header_size], const char** why) {
  FrameHeader h;
  uint16_t t;
  std::memcpy(&h.magic, in, 4);
  std::memcpy(&t, in + 4, 2);
  std::memcpy(&h.flags, in + 6, 2);
  std::memcpy(&h.length, in + 8, 4);
  std::memcpy(&h.seq, in + 12, 4);
  h.type = MsgType(t);
  if (h.magic != k_magic) {
    if (why) *why = "bad frame magic (not a hone peer?)";
    return std::nullopt;
  }
  if (h.length > k_max_payload) {
    if (why) *why = "frame payload over the 4 MiB limit";
    return std::nullopt;
  }
  if (h.flags & ~uint16_t(k_flag_fd)) {
    if (why) *why = "unknown frame flags";
    return std::nullopt;
  }
  return h;
}

std::string frame(MsgType type, uint32_t seq, const wire::Writer& payload, uint16_t flags) {
  FrameHeader h;
  h.type = type;
  h.flags = flags;
  h.length = uint32_t(payload.size());
  h.seq = seq;
  std::string out(k_header_size, '\0');
  h.encode(out.data());
  out += payload.out();
  return out;
}

namespace {

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

constexpr uint32_t k_max_name = 64u << 10;
constexpr uint32_t k_max_link_inputs = 4096; // inputs of one JIT link

} // namespace

void encode(wire::Writer& w, const Hello& m) {
  w.u32(m.version_min);
  w.u32(m.version_max);
  w.u8(uint8_t(m.kind));
  w.u32(m.pid);
  w.u32(m.uid);
  w.str(m.exe);
  w.str(m.hostname);
  w.str(m.device_name);
  w.str(m.arch);
  w.u32(m.driver_version);
  w.str(m.client_version);
}

bool decode(wire::Reader& r, Hello& m) {
  m.version_min = r.u32();
  m.version_max = r.u32();
  uint8_t kind = r.u8();
  if (kind < 1 || kind > 3) r.fail("unknown client kind");
  m.kind = ClientKind(kind);
  m.pid = r.u32();
  m.uid = r.u32();
  m.exe = r.str(4096);
  m.hostname = r.str(256);
  m.device_name = r.str(256);
  m.arch = r.str(32);
  m.driver_version = r.u32();
  m.client_version = r.str(64);
  if (r.ok() && m.version_min > m.version_max) r.fail("version range is empty");
  return r.ok();
}

void encode(wire::Writer& w, const HelloAck& m) {
  w.u32(m.version);
  w.str(m.daemon_version);
  w.u32(m.report_interval_ms);
}

bool decode(wire::Reader& r, HelloAck& m) {
  m.version = r.u32();
  m.daemon_version = r.str(64);
  m.report_interval_ms = r.u32();
  return r.ok();
}

void encode(wire::Writer& w, const ErrorMsg& m) {
  w.u32(m.code);
  w.str(m.message);
}

bool decode(wire::Reader& r, ErrorMsg& m) {
  m.code = r.u32();
  m.message = r.str(k_max_name);
  return r.ok();
}

void encode(wire::Writer& w, const Kernels& m) {
  w.u32(uint32_t(m.kernels.size()));
  for (const auto& k : m.kernels) {
    w.u64(k.id);
    put_hash(w, k.key.image);
    w.str(k.key.entry);
    w.u8(uint8_t(k.format));
    w.u64(k.image_size);
    w.boolean(k.source_known);
  }
  if (!m.arch.empty()) {
    w.str(m.device_name);
    w.str(m.arch);
    w.u32(m.driver_version);
  }
}

bool decode(wire::Reader& r, Kernels& m) {
  uint32_t n = r.count(1u << 16, 8 + 16 + 4 + 1 + 8 + 1);
  m.kernels.resize(n);
  for (auto& k : m.kernels) {
    k.id = r.u64();
    k.key.image = get_hash(r);
    k.key.entry = r.str(k_max_name);
    uint8_t f = r.u8();
    if (f > 3) r.fail("unknown image format");
    k.format = ImageFormat(f);
    k.image_size = r.u64();
    k.source_known = r.boolean();
    if (!r.ok()) break;
    if (k.key.entry.empty()) r.fail("kernel without a name");
  }
  if (r.ok() && r.remaining() > 0) {
    m.device_name = r.str(k_max_name);
    m.arch = r.str(k_max_name);
    m.driver_version = r.u32();
  }
  return r.ok();
}

void encode(wire::Writer& w, const Stats& m) {
  w.u64(m.uptime_ns);
  w.u32(uint32_t(m.kernels.size()));
  for (const auto& k : m.kernels) {
    w.u64(k.id);
    w.u64(k.launches);
    w.u64(k.sampled);
    w.u64(k.sampled_ns);
    w.u64(k.variant_launches);
    w.u64(k.fallbacks);
    for (auto v : k.grid) w.u32(v);
    for (auto v : k.block) w.u32(v);
  }
  if (m.graph_kernels.empty() && m.graph_replays == 0 && m.graph_nodes_patched == 0 &&
      m.guard_misses.empty())
    return;
  w.u32(uint32_t(m.graph_kernels.size()));
  for (const auto& g : m.graph_kernels) {
    w.u64(g.id);
    w.u64(g.graph_launches);
    w.u32(g.graphs);
    w.u32(g.nodes);
    w.u32(g.nodes_serving);
  }
  w.u64(m.graph_replays);
  w.u64(m.graph_nodes_patched);
  if (m.guard_misses.empty()) return;
  w.u32(uint32_t(m.guard_misses.size()));
  for (const auto& [id, misses] : m.guard_misses) {
    w.u64(id);
    w.u64(misses);
  }
}

bool decode(wire::Reader& r, Stats& m) {
  m.uptime_ns = r.u64();
  uint32_t n = r.count(1u << 16, 8 * 6 + 24);
  m.kernels.resize(n);
  for (auto& k : m.kernels) {
    k.id = r.u64();
    k.launches = r.u64();
    k.sampled = r.u64();
    k.sampled_ns = r.u64();
    k.variant_launches = r.u64();
    k.fallbacks = r.u64();
    for (auto& v : k.grid) v = r.u32();
    for (auto& v : k.block) v = r.u32();
    if (!r.ok()) break;
    if (k.sampled > k.launches) r.fail("more sampled launches than launches");
    if (k.variant_launches > k.launches) r.fail("more variant launches than launches");
  }
  if (r.ok() && r.remaining() > 0) {
    uint32_t g = r.count(1u << 16, 8 + 8 + 4 * 3);
    m.graph_kernels.resize(g);
    for (auto& k : m.graph_kernels) {
      k.id = r.u64();
      k.graph_launches = r.u64();
      k.graphs = r.u32();
      k.nodes = r.u32();
      k.nodes_serving = r.u32();
      if (!r.ok()) break;
      if (k.nodes_serving > k.nodes) r.fail("more graph nodes serving a variant than nodes");
      if (k.graphs > k.nodes) r.fail("more graphs than graph nodes");
    }
    m.graph_replays = r.u64();
    m.graph_nodes_patched = r.u64();
  }
  if (r.ok() && r.remaining() > 0) {
    uint32_t g = r.count(1u << 16, 16);
    m.guard_misses.resize(g);
    for (auto& [id, misses] : m.guard_misses) {
      id = r.u64();
      misses = r.u64();
    }
  }
  return r.ok();
}

void encode(wire::Writer& w, const ImageRequest& m) { put_hash(w, m.image); }

bool decode(wire::Reader& r, ImageRequest& m) {
  m.image = get_hash(r);
  return r.ok();
}

void encode(wire::Writer& w, const Image& m) {
  put_hash(w, m.image);
  w.boolean(m.available);
  w.u8(uint8_t(m.format));
  w.u64(m.size);
  w.boolean(m.source.has_value());
  if (m.source) {
    w.str(m.source->name);
    w.str(m.source->source);
    w.u32(uint32_t(m.source->headers.size()));
    for (const auto& [n, c] : m.source->headers) {
      w.str(n);
      w.str(c);
    }
    w.u32(uint32_t(m.source->options.size()));
    for (const auto& o : m.source->options) w.str(o);
  }
  w.boolean(m.triton.has_value());
  if (m.triton) {
    w.str(m.triton->cubin_path);
    w.str(m.triton->ptx);
  }
  w.boolean(m.linked.has_value());
  if (m.linked) {
    w.u32(uint32_t(m.linked->inputs.size()));
    for (const auto& in : m.linked->inputs) {
      w.u8(in.type);
      w.str(in.name);
      w.str(in.ptx);
      w.u64(in.ptx_size);
      w.boolean(in.from_nvrtc);
    }
  }
}

bool decode(wire::Reader& r, Image& m) {
  m.image = get_hash(r);
  m.available = r.boolean();
  uint8_t f = r.u8();
  if (f > 3) r.fail("unknown image format");
  m.format = ImageFormat(f);
  m.size = r.u64();
  if (r.boolean()) {
    SourceInfo s;
    s.name = r.str(k_max_name);
    s.source = r.str();
    uint32_t nh = r.count(1024, 8);
    for (uint32_t i = 0; i < nh && r.ok(); ++i) {
      std::string n = r.str(k_max_name);
      std::string c = r.str();
      s.headers.emplace_back(std::move(n), std::move(c));
    }
    uint32_t no = r.count(1024, 4);
    for (uint32_t i = 0; i < no && r.ok(); ++i) s.options.push_back(r.str(k_max_name));
    m.source = std::move(s);
  }
  if (r.boolean()) {
    Image::Triton t;
    t.cubin_path = r.str(k_max_name);
    t.ptx = r.str();
    m.triton = std::move(t);
  }
  // Absent from an older shim's message.
  if (r.ok() && r.remaining() > 0 && r.boolean()) {
    Image::Linked l;
    uint32_t n = r.count(k_max_link_inputs, 18);
    for (uint32_t i = 0; i < n && r.ok(); ++i) {
      Image::LinkInput in;
      in.type = r.u8();
      in.name = r.str(k_max_name);
      in.ptx = r.str();
      in.ptx_size = r.u64();
      in.from_nvrtc = r.boolean();
      l.inputs.push_back(std::move(in));
    }
    m.linked = std::move(l);
  }
  return r.ok();
}

namespace {
void put_key(wire::Writer& w, const KernelKey& k) {
  put_hash(w, k.image);
  w.str(k.entry);
}
KernelKey get_key(wire::Reader& r) {
  KernelKey k;
  k.image = get_hash(r);
  k.entry = r.str(k_max_name);
  return k;
}
void put_strings(wire::Writer& w, const std::vector<std::string>& v) {
  w.u32(uint32_t(v.size()));
  for (const auto& s : v) w.str(s);
}
std::vector<std::string> get_strings(wire::Reader& r) {
  std::vector<std::string> v;
  uint32_t n = r.count(256, 4);
  for (uint32_t i = 0; i < n && r.ok(); ++i) v.push_back(r.str(4096));
  return v;
}
} // namespace

void encode(wire::Writer& w, const CaptureRequest& m) {
  w.u64(m.request);
  w.u64(m.kernel);
  w.u32(m.launches);
  w.u64(m.max_bytes);
  w.boolean(m.with_outputs);
  w.u8(uint8_t((m.shadow ? 1 : 0) | (m.whole ? 2 : 0)));
}

bool decode(wire::Reader& r, CaptureRequest& m) {
  m.request = r.u64();
  m.kernel = r.u64();
  m.launches = r.u32();
  m.max_bytes = r.u64();
  m.with_outputs = r.boolean();
  const uint8_t flags = r.u8();
  if (r.ok() && flags > 3) r.fail("capture request flags out of range");
  m.shadow = flags & 1;
  m.whole = flags & 2;
  if (r.ok() && (m.launches == 0 || m.launches > 64)) r.fail("capture launches out of range");
  return r.ok();
}

void encode(wire::Writer& w, const InstallVariant& m) {
  put_key(w, m.kernel);
  put_hash(w, m.variant.h);
  w.u8(uint8_t(m.format));
  w.u64(m.size);
  w.str(m.entry);
  put_strings(w, m.jit_options);
  encode(w, m.guard);
}

bool decode(wire::Reader& r, InstallVariant& m) {
  m.kernel = get_key(r);
  m.variant.h = get_hash(r);
  uint8_t f = r.u8();
  if (f > 3) r.fail("unknown image format");
  m.format = ImageFormat(f);
  m.size = r.u64();
  m.entry = r.str(k_max_name);
  m.jit_options = get_strings(r);
  decode(r, m.guard);
  if (r.ok() && m.entry.empty()) r.fail("variant without an entry");
  return r.ok();
}

void encode(wire::Writer& w, const RemoveVariant& m) {
  put_key(w, m.kernel);
  put_hash(w, m.variant.h);
}

bool decode(wire::Reader& r, RemoveVariant& m) {
  m.kernel = get_key(r);
  m.variant.h = get_hash(r);
  return r.ok();
}

void encode(wire::Writer& w, const VariantStatus& m) {
  put_key(w, m.kernel);
  put_hash(w, m.variant.h);
  w.boolean(m.installed);
  w.str(m.message);
}

bool decode(wire::Reader& r, VariantStatus& m) {
  m.kernel = get_key(r);
  m.variant.h = get_hash(r);
  m.installed = r.boolean();
  m.message = r.str(k_max_name);
  return r.ok();
}

const char* type_name(MsgType t) {
  switch (t) {
  case MsgType::hello: return "hello";
  case MsgType::hello_ack: return "hello_ack";
  case MsgType::error: return "error";
  case MsgType::goodbye: return "goodbye";
  case MsgType::kernels: return "kernels";
  case MsgType::stats: return "stats";
  case MsgType::image: return "image";
  case MsgType::image_request: return "image_request";
  case MsgType::control: return "control";
  case MsgType::capture: return "capture";
  case MsgType::variant_status: return "variant_status";
  case MsgType::capture_request: return "capture_request";
  case MsgType::install_variant: return "install_variant";
  case MsgType::remove_variant: return "remove_variant";
  case MsgType::job: return "job";
  case MsgType::verdict: return "verdict";
  }
  return "unknown";
}

} // namespace hone::proto
