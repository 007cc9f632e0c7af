// The JIT linker's entry points (cuLinkCreate, cuLinkAddData, cuLinkAddFile, cuLinkComplete,
// cuLinkDestroy): link states, their options and logs. Linking itself is emu/link.cpp; the image
// cuLinkComplete returns is emu/link_image.hpp's.
#include "emu/driver.hpp"

#include "emu/link.hpp"
#include "emu/link_image.hpp"
#include "emu/log.hpp"

#include <chrono>
#include <deque>
#include <fstream>
#include <iterator>

namespace hone::emu {

namespace {

// The options of cuLinkCreate (and, restricted, of cuLinkAddData/AddFile) as they apply here.
struct LinkOptions {
  // Outputs, cuLinkCreate only. cuda.h: the log sizes and the wall time "accumulate data until
  // the CUlinkState is destroyed", written back into the option values given to cuLinkCreate,
  // which "must remain valid for the life of the CUlinkState if output options are used".
  char* info = nullptr;
  size_t info_capacity = 0;
  int info_index = -1;
  char* error = nullptr;
  size_t error_capacity = 0;
  int error_index = -1;
  int wall_index = -1;
  int threads_index = -1; // CU_JIT_THREADS_PER_BLOCK is in/out: the threads targeted
  bool verbose = false;
  std::optional<uint32_t> target; // CU_JIT_TARGET (an SM number); else the context's device
  std::optional<uint32_t> max_registers;
  std::optional<uint32_t> threads_per_block;
};

// CUjit_target values (cuda.h): compute 3.0 to 12.1, each also with the accelerated (`a`) and
// family (`f`) bases. The SM number, or 0 for anything else.
uint32_t jit_target_arch(uintptr_t value) {
  static constexpr uint32_t k_known[] = {30, 32, 35, 37, 50, 52, 53,  60,  61,  62,  70, 72,
                                         75, 80, 86, 87, 89, 90, 100, 103, 110, 120, 121};
  const uintptr_t base = value & ~uintptr_t(0xffff);
  if (base != 0 && base != CU_COMPUTE_ACCELERATED_TARGET_BASE &&
      base != CU_COMPUTE_FAMILY_TARGET_BASE)
    return 0;
  const uint32_t arch = uint32_t(value & 0xffff);
  for (uint32_t k : k_known) {
    if (k == arch) return arch;
  }
  return 0;
}

// Read `count` options. `per_input`: cuLinkAddData/AddFile, which "does not accept any of
// CU_JIT_WALL_TIME, CU_JIT_INFO_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER, CU_JIT_TARGET_FROM_CUCONTEXT,
// or CU_JIT_TARGET". Options with no meaning for an emulated device that runs PTX (optimization
// level, debug and line information, cache mode, fallback strategy, ...) are checked and accepted.
CUresult parse_link_options(unsigned count, CUjit_option* options, void** values, bool per_input,
                            LinkOptions& out, std::string& why) {
  if (count == 0) return CUDA_SUCCESS;
  if (options == nullptr || values == nullptr) {
    why = std::to_string(count) + " JIT options given without the option or value array";
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (unsigned i = 0; i < count; ++i) {
    const int option = enum_value(options[i]);
    const uintptr_t v = reinterpret_cast<uintptr_t>(values[i]);
    auto refuse_per_input = [&] {
      why = "cuLinkAddData/cuLinkAddFile do not accept JIT option " + std::to_string(option) +
            " (logs, wall time and target are the link's: give them to cuLinkCreate)";
      return CUDA_ERROR_INVALID_VALUE;
    };
    switch (option) {
    case CU_JIT_MAX_REGISTERS:
      out.max_registers = uint32_t(v);
      break;
    case CU_JIT_THREADS_PER_BLOCK:
      out.threads_per_block = uint32_t(v);
      if (!per_input) out.threads_index = int(i);
      break;
    case CU_JIT_WALL_TIME:
      if (per_input) return refuse_per_input();
      out.wall_index = int(i);
      break;
    case CU_JIT_INFO_LOG_BUFFER:
      if (per_input) return refuse_per_input();
      out.info = static_cast<char*>(values[i]);
      break;
    case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES:
      if (per_input) break; // a size without its buffer: nothing to write
      out.info_capacity = uint32_t(v);
      out.info_index = int(i);
      break;
    case CU_JIT_ERROR_LOG_BUFFER:
      if (per_input) return refuse_per_input();
      out.error = static_cast<char*>(values[i]);
      break;
    case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES:
      if (per_input) break;
      out.error_capacity = uint32_t(v);
      out.error_index = int(i);
      break;
    case CU_JIT_OPTIMIZATION_LEVEL:
      if (v > 4) {
        why = "CU_JIT_OPTIMIZATION_LEVEL must be 0 to 4";
        return CUDA_ERROR_INVALID_VALUE;
      }
      break;
    case CU_JIT_TARGET_FROM_CUCONTEXT:
      if (per_input) return refuse_per_input();
      break;
    case CU_JIT_TARGET: {
      if (per_input) return refuse_per_input();
      const uint32_t arch = jit_target_arch(v);
      if (arch == 0) {
        why = "CU_JIT_TARGET " + std::to_string(v) + " is not a CUjit_target";
        return CUDA_ERROR_INVALID_VALUE;
      }
      out.target = arch;
      break;
    }
    case CU_JIT_FALLBACK_STRATEGY:
      if (v > CU_PREFER_BINARY) {
        why = "CU_JIT_FALLBACK_STRATEGY must be a CUjit_fallback";
        return CUDA_ERROR_INVALID_VALUE;
      }
      break; // the emulated device always takes PTX: there is no binary to prefer
    case CU_JIT_CACHE_MODE:
      if (v > CU_JIT_CACHE_OPTION_CA) {
        why = "CU_JIT_CACHE_MODE must be a CUjit_cacheMode";
        return CUDA_ERROR_INVALID_VALUE;
      }
      break;
    case CU_JIT_LOG_VERBOSE:
      out.verbose = v != 0;
      break;
    case CU_JIT_GLOBAL_SYMBOL_COUNT:
      if (v != 0) {
        why = "CU_JIT_GLOBAL_SYMBOL_NAMES/ADDRESSES (relocating undefined variables to host "
              "addresses) is not supported by the emulated device";
        return CUDA_ERROR_NOT_SUPPORTED;
      }
      break;
    case CU_JIT_LTO:
      if (v != 0) {
        why = "CU_JIT_LTO: link-time optimization of LTO-IR is not supported by the emulated "
              "device, which links PTX";
        return CUDA_ERROR_NOT_SUPPORTED;
      }
      break;
    default:
      if (option < 0 || option >= CU_JIT_NUM_OPTIONS) {
        why = "unknown JIT option " + std::to_string(option);
        return CUDA_ERROR_INVALID_VALUE;
      }
      break; // debug/line information, FTZ and the like, split compile, ...: nothing to change
    }
  }
  if (out.target && out.threads_per_block) {
    why = "CU_JIT_THREADS_PER_BLOCK cannot be combined with CU_JIT_TARGET";
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

struct LinkState {
  std::mutex mutex; // one call at a time per state
  Handle handle = 0;
  uint32_t target = 90;
  LinkOptions options;
  void** values = nullptr; // cuLinkCreate's option values, where the outputs go
  std::string info_log;
  std::string error_log;
  double wall_ms = 0;
  size_t inputs = 0;
  std::vector<LinkUnit> units;
  std::vector<LinkUnit> members;
  std::deque<std::vector<uint8_t>> images; // valid until cuLinkDestroy, as cuda.h says
};

struct LinkRegistry {
  std::mutex mutex;
  std::unordered_map<Handle, std::shared_ptr<LinkState>> states;
};

LinkRegistry& links() {
  static auto* r = new LinkRegistry(); // never destroyed: entry points may run during exit
  return *r;
}

std::shared_ptr<LinkState> find_state(CUlinkState h) {
  LinkRegistry& l = links();
  std::lock_guard lock(l.mutex);
  auto it = l.states.find(from_cu(h));
  return it == l.states.end() ? nullptr : it->second;
}

// Write the accumulated logs and wall time into cuLinkCreate's option values: NUL-terminated text
// capped at the buffer's size, and the bytes written (terminator included) in place of the size.
void report(LinkState& s) {
  write_jit_log(s.options.info, s.options.info_capacity, s.values, s.options.info_index,
                s.info_log);
  write_jit_log(s.options.error, s.options.error_capacity, s.values, s.options.error_index,
                s.error_log);
  if (s.options.wall_index >= 0) {
    const float ms = float(s.wall_ms); // stored in the option value slot itself
    std::memcpy(&s.values[s.options.wall_index], &ms, sizeof ms);
  }
}

void append_line(std::string& log, const std::string& text) {
  if (text.empty()) return;
  log += text;
  if (log.back() != '\n') log += '\n';
}

// Time the body of a link call into the state's wall time.
template <class F> CUresult timed(LinkState& s, F&& body) {
  const auto start = std::chrono::steady_clock::now();
  CUresult rc = body();
  s.wall_ms +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  report(s);
  return rc;
}

const char* input_type_name(int type) {
  switch (type) {
  case CU_JIT_INPUT_CUBIN:
    return "cubin";
  case CU_JIT_INPUT_PTX:
    return "PTX";
  case CU_JIT_INPUT_FATBINARY:
    return "fatbin";
  case CU_JIT_INPUT_OBJECT:
    return "object";
  case CU_JIT_INPUT_LIBRARY:
    return "library";
  case CU_JIT_INPUT_NVVM:
    return "NVVM";
  default:
    return "input";
  }
}

CUresult add_input(LinkState& s, int type, std::span<const uint8_t> bytes, std::string name,
                   unsigned num_options, CUjit_option* options, void** values) {
  LinkOptions per_input;
  std::string why;
  if (CUresult rc = parse_link_options(num_options, options, values, true, per_input, why);
      rc != CUDA_SUCCESS) {
    append_line(s.error_log, "error   : " + why);
    return rc;
  }
  if (name.empty())
    name = std::string(input_type_name(type)) + " input " + std::to_string(s.inputs);
  ++s.inputs;
  auto code = link_input(type, bytes, name, s.target);
  if (!code) {
    append_line(s.error_log, "error   : " + code.error().message);
    log(LogLevel::warn, "cuLinkAddData: " + code.error().message);
    return static_cast<CUresult>(code.error().code);
  }
  for (auto* list : {&code->units, &code->members}) {
    for (auto& u : *list) {
      u.max_registers = per_input.max_registers;
      u.threads_per_block = per_input.threads_per_block;
    }
  }
  if (s.options.verbose) {
    append_line(s.info_log, "info    : " + name + ": " + input_type_name(type) + " for sm_" +
                                std::to_string(s.target) + " added");
    append_line(s.info_log, code->notes);
  }
  for (auto& u : code->units) s.units.push_back(std::move(u));
  for (auto& u : code->members) s.members.push_back(std::move(u));
  return CUDA_SUCCESS;
}

CUresult link_create(unsigned num_options, CUjit_option* options, void** values,
                     CUlinkState* state_out) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (state_out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto s = std::make_shared<LinkState>();
  std::string why;
  if (CUresult rc = parse_link_options(num_options, options, values, false, s->options, why);
      rc != CUDA_SUCCESS) {
    log(LogLevel::warn, "cuLinkCreate: " + why);
    s->values = values;
    append_line(s->error_log, "error   : " + why);
    if (values != nullptr) report(*s); // an application reads the error log on failure too
    return rc;
  }
  s->values = values;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex); // new_handle() too
    if (s->options.target) {
      s->target = *s->options.target;
    } else {
      // CU_JIT_TARGET_FROM_CUCONTEXT, the default: the current context's device.
      Context* ctx = nullptr;
      if (CUresult rc = current_context(r, ctx); rc != CUDA_SUCCESS) return rc;
      s->target = DeviceLimits::k_cc_major * 10 + DeviceLimits::k_cc_minor;
    }
    s->handle = r.new_handle();
  }
  report(*s);
  LinkRegistry& l = links();
  std::lock_guard lock(l.mutex);
  l.states.emplace(s->handle, s);
  *state_out = to_cu<CUlinkState>(s->handle);
  return CUDA_SUCCESS;
}

CUresult link_add_data(CUlinkState state, CUjitInputType type, void* data, size_t size,
                       const char* name, unsigned num_options, CUjit_option* options,
                       void** values) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  auto s = find_state(state);
  if (s == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  std::lock_guard lock(s->mutex);
  return timed(*s, [&] {
    if (data == nullptr || size == 0) {
      append_line(s->error_log, "error   : cuLinkAddData: no data");
      return CUDA_ERROR_INVALID_VALUE;
    }
    return add_input(*s, enum_value(type), {static_cast<const uint8_t*>(data), size},
                     name != nullptr ? name : "", num_options, options, values);
  });
}

CUresult link_add_file(CUlinkState state, CUjitInputType type, const char* path,
                       unsigned num_options, CUjit_option* options, void** values) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  auto s = find_state(state);
  if (s == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  std::lock_guard lock(s->mutex);
  return timed(*s, [&] {
    if (path == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      append_line(s->error_log, std::string("error   : cannot open ") + path);
      return CUDA_ERROR_FILE_NOT_FOUND;
    }
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                               std::istreambuf_iterator<char>());
    if (in.bad()) {
      append_line(s->error_log, std::string("error   : cannot read ") + path);
      return CUDA_ERROR_FILE_NOT_FOUND;
    }
    if (bytes.empty()) {
      append_line(s->error_log, std::string("error   : ") + path + " is empty");
      return CUDA_ERROR_INVALID_IMAGE;
    }
    return add_input(*s, enum_value(type), bytes, path, num_options, options, values);
  });
}

CUresult link_complete(CUlinkState state, void** cubin_out, size_t* size_out) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  auto s = find_state(state);
  if (s == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (cubin_out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(s->mutex);
  return timed(*s, [&] {
    CompileOptions options;
    options.max_registers = s->options.max_registers.value_or(0);
    options.threads_per_block = s->options.threads_per_block.value_or(0);
    auto linked = link_units(s->units, s->members, s->target, options);
    if (!linked) {
      append_line(s->error_log, linked.error().message);
      log(LogLevel::warn, "cuLinkComplete: " + linked.error().message);
      return static_cast<CUresult>(linked.error().code);
    }
    append_line(s->info_log, linked->info);
    if (s->options.verbose) {
      append_line(s->info_log, "info    : linked " + std::to_string(s->units.size()) +
                                   " input(s) for sm_" + std::to_string(s->target) +
                                   " into an image of PTX for the emulated device");
    }
    LinkedImage image;
    image.arch = s->target;
    image.options = linked->options;
    image.ptx = std::move(linked->ptx);
    s->images.push_back(write_linked_image(image));
    if (s->options.threads_index >= 0 && s->options.threads_per_block)
      s->values[s->options.threads_index] =
          reinterpret_cast<void*>(uintptr_t(*s->options.threads_per_block));
    *cubin_out = s->images.back().data();
    if (size_out != nullptr) *size_out = s->images.back().size();
    log(LogLevel::info, "cuLinkComplete: linked " + std::to_string(s->units.size()) +
                            " input(s) for sm_" + std::to_string(s->target));
    return CUDA_SUCCESS;
  });
}

CUresult link_destroy(CUlinkState state) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  LinkRegistry& l = links();
  std::shared_ptr<LinkState> s;
  {
    std::lock_guard lock(l.mutex);
    auto it = l.states.find(from_cu(state));
    if (it == l.states.end()) return CUDA_ERROR_INVALID_HANDLE;
    s = std::move(it->second);
    l.states.erase(it);
  }
  std::lock_guard lock(s->mutex); // a call still running on another thread finishes first
  return CUDA_SUCCESS;
}

} // namespace

} // namespace hone::emu

using namespace hone::emu;

extern "C" {

// cuda.h maps cuLinkCreate, cuLinkAddData and cuLinkAddFile to their _v2 forms (CUDA 6.5); the
// legacy names (CUDA 5.5) take the same arguments.
CUresult CUDAAPI cuLinkCreate_v2(unsigned int numOptions, CUjit_option* options,
                                 void** optionValues, CUlinkState* stateOut) {
  return guarded([&] { return link_create(numOptions, options, optionValues, stateOut); });
}

CUresult CUDAAPI cuLinkCreate(unsigned int numOptions, CUjit_option* options, void** optionValues,
                              CUlinkState* stateOut) {
  return guarded([&] { return link_create(numOptions, options, optionValues, stateOut); });
}

CUresult CUDAAPI cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void* data, size_t size,
                                  const char* name, unsigned int numOptions, CUjit_option* options,
                                  void** optionValues) {
  return guarded([&] {
    return link_add_data(state, type, data, size, name, numOptions, options, optionValues);
  });
}

CUresult CUDAAPI cuLinkAddData(CUlinkState state, CUjitInputType type, void* data, size_t size,
                               const char* name, unsigned int numOptions, CUjit_option* options,
                               void** optionValues) {
  return guarded([&] {
    return link_add_data(state, type, data, size, name, numOptions, options, optionValues);
  });
}

CUresult CUDAAPI cuLinkAddFile_v2(CUlinkState state, CUjitInputType type, const char* path,
                                  unsigned int numOptions, CUjit_option* options,
                                  void** optionValues) {
  return guarded(
      [&] { return link_add_file(state, type, path, numOptions, options, optionValues); });
}

CUresult CUDAAPI cuLinkAddFile(CUlinkState state, CUjitInputType type, const char* path,
                               unsigned int numOptions, CUjit_option* options,
                               void** optionValues) {
  return guarded(
      [&] { return link_add_file(state, type, path, numOptions, options, optionValues); });
}

CUresult CUDAAPI cuLinkComplete(CUlinkState state, void** cubinOut, size_t* sizeOut) {
  return guarded([&] { return link_complete(state, cubinOut, sizeOut); });
}

CUresult CUDAAPI cuLinkDestroy(CUlinkState state) {
  return guarded([&] { return link_destroy(state); });
}

} // extern "C"
