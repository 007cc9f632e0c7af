#include "agent/kernel_ptx.hpp"

#include "cuda/fatbin.hpp"

#include <charconv>
#include <span>

namespace hone::agent {

namespace {

// 90 for "sm_90" or "sm_90a"; 0 when unknown.
uint32_t arch_number(std::string_view arch) {
  if (arch.starts_with("sm_")) arch.remove_prefix(3);
  uint32_t n = 0;
  auto [p, ec] = std::from_chars(arch.data(), arch.data() + arch.size(), n);
  return ec == std::errc() ? n : 0;
}

} // namespace

Result<std::string> kernel_ptx(const KernelTask& task) {
  if (task.image.empty()) return make_error("the image is not known yet");
  switch (task.format) {
  case proto::ImageFormat::ptx: {
    std::string_view text(task.image);
    while (!text.empty() && text.back() == '\0') text.remove_suffix(1);
    return std::string(text);
  }
  case proto::ImageFormat::cubin:
    return make_error("a cubin: SASS only, no PTX");
  case proto::ImageFormat::fatbin:
    break;
  default:
    return make_error("an image of unknown format");
  }
  auto parsed = cuda::parse_fatbin(
      std::span(reinterpret_cast<const std::uint8_t*>(task.image.data()), task.image.size()));
  if (!parsed) return make_error("a fatbin that cannot be read: " + parsed.error().message);
  uint32_t arch = arch_number(task.arch);
  const cuda::FatbinEntry* entry = cuda::select_ptx(*parsed, arch ? arch : 0xffff);
  if (entry == nullptr) {
    std::string have;
    for (const auto& e : parsed->entries) {
      have += (have.empty() ? "" : ", ") + cuda::arch_name(e);
    }
    bool any_ptx = false;
    for (const auto& e : parsed->entries) any_ptx |= e.kind == cuda::EntryKind::ptx;
    return make_error(
        any_ptx ? "a fatbin whose PTX is for newer GPUs than " +
                      (task.arch.empty() ? std::string("this one") : task.arch) + " (" + have + ")"
                : "a fatbin with SASS only (" + (have.empty() ? "empty" : have) + ")");
  }
  auto text = cuda::entry_ptx(*entry);
  if (!text) {
    return make_error("a fatbin whose PTX entry (" + cuda::arch_name(*entry) +
                      ") cannot be decoded: " + text.error().message);
  }
  return std::move(*text);
}

std::string param_label(std::string_view entry, std::string_view name) {
  std::string prefix = std::string(entry) + "_param_";
  if (entry.starts_with("_Z") && name.starts_with(prefix) && name.size() > prefix.size()) {
    return "param " + std::string(name.substr(prefix.size()));
  }
  return std::string(name);
}

} // namespace hone::agent
