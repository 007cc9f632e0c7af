#include "agent/kernel_ptx.hpp"

#include "cuda/fatbin.hpp"
#include "ptx/retarget.hpp"

#include <algorithm>
#include <cctype>
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

std::string strip_nul(std::string_view text) {
  while (!text.empty() && text.back() == '\0') text.remove_suffix(1);
  return std::string(text);
}

// A SASS image: its PTX from Triton's cache when there is one, else `why`.
KernelCode sass(const KernelTask& task, std::string why) {
  KernelCode c;
  if (!task.triton_ptx.empty()) {
    c.kind = CodeKind::triton;
    c.ptx = strip_nul(task.triton_ptx);
    c.detail = "PTX from the application's Triton cache (" + why + ")";
    return c;
  }
  c.kind = CodeKind::sass;
  c.detail = std::move(why);
  return c;
}

KernelCode from_fatbin(const KernelTask& task) {
  auto parsed = cuda::parse_fatbin(
      std::span(reinterpret_cast<const std::uint8_t*>(task.image.data()), task.image.size()));
  if (!parsed) {
    KernelCode c;
    c.kind = CodeKind::sass;
    c.detail = "a fatbin that cannot be read: " + parsed.error().message;
    return c;
  }
  cuda::Fatbin usable = *parsed;
  std::erase_if(usable.entries, [&](const cuda::FatbinEntry& e) {
    return task.hide_ptx_arch && e.kind == cuda::EntryKind::ptx && e.arch == task.hide_ptx_arch;
  });
  const uint32_t arch = arch_number(task.arch);
  std::string have;
  for (const auto& e : usable.entries) have += (have.empty() ? "" : ", ") + cuda::arch_name(e);
  if (have.empty()) have = "empty";
  if (const cuda::FatbinEntry* entry = cuda::select_ptx(usable, arch ? arch : 0xffff)) {
    auto text = cuda::entry_ptx(*entry);
    KernelCode c;
    if (!text) {
      c.kind = CodeKind::sass;
      c.detail = "a fatbin whose PTX entry (" + cuda::arch_name(*entry) +
                 ") cannot be decoded: " + text.error().message;
      return c;
    }
    c.kind = CodeKind::ptx;
    c.ptx = std::move(*text);
    c.detail = cuda::arch_name(*entry) + " PTX of the fatbin";
    return c;
  }
  // No PTX a driver would JIT here: PTX for newer GPUs, retargeted where it can be, nearest first.
  std::vector<const cuda::FatbinEntry*> newer;
  for (const auto& e : usable.entries) {
    if (e.kind == cuda::EntryKind::ptx && arch && e.arch > arch) newer.push_back(&e);
  }
  if (newer.empty()) {
    return sass(task, "a fatbin with SASS only (" + have + ")");
  }
  std::stable_sort(newer.begin(), newer.end(),
                   [](const auto* a, const auto* b) { return a->arch < b->arch; });
  std::string refused;
  for (const cuda::FatbinEntry* e : newer) {
    auto text = cuda::entry_ptx(*e);
    if (!text) {
      if (refused.empty()) refused = cuda::arch_name(*e) + " PTX cannot be decoded: " + text.error().message;
      continue;
    }
    auto lowered = ptx::retarget(*text, arch);
    if (lowered) {
      KernelCode c;
      c.kind = CodeKind::ptx_newer;
      c.ptx = std::move(lowered->ptx);
      c.detail = cuda::arch_name(*e) + " PTX retargeted to " + lowered->to_target;
      return c;
    }
    if (refused.empty()) refused = cuda::arch_name(*e) + " PTX: " + lowered.error().message;
  }
  KernelCode c = sass(task, "PTX only for newer GPUs, not retargetable to " + task.arch + ": " +
                                refused + " (" + have + ")");
  if (c.kind == CodeKind::sass) c.kind = CodeKind::ptx_newer;
  return c;
}

} // namespace

const char* to_string(CodeKind k) {
  switch (k) {
  case CodeKind::source:
    return "source";
  case CodeKind::ptx:
    return "ptx";
  case CodeKind::ptx_newer:
    return "ptx_newer";
  case CodeKind::triton:
    return "triton";
  case CodeKind::sass:
    return "sass";
  case CodeKind::collective:
    return "collective";
  default:
    return "unknown";
  }
}

bool is_collective(std::string_view entry) {
  std::string name(entry);
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  for (const char* word : {"nccl", "allreduce", "all_reduce", "allgather", "all_gather",
                           "reducescatter", "reduce_scatter", "alltoall", "all_to_all",
                           "cross_device_reduce", "custom_ar", "oneshot_ar", "twoshot_ar"}) {
    if (name.find(word) != std::string::npos) return true;
  }
  return false;
}

KernelCode kernel_code(const KernelTask& task) {
  KernelCode c;
  if (is_collective(task.key.entry)) {
    c.kind = CodeKind::collective;
    c.detail = "a collective kernel (it waits on other GPUs): never captured, replayed or "
               "optimized";
    return c;
  }
  if (task.image.empty()) {
    c.detail = "the image is not known yet";
    return c;
  }
  switch (task.format) {
  case proto::ImageFormat::ptx:
    c.kind = CodeKind::ptx;
    c.ptx = strip_nul(task.image);
    c.detail = "a PTX image";
    break;
  case proto::ImageFormat::cubin:
    c = sass(task, "a cubin: SASS only");
    break;
  case proto::ImageFormat::fatbin:
    c = from_fatbin(task);
    break;
  default:
    c.kind = CodeKind::sass;
    c.detail = "an image of unknown format";
    break;
  }
  if (task.source) {
    // The NVRTC source is what the strategies prefer; the PTX, if any, goes along.
    c.kind = CodeKind::source;
    c.detail = "NVRTC source" + (c.ptx.empty() ? std::string() : ", and " + c.detail);
  }
  return c;
}

Result<std::string> kernel_ptx(const KernelTask& task) {
  if (!task.ptx.empty()) return strip_nul(task.ptx);
  KernelCode c = kernel_code(task);
  if (!c.ptx.empty()) return std::move(c.ptx);
  return make_error(c.detail);
}

std::string param_label(std::string_view entry, std::string_view name) {
  std::string prefix = std::string(entry) + "_param_";
  if (entry.starts_with("_Z") && name.starts_with(prefix) && name.size() > prefix.size()) {
    return "param " + std::string(name.substr(prefix.size()));
  }
  return std::string(name);
}

} // namespace hone::agent
