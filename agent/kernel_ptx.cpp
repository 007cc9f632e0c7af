#include "agent/kernel_ptx.hpp"

#include "agent/kernel_source.hpp"

#include "cuda/fatbin.hpp"
#include "ptx/retarget.hpp"
#include "ptx/symbols.hpp"

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

const char* input_type_name(uint8_t type) {
  // CUjitInputType (cuda.h)
  switch (type) {
  case 0:
    return "cubin";
  case 1:
    return "PTX";
  case 2:
    return "fatbin";
  case 3:
    return "object";
  case 4:
    return "library";
  case 5:
    return "NVVM IR";
  default:
    return "input";
  }
}

std::string plural(size_t n, const char* one) {
  return std::to_string(n) + " " + one + (n == 1 ? "" : "s");
}

// A cubin the application's JIT linker made (cuLinkComplete): the PTX input that defines the
// entry, when that input loads on its own (its .extern symbols are none the link's other inputs
// define). hone does not link the inputs itself: a kernel that needs another input stays SASS.
KernelCode from_link(const KernelTask& task) {
  const auto& inputs = task.linked->inputs;
  const std::string link = "the JIT link (" + plural(inputs.size(), "input") + ")";
  std::vector<ptx::ModuleSymbols> symbols(inputs.size());
  size_t found = inputs.size();
  std::string unsent;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].type != 1) continue;
    if (inputs[i].ptx.empty()) {
      if (inputs[i].ptx_size && unsent.empty()) {
        unsent = "'" + inputs[i].name + "' (" + std::to_string(inputs[i].ptx_size) + " bytes)";
      }
      continue;
    }
    symbols[i] = ptx::module_symbols(inputs[i].ptx);
    if (found == inputs.size() && symbols[i].entries.count(task.key.entry)) found = i;
  }
  if (found == inputs.size()) {
    return sass(task, "a cubin from " + link + ": no PTX input the shim sent defines .entry " +
                          task.key.entry +
                          (unsent.empty() ? std::string()
                                          : "; the PTX of " + unsent + " was too large to send"));
  }
  const auto& in = inputs[found];
  const std::string which = "PTX input '" + in.name + "' of " + link;
  // Its .extern symbols: one another input defines, or one a non-PTX input may define, means the
  // module does not load without the link. None of either (vprintf, ...) is the driver's own.
  std::vector<std::string> needs;
  for (const auto* set : {&symbols[found].extern_funcs, &symbols[found].extern_vars}) {
    for (const auto& name : *set) {
      for (size_t j = 0; j < inputs.size(); ++j) {
        if (j == found) continue;
        const auto& other = symbols[j];
        const bool defines = inputs[j].type == 1
                                 ? other.functions.count(name) || other.variables.count(name)
                                 : true; // a cubin, object or library may: hone cannot tell
        if (defines) {
          needs.push_back(name + " (from " + input_type_name(inputs[j].type) + " input '" +
                          inputs[j].name + "')");
          break;
        }
      }
    }
  }
  if (!needs.empty()) {
    std::string list;
    for (size_t i = 0; i < needs.size() && i < 3; ++i) list += (i ? ", " : "") + needs[i];
    if (needs.size() > 3) list += ", ...";
    KernelCode c = sass(task, "a cubin from " + link + ": .entry " + task.key.entry + "'s " +
                                  which + " is not self-contained: it uses " + list +
                                  ", and hone does not link inputs itself");
    return c;
  }
  KernelCode c;
  c.kind = CodeKind::ptx;
  c.ptx = strip_nul(in.ptx);
  c.detail = which;
  c.linked = true;
  if (task.source && in.from_nvrtc) {
    c.kind = CodeKind::source;
    c.detail = "NVRTC source, and " + c.detail;
  }
  return c;
}

// NVRTC source that includes files from directories honed cannot read does not compile here: the
// strategies work on the PTX instead (or on nothing, without PTX), and the detail says why.
KernelCode source_usable(KernelCode c, const KernelTask& task) {
  if (c.kind != CodeKind::source || !task.source) return c;
  auto why = unreadable_include(nvrtc_candidate_options(task.source->options).include_dirs);
  if (!why) return c;
  const std::string prefix = "NVRTC source, and ";
  if (c.detail.starts_with(prefix)) c.detail.erase(0, prefix.size());
  c.kind = c.ptx.empty() ? CodeKind::sass : CodeKind::ptx;
  c.detail += " (its NVRTC source is not used: " + *why + ")";
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
    // A cubin the JIT linker made knows its source through the input that defines the entry.
    if (task.linked) return source_usable(from_link(task), task);
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
  return source_usable(std::move(c), task);
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
