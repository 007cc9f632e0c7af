// The worker's own context on one device, through the driver table: module loading with the JIT
// logs, parameter layouts, launches timed with events on one stream, and copies.
#pragma once

#include "common/capture.hpp"
#include "common/result.hpp"
#include "cuda/driver_api.hpp"
#include "cuda/jit_options.hpp"
#include "emu/launch_cost.h"

#include <array>
#include <map>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace hone::worker {

using cuda::JitOption;

// A module loaded into the worker's context; unloaded when destroyed.
class Module {
public:
  Module() = default;
  Module(const cuda::DriverApi* api, CUmodule m) : m_api(api), m_module(m) {}
  Module(Module&& o) noexcept : m_api(o.m_api), m_module(o.m_module) { o.m_module = nullptr; }
  Module& operator=(Module&& o) noexcept;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  ~Module();

  // The entry point `entry`; the error says it is missing.
  Result<CUfunction> function(const std::string& entry) const;

private:
  const cuda::DriverApi* m_api = nullptr;
  CUmodule m_module = nullptr;
};

struct LaunchShape {
  std::array<uint32_t, 3> grid{};
  std::array<uint32_t, 3> block{};
  uint32_t shared_bytes = 0;
};

// What bounds a kernel, for a verdict's feedback: what the driver says of the compiled kernel
// (ptxas' resources on a GPU) and, on the emulated device, what its cost model made of the last
// launch. -1: the driver does not say.
struct KernelProfile {
  int registers = -1;           // per thread
  int local_bytes = -1;         // local memory per thread: register spills and stack
  int static_shared_bytes = -1;
  int blocks_per_sm = -1;       // resident blocks per SM at the launch's shape
  int warps_per_block = 0;
  int max_warps_per_sm = -1;
  std::optional<hone_emu_cost> modeled;
};

class Device {
public:
  // Initialise the driver and create this worker's context on device `ordinal` (cuCtxCreate_v2,
  // or the primary context when the driver lacks it), with one stream and two timing events.
  static Result<std::unique_ptr<Device>> open(std::shared_ptr<const cuda::DriverApi> api,
                                              int ordinal = 0);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const cuda::DriverApi& api() const { return *m_api; }
  CUdevice device() const { return m_device; }
  int cc_major() const { return m_cc_major; }
  int cc_minor() const { return m_cc_minor; }
  // "sm_90".
  std::string arch() const;
  const std::string& name() const { return m_name; }
  int driver_version() const { return m_driver_version; }
  // The driver has the VMM entry points and the device reports VMM support.
  bool vmm() const { return m_vmm; }

  // Load a module image (NUL-terminated PTX, cubin or fatbin) with `options`. On failure the
  // error's message is the driver's result followed by the JIT error log; its code the CUresult.
  Result<Module> load(const void* image, const std::vector<JitOption>& options = {});
  // The parameter layout of `fn` (offset and size of every parameter), from cuFuncGetParamInfo.
  Result<std::vector<ParamSlot>> param_layout(CUfunction fn) const;
  // Launch `fn` on the worker's stream with the parameter buffer `params` and wait for it.
  // Returns its device time in nanoseconds, measured with events. The error's code is the
  // CUresult of the launch or of the wait (a kernel fault surfaces there).
  Result<double> run(CUfunction fn, const LaunchShape& shape, std::string& params);
  // What bounds `fn` at `shape`; after a launch of it, on the emulated device, with the model's
  // account of that launch.
  KernelProfile profile(CUfunction fn, const LaunchShape& shape) const;
  // The device's peak DRAM bandwidth in bytes per second, from its memory clock and bus width
  // (DDR: two transfers a clock); 0 when the driver does not say.
  double dram_peak_bytes_per_s() const;
  // Is the context still usable (a synchronize succeeds)?
  bool healthy() const;

  Result<void> upload(uint64_t dst, const void* src, size_t bytes) const;
  Result<void> download(void* dst, uint64_t src, size_t bytes) const;
  Result<void> fill(uint64_t dst, uint8_t value, size_t bytes) const;

  // Evict the L2 before a timed run: write a scratch buffer of twice its size (allocated on first
  // use). False when the device has no L2 to flush this way: its size unknown, the scratch buffer
  // not allocatable, or the emulated device, whose timing keeps no cache between launches.
  bool flush_l2();

  // Before a validation run on a GPU: seeded garbage from `seed` in every SM's shared memory and
  // in the local-memory window laid out for a kernel of `local_bytes` per thread (scrub.hpp),
  // on the worker's stream, ahead of the next run(). False when nothing was scrubbed: on the
  // emulated device (its fill seed does this at every launch) unless `even_emulated`, or when the
  // driver lacks what the scrub needs; `why` then says which.
  bool scrub(uint64_t seed, int local_bytes, bool even_emulated = false);
  const std::string& scrub_unavailable() const { return m_scrub_why; }
  bool emulated() const { return m_name.rfind("hone emulated device", 0) == 0; }

private:
  Result<CUfunction> scrub_function(uint32_t frame);
  Device() = default;
  std::shared_ptr<const cuda::DriverApi> m_api;
  CUdevice m_device = 0;
  CUcontext m_ctx = nullptr;
  bool m_primary = false;
  CUstream m_stream = nullptr;
  CUevent m_start = nullptr;
  CUevent m_end = nullptr;
  int m_cc_major = 0;
  int m_cc_minor = 0;
  int m_driver_version = 0;
  std::string m_name;
  bool m_vmm = false;
  CUdeviceptr m_l2_scratch = 0;
  size_t m_l2_scratch_bytes = 0;
  bool m_l2_tried = false;
  uint8_t m_l2_value = 0;
  std::map<uint32_t, Module> m_scrub_modules; // by local frame; 0: the shared scrub alone
  std::string m_scrub_why;
};

} // namespace hone::worker
