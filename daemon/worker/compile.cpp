#include "daemon/worker/compile.hpp"

#include "cuda/fatbin.hpp"
#include "cuda/jit_options.hpp"
#include "cuda/nvrtc.hpp"

#include <span>

namespace hone::worker {

namespace {

// The image's bytes must hold what its own headers declare: the driver reads by them.
Result<void> check_image(const std::string& image, bool ptx) {
  if (image.empty()) return make_error("the image is empty");
  if (ptx) return ok(); // std::string keeps a NUL after its bytes: the driver stops there
  auto size = cuda::image_size(image.data(), image.size());
  if (!size) return make_error("malformed image: " + size.error().message);
  return ok();
}

std::string strip_nul(std::string s) {
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

} // namespace

Result<LoadedCandidate> load_candidate(Device& device, const Job& job) {
  LoadedCandidate out;
  std::vector<JitOption> jit;
  if (job.kind != CandidateKind::cubin || !job.jit_options.empty()) {
    auto parsed = cuda::parse_jit_options(job.jit_options);
    if (!parsed) return parsed.error();
    jit = std::move(*parsed);
  }
  switch (job.kind) {
  case CandidateKind::cuda: {
    std::vector<std::string> options{"--gpu-architecture=compute_" +
                                     std::to_string(device.cc_major()) +
                                     std::to_string(device.cc_minor())};
    options.insert(options.end(), job.nvrtc_options.begin(), job.nvrtc_options.end());
    // The toolkit's device headers (cuda_fp16.h, ...), searched after the candidate's own paths.
    static const std::string k_include = cuda::cuda_include_dir();
    if (!k_include.empty()) options.push_back("--include-path=" + k_include);
    auto compiled = cuda::nvrtc_compile(job.candidate, "candidate.cu", options);
    if (!compiled) return compiled.error();
    out.ptx = std::move(compiled->ptx);
    out.log = std::move(compiled->log);
    while (!out.log.empty() && (out.log.back() == '\n' || out.log.back() == '\0')) out.log.pop_back();
    break;
  }
  case CandidateKind::ptx:
    out.ptx = strip_nul(job.candidate);
    if (out.ptx.empty()) return make_error("the candidate PTX is empty");
    break;
  case CandidateKind::cubin:
    if (auto r = check_image(job.candidate, false); !r) return r.error();
    break;
  }
  const void* image = job.kind == CandidateKind::cubin
                          ? static_cast<const void*>(job.candidate.data())
                          : static_cast<const void*>(out.ptx.c_str());
  auto m = device.load(image, jit);
  if (!m)
    return make_error("the driver refused the candidate: " + m.error().message, m.error().code);
  out.module = std::move(*m);
  return out;
}

Result<LoadedOriginal> load_original(Device& device, const Job& job) {
  LoadedOriginal out;
  bool ptx = job.original_format == proto::ImageFormat::ptx;
  if (job.original_format == proto::ImageFormat::unknown) {
    return make_error("the original image's format is unknown");
  }
  if (auto r = check_image(job.original_image, ptx); !r) return r.error();
  if (ptx) {
    out.ptx = strip_nul(job.original_image);
  } else if (job.original_format == proto::ImageFormat::fatbin) {
    // The PTX the driver would JIT for this device, for the analysis (element types).
    auto bytes = std::span(reinterpret_cast<const uint8_t*>(job.original_image.data()),
                           job.original_image.size());
    if (auto fb = cuda::parse_fatbin(bytes)) {
      if (const auto* e =
              cuda::select_ptx(*fb, uint32_t(device.cc_major() * 10 + device.cc_minor()))) {
        if (auto text = cuda::entry_ptx(*e)) out.ptx = std::move(*text);
      }
    }
  }
  auto m = device.load(job.original_image.c_str());
  if (!m) return m.error();
  out.module = std::move(*m);
  return out;
}

} // namespace hone::worker
