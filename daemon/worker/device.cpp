#include "daemon/worker/device.hpp"

#include "daemon/worker/scrub.hpp"

#include <algorithm>
#include <cstring>

namespace hone::worker {

Module& Module::operator=(Module&& o) noexcept {
  if (this != &o) {
    if (m_module && m_api) m_api->cuModuleUnload(m_module);
    m_api = o.m_api;
    m_module = o.m_module;
    o.m_module = nullptr;
  }
  return *this;
}

Module::~Module() {
  if (m_module && m_api) m_api->cuModuleUnload(m_module); // fails harmlessly on a dead context
}

Result<CUfunction> Module::function(const std::string& entry) const {
  CUfunction fn = nullptr;
  if (auto r = HONE_CU(*m_api, cuModuleGetFunction, &fn, m_module, entry.c_str()); !r) {
    return make_error("entry point " + entry + " not found: " + r.error().message, r.error().code);
  }
  return fn;
}

Result<std::unique_ptr<Device>> Device::open(std::shared_ptr<const cuda::DriverApi> api,
                                             int ordinal) {
  std::unique_ptr<Device> d(new Device());
  d->m_api = std::move(api);
  const auto& a = *d->m_api;
  if (auto r = HONE_CU(a, cuInit, 0u); !r) return r.error();
  a.cuDriverGetVersion(&d->m_driver_version);
  int count = 0;
  if (auto r = HONE_CU(a, cuDeviceGetCount, &count); !r) return r.error();
  if (ordinal >= count) {
    return make_error("no CUDA device " + std::to_string(ordinal) + " (" + std::to_string(count) +
                      " visible) in " + a.path());
  }
  if (auto r = HONE_CU(a, cuDeviceGet, &d->m_device, ordinal); !r) return r.error();
  char name[256] = {};
  if (auto r = HONE_CU(a, cuDeviceGetName, name, int(sizeof name - 1), d->m_device); !r) {
    return r.error();
  }
  d->m_name = name;
  if (auto r = HONE_CU(a, cuDeviceGetAttribute, &d->m_cc_major,
                       CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d->m_device);
      !r) {
    return r.error();
  }
  if (auto r = HONE_CU(a, cuDeviceGetAttribute, &d->m_cc_minor,
                       CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d->m_device);
      !r) {
    return r.error();
  }
  int vmm = 0;
  if (a.has_vmm() &&
      a.cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                             d->m_device) == CUDA_SUCCESS) {
    d->m_vmm = vmm != 0;
  }
  if (a.cuCtxCreate_v2) {
    if (auto r = HONE_CU(a, cuCtxCreate_v2, &d->m_ctx, 0u, d->m_device); !r) return r.error();
  } else {
    if (auto r = HONE_CU(a, cuDevicePrimaryCtxRetain, &d->m_ctx, d->m_device); !r) return r.error();
    d->m_primary = true;
    if (auto r = HONE_CU(a, cuCtxSetCurrent, d->m_ctx); !r) return r.error();
  }
  // A blocking stream (ordered after the synchronous copies that restore the buffers), at the
  // lowest priority the device has: validation yields to the applications' streams.
  int least = 0, greatest = 0;
  if (a.cuCtxGetStreamPriorityRange && a.cuStreamCreateWithPriority &&
      a.cuCtxGetStreamPriorityRange(&least, &greatest) == CUDA_SUCCESS) {
    if (auto r = HONE_CU(a, cuStreamCreateWithPriority, &d->m_stream, 0u, least); !r) {
      return r.error();
    }
  } else if (auto r = HONE_CU(a, cuStreamCreate, &d->m_stream, 0u); !r) {
    return r.error();
  }
  if (auto r = HONE_CU(a, cuEventCreate, &d->m_start, 0u); !r) return r.error();
  if (auto r = HONE_CU(a, cuEventCreate, &d->m_end, 0u); !r) return r.error();
  return d;
}

Device::~Device() {
  if (!m_api) return;
  const auto& a = *m_api;
  if (m_l2_scratch) a.cuMemFree(m_l2_scratch);
  if (m_start) a.cuEventDestroy(m_start);
  if (m_end) a.cuEventDestroy(m_end);
  if (m_stream) a.cuStreamDestroy(m_stream);
  if (m_ctx) {
    if (m_primary) {
      a.cuDevicePrimaryCtxRelease(m_device);
    } else {
      a.cuCtxDestroy(m_ctx);
    }
  }
}

std::string Device::arch() const {
  return "sm_" + std::to_string(m_cc_major) + std::to_string(m_cc_minor);
}

Result<Module> Device::load(const void* image, const std::vector<JitOption>& options) {
  const auto& a = *m_api;
  // The driver writes the logs into these; their sizes go in and come back in the value slots.
  constexpr size_t k_log = 64 << 10;
  std::string error_log(k_log, '\0');
  std::string info_log(k_log, '\0');
  std::vector<CUjit_option> opts;
  std::vector<void*> values;
  for (const auto& o : options) {
    opts.push_back(CUjit_option(o.option));
    values.push_back(reinterpret_cast<void*>(o.value));
  }
  opts.push_back(CU_JIT_ERROR_LOG_BUFFER);
  values.push_back(error_log.data());
  opts.push_back(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES);
  values.push_back(reinterpret_cast<void*>(uintptr_t(k_log)));
  opts.push_back(CU_JIT_INFO_LOG_BUFFER);
  values.push_back(info_log.data());
  opts.push_back(CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES);
  values.push_back(reinterpret_cast<void*>(uintptr_t(k_log)));
  CUmodule m = nullptr;
  CUresult r = a.cuModuleLoadDataEx(&m, image, unsigned(opts.size()), opts.data(), values.data());
  if (r != CUDA_SUCCESS) {
    error_log.resize(::strnlen(error_log.data(), k_log));
    std::string msg = a.describe(r);
    if (!error_log.empty()) msg += "\n" + error_log;
    return make_error(std::move(msg), int(r));
  }
  return Module(m_api.get(), m);
}

Result<std::vector<ParamSlot>> Device::param_layout(CUfunction fn) const {
  const auto& a = *m_api;
  if (!a.cuFuncGetParamInfo) {
    return make_error("the driver " + a.path() +
                      " lacks cuFuncGetParamInfo (CUDA 12.4 or newer is needed to read "
                      "parameter layouts)");
  }
  std::vector<ParamSlot> out;
  for (size_t i = 0; i < 4096; ++i) {
    size_t offset = 0, size = 0;
    CUresult r = a.cuFuncGetParamInfo(fn, i, &offset, &size);
    if (r == CUDA_ERROR_INVALID_VALUE) return out; // past the last parameter
    if (r != CUDA_SUCCESS) return a.error("cuFuncGetParamInfo", r);
    out.push_back({uint32_t(offset), uint32_t(size)});
  }
  return make_error("a kernel with more than 4096 parameters");
}

Result<double> Device::run(CUfunction fn, const LaunchShape& s, std::string& params) {
  const auto& a = *m_api;
  size_t size = params.size();
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, params.data(), CU_LAUNCH_PARAM_BUFFER_SIZE,
                   &size, CU_LAUNCH_PARAM_END};
  if (auto r = HONE_CU(a, cuEventRecord, m_start, m_stream); !r) return r.error();
  if (auto r =
          HONE_CU(a, cuLaunchKernel, fn, s.grid[0], s.grid[1], s.grid[2], s.block[0], s.block[1],
                  s.block[2], s.shared_bytes, m_stream, nullptr, params.empty() ? nullptr : extra);
      !r) {
    return r.error();
  }
  // A kernel fault surfaces in the first call after the launch (asynchronously on a GPU).
  auto fault = [&](const Error& e) {
    auto r = CUresult(e.code);
    return make_error("the kernel failed: " + a.describe(r) + " (reported by " +
                          e.message.substr(0, e.message.find(' ')) + ")",
                      e.code);
  };
  if (auto r = HONE_CU(a, cuEventRecord, m_end, m_stream); !r) return fault(r.error());
  if (auto r = HONE_CU(a, cuEventSynchronize, m_end); !r) return fault(r.error());
  float ms = 0;
  if (auto r = HONE_CU(a, cuEventElapsedTime, &ms, m_start, m_end); !r) return r.error();
  return double(ms) * 1e6;
}

KernelProfile Device::profile(CUfunction fn, const LaunchShape& shape) const {
  const auto& a = *m_api;
  KernelProfile p;
  auto attribute = [&](CUfunction_attribute what) {
    int v = -1;
    if (!a.cuFuncGetAttribute || a.cuFuncGetAttribute(&v, what, fn) != CUDA_SUCCESS) return -1;
    return v;
  };
  p.registers = attribute(CU_FUNC_ATTRIBUTE_NUM_REGS);
  p.local_bytes = attribute(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES);
  p.static_shared_bytes = attribute(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
  const int threads = int(uint64_t(shape.block[0]) * shape.block[1] * shape.block[2]);
  p.warps_per_block = (threads + 31) / 32;
  int blocks = 0;
  if (a.cuOccupancyMaxActiveBlocksPerMultiprocessor &&
      a.cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, fn, threads,
                                                    shape.shared_bytes) == CUDA_SUCCESS) {
    p.blocks_per_sm = blocks;
  }
  int sm_threads = 0;
  if (a.cuDeviceGetAttribute(&sm_threads, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
                             m_device) == CUDA_SUCCESS) {
    p.max_warps_per_sm = sm_threads / 32;
  }
  if (auto query = reinterpret_cast<hone_emu_launch_cost_fn>(
          a.symbol(HONE_EMU_LAUNCH_COST_SYMBOL))) {
    hone_emu_cost c{};
    c.version = HONE_EMU_LAUNCH_COST_VERSION;
    if (query(fn, &c) == CUDA_SUCCESS) p.modeled = c;
  }
  return p;
}

double Device::dram_peak_bytes_per_s() const {
  int khz = 0, bits = 0;
  const auto& a = *m_api;
  if (a.cuDeviceGetAttribute(&khz, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, m_device) !=
          CUDA_SUCCESS ||
      a.cuDeviceGetAttribute(&bits, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, m_device) !=
          CUDA_SUCCESS ||
      khz <= 0 || bits <= 0) {
    return 0;
  }
  return double(khz) * 1e3 * 2 * (double(bits) / 8);
}

bool Device::healthy() const {
  return m_api->cuCtxSynchronize() == CUDA_SUCCESS;
}

Result<void> Device::upload(uint64_t dst, const void* src, size_t bytes) const {
  if (bytes == 0) return ok();
  return HONE_CU(*m_api, cuMemcpyHtoD, CUdeviceptr(dst), src, bytes);
}

Result<void> Device::download(void* dst, uint64_t src, size_t bytes) const {
  if (bytes == 0) return ok();
  return HONE_CU(*m_api, cuMemcpyDtoH, dst, CUdeviceptr(src), bytes);
}

bool Device::flush_l2() {
  if (!m_l2_tried) {
    m_l2_tried = true;
    int l2 = 0;
    if (emulated()) return false;
    if (m_api->cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, m_device) !=
            CUDA_SUCCESS ||
        l2 <= 0) {
      return false;
    }
    size_t bytes = 2 * size_t(l2);
    if (m_api->cuMemAlloc(&m_l2_scratch, bytes) != CUDA_SUCCESS) {
      m_l2_scratch = 0;
      return false;
    }
    m_l2_scratch_bytes = bytes;
  }
  if (!m_l2_scratch) return false;
  // Outside the timed region: the restore before it waits too.
  return m_api->cuMemsetD8(m_l2_scratch, ++m_l2_value, m_l2_scratch_bytes) == CUDA_SUCCESS;
}

Result<CUfunction> Device::scrub_function(uint32_t frame) {
  auto it = m_scrub_modules.find(frame);
  if (it == m_scrub_modules.end()) {
    std::string ptx = scrub_ptx(frame);
    auto m = load(ptx.c_str());
    if (!m) return make_error("the scrub module does not load: " + m.error().message);
    it = m_scrub_modules.emplace(frame, std::move(*m)).first;
  }
  return it->second.function(frame == 0 ? k_scrub_shared_entry : k_scrub_local_entry);
}

bool Device::scrub(uint64_t seed, int local_bytes, bool even_emulated) {
  const auto& a = *m_api;
  auto unavailable = [&](std::string why) {
    m_scrub_why = std::move(why);
    return false;
  };
  if (emulated() && !even_emulated) {
    return unavailable("the emulated device fills shared and local memory itself (fill seed)");
  }
  if (!a.cuFuncSetAttribute) return unavailable("the driver lacks cuFuncSetAttribute");
  auto attribute = [&](CUdevice_attribute what) {
    int v = 0;
    return a.cuDeviceGetAttribute(&v, what, m_device) == CUDA_SUCCESS ? v : 0;
  };
  const int sms = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  const int optin = attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  const int sm_threads = attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
  const int block_threads = std::min(1024, attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK));
  if (sms <= 0 || optin <= 0 || sm_threads <= 0 || block_threads <= 0) {
    return unavailable("the driver does not say its SM count, shared memory or thread limits");
  }
  // Shared memory: one block takes all an SM may give a block, so with two blocks per SM in the
  // grid every SM runs the scrub at least once (a block per SM at a time).
  auto shared = scrub_function(0);
  if (!shared) return unavailable(shared.error().message);
  if (a.cuFuncSetAttribute(*shared, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, optin) !=
          CUDA_SUCCESS ||
      a.cuFuncSetAttribute(*shared, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                           int(CU_SHAREDMEM_CARVEOUT_MAX_SHARED)) != CUDA_SUCCESS) {
    return unavailable("the driver refuses the scrub's shared memory size or carveout");
  }
  uint32_t bytes = uint32_t(optin);
  void* shared_args[] = {&seed, &bytes};
  if (a.cuLaunchKernel(*shared, uint32_t(2 * sms), 1, 1, uint32_t(block_threads), 1, 1, bytes,
                       m_stream, shared_args, nullptr) != CUDA_SUCCESS) {
    return unavailable("the shared-memory scrub does not launch");
  }
  // Local memory: every thread slot of every SM, twice over, with the kernel's own frame.
  if (uint32_t frame = scrub_local_frame(local_bytes)) {
    auto local = scrub_function(frame);
    if (!local) return unavailable(local.error().message);
    uint64_t local_seed = seed ^ 0x5bd1e9955bd1e995ull;
    void* local_args[] = {&local_seed};
    const uint32_t blocks = uint32_t(2 * sms * ((sm_threads + block_threads - 1) / block_threads));
    if (a.cuLaunchKernel(*local, blocks, 1, 1, uint32_t(block_threads), 1, 1, 0, m_stream,
                         local_args, nullptr) != CUDA_SUCCESS) {
      return unavailable("the local-memory scrub does not launch");
    }
  }
  m_scrub_why.clear();
  return true;
}

Result<void> Device::fill(uint64_t dst, uint8_t value, size_t bytes) const {
  if (bytes == 0) return ok();
  return HONE_CU(*m_api, cuMemsetD8, CUdeviceptr(dst), (unsigned char)value, bytes);
}

} // namespace hone::worker
