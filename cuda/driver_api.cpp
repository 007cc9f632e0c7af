#include "cuda/driver_api.hpp"

#include <dlfcn.h>
#include <link.h>

namespace hone::cuda {

Result<std::shared_ptr<const DriverApi>> DriverApi::open(const std::string& path) {
  // RTLD_LOCAL: the driver's symbols stay out of the global scope, so a preloaded hook library in
  // this process (there should be none in honed) never sees our calls.
  void* lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* err = ::dlerror();
    return make_error("cannot load the CUDA driver " + path + ": " + (err ? err : "unknown error") +
                      " (install the NVIDIA driver, or set worker.driver to a driver library such "
                      "as hone's emulated device build/lib/emu/libcuda.so.1)");
  }
  auto api = std::make_shared<DriverApi>();
  api->m_path = path;
  api->m_lib = lib;
  link_map* lm = nullptr;
  if (::dlinfo(lib, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && *lm->l_name) {
    api->m_path = lm->l_name;
  }
  auto resolve = [&](const char* abi, const char* fallback) -> void* {
    void* p = ::dlsym(lib, abi);
    if (p == nullptr && *fallback) p = ::dlsym(lib, fallback);
    return p;
  };
  std::string missing;
  // NOLINTBEGIN(bugprone-macro-parentheses): `name` is a member name here
#define HONE_X(name, abi, fallback)                                                                \
  api->name = reinterpret_cast<decltype(api->name)>(resolve(abi, fallback));                       \
  if (api->name == nullptr) missing += std::string(missing.empty() ? "" : ", ") + abi;
  HONE_DRIVER_REQUIRED(HONE_X)
#undef HONE_X
  // NOLINTEND(bugprone-macro-parentheses)
  if (!missing.empty()) {
    return make_error(api->m_path + " is not a usable CUDA driver: it lacks " + missing);
  }
#define HONE_X(name, abi, fallback)                                                                \
  api->name = reinterpret_cast<decltype(api->name)>(resolve(abi, fallback));
  HONE_DRIVER_OPTIONAL(HONE_X)
#undef HONE_X
  api->cuCtxCreate_v2 =
      reinterpret_cast<decltype(api->cuCtxCreate_v2)>(resolve("cuCtxCreate_v2", ""));
  return std::shared_ptr<const DriverApi>(std::move(api));
}

bool DriverApi::has_vmm() const {
  return cuMemGetAllocationGranularity && cuMemAddressReserve && cuMemAddressFree && cuMemCreate &&
         cuMemRelease && cuMemMap && cuMemUnmap && cuMemSetAccess;
}

void* DriverApi::symbol(const char* name) const {
  return m_lib ? ::dlsym(m_lib, name) : nullptr;
}

std::string DriverApi::describe(CUresult r) const {
  const char* name = nullptr;
  const char* text = nullptr;
  std::string out;
  if (cuGetErrorName(r, &name) == CUDA_SUCCESS && name) {
    out = name;
  } else {
    out = "CUresult " + std::to_string(int(r));
  }
  if (cuGetErrorString(r, &text) == CUDA_SUCCESS && text) out += std::string(": ") + text;
  return out;
}

Error DriverApi::error(std::string_view call, CUresult r) const {
  return make_error(std::string(call) + " failed: " + describe(r), int(r));
}

bool is_sticky(CUresult r) {
  switch (r) {
  case CUDA_ERROR_ILLEGAL_ADDRESS:
  case CUDA_ERROR_MISALIGNED_ADDRESS:
  case CUDA_ERROR_LAUNCH_TIMEOUT:
  case CUDA_ERROR_LAUNCH_FAILED:
  case CUDA_ERROR_ASSERT:
  case CUDA_ERROR_ILLEGAL_INSTRUCTION:
  case CUDA_ERROR_HARDWARE_STACK_ERROR:
  case CUDA_ERROR_INVALID_ADDRESS_SPACE:
  case CUDA_ERROR_INVALID_PC:
  case CUDA_ERROR_ECC_UNCORRECTABLE:
  case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    return true;
  default:
    return false;
  }
}

} // namespace hone::cuda
