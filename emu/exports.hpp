// The emulated driver's entry points, as generated from cuda.h (emu/gen_exports.cmake).
//
// Every `CUresult cuXxx(` of cuda.h and cudaProfiler.h is exported: the implemented ones by the
// driver sources, the others by a generated weak stub that logs its name once and returns
// CUDA_ERROR_NOT_SUPPORTED. This header does not include cuda.h: the generated file declares the
// stubs without their real signatures.
#pragma once

#include <atomic>
#include <cstddef>

namespace hone::emu {

// One exported function: its ABI name (cuMemAlloc_v2, cuLaunchKernel_ptsz) and address.
struct ExportEntry {
  const char* name;
  void* fn;
};

// One function pointer typedef of cudaTypedefs.h, PFN_<base>_v<version><suffix>: the variant of
// `base` that cuGetProcAddress returns from CUDA `version` on; suffix "", "_ptds" or "_ptsz".
struct PfnRecord {
  const char* base;
  int version;
  const char* suffix;
};

// Sorted by name (strcmp order).
extern const ExportEntry k_exports[];
extern const std::size_t k_export_count;
extern const PfnRecord k_pfn_records[];
extern const std::size_t k_pfn_record_count;

// What a stub does: log `name` once (warn level) and return CUDA_ERROR_NOT_SUPPORTED.
int unsupported_call(const char* name, std::atomic<bool>& logged) noexcept;

} // namespace hone::emu
