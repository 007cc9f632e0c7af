// The runtime's entry points and error names, as generated from the CUDA headers
// (emu/runtime/gen_exports.cmake).
//
// Every `cudaError_t cudaXxx(` of cuda_runtime_api.h is exported, in its plain and its per-thread
// (_ptds/_ptsz) spelling: the implemented ones by the runtime sources, the others by a generated
// weak stub that logs its name once and returns cudaErrorNotSupported. This header does not
// include cuda_runtime_api.h: the generated file declares the stubs without their signatures.
#pragma once

#include <atomic>
#include <cstddef>

namespace hone::cudart {

// One exported function: its ABI name and address.
struct ExportEntry {
  const char* name;
  void* fn;
};

// One value of enum cudaError (driver_types.h) and its name.
struct ErrorName {
  int value;
  const char* name;
};

// Sorted by name (strcmp order).
extern const ExportEntry k_exports[];
extern const std::size_t k_export_count;
// In the header's order.
extern const ErrorName k_error_names[];
extern const std::size_t k_error_name_count;

// What a stub does: log `name` once (warn level) and return cudaErrorNotSupported, recording it
// as the thread's last error.
int unsupported_call(const char* name, std::atomic<bool>& logged) noexcept;

} // namespace hone::cudart
