#include "common/job.hpp"

#include <cstring>

namespace hone {

namespace {

constexpr uint32_t k_bundle_magic = 0x424F4A48; // "HJOB"
constexpr uint32_t k_bundle_version = 1;
constexpr uint32_t k_max_image = 1u << 30;
constexpr uint32_t k_max_options = 256;
constexpr uint32_t k_max_captures = 256;

void put_f64(wire::Writer& w, double d) {
  uint64_t b;
  std::memcpy(&b, &d, 8);
  w.u64(b);
}
double get_f64(wire::Reader& r) {
  uint64_t b = r.u64();
  double d;
  std::memcpy(&d, &b, 8);
  return d;
}

void put_strings(wire::Writer& w, const std::vector<std::string>& v) {
  w.u32(uint32_t(v.size()));
  for (const auto& s : v) w.str(s);
}
void get_strings(wire::Reader& r, std::vector<std::string>& v) {
  uint32_t n = r.count(k_max_options, 4);
  v.clear();
  for (uint32_t i = 0; i < n && r.ok(); ++i) v.push_back(r.str(4096));
}

} // namespace

const char* to_string(VerdictKind k) {
  switch (k) {
  case VerdictKind::verified: return "verified";
  case VerdictKind::compile_error: return "compile error";
  case VerdictKind::load_error: return "load error";
  case VerdictKind::launch_error: return "launch error";
  case VerdictKind::illegal_address: return "illegal address";
  case VerdictKind::timeout: return "timeout";
  case VerdictKind::mismatch: return "mismatch";
  case VerdictKind::nondeterministic: return "nondeterministic";
  case VerdictKind::not_faster: return "not faster";
  case VerdictKind::suspicious: return "suspicious";
  case VerdictKind::unsupported: return "unsupported";
  case VerdictKind::internal: return "internal error";
  case VerdictKind::refused: return "refused";
  case VerdictKind::not_applicable: return "not applicable";
  }
  return "unknown";
}

void encode(wire::Writer& w, const Job& j) {
  w.u64(j.id);
  w.u64(j.kernel.image.lo);
  w.u64(j.kernel.image.hi);
  w.str(j.kernel.entry);
  w.u8(uint8_t(j.original_format));
  w.u32(uint32_t(j.original_image.size()));
  w.raw(j.original_image.data(), j.original_image.size());
  w.str(j.original_entry);
  w.u32(uint32_t(j.original_ptx.size()));
  w.raw(j.original_ptx.data(), j.original_ptx.size());
  w.u8(uint8_t(j.kind));
  w.u32(uint32_t(j.candidate.size()));
  w.raw(j.candidate.data(), j.candidate.size());
  w.str(j.candidate_entry);
  put_strings(w, j.jit_options);
  put_strings(w, j.nvrtc_options);
  w.u8(uint8_t(j.comparison));
  for (double d : {j.tolerance.f32_rel, j.tolerance.f32_abs, j.tolerance.f64_rel,
                   j.tolerance.f64_abs, j.tolerance.f16_rel, j.tolerance.f16_abs}) {
    put_f64(w, d);
  }
  w.u32(j.bench.warmup);
  w.u32(j.bench.runs);
  w.u32(j.bench.min_runs);
  put_f64(w, j.bench.min_speedup);
  put_f64(w, j.bench.noise_factor);
  put_f64(w, j.bench.suspicious);
  encode(w, j.guard);
  w.u8(uint8_t((j.static_checks ? 1 : 0) | (j.shadow_check ? 2 : 0) | (uint8_t(j.check) << 2) |
               (j.gpu_scrub ? 16 : 0)));
  w.u32(uint32_t(j.captures.size()));
  for (const auto& c : j.captures) encode(w, c);
}

bool decode(wire::Reader& r, Job& j) {
  auto big = [&](std::string& out) {
    uint32_t n = r.u32();
    if (n > k_max_image || n > r.remaining()) {
      r.fail("image larger than the job");
      return;
    }
    out.resize(n);
    r.raw(out.data(), n);
  };
  j.id = r.u64();
  j.kernel.image.lo = r.u64();
  j.kernel.image.hi = r.u64();
  j.kernel.entry = r.str(64u << 10);
  uint8_t f = r.u8();
  if (f > 3) r.fail("unknown image format");
  j.original_format = proto::ImageFormat(f);
  big(j.original_image);
  j.original_entry = r.str(64u << 10);
  big(j.original_ptx);
  uint8_t k = r.u8();
  if (k > 2) r.fail("unknown candidate kind");
  j.kind = CandidateKind(k);
  big(j.candidate);
  j.candidate_entry = r.str(64u << 10);
  get_strings(r, j.jit_options);
  get_strings(r, j.nvrtc_options);
  uint8_t c = r.u8();
  if (c > 1) r.fail("unknown comparison");
  j.comparison = Comparison(c);
  for (double* d : {&j.tolerance.f32_rel, &j.tolerance.f32_abs, &j.tolerance.f64_rel,
                    &j.tolerance.f64_abs, &j.tolerance.f16_rel, &j.tolerance.f16_abs}) {
    *d = get_f64(r);
  }
  j.bench.warmup = r.u32();
  j.bench.runs = r.u32();
  j.bench.min_runs = r.u32();
  j.bench.min_speedup = get_f64(r);
  j.bench.noise_factor = get_f64(r);
  j.bench.suspicious = get_f64(r);
  if (j.bench.runs > 10000 || j.bench.warmup > 1000 || j.bench.min_runs > 10000)
    r.fail("benchmark settings out of range");
  decode(r, j.guard);
  uint8_t flags = r.u8();
  if ((flags & ~16) > 11) r.fail("unknown job flags");
  j.static_checks = flags & 1;
  j.gpu_scrub = flags & 16;
  j.shadow_check = flags & 2;
  j.check = JobCheck((flags >> 2) & 3);
  uint32_t n = r.count(k_max_captures, 64);
  j.captures.resize(n);
  for (auto& cap : j.captures) {
    if (!decode(r, cap)) break;
  }
  return r.ok();
}

void encode(wire::Writer& w, const Verdict& v) {
  w.u64(v.job);
  w.u8(uint8_t(v.kind));
  w.str(v.message);
  put_f64(w, v.original_ns);
  put_f64(w, v.candidate_ns);
  put_f64(w, v.speedup);
  put_f64(w, v.noise);
  w.u32(v.captures_used);
  w.u8(uint8_t(v.comparison));
  w.str(v.evidence_json);
  w.u32(uint32_t(v.compiled_ptx.size()));
  w.raw(v.compiled_ptx.data(), v.compiled_ptx.size());
  w.u8(v.worker_exits ? 1 : 0);
}

bool decode(wire::Reader& r, Verdict& v) {
  v.job = r.u64();
  uint8_t k = r.u8();
  if (k > uint8_t(k_last_verdict_kind)) r.fail("unknown verdict");
  v.kind = VerdictKind(k);
  v.message = r.str(256u << 10);
  v.original_ns = get_f64(r);
  v.candidate_ns = get_f64(r);
  v.speedup = get_f64(r);
  v.noise = get_f64(r);
  v.captures_used = r.u32();
  uint8_t c = r.u8();
  if (c > 1) r.fail("unknown comparison");
  v.comparison = Comparison(c);
  v.evidence_json = r.str(1u << 20);
  if (r.ok() && r.remaining() >= 4) {
    uint32_t n = r.u32();
    if (n > k_max_image || n > r.remaining()) {
      r.fail("compiled PTX larger than the verdict");
    } else {
      v.compiled_ptx.resize(n);
      r.raw(v.compiled_ptx.data(), n);
    }
  }
  if (r.ok() && r.remaining() >= 1) {
    uint8_t exits = r.u8();
    if (exits > 1) r.fail("bad worker_exits flag");
    v.worker_exits = exits == 1;
  }
  return r.ok();
}

std::string encode_bundle(const Job& job, const std::vector<std::string_view>& capture_data) {
  wire::Writer spec;
  encode(spec, job);
  wire::Writer w;
  w.u32(k_bundle_magic);
  w.u32(k_bundle_version);
  w.u64(spec.size());
  w.raw(spec.out().data(), spec.size());
  for (auto d : capture_data) w.raw(d.data(), d.size());
  return std::move(w.out());
}

Result<Bundle> decode_bundle(std::string bytes) {
  Bundle b;
  b.bytes = std::move(bytes);
  wire::Reader r(b.bytes);
  if (r.u32() != k_bundle_magic) return make_error("not a job bundle (bad magic)");
  uint32_t version = r.u32();
  if (version != k_bundle_version) {
    return make_error("job bundle format " + std::to_string(version) + ", this worker reads " +
                      std::to_string(k_bundle_version));
  }
  uint64_t spec_len = r.u64();
  if (!r.ok() || spec_len > r.remaining()) return make_error("job bundle truncated");
  size_t spec_at = 16;
  wire::Reader spec(std::string_view(b.bytes).substr(spec_at, spec_len));
  if (!decode(spec, b.job)) return make_error(std::string("malformed job: ") + spec.error());
  uint64_t at = spec_at + spec_len;
  for (const auto& c : b.job.captures) {
    if (c.data_bytes > b.bytes.size() - at) return make_error("job bundle: capture data truncated");
    b.capture_data.push_back(std::string_view(b.bytes).substr(at, c.data_bytes));
    at += c.data_bytes;
  }
  if (at != b.bytes.size()) return make_error("job bundle: trailing bytes after the captures");
  return b;
}

} // namespace hone
