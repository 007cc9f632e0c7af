// Modules, libraries, functions and kernels: loading images (PTX text, fatbins carrying PTX) into
// Programs, and the handles the driver API gives out for them.
#include "emu/driver.hpp"

#include "cuda/fatbin.hpp"
#include "emu/cost_model.hpp"
#include "emu/launch_cost.h"
#include "emu/link_image.hpp"
#include "emu/log.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

namespace hone::emu {

namespace {

constexpr uint32_t k_target_arch = DeviceLimits::k_cc_major * 10 + DeviceLimits::k_cc_minor;

// --- JIT options ---------------------------------------------------------------------------------

// The JIT options whose results a program reads back: the info and error logs and the wall time;
// and those that change the registers ptxas allocates, which the cost model's occupancy follows.
// Everything else (optimization level, target, cache mode, ...) has no meaning for an interpreter
// and is accepted and ignored.
struct JitLogs {
  char* info = nullptr;
  size_t info_size = 0;
  int info_index = -1;
  char* error = nullptr;
  size_t error_size = 0;
  int error_index = -1;
  int wall_time_index = -1;
  CompileOptions compile; // what changes the registers ptxas allocates (the cost model's)
};

CUresult parse_jit_options(unsigned count, const CUjit_option* options, void** values,
                           JitLogs& logs) {
  if (count == 0) return CUDA_SUCCESS;
  if (options == nullptr || values == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < count; ++i) {
    const int option = enum_value(options[i]);
    if (option < 0 || option >= CU_JIT_NUM_OPTIONS) return CUDA_ERROR_INVALID_VALUE;
    switch (option) {
    case CU_JIT_INFO_LOG_BUFFER:
      logs.info = static_cast<char*>(values[i]);
      break;
    case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES:
      logs.info_size = reinterpret_cast<uintptr_t>(values[i]);
      logs.info_index = static_cast<int>(i);
      break;
    case CU_JIT_ERROR_LOG_BUFFER:
      logs.error = static_cast<char*>(values[i]);
      break;
    case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES:
      logs.error_size = reinterpret_cast<uintptr_t>(values[i]);
      logs.error_index = static_cast<int>(i);
      break;
    case CU_JIT_WALL_TIME:
      logs.wall_time_index = static_cast<int>(i);
      break;
    case CU_JIT_MAX_REGISTERS:
      logs.compile.max_registers = uint32_t(reinterpret_cast<uintptr_t>(values[i]));
      break;
    case CU_JIT_THREADS_PER_BLOCK:
      logs.compile.threads_per_block = uint32_t(reinterpret_cast<uintptr_t>(values[i]));
      break;
    default:
      break;
    }
  }
  return CUDA_SUCCESS;
}

// Write the logs back the way the real driver does: NUL-terminated text, and the byte count
// (terminator included) in place of the size option's value.
void write_jit_logs(const JitLogs& logs, void** values, std::string_view error_text) {
  write_jit_log(logs.info, logs.info_size, values, logs.info_index, "");
  write_jit_log(logs.error, logs.error_size, values, logs.error_index, error_text);
  if (logs.wall_time_index >= 0) {
    float ms = 0.0f; // stored in the option value slot itself, as the real driver does
    std::memcpy(&values[logs.wall_time_index], &ms, sizeof(ms));
  }
}

// --- loading -------------------------------------------------------------------------------------

Result<std::string> read_file(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(std::string("cannot open ") + path, CUDA_ERROR_FILE_NOT_FOUND);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return make_error(std::string("cannot read ") + path, CUDA_ERROR_FILE_NOT_FOUND);
  return text.str();
}

Module& add_module(Registry& r, Context& ctx, std::shared_ptr<Program> program, std::string name,
                   Handle library) {
  auto mod = std::make_unique<Module>();
  mod->handle = r.new_handle();
  mod->ctx = ctx.handle;
  mod->library = library;
  mod->program = std::move(program);
  mod->name = std::move(name);
  Module& ref = *mod;
  ctx.modules.insert(mod->handle);
  r.modules.emplace(mod->handle, std::move(mod));
  return ref;
}

// Load `ptx` as a module of the current context (cuModuleLoad*).
CUresult load_module(CUmodule* out, const std::string& ptx, const std::string& name,
                     std::string* error_text, const CompileOptions& options = {}) {
  Registry& r = registry();
  Handle ctx_handle = 0;
  {
    std::lock_guard lock(r.mutex);
    Context* ctx = nullptr;
    if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
    ctx_handle = ctx->handle;
    printf_flush(*ctx); // module loads flush device printf's FIFO
  }
  // Parsing may take a while for large modules: other threads keep going meanwhile.
  auto program = Program::load(ptx, name, nullptr, options);
  if (!program) {
    CUresult code = program.error().code != 0 ? static_cast<CUresult>(program.error().code)
                                              : CUDA_ERROR_INVALID_PTX;
    log(LogLevel::warn, name + ": cannot load: " + program.error().message);
    if (error_text != nullptr) *error_text = program.error().message;
    return code;
  }
  std::lock_guard lock(r.mutex);
  Context* ctx = live_context(r, ctx_handle);
  if (ctx == nullptr) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  Module& mod = add_module(r, *ctx, std::move(*program), name, 0);
  log(LogLevel::info, name + ": loaded as module " + std::to_string(mod.handle));
  *out = to_cu<CUmodule>(mod.handle);
  return CUDA_SUCCESS;
}

// The image loaders share this: the PTX, or why there is none.
CUresult load_image(CUmodule* out, const void* image, size_t size, const std::string& what,
                    std::string* error_text, const CompileOptions& options = {}) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (out == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::optional<CompileOptions> linked;
  auto ptx = image_ptx(image, size, what, &linked);
  if (!ptx) {
    log(LogLevel::warn, ptx.error().message);
    if (error_text != nullptr) *error_text = ptx.error().message;
    return static_cast<CUresult>(ptx.error().code);
  }
  // A linked image was compiled with the link's options: a GPU compiles nothing when it loads a
  // cubin, so the options of the load do not apply to it.
  return load_module(out, *ptx, what, error_text, linked ? *linked : options);
}

// The function of `mod` named `name`, creating its handle on first request.
CUresult module_function(Registry& r, Module& mod, std::string_view name, Handle& out,
                         Handle library_kernel = 0) {
  if (auto it = mod.functions.find(name); it != mod.functions.end()) {
    out = it->second;
    return CUDA_SUCCESS;
  }
  Kernel* kernel = mod.program->kernel(name);
  if (kernel == nullptr) return CUDA_ERROR_NOT_FOUND;
  auto fn = std::make_unique<Function>();
  fn->handle = r.new_handle();
  fn->module = mod.handle;
  fn->ctx = mod.ctx;
  fn->library_kernel = library_kernel;
  fn->program = mod.program;
  fn->kernel = kernel;
  fn->name = std::string(name);
  if (LibraryKernel* lk = r.kernel(library_kernel)) {
    // Attributes set on the CUkernel apply in every context, including ones loaded later.
    if (lk->max_dynamic_shared_bytes)
      kernel->attributes().max_dynamic_shared_bytes = *lk->max_dynamic_shared_bytes;
    if (lk->preferred_carveout)
      kernel->attributes().preferred_shared_carveout = *lk->preferred_carveout;
  }
  out = fn->handle;
  mod.functions.emplace(fn->name, fn->handle);
  r.functions.emplace(fn->handle, std::move(fn));
  return CUDA_SUCCESS;
}

// The module `lib` has in the current context, loading it there on first use. Fills `mod_out`.
CUresult library_module(Handle lib_handle, Handle& mod_out) {
  Registry& r = registry();
  std::string ptx, name;
  ManagedSymbols managed;
  CompileOptions options;
  Handle ctx_handle = 0;
  {
    std::lock_guard lock(r.mutex);
    Context* ctx = nullptr;
    if (CUresult rc = current_context(r, ctx); rc != CUDA_SUCCESS) return rc;
    Library* lib = r.library(lib_handle);
    if (lib == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    if (auto it = lib->modules.find(ctx->handle); it != lib->modules.end()) {
      mod_out = it->second;
      return CUDA_SUCCESS;
    }
    if (!lib->prototype_taken) {
      lib->prototype_taken = true;
      Module& mod = add_module(r, *ctx, lib->prototype, lib->name, lib->handle);
      lib->modules.emplace(ctx->handle, mod.handle);
      mod_out = mod.handle;
      return CUDA_SUCCESS;
    }
    ptx = lib->ptx;
    name = lib->name;
    ctx_handle = ctx->handle;
    managed = lib->prototype->managed();
    options = lib->options;
  }
  // Managed variables are the library's, one for every context: the prototype's memory.
  auto program = Program::load(ptx, name, &managed, options);
  if (!program) {
    log(LogLevel::warn, name + ": cannot load into a new context: " + program.error().message);
    return program.error().code != 0 ? static_cast<CUresult>(program.error().code)
                                     : CUDA_ERROR_INVALID_PTX;
  }
  std::lock_guard lock(r.mutex);
  Context* ctx = live_context(r, ctx_handle);
  if (ctx == nullptr) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  Library* lib = r.library(lib_handle);
  if (lib == nullptr) return CUDA_ERROR_INVALID_HANDLE; // unloaded meanwhile
  if (auto it = lib->modules.find(ctx_handle); it != lib->modules.end()) {
    mod_out = it->second; // another thread won the race
    return CUDA_SUCCESS;
  }
  Module& mod = add_module(r, *ctx, std::move(*program), lib->name, lib->handle);
  lib->modules.emplace(ctx_handle, mod.handle);
  mod_out = mod.handle;
  return CUDA_SUCCESS;
}

CUresult kernel_function(Handle kernel_handle, Handle& fn_out) {
  Handle lib_handle = 0;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    LibraryKernel* lk = r.kernel(kernel_handle);
    if (lk == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    lib_handle = lk->library;
  }
  Handle mod_handle = 0;
  if (CUresult rc = library_module(lib_handle, mod_handle); rc != CUDA_SUCCESS) return rc;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  LibraryKernel* lk = r.kernel(kernel_handle);
  Module* mod = r.module(mod_handle);
  if (lk == nullptr || mod == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  return module_function(r, *mod, lk->name, fn_out, kernel_handle);
}

CUresult load_library(CUlibrary* out, const void* image, size_t size, const std::string& what,
                      unsigned num_jit, CUjit_option* jit_options, void** jit_values,
                      unsigned num_lib, CUlibraryOption* lib_options, void** lib_values) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (out == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (num_lib > 0 && (lib_options == nullptr || lib_values == nullptr))
    return CUDA_ERROR_INVALID_VALUE;
  JitLogs logs;
  if (CUresult rc = parse_jit_options(num_jit, jit_options, jit_values, logs); rc != CUDA_SUCCESS)
    return rc;
  std::string error_text;
  auto finish = [&](CUresult rc) {
    if (num_jit > 0) write_jit_logs(logs, jit_values, error_text);
    return rc;
  };
  std::optional<CompileOptions> linked;
  auto ptx = image_ptx(image, size, what, &linked);
  if (!ptx) {
    log(LogLevel::warn, ptx.error().message);
    error_text = ptx.error().message;
    return finish(static_cast<CUresult>(ptx.error().code));
  }
  const CompileOptions options = linked ? *linked : logs.compile; // as in load_image
  auto program = Program::load(*ptx, what, nullptr, options);
  if (!program) {
    log(LogLevel::warn, what + ": cannot load: " + program.error().message);
    error_text = program.error().message;
    return finish(program.error().code != 0 ? static_cast<CUresult>(program.error().code)
                                            : CUDA_ERROR_INVALID_PTX);
  }
  auto lib = std::make_unique<Library>();
  lib->name = what;
  lib->ptx = std::move(*ptx);
  lib->options = options;
  lib->kernel_names = (*program)->kernel_names();
  lib->prototype = std::move(*program);
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  lib->handle = r.new_handle();
  *out = to_cu<CUlibrary>(lib->handle);
  log(LogLevel::info, what + ": loaded as library " + std::to_string(lib->handle));
  r.libraries.emplace(lib->handle, std::move(lib));
  return finish(CUDA_SUCCESS);
}

// A library kernel's context-free view: the prototype program's Kernel.
CUresult library_kernel_view(Registry& r, CUkernel k, LibraryKernel*& lk, Kernel*& kernel) {
  lk = r.kernel(from_cu(k));
  if (lk == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  Library* lib = r.library(lk->library);
  if (lib == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  kernel = lib->prototype->kernel(lk->name);
  return kernel != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

// --- function attributes -------------------------------------------------------------------------

CUresult get_attribute(const KernelAttributes& a, const std::map<int, int>& extra, int attrib,
                       int& out) {
  switch (attrib) {
  case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
    out = static_cast<int>(a.max_threads_per_block);
    break;
  case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES:
    out = static_cast<int>(a.static_shared_bytes);
    break;
  case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES:
    out = static_cast<int>(a.const_bytes);
    break;
  case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES:
    out = static_cast<int>(a.local_bytes);
    break;
  case CU_FUNC_ATTRIBUTE_NUM_REGS:
    out = static_cast<int>(a.num_regs);
    break;
  case CU_FUNC_ATTRIBUTE_PTX_VERSION:
    out = static_cast<int>(a.ptx_version);
    break;
  case CU_FUNC_ATTRIBUTE_BINARY_VERSION:
    out = static_cast<int>(a.binary_version);
    break;
  case CU_FUNC_ATTRIBUTE_CACHE_MODE_CA:
    out = 0;
    break;
  case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
    out = static_cast<int>(a.max_dynamic_shared_bytes);
    break;
  case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
    out = a.preferred_shared_carveout;
    break;
  case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
    out = static_cast<int>(a.required_cluster_width);
    break;
  default:
    if (attrib < 0 || attrib >= CU_FUNC_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
    auto it = extra.find(attrib);
    out = it != extra.end() ? it->second : 0;
    break;
  }
  return CUDA_SUCCESS;
}

CUresult set_attribute(KernelAttributes& a, std::map<int, int>& extra, int attrib, int value) {
  switch (attrib) {
  case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
    // The opt-in: static plus dynamic shared memory up to the device's 227 KB per block.
    if (value < 0 || a.static_shared_bytes + static_cast<uint64_t>(value) >
                         DeviceLimits::k_shared_per_block_optin)
      return CUDA_ERROR_INVALID_VALUE;
    a.max_dynamic_shared_bytes = static_cast<uint32_t>(value);
    return CUDA_SUCCESS;
  case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
    if (value < -1 || value > 100) return CUDA_ERROR_INVALID_VALUE;
    a.preferred_shared_carveout = value;
    return CUDA_SUCCESS;
  case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
    if (value < 0) return CUDA_ERROR_INVALID_VALUE;
    a.required_cluster_width = static_cast<uint32_t>(value);
    return CUDA_SUCCESS;
  case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
  case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
  case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
  case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
    if (value < 0) return CUDA_ERROR_INVALID_VALUE;
    extra[attrib] = value;
    return CUDA_SUCCESS;
  default:
    // Read-only (registers, sizes, versions) or not an attribute.
    return CUDA_ERROR_INVALID_VALUE;
  }
}

// A CUfunction handle for the cuFunc* queries, which also accept a CUkernel (as launches do).
CUresult query_function(Handle h, Function*& out, std::unique_lock<std::mutex>& lock) {
  Registry& r = registry();
  lock = std::unique_lock(r.mutex);
  Context* ctx = nullptr;
  if (CUresult rc = current_context(r, ctx); rc != CUDA_SUCCESS) return rc;
  out = r.function(h);
  if (out != nullptr) return CUDA_SUCCESS;
  if (r.kernel(h) == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  lock.unlock();
  Handle fn = 0;
  if (CUresult rc = kernel_function(h, fn); rc != CUDA_SUCCESS) return rc;
  lock.lock();
  out = r.function(fn);
  return out != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

} // namespace

void write_jit_log(char* buffer, size_t capacity, void** values, int size_index,
                   std::string_view text) {
  if (buffer == nullptr || capacity == 0) return;
  const size_t n = std::min(text.size(), capacity - 1);
  std::memcpy(buffer, text.data(), n);
  buffer[n] = '\0';
  if (size_index >= 0) values[size_index] = reinterpret_cast<void*>(static_cast<uintptr_t>(n + 1));
}

Result<std::string> image_ptx(const void* image, size_t size, std::string_view what,
                              std::optional<CompileOptions>* linked) {
  std::string prefix(what);
  auto view = cuda::locate_image(image, size);
  if (!view)
    return make_error(prefix + ": not a module image: " + view.error().message,
                      CUDA_ERROR_INVALID_IMAGE);
  auto bytes = view->bytes;
  switch (view->format) {
  case cuda::ImageFormat::ptx: {
    std::string text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    while (!text.empty() && text.back() == '\0') text.pop_back();
    return text;
  }
  case cuda::ImageFormat::cubin: {
    // The emulated linker's output (cuLinkComplete) carries PTX; any other cubin SASS only.
    auto image_linked = read_linked_image(bytes);
    if (image_linked && *image_linked) {
      if ((*image_linked)->arch != k_target_arch)
        return make_error(prefix + ": the image was linked for sm_" +
                              std::to_string((*image_linked)->arch) +
                              " (CU_JIT_TARGET), which cannot run on this sm_90 device",
                          CUDA_ERROR_NO_BINARY_FOR_GPU);
      if (linked != nullptr) *linked = (*image_linked)->options;
      return std::move((*image_linked)->ptx);
    }
    return make_error(prefix +
                          ": a cubin holds SASS, which the emulated device cannot run; "
                          "build with PTX (e.g. nvcc -gencode arch=compute_90,code=compute_90)",
                      CUDA_ERROR_NO_BINARY_FOR_GPU);
  }
  case cuda::ImageFormat::fatbin: {
    auto fatbin = cuda::parse_fatbin(bytes);
    if (!fatbin)
      return make_error(prefix + ": bad fatbin: " + fatbin.error().message,
                        CUDA_ERROR_INVALID_IMAGE);
    const cuda::FatbinEntry* entry = cuda::select_ptx(*fatbin, k_target_arch);
    if (entry == nullptr) {
      std::string entries;
      for (const auto& e : fatbin->entries) {
        entries += entries.empty() ? "" : ", ";
        entries += cuda::arch_name(e);
      }
      return make_error(prefix + ": the fatbin carries no PTX for sm_90 (it has: " +
                            (entries.empty() ? "nothing" : entries) +
                            "); the emulated device runs PTX only: build with "
                            "-gencode arch=compute_90,code=compute_90",
                        CUDA_ERROR_NO_BINARY_FOR_GPU);
    }
    auto ptx = cuda::entry_ptx(*entry);
    if (!ptx)
      return make_error(prefix + ": cannot extract " + cuda::describe(*entry) + ": " +
                            ptx.error().message,
                        CUDA_ERROR_INVALID_IMAGE);
    return std::move(*ptx);
  }
  case cuda::ImageFormat::fatbin_wrapper:
  case cuda::ImageFormat::unknown:
    break;
  }
  return make_error(prefix + ": not PTX, a cubin or a fatbin", CUDA_ERROR_INVALID_IMAGE);
}

CUresult resolve_function(Handle h, Handle& function_out) {
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    if (r.function(h) != nullptr) {
      function_out = h;
      return CUDA_SUCCESS;
    }
    if (r.kernel(h) == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  }
  return kernel_function(h, function_out);
}

} // namespace hone::emu

using namespace hone::emu;

extern "C" {

// --- modules
// ---------------------------------------------------------------------------------------

CUresult CUDAAPI cuModuleLoadData(CUmodule* module, const void* image) {
  return guarded([&] {
    return load_image(module, image, hone::cuda::k_unknown_size, "cuModuleLoadData image", nullptr);
  });
}

CUresult CUDAAPI cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int numOptions,
                                    CUjit_option* options, void** optionValues) {
  return guarded([&] {
    JitLogs logs;
    if (CUresult rc = parse_jit_options(numOptions, options, optionValues, logs);
        rc != CUDA_SUCCESS)
      return rc;
    std::string error_text;
    CUresult rc = load_image(module, image, hone::cuda::k_unknown_size, "cuModuleLoadDataEx image",
                             &error_text, logs.compile);
    if (numOptions > 0) write_jit_logs(logs, optionValues, error_text);
    return rc;
  });
}

CUresult CUDAAPI cuModuleLoadFatBinary(CUmodule* module, const void* fatCubin) {
  return guarded([&] {
    return load_image(module, fatCubin, hone::cuda::k_unknown_size, "cuModuleLoadFatBinary image",
                      nullptr);
  });
}

CUresult CUDAAPI cuModuleLoad(CUmodule* module, const char* fname) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (module == nullptr || fname == nullptr) return CUDA_ERROR_INVALID_VALUE;
    auto data = read_file(fname);
    if (!data) {
      log(LogLevel::warn, "cuModuleLoad: " + data.error().message);
      return CUDA_ERROR_FILE_NOT_FOUND;
    }
    data->push_back('\0'); // a PTX file need not end in NUL; the image readers want one
    return load_image(module, data->data(), data->size(), fname, nullptr);
  });
}

CUresult CUDAAPI cuModuleUnload(CUmodule hmod) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    Context* ctx = nullptr;
    if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
    Module* mod = r.module(from_cu(hmod));
    if (mod == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    printf_flush(*ctx); // and unloads
    for (const auto& [name, f] : mod->functions) r.functions.erase(f);
    if (Library* lib = r.library(mod->library)) lib->modules.erase(mod->ctx);
    if (Context* owner = r.context(mod->ctx)) owner->modules.erase(mod->handle);
    // A launch still running holds the Program; it is freed when that launch ends.
    r.modules.erase(from_cu(hmod));
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction* hfunc, CUmodule hmod, const char* name) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (hfunc == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    Context* ctx = nullptr;
    if (CUresult rc = current_context(r, ctx); rc != CUDA_SUCCESS) return rc;
    Module* mod = r.module(from_cu(hmod));
    if (mod == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    Handle fn = 0;
    if (CUresult rc = module_function(r, *mod, name, fn); rc != CUDA_SUCCESS) return rc;
    *hfunc = to_cu<CUfunction>(fn);
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuModuleGetFunctionCount(unsigned int* count, CUmodule hmod) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    Context* ctx = nullptr;
    if (CUresult rc = current_context(r, ctx); rc != CUDA_SUCCESS) return rc;
    Module* mod = r.module(from_cu(hmod));
    if (mod == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    *count = static_cast<unsigned>(mod->program->kernel_names().size());
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuModuleEnumerateFunctions(CUfunction* functions, unsigned int numFunctions,
                                            CUmodule hmod) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (functions == nullptr && numFunctions > 0) return CUDA_ERROR_INVALID_VALUE;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    Context* ctx = nullptr;
    if (CUresult rc = current_context(r, ctx); rc != CUDA_SUCCESS) return rc;
    Module* mod = r.module(from_cu(hmod));
    if (mod == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    auto names = mod->program->kernel_names();
    for (unsigned i = 0; i < numFunctions && i < names.size(); ++i) {
      Handle fn = 0;
      if (CUresult rc = module_function(r, *mod, names[i], fn); rc != CUDA_SUCCESS) return rc;
      functions[i] = to_cu<CUfunction>(fn);
    }
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuModuleGetGlobal_v2(CUdeviceptr* dptr, size_t* bytes, CUmodule hmod,
                                      const char* name) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    Context* ctx = nullptr;
    if (CUresult rc = current_context(r, ctx); rc != CUDA_SUCCESS) return rc;
    Module* mod = r.module(from_cu(hmod));
    if (mod == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    auto sym = mod->program->global(name);
    if (!sym) return CUDA_ERROR_NOT_FOUND;
    if (dptr != nullptr) *dptr = sym->address;
    if (bytes != nullptr) *bytes = sym->size;
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuModuleGetLoadingMode(CUmoduleLoadingMode* mode) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (mode == nullptr) return CUDA_ERROR_INVALID_VALUE;
  // Modules are parsed and prepared in full when loaded.
  *mode = CU_MODULE_EAGER_LOADING;
  return CUDA_SUCCESS;
}

// --- libraries and kernels ---------------------------------------------------------------------

CUresult CUDAAPI cuLibraryLoadData(CUlibrary* library, const void* code, CUjit_option* jitOptions,
                                   void** jitOptionsValues, unsigned int numJitOptions,
                                   CUlibraryOption* libraryOptions, void** libraryOptionValues,
                                   unsigned int numLibraryOptions) {
  return guarded([&] {
    return load_library(library, code, hone::cuda::k_unknown_size, "cuLibraryLoadData image",
                        numJitOptions, jitOptions, jitOptionsValues, numLibraryOptions,
                        libraryOptions, libraryOptionValues);
  });
}

CUresult CUDAAPI cuLibraryLoadFromFile(CUlibrary* library, const char* fileName,
                                       CUjit_option* jitOptions, void** jitOptionsValues,
                                       unsigned int numJitOptions, CUlibraryOption* libraryOptions,
                                       void** libraryOptionValues, unsigned int numLibraryOptions) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (library == nullptr || fileName == nullptr) return CUDA_ERROR_INVALID_VALUE;
    auto data = read_file(fileName);
    if (!data) {
      log(LogLevel::warn, "cuLibraryLoadFromFile: " + data.error().message);
      return CUDA_ERROR_FILE_NOT_FOUND;
    }
    data->push_back('\0');
    return load_library(library, data->data(), data->size(), fileName, numJitOptions, jitOptions,
                        jitOptionsValues, numLibraryOptions, libraryOptions, libraryOptionValues);
  });
}

CUresult CUDAAPI cuLibraryUnload(CUlibrary library) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    Library* lib = r.library(from_cu(library));
    if (lib == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    for (const auto& [ctx_handle, mod_handle] : lib->modules) {
      if (Module* mod = r.module(mod_handle)) {
        for (const auto& [name, f] : mod->functions) r.functions.erase(f);
      }
      if (Context* ctx = r.context(ctx_handle)) ctx->modules.erase(mod_handle);
      r.modules.erase(mod_handle);
    }
    for (const auto& [name, k] : lib->kernels) r.kernels.erase(k);
    r.libraries.erase(from_cu(library));
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuLibraryGetKernel(CUkernel* pKernel, CUlibrary library, const char* name) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (pKernel == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    Library* lib = r.library(from_cu(library));
    if (lib == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    if (auto it = lib->kernels.find(std::string_view(name)); it != lib->kernels.end()) {
      *pKernel = to_cu<CUkernel>(it->second);
      return CUDA_SUCCESS;
    }
    if (lib->prototype->kernel(name) == nullptr) return CUDA_ERROR_NOT_FOUND;
    auto k = std::make_unique<LibraryKernel>();
    k->handle = r.new_handle();
    k->library = lib->handle;
    k->name = name;
    lib->kernels.emplace(k->name, k->handle);
    *pKernel = to_cu<CUkernel>(k->handle);
    r.kernels.emplace(k->handle, std::move(k));
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuLibraryGetKernelCount(unsigned int* count, CUlibrary library) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    Library* lib = r.library(from_cu(library));
    if (lib == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    *count = static_cast<unsigned>(lib->kernel_names.size());
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuLibraryEnumerateKernels(CUkernel* kernels, unsigned int numKernels,
                                           CUlibrary library) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (kernels == nullptr && numKernels > 0) return CUDA_ERROR_INVALID_VALUE;
    std::vector<std::string> names;
    {
      Registry& r = registry();
      std::lock_guard lock(r.mutex);
      Library* lib = r.library(from_cu(library));
      if (lib == nullptr) return CUDA_ERROR_INVALID_HANDLE;
      names = lib->kernel_names;
    }
    for (unsigned i = 0; i < numKernels && i < names.size(); ++i) {
      if (CUresult rc = cuLibraryGetKernel(&kernels[i], library, names[i].c_str());
          rc != CUDA_SUCCESS)
        return rc;
    }
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuLibraryGetModule(CUmodule* pMod, CUlibrary library) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (pMod == nullptr) return CUDA_ERROR_INVALID_VALUE;
    Handle mod = 0;
    if (CUresult rc = library_module(from_cu(library), mod); rc != CUDA_SUCCESS) return rc;
    *pMod = to_cu<CUmodule>(mod);
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuLibraryGetGlobal(CUdeviceptr* dptr, size_t* bytes, CUlibrary library,
                                    const char* name) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
    Handle mod = 0;
    if (CUresult rc = library_module(from_cu(library), mod); rc != CUDA_SUCCESS) return rc;
    return cuModuleGetGlobal_v2(dptr, bytes, to_cu<CUmodule>(mod), name);
  });
}

CUresult CUDAAPI cuKernelGetFunction(CUfunction* pFunc, CUkernel kernel) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (pFunc == nullptr) return CUDA_ERROR_INVALID_VALUE;
    Handle fn = 0;
    if (CUresult rc = kernel_function(from_cu(kernel), fn); rc != CUDA_SUCCESS) return rc;
    *pFunc = to_cu<CUfunction>(fn);
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuKernelGetLibrary(CUlibrary* pLib, CUkernel kernel) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (pLib == nullptr) return CUDA_ERROR_INVALID_VALUE;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    LibraryKernel* lk = r.kernel(from_cu(kernel));
    if (lk == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    *pLib = to_cu<CUlibrary>(lk->library);
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuKernelGetName(const char** name, CUkernel kernel) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    LibraryKernel* lk = r.kernel(from_cu(kernel));
    if (lk == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    *name = lk->name.c_str(); // valid until the library is unloaded
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t* paramOffset,
                                      size_t* paramSize) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (paramOffset == nullptr) return CUDA_ERROR_INVALID_VALUE;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    LibraryKernel* lk = nullptr;
    Kernel* k = nullptr;
    if (CUresult rc = library_kernel_view(r, kernel, lk, k); rc != CUDA_SUCCESS) return rc;
    if (paramIndex >= k->params().size()) return CUDA_ERROR_INVALID_VALUE;
    *paramOffset = k->params()[paramIndex].offset;
    if (paramSize != nullptr) *paramSize = k->params()[paramIndex].size;
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuKernelGetAttribute(int* pi, CUfunction_attribute attrib, CUkernel kernel,
                                      CUdevice dev) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (pi == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= k_device_count) return CUDA_ERROR_INVALID_DEVICE;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    LibraryKernel* lk = nullptr;
    Kernel* k = nullptr;
    if (CUresult rc = library_kernel_view(r, kernel, lk, k); rc != CUDA_SUCCESS) return rc;
    KernelAttributes a = k->attributes();
    if (lk->max_dynamic_shared_bytes) a.max_dynamic_shared_bytes = *lk->max_dynamic_shared_bytes;
    if (lk->preferred_carveout) a.preferred_shared_carveout = *lk->preferred_carveout;
    return get_attribute(a, {}, enum_value(attrib), *pi);
  });
}

CUresult CUDAAPI cuKernelSetAttribute(CUfunction_attribute attrib, int val, CUkernel kernel,
                                      CUdevice dev) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (dev < 0 || dev >= k_device_count) return CUDA_ERROR_INVALID_DEVICE;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    LibraryKernel* lk = nullptr;
    Kernel* k = nullptr;
    if (CUresult rc = library_kernel_view(r, kernel, lk, k); rc != CUDA_SUCCESS) return rc;
    KernelAttributes a = k->attributes();
    std::map<int, int> extra;
    const int id = enum_value(attrib);
    if (CUresult rc = set_attribute(a, extra, id, val); rc != CUDA_SUCCESS) return rc;
    if (id == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
      lk->max_dynamic_shared_bytes = a.max_dynamic_shared_bytes;
    if (id == CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT)
      lk->preferred_carveout = a.preferred_shared_carveout;
    // Apply to the functions it already resolved to, in every context.
    Library* lib = r.library(lk->library);
    for (const auto& [ctx_handle, mod_handle] : lib->modules) {
      Module* mod = r.module(mod_handle);
      if (mod == nullptr) continue;
      if (Kernel* kk = mod->program->kernel(lk->name)) {
        std::map<int, int> ignored;
        (void)set_attribute(kk->attributes(), ignored, id, val);
      }
    }
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuKernelSetCacheConfig(CUkernel kernel, CUfunc_cache config, CUdevice dev) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (dev < 0 || dev >= k_device_count) return CUDA_ERROR_INVALID_DEVICE;
    const int c = enum_value(config);
    if (c < CU_FUNC_CACHE_PREFER_NONE || c > CU_FUNC_CACHE_PREFER_EQUAL)
      return CUDA_ERROR_INVALID_VALUE;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    return r.kernel(from_cu(kernel)) != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
  });
}

// --- functions
// ---------------------------------------------------------------------------------------

CUresult CUDAAPI cuFuncGetAttribute(int* pi, CUfunction_attribute attrib, CUfunction hfunc) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (pi == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::unique_lock<std::mutex> lock;
    Function* fn = nullptr;
    if (CUresult rc = query_function(from_cu(hfunc), fn, lock); rc != CUDA_SUCCESS) return rc;
    return get_attribute(fn->kernel->attributes(), fn->extra_attributes, enum_value(attrib), *pi);
  });
}

CUresult CUDAAPI cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    std::unique_lock<std::mutex> lock;
    Function* fn = nullptr;
    if (CUresult rc = query_function(from_cu(hfunc), fn, lock); rc != CUDA_SUCCESS) return rc;
    return set_attribute(fn->kernel->attributes(), fn->extra_attributes, enum_value(attrib), value);
  });
}

CUresult CUDAAPI cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    const int c = enum_value(config);
    if (c < CU_FUNC_CACHE_PREFER_NONE || c > CU_FUNC_CACHE_PREFER_EQUAL)
      return CUDA_ERROR_INVALID_VALUE;
    std::unique_lock<std::mutex> lock;
    Function* fn = nullptr;
    return query_function(from_cu(hfunc), fn, lock); // a preference only: nothing to change
  });
}

CUresult CUDAAPI cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t* paramOffset,
                                    size_t* paramSize) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (paramOffset == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::unique_lock<std::mutex> lock;
    Function* fn = nullptr;
    if (CUresult rc = query_function(from_cu(func), fn, lock); rc != CUDA_SUCCESS) return rc;
    const auto& params = fn->kernel->params();
    if (paramIndex >= params.size()) return CUDA_ERROR_INVALID_VALUE;
    *paramOffset = params[paramIndex].offset;
    if (paramSize != nullptr) *paramSize = params[paramIndex].size;
    return CUDA_SUCCESS;
  });
}

// hone's query of the cost model (emu/launch_cost.h): the last completed launch of `fn`.
CUresult hone_emu_launch_cost(CUfunction fn, hone_emu_cost* out) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (out == nullptr || out->version != HONE_EMU_LAUNCH_COST_VERSION) return CUDA_ERROR_INVALID_VALUE;
    std::unique_lock<std::mutex> lock;
    Function* f = nullptr;
    if (CUresult rc = query_function(from_cu(fn), f, lock); rc != CUDA_SUCCESS) return rc;
    const Kernel::LastLaunch& last = f->kernel->last;
    if (!last.done) return CUDA_ERROR_NOT_FOUND;
    const ModeledCost& c = last.cost;
    hone_emu_cost r{};
    r.version = HONE_EMU_LAUNCH_COST_VERSION;
    r.registers = c.registers;
    r.registers_assumed = c.registers_assumed ? 1 : 0;
    r.blocks_per_sm = c.blocks_per_sm;
    r.warps_per_sm = c.warps_per_sm;
    std::snprintf(r.occupancy_limit, sizeof r.occupancy_limit, "%s", c.occupancy_limit.c_str());
    std::snprintf(r.bound, sizeof r.bound, "%s", c.bound.c_str());
    r.waves = c.waves;
    r.modeled_ns = last.modeled_ns;
    r.issue_ns = c.issue_ns;
    r.latency_ns = c.latency_ns;
    r.l1_ns = c.l1_ns;
    r.l2_ns = c.l2_ns;
    r.dram_ns = c.dram_ns;
    r.l2_bytes = c.l2_bytes;
    r.dram_bytes = c.dram_bytes;
    r.dram_bytes_per_s = cost::k_dram_bytes_per_kcycle * cost::k_clock_khz;
    *out = r;
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuFuncGetName(const char** name, CUfunction hfunc) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (name == nullptr || hfunc == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::unique_lock<std::mutex> lock;
    Function* fn = nullptr;
    if (CUresult rc = query_function(from_cu(hfunc), fn, lock); rc != CUDA_SUCCESS) return rc;
    *name = fn->name.c_str(); // valid while the function handle is
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuFuncGetModule(CUmodule* hmod, CUfunction hfunc) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (hmod == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::unique_lock<std::mutex> lock;
    Function* fn = nullptr;
    if (CUresult rc = query_function(from_cu(hfunc), fn, lock); rc != CUDA_SUCCESS) return rc;
    *hmod = to_cu<CUmodule>(fn->module);
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuFuncIsLoaded(CUfunctionLoadingState* state, CUfunction function) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (state == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::unique_lock<std::mutex> lock;
    Function* fn = nullptr;
    if (CUresult rc = query_function(from_cu(function), fn, lock); rc != CUDA_SUCCESS) return rc;
    *state = CU_FUNCTION_LOADING_STATE_LOADED;
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuFuncLoad(CUfunction function) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    std::unique_lock<std::mutex> lock;
    Function* fn = nullptr;
    return query_function(from_cu(function), fn, lock);
  });
}

} // extern "C"
