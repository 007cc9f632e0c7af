#include "shim/swap.hpp"

#include "cuda/jit_options.hpp"
#include "shim/log.hpp"
#include "shim/pointer_fields.hpp"
#include "shim/real.hpp"
#include "shim/registry.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>

namespace hone::shim {

namespace {

using CUctx = void*;
using PushCtx = int (*)(CUctx);
using PopCtx = int (*)(CUctx*);
using LoadDataEx = int (*)(void**, const void*, unsigned, int*, void**);
using GetFunction = int (*)(void**, void*, const char*);
using ErrorString = int (*)(int, const char**);
using ParamInfo = int (*)(void*, size_t, size_t*, size_t*);

constexpr int k_success = 0;

struct Installed {
  proto::InstallVariant msg;
  std::string image;
  std::map<CUctx, void*> function_in;     // the variant's function per context
  std::vector<const void*> served;        // handles it serves
  std::vector<PointerField> alias_fields; // no_alias guard: what each launch checks
};

// Reporter thread only (and the fork handler).
std::map<KernelKey, Installed>* g_installed = new std::map<KernelKey, Installed>();

std::string driver_error(int code) {
  const char* s = nullptr;
  if (auto f = real_as<ErrorString>(Fn::cuGetErrorString)) f(code, &s);
  return s ? s : "error " + std::to_string(code);
}

// The launch path reads each guarded scalar at (param, offset) for bytes.size() bytes: the guard
// must fit the kernel's parameters (the variant's layout is the original's; the worker checked).
bool guard_fits(const Guard& g, void* fn, std::string* why) {
  if (g.scalars.empty()) return true;
  auto info = real_as<ParamInfo>(Fn::cuFuncGetParamInfo);
  if (!info) {
    *why = "the driver cannot describe kernel parameters (cuFuncGetParamInfo), which a guard on "
           "scalar values needs";
    return false;
  }
  for (const auto& sc : g.scalars) {
    size_t offset = 0, size = 0;
    if (info(fn, sc.param, &offset, &size) != k_success || offset != sc.offset ||
        sc.bytes.empty() || sc.bytes.size() > size) {
      *why = "its guard names bytes outside parameter " + std::to_string(sc.param) +
             " of the kernel";
      return false;
    }
  }
  return true;
}

// A no_alias guard is checked on each launch over the kernel's pointer fields: the shim must know
// them (the PTX analysis of the original image, the fields capture copies, so a launch is served
// only where the worker's validation would have run it) and a launch must be able to hold their
// allocations in a stack array.
bool find_alias_fields(Installed& inst, std::string* why) {
  const std::string needs = "its guard needs pointer parameters in distinct allocations, ";
  if (!real(Fn::cuMemGetAddressRange_v2)) {
    *why = needs + "and the driver cannot place a pointer in its allocation (cuMemGetAddressRange)";
    return false;
  }
  auto fields = pointer_fields(inst.msg.kernel);
  if (!fields) {
    *why = needs + "and the shim has no PTX of the kernel to find them in (the image is not PTX, "
                   "or was not kept: HONE_IMAGE_CACHE_MB)";
    return false;
  }
  if (fields->size() > Swap::k_max_alias_fields) {
    *why = needs + "and the kernel has " + std::to_string(fields->size()) +
           " pointer fields; the shim checks at most " + std::to_string(Swap::k_max_alias_fields) +
           " per launch";
    return false;
  }
  inst.alias_fields = std::move(*fields);
  return true;
}

// Load the variant in `ctx` (once) and return its function, or nullptr with `why`.
void* function_in(Installed& inst, CUctx ctx, std::string* why) {
  auto it = inst.function_in.find(ctx);
  if (it != inst.function_in.end()) return it->second;
  auto push = real_as<PushCtx>(Fn::cuCtxPushCurrent_v2);
  auto pop = real_as<PopCtx>(Fn::cuCtxPopCurrent_v2);
  auto load = real_as<LoadDataEx>(Fn::cuModuleLoadDataEx);
  auto get = real_as<GetFunction>(Fn::cuModuleGetFunction);
  if (!push || !pop || !load || !get) {
    *why = "the driver lacks a function swapping needs";
    return nullptr;
  }
  auto parsed = cuda::parse_jit_options(inst.msg.jit_options);
  if (!parsed) {
    *why = parsed.error().message;
    return nullptr;
  }
  std::vector<int> options;
  std::vector<void*> values;
  for (const auto& o : *parsed) {
    options.push_back(int(o.option));
    values.push_back(reinterpret_cast<void*>(o.value));
  }
  if (push(ctx) != k_success) {
    *why = "the kernel's context is gone";
    return nullptr;
  }
  void* module = nullptr;
  void* fn = nullptr;
  int r = load(&module, inst.image.data(), unsigned(options.size()), options.data(), values.data());
  if (r == k_success) r = get(&fn, module, inst.msg.entry.c_str());
  bool guard_ok = r == k_success && guard_fits(inst.msg.guard, fn, why);
  CUctx popped;
  pop(&popped);
  if (r != k_success) {
    *why = "loading the variant failed: " + driver_error(r);
    return nullptr;
  }
  if (!guard_ok) return nullptr;
  inst.function_in[ctx] = fn; // the module stays loaded until exit (see swap.hpp)
  return fn;
}

// Serve every handle of the kernel not served yet. Returns false with `why` on the first failure.
bool serve(Installed& inst, std::string* why) {
  for (const auto& h : registry().handles_of(inst.msg.kernel)) {
    if (std::find(inst.served.begin(), inst.served.end(), h.handle) != inst.served.end()) continue;
    void* fn = function_in(inst, h.context, why);
    if (!fn) return false;
    auto* swap = new Swap{fn, h.context, h.kernel_handle, inst.msg.guard, inst.msg.variant,
                          inst.alias_fields};
    {
      std::lock_guard lock(registry().mutex());
      registry().functions.set_swap(h.handle, swap);
    }
    inst.served.push_back(h.handle);
  }
  return true;
}

void withdraw(Installed& inst) {
  std::lock_guard lock(registry().mutex());
  for (const void* h : inst.served) registry().functions.set_swap(h, nullptr);
  inst.served.clear();
}

} // namespace

proto::VariantStatus install_variant(const proto::InstallVariant& msg, std::string image) {
  proto::VariantStatus st;
  st.kernel = msg.kernel;
  st.variant = msg.variant;
  auto [it, fresh] = g_installed->try_emplace(msg.kernel);
  Installed& inst = it->second;
  if (!fresh) withdraw(inst); // a newer variant replaces the one serving now
  inst = Installed{msg, std::move(image), {}, {}, {}};
  std::string why;
  if ((msg.guard.no_alias && !find_alias_fields(inst, &why)) || !serve(inst, &why)) {
    withdraw(inst);
    g_installed->erase(it);
    st.message = why;
    log(Level::info, "variant %s of %s not installed: %s", msg.variant.hex().c_str(),
        msg.kernel.entry.c_str(), why.c_str());
    return st;
  }
  st.installed = true;
  st.message = "serving " + std::to_string(inst.served.size()) + " handle(s)";
  if (msg.guard.no_alias) {
    st.message += "; launches whose " + std::to_string(inst.alias_fields.size()) +
                  " pointer field(s) share an allocation run the original";
  }
  log(Level::info, "variant %s now serves %s", msg.variant.hex().c_str(), msg.kernel.entry.c_str());
  return st;
}

proto::VariantStatus remove_variant(const proto::RemoveVariant& msg) {
  proto::VariantStatus st;
  st.kernel = msg.kernel;
  st.variant = msg.variant;
  auto it = g_installed->find(msg.kernel);
  if (it == g_installed->end() ||
      (!(msg.variant.h.empty()) && it->second.msg.variant != msg.variant)) {
    st.message = "not installed";
    return st;
  }
  withdraw(it->second);
  st.variant = it->second.msg.variant;
  g_installed->erase(it);
  st.message = "removed";
  log(Level::info, "variant %s of %s removed", st.variant.hex().c_str(), msg.kernel.entry.c_str());
  return st;
}

std::vector<proto::VariantStatus> install_on_new_handles() {
  std::vector<proto::VariantStatus> out;
  for (auto it = g_installed->begin(); it != g_installed->end();) {
    std::string why;
    if (serve(it->second, &why)) {
      ++it;
      continue;
    }
    proto::VariantStatus st;
    st.kernel = it->first;
    st.variant = it->second.msg.variant;
    st.message = why;
    withdraw(it->second);
    out.push_back(st);
    it = g_installed->erase(it);
  }
  return out;
}

void swap_reset_after_fork() { g_installed = new std::map<KernelKey, Installed>(); }

} // namespace hone::shim
