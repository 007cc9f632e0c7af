// cuGetProcAddress: the lookups the CUDA runtime and hook libraries make instead of dlsym.
//
// A lookup names a base symbol ("cuMemAlloc"), a CUDA version and whether per-thread default
// stream variants are wanted. cudaTypedefs.h has one PFN typedef per variant, named after the
// version that introduced it (PFN_cuMemAlloc_v3020); the k-th version of a base, in order, is the
// ABI name base, base_v2, base_v3, ...; a _ptds/_ptsz typedef is the per-thread variant of the
// ABI name current at its version. That rule maps every typedef of CUDA 13.0 onto a function cuda.h
// declares (checked by emu_driver_test), so the table below is derived, not hand-written.
#include "emu/driver.hpp"

#include "emu/exports.hpp"
#include "emu/log.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <string>

#include <cudaProfiler.h>

namespace hone::emu {

namespace {

// The first private table NVIDIA's runtime (cudart 12 and 13) asks the driver for.
constexpr const char* k_nvidia_runtime_table = "6bd5fb6c-5bf4-e74a-8987-d93912fd9df9";

struct Variant {
  int version = 0;      // first CUDA version it serves
  int base_version = 0; // per-thread variants: the version of the legacy variant it mirrors
  bool per_thread = false;
  void* fn = nullptr;
};

struct ProcTable {
  std::map<std::string, std::vector<Variant>, std::less<>> by_base;
  std::set<std::string, std::less<>> claimed; // ABI names some base name resolves to
};

void* find_export(std::string_view name) {
  auto* begin = k_exports;
  auto* end = k_exports + k_export_count;
  auto it = std::lower_bound(begin, end, name,
                             [](const ExportEntry& e, std::string_view n) { return e.name < n; });
  return it != end && it->name == name ? it->fn : nullptr;
}

ProcTable build_table() {
  std::map<std::string, std::vector<const PfnRecord*>, std::less<>> by_base;
  for (size_t i = 0; i < k_pfn_record_count; ++i)
    by_base[k_pfn_records[i].base].push_back(&k_pfn_records[i]);
  ProcTable table;
  for (const auto& entry : by_base) {
    const std::string& base = entry.first;
    const auto& records = entry.second;
    std::vector<int> legacy;
    for (const PfnRecord* rec : records) {
      if (*rec->suffix == '\0') legacy.push_back(rec->version);
    }
    std::sort(legacy.begin(), legacy.end());
    auto abi_name = [&](int legacy_version) {
      size_t k = static_cast<size_t>(std::find(legacy.begin(), legacy.end(), legacy_version) -
                                     legacy.begin());
      return k == 0 ? base : base + "_v" + std::to_string(k + 1);
    };
    auto& variants = table.by_base[base];
    for (const PfnRecord* rec : records) {
      Variant v;
      v.version = rec->version;
      v.per_thread = *rec->suffix != '\0';
      std::string name;
      if (!v.per_thread) {
        v.base_version = rec->version;
        name = abi_name(rec->version);
      } else {
        // The legacy variant current when the per-thread one was introduced.
        auto it = std::upper_bound(legacy.begin(), legacy.end(), rec->version);
        if (it == legacy.begin()) continue;
        v.base_version = *std::prev(it);
        name = abi_name(v.base_version) + rec->suffix;
      }
      v.fn = find_export(name);
      if (v.fn == nullptr) continue; // a typedef without a function in cuda.h
      variants.push_back(v);
      table.claimed.insert(name);
    }
    if (variants.empty()) table.by_base.erase(base);
  }
  return table;
}

const ProcTable& proc_table() {
  static const ProcTable table = build_table();
  return table;
}

CUresult get_proc_address(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                          CUdriverProcAddressQueryResult* status) {
  auto set_status = [&](CUdriverProcAddressQueryResult s) {
    if (status != nullptr) *status = s;
  };
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  constexpr cuuint64_t k_known_flags =
      CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  if ((flags & ~k_known_flags) != 0) return CUDA_ERROR_INVALID_VALUE;
  // "If the specified CUDA version is greater than the driver version, the API will return
  // CUDA_ERROR_INVALID_VALUE" (cuGetProcAddress documentation).
  if (cuda_version > k_driver_version) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  const ProcTable& table = proc_table();
  auto it = table.by_base.find(std::string_view(symbol));
  if (it == table.by_base.end()) {
    // A driver function cuda.h declares without a typedef (none in 13.0) is found by its own name;
    // an ABI name a base name stands for (cuMemAlloc_v2) is not, as on the real driver.
    void* fn = find_export(symbol);
    if (fn != nullptr && table.claimed.count(std::string_view(symbol)) == 0) {
      *pfn = fn;
      set_status(CU_GET_PROC_ADDRESS_SUCCESS);
      return CUDA_SUCCESS;
    }
    set_status(CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    log(LogLevel::debug, std::string("cuGetProcAddress: no driver symbol ") + symbol);
    return CUDA_ERROR_NOT_FOUND;
  }
  const Variant* legacy = nullptr;
  const Variant* per_thread = nullptr;
  for (const Variant& v : it->second) {
    if (v.version > cuda_version) continue;
    const Variant*& best = v.per_thread ? per_thread : legacy;
    if (best == nullptr || v.version > best->version) best = &v;
  }
  if (legacy == nullptr) {
    set_status(CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    return CUDA_ERROR_NOT_FOUND;
  }
  const Variant* chosen = legacy;
  // The default mode is the legacy stream: a per-thread-stream caller says so with the flag (cuda.h
  // does it for programs built with CUDA_API_PER_THREAD_DEFAULT_STREAM).
  if ((flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0 && per_thread != nullptr &&
      per_thread->base_version == legacy->version) {
    chosen = per_thread;
  }
  *pfn = chosen->fn;
  set_status(CU_GET_PROC_ADDRESS_SUCCESS);
  return CUDA_SUCCESS;
}

} // namespace

} // namespace hone::emu

using namespace hone::emu;

extern "C" {

// Both work before cuInit: the runtime finds cuInit itself through them.
CUresult CUDAAPI cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion,
                                  cuuint64_t flags) {
  return guarded([&] { return get_proc_address(symbol, pfn, cudaVersion, flags, nullptr); });
}

CUresult CUDAAPI cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion,
                                     cuuint64_t flags,
                                     CUdriverProcAddressQueryResult* symbolStatus) {
  return guarded([&] { return get_proc_address(symbol, pfn, cudaVersion, flags, symbolStatus); });
}

// The private tables NVIDIA's runtime (libcudart) and libraries such as NVRTC ask the driver for.
// Their layout is not documented and the emulated device does not provide them, so a runtime-API
// program stops at its first CUDA call with cudaErrorNotSupported. Each table asked for is named
// once (info level), so what a program needs is on record.
CUresult CUDAAPI cuGetExportTable(const void** ppExportTable, const CUuuid* pExportTableId) {
  return guarded([&] {
    if (ppExportTable == nullptr || pExportTableId == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *ppExportTable = nullptr;
    static std::mutex mutex;
    static std::set<std::string> seen;
    char id[64];
    const auto* b = reinterpret_cast<const unsigned char*>(pExportTableId->bytes);
    std::snprintf(id, sizeof id,
                  "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                  b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                  b[14], b[15]);
    std::lock_guard lock(mutex);
    // NVIDIA's runtime asks for this table before anything else (NVRTC never does): the program
    // carries NVIDIA's libcudart (nvcc links it statically by default), which cannot run here.
    if (std::strcmp(id, k_nvidia_runtime_table) == 0 && seen.insert(id).second) {
      log(LogLevel::warn,
          "this program uses NVIDIA's CUDA runtime (libcudart, linked statically by nvcc's "
          "default -cudart static, or NVIDIA's shared libcudart.so), which needs private driver "
          "tables the emulated device does not provide: its CUDA calls fail with "
          "cudaErrorNotSupported. Build it with `nvcc -cudart shared` and run it with "
          "LD_LIBRARY_PATH=<build>/lib/emu, so that it uses the emulated device's own runtime "
          "(emu/README.md, \"Runtime-API programs\")");
      return CUDA_ERROR_NOT_SUPPORTED;
    }
    if (seen.insert(id).second) {
      log(LogLevel::info,
          std::string("cuGetExportTable(") + id +
              "): private driver table not provided by the emulated device (programs "
              "built on libcudart need it): CUDA_ERROR_NOT_SUPPORTED");
    }
    return CUDA_ERROR_NOT_SUPPORTED;
  });
}

// Profiling ranges are a no-op: there is no profiler to start. cudaProfiler.h, unlike cuda.h, does
// not push default visibility, hence the attribute.
__attribute__((visibility("default"))) CUresult CUDAAPI cuProfilerStart(void) {
  return initialized() ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

__attribute__((visibility("default"))) CUresult CUDAAPI cuProfilerStop(void) {
  return initialized() ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

} // extern "C"
