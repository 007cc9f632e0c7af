#include "cuda/jit_options.hpp"

#include <cuda.h>

#include <charconv>
#include <string_view>

namespace hone::cuda {

namespace {

// CUjit_option names (without CU_JIT_) whose value is an unsigned integer or an enum: the ones a
// candidate may set. The log buffers are the worker's; the rest need pointers or are outputs.
struct KnownOption {
  std::string_view name;
  CUjit_option option;
};
constexpr KnownOption k_options[] = {
    {"MAX_REGISTERS", CU_JIT_MAX_REGISTERS},
    {"THREADS_PER_BLOCK", CU_JIT_THREADS_PER_BLOCK},
    {"OPTIMIZATION_LEVEL", CU_JIT_OPTIMIZATION_LEVEL},
    {"TARGET_FROM_CUCONTEXT", CU_JIT_TARGET_FROM_CUCONTEXT},
    {"TARGET", CU_JIT_TARGET},
    {"FALLBACK_STRATEGY", CU_JIT_FALLBACK_STRATEGY},
    {"GENERATE_DEBUG_INFO", CU_JIT_GENERATE_DEBUG_INFO},
    {"LOG_VERBOSE", CU_JIT_LOG_VERBOSE},
    {"GENERATE_LINE_INFO", CU_JIT_GENERATE_LINE_INFO},
    {"CACHE_MODE", CU_JIT_CACHE_MODE},
    {"POSITION_INDEPENDENT_CODE", CU_JIT_POSITION_INDEPENDENT_CODE},
    {"MIN_CTA_PER_SM", CU_JIT_MIN_CTA_PER_SM},
    {"MAX_THREADS_PER_BLOCK", CU_JIT_MAX_THREADS_PER_BLOCK},
    {"OVERRIDE_DIRECTIVE_VALUES", CU_JIT_OVERRIDE_DIRECTIVE_VALUES},
};
constexpr std::string_view k_reserved[] = {
    "WALL_TIME",
    "INFO_LOG_BUFFER",
    "INFO_LOG_BUFFER_SIZE_BYTES",
    "ERROR_LOG_BUFFER",
    "ERROR_LOG_BUFFER_SIZE_BYTES",
    "NEW_SM3X_OPT",
    "FAST_COMPILE",
    "GLOBAL_SYMBOL_NAMES",
    "GLOBAL_SYMBOL_ADDRESSES",
    "GLOBAL_SYMBOL_COUNT",
    "LTO",
    "FTZ",
    "PREC_DIV",
    "PREC_SQRT",
    "FMA",
    "REFERENCED_KERNEL_NAMES",
    "REFERENCED_KERNEL_COUNT",
    "REFERENCED_VARIABLE_NAMES",
    "REFERENCED_VARIABLE_COUNT",
    "OPTIMIZE_UNUSED_DEVICE_VARIABLES",
    "SPLIT_COMPILE",
};

} // namespace

Result<std::vector<JitOption>> parse_jit_options(const std::vector<std::string>& options) {
  std::vector<JitOption> out;
  for (const auto& text : options) {
    auto eq = text.find('=');
    std::string_view name = std::string_view(text).substr(0, eq);
    std::string_view value =
        eq == std::string::npos ? std::string_view() : std::string_view(text).substr(eq + 1);
    if (name.starts_with("CU_JIT_")) name.remove_prefix(7);
    const KnownOption* known = nullptr;
    for (const auto& k : k_options) {
      if (k.name == name) known = &k;
    }
    if (!known) {
      for (auto r : k_reserved) {
        if (r == name) {
          return make_error("JIT option " + std::string(name) +
                            " is not accepted from a candidate (the worker sets the logs; the "
                            "others are outputs, take pointers, or apply only to link-time "
                            "optimization)");
        }
      }
      return make_error("unknown JIT option '" + std::string(name) +
                        "' (expected a CUjit_option name without CU_JIT_, e.g. MAX_REGISTERS=64)");
    }
    uint64_t v = 0;
    if (known->option == CU_JIT_TARGET_FROM_CUCONTEXT && value.empty()) {
      v = 0;
    } else {
      auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
      if (value.empty() || ec != std::errc() || p != value.data() + value.size() ||
          v > 0xFFFFFFFFu) {
        return make_error("JIT option " + std::string(name) + ": '" + std::string(value) +
                          "' is not an unsigned 32-bit integer");
      }
    }
    out.push_back({int(known->option), uintptr_t(v)});
  }
  return out;
}

} // namespace hone::cuda
