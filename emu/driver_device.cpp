// cuInit, the driver version and the one emulated device: a plausible sm_90 part (DeviceLimits).
#include "emu/driver.hpp"

#include "emu/log.hpp"
#include "emu/memory.hpp"

#include <cstring>

namespace hone::emu {

namespace {

using L = DeviceLimits;

CUresult check_device(CUdevice dev) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  return dev >= 0 && dev < k_device_count ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

// Copy `text` into a caller buffer of `len` bytes, truncating, always NUL-terminated.
CUresult copy_string(char* out, int len, const char* text) {
  if (out == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  size_t n = std::min(std::strlen(text), static_cast<size_t>(len) - 1);
  std::memcpy(out, text, n);
  out[n] = '\0';
  return CUDA_SUCCESS;
}

// Every CUdevice_attribute of cuda.h 13.0 (1 ... CU_DEVICE_ATTRIBUTE_MAX - 1 are all defined).
// What is not listed is a feature the emulated device does not offer (pageable memory access,
// clusters, TMA, ...): 0, so programs that check before using them stay on the path that works
// here.
int attribute_value(int attrib) {
  switch (attrib) {
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
    return L::k_max_threads_per_block;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
    return L::k_max_block_dim_xy;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y:
    return L::k_max_block_dim_xy;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z:
    return L::k_max_block_dim_z;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:
    return static_cast<int>(L::k_max_grid_dim_x);
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
    return L::k_max_grid_dim_yz;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z:
    return L::k_max_grid_dim_yz;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
    return L::k_shared_per_block;
  case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY:
    return L::k_const_bytes;
  case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
    return L::k_warp_size;
  case CU_DEVICE_ATTRIBUTE_MAX_PITCH:
    return 2147483647;
  case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK:
    return L::k_regs_per_block;
  case CU_DEVICE_ATTRIBUTE_CLOCK_RATE:
    return L::k_clock_khz;
  case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT:
    return 512;
  case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP:
    return 1;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
    return L::k_sm_count;
  case CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT:
    return 0;
  case CU_DEVICE_ATTRIBUTE_INTEGRATED:
    return 0;
  case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
    return 1;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE:
    return CU_COMPUTEMODE_DEFAULT;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH:
    return 131072;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH:
    return 131072;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT:
    return 65536;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH:
    return 16384;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT:
    return 16384;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH:
    return 16384;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_WIDTH:
    return 32768;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_HEIGHT:
    return 32768;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_LAYERS:
    return 2048;
  case CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT:
    return 512;
  case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:
    return 1;
  case CU_DEVICE_ATTRIBUTE_ECC_ENABLED:
    return 1;
  case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
    return 1;
  case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
    return 0;
  case CU_DEVICE_ATTRIBUTE_TCC_DRIVER:
    return 0;
  case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE:
    return 2619000;
  case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH:
    return 5120;
  case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
    return 50 * 1024 * 1024;
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR:
    return L::k_max_threads_per_sm;
  case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT:
    return 2;
  case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
    return 1;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_WIDTH:
    return 32768;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_LAYERS:
    return 2048;
  case CU_DEVICE_ATTRIBUTE_CAN_TEX2D_GATHER:
    return 1;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_WIDTH:
    return 32768;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_HEIGHT:
    return 32768;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE:
    return 8192;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE:
    return 8192;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE:
    return 32768;
  case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
    return 0;
  case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT:
    return 32;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_WIDTH:
    return 32768;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH:
    return 32768;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS:
    return 2046;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_WIDTH:
    return 32768;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_WIDTH:
    return 131072;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_HEIGHT:
    return 65536;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_WIDTH:
    return 16384;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_HEIGHT:
    return 16384;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_DEPTH:
    return 16384;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_WIDTH:
    return 32768;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_LAYERS:
    return 2048;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_WIDTH:
    return 32768;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_HEIGHT:
    return 32768;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_LAYERS:
    return 2048;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_WIDTH:
    return 32768;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH:
    return 32768;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS:
    return 2046;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LINEAR_WIDTH:
    return 268435456;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_WIDTH:
    return 131072;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_HEIGHT:
    return 65000;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_PITCH:
    return 2097120;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH:
    return 32768;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT:
    return 32768;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
    return L::k_cc_major;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
    return L::k_cc_minor;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH:
    return 32768;
  case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED:
    return 1;
  case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED:
    return 1;
  case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED:
    return 1;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR:
    return L::k_shared_per_sm;
  case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR:
    return L::k_regs_per_block;
  case CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO:
    return 2;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED:
    return 1;
  case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH:
    return 1;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
    return L::k_shared_per_block_optin;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR:
    return 32;
  case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK:
    return 1024;
  case CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT:
    return 4;
  case CU_DEVICE_ATTRIBUTE_NUMA_ID:
    return -1;
  case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID:
    return -1;
  case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    return 1;
  // Managed memory is an allocation both sides use at one address, and work runs synchronously:
  // the host may touch it directly, at any time.
  case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
  case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
  case CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST:
    return 1;
  case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
    return 1;
  // Registered host memory is used at its host address, read-only registrations included.
  case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED:
  case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM:
  case CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED:
    return 1;
  case CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID:
    return static_cast<int>((0x2330u << 16) | 0x10deu);
  default:
    return 0;
  }
}

constexpr CUuuid k_uuid = {
    {'h', 'o', 'n', 'e', '-', 'e', 'm', 'u', '-', 's', 'm', '9', '0', '-', '0', '0'}};

} // namespace

} // namespace hone::emu

using namespace hone::emu;

extern "C" {

CUresult CUDAAPI cuInit(unsigned int Flags) {
  return guarded([&] {
    if (Flags != 0) return CUDA_ERROR_INVALID_VALUE;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    if (r.primary == 0) {
      // The primary context exists, inactive, from the start so its handle never changes.
      auto ctx = std::make_unique<Context>();
      ctx->handle = r.new_handle();
      ctx->id = r.new_id();
      ctx->primary = true;
      ctx->active = false;
      ctx->legacy.legacy = true;
      ctx->legacy.ctx = ctx->handle;
      r.primary = ctx->handle;
      r.contexts.emplace(ctx->handle, std::move(ctx));
      log(LogLevel::info, "cuInit: emulated device ready (" + std::string(k_device_name) + ")");
    }
    set_initialized();
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuDriverGetVersion(int* driverVersion) {
  if (driverVersion == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *driverVersion = k_driver_version;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice* device, int ordinal) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (ordinal < 0 || ordinal >= k_device_count) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int* count) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *count = k_device_count;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice dev) {
  if (CUresult rc = check_device(dev); rc != CUDA_SUCCESS) return rc;
  return copy_string(name, len, k_device_name);
}

CUresult CUDAAPI cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  if (CUresult rc = check_device(dev); rc != CUDA_SUCCESS) return rc;
  if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *uuid = k_uuid;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  return cuDeviceGetUuid(uuid, dev);
}

CUresult CUDAAPI cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  if (CUresult rc = check_device(dev); rc != CUDA_SUCCESS) return rc;
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *bytes = Memory::k_total_bytes;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceComputeCapability(int* major, int* minor, CUdevice dev) {
  if (CUresult rc = check_device(dev); rc != CUDA_SUCCESS) return rc;
  if (major == nullptr || minor == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *major = DeviceLimits::k_cc_major;
  *minor = DeviceLimits::k_cc_minor;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib, CUdevice dev) {
  if (CUresult rc = check_device(dev); rc != CUDA_SUCCESS) return rc;
  if (pi == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const int a = enum_value(attrib);
  if (a < 1 || a >= CU_DEVICE_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
  *pi = attribute_value(a);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetProperties(CUdevprop* prop, CUdevice dev) {
  if (CUresult rc = check_device(dev); rc != CUDA_SUCCESS) return rc;
  if (prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *prop = CUdevprop{};
  prop->maxThreadsPerBlock = L::k_max_threads_per_block;
  prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = L::k_max_block_dim_xy;
  prop->maxThreadsDim[2] = L::k_max_block_dim_z;
  prop->maxGridSize[0] = static_cast<int>(L::k_max_grid_dim_x);
  prop->maxGridSize[1] = prop->maxGridSize[2] = L::k_max_grid_dim_yz;
  prop->sharedMemPerBlock = L::k_shared_per_block;
  prop->totalConstantMemory = L::k_const_bytes;
  prop->SIMDWidth = L::k_warp_size;
  prop->memPitch = 2147483647;
  prop->regsPerBlock = L::k_regs_per_block;
  prop->clockRate = L::k_clock_khz;
  prop->textureAlign = 512;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetPCIBusId(char* pciBusId, int len, CUdevice dev) {
  if (CUresult rc = check_device(dev); rc != CUDA_SUCCESS) return rc;
  return copy_string(pciBusId, len, k_pci_bus_id);
}

CUresult CUDAAPI cuDeviceGetByPCIBusId(CUdevice* dev, const char* pciBusId) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (dev == nullptr || pciBusId == nullptr) return CUDA_ERROR_INVALID_VALUE;
    // Accept the short form ("01:00.0") as well as the full one, case-insensitively.
    std::string id(pciBusId);
    for (char& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (id != k_pci_bus_id && "0000:" + id != k_pci_bus_id) return CUDA_ERROR_INVALID_DEVICE;
    *dev = 0;
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuDeviceCanAccessPeer(int* canAccessPeer, CUdevice dev, CUdevice peerDev) {
  if (CUresult rc = check_device(dev); rc != CUDA_SUCCESS) return rc;
  if (CUresult rc = check_device(peerDev); rc != CUDA_SUCCESS) return rc;
  if (canAccessPeer == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *canAccessPeer = 0;
  return CUDA_SUCCESS;
}

} // extern "C"
