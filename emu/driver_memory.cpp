// Device and pinned host memory, copies, memsets and pointer attributes.
//
// Device addresses are host addresses (emu/memory.hpp), so a copy is a memmove once both ranges
// are checked: the device side of every copy and memset must lie inside one live allocation, or
// inside adjacent accessible mappings of one reserved range (CUDA_ERROR_INVALID_VALUE otherwise);
// host pointers are the caller's responsibility, as on the real driver. Copies run synchronously and advance the stream's modeled clock (copy_ns).
#include "emu/driver.hpp"

#include "emu/graph.hpp"
#include "emu/log.hpp"
#include "emu/memory.hpp"

#include <cstring>
#include <limits>

namespace hone::emu {

namespace {

constexpr unsigned k_host_alloc_flags =
    CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED;

// Inside one allocation, or inside adjacent accessible mappings of one reservation (Memory::covers).
bool inside_allocation(uint64_t addr, uint64_t bytes) {
  return memory().covers(addr, bytes, false);
}

// The same, and writable: no mapping with read access only.
bool inside_writable(uint64_t addr, uint64_t bytes) {
  return memory().covers(addr, bytes, true);
}

bool is_host_memory(const Allocation& a) {
  return a.kind == AllocKind::host || a.kind == AllocKind::registered;
}

// Which side of a copy a pointer is on: device memory (any allocation but pinned or registered
// host memory; managed memory counts as device memory), or host memory (pinned, registered, or
// any address the device does not know: pageable).
enum class Side { device, host, bad };

Side side_of(uint64_t addr, uint64_t bytes) {
  auto a = memory().find(addr);
  if (!a) return Side::host;
  if (!inside_allocation(addr, bytes)) return Side::bad;
  return is_host_memory(*a) ? Side::host : Side::device;
}

CopyKind copy_kind(Side dst, Side src) {
  if (dst == Side::device)
    return src == Side::device ? CopyKind::device_to_device : CopyKind::host_to_device;
  return src == Side::device ? CopyKind::device_to_host : CopyKind::host_to_host;
}

// A copy of `bytes` from `src` to `dst` on `hs`. `kind` nullopt: infer from the addresses
// (cuMemcpy, unified addressing).
CUresult copy(uint64_t dst, uint64_t src, size_t bytes, std::optional<CopyKind> kind, CUstream hs,
              bool per_thread, bool host_sync) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  Registry& r = registry();
  {
    std::lock_guard lock(r.mutex);
    Context* ctx = nullptr;
    if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
    Stream* s = nullptr;
    if (CUresult rc = resolve_stream(r, *ctx, hs, per_thread, s); rc != CUDA_SUCCESS) return rc;
    // A synchronous copy is an unsafe call during stream capture; an async one may be captured.
    if (host_sync) {
      if (CUresult rc = capture_forbids_unsafe(r); rc != CUDA_SUCCESS) return rc;
    }
    bool captured = false;
    if (CUresult rc = capture_check(r, *ctx, *s, captured); rc != CUDA_SUCCESS) return rc;
    if (bytes == 0) return CUDA_SUCCESS;
    if (kind) {
      bool dst_device = *kind == CopyKind::host_to_device || *kind == CopyKind::device_to_device;
      bool src_device = *kind == CopyKind::device_to_host || *kind == CopyKind::device_to_device;
      if (dst_device && !inside_writable(dst, bytes)) return CUDA_ERROR_INVALID_VALUE;
      if (src_device && !inside_allocation(src, bytes)) return CUDA_ERROR_INVALID_VALUE;
      if (dst == 0 || src == 0) return CUDA_ERROR_INVALID_VALUE;
    } else {
      Side d = side_of(dst, bytes);
      Side sr = side_of(src, bytes);
      if (d == Side::bad || sr == Side::bad || dst == 0 || src == 0)
        return CUDA_ERROR_INVALID_VALUE;
      if (d == Side::device && !inside_writable(dst, bytes)) return CUDA_ERROR_INVALID_VALUE;
      kind = copy_kind(d, sr);
    }
    if (captured) {
      GraphNode node;
      node.type = CU_GRAPH_NODE_TYPE_MEMCPY;
      node.copy = linear_copy(dst, src, bytes);
      node.op_ctx = ctx->handle;
      return capture_node(r, *s, std::move(node));
    }
    uint64_t start = op_start(r, *ctx, *s);
    uint64_t end = start + copy_ns(*kind, bytes);
    op_finish(*s, end);
    // The synchronous copies that involve the host return once the copy is done (device-to-device
    // ones, like the Async forms, return at once).
    if (host_sync && *kind != CopyKind::device_to_device) host_waits(*ctx, end);
    start_device_work(r);
  }
  // Outside the lock: a large copy must not stall other threads. Overlapping ranges are undefined
  // on the real driver; memmove makes them harmless here.
  std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
  done_device_work(r);
  return CUDA_SUCCESS;
}

CUresult memset_elements(uint64_t dst, uint32_t value, size_t count, unsigned elem_size,
                         CUstream hs, bool per_thread, bool sync) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  Registry& r = registry();
  if (count > std::numeric_limits<size_t>::max() / elem_size) return CUDA_ERROR_INVALID_VALUE;
  size_t bytes = count * elem_size;
  {
    std::lock_guard lock(r.mutex);
    Context* ctx = nullptr;
    if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
    Stream* s = nullptr;
    if (CUresult rc = resolve_stream(r, *ctx, hs, per_thread, s); rc != CUDA_SUCCESS) return rc;
    if (sync) {
      if (CUresult rc = capture_forbids_unsafe(r); rc != CUDA_SUCCESS) return rc;
    }
    bool captured = false;
    if (CUresult rc = capture_check(r, *ctx, *s, captured); rc != CUDA_SUCCESS) return rc;
    if (dst % elem_size != 0) return CUDA_ERROR_INVALID_VALUE;
    if (count == 0) return CUDA_SUCCESS;
    if (!inside_writable(dst, bytes)) return CUDA_ERROR_INVALID_VALUE;
    if (captured) {
      GraphNode node;
      node.type = CU_GRAPH_NODE_TYPE_MEMSET;
      node.memset.dst = dst;
      node.memset.value = value;
      node.memset.elementSize = elem_size;
      node.memset.width = count;
      node.memset.height = 1;
      node.memset.pitch = bytes;
      node.op_ctx = ctx->handle;
      return capture_node(r, *s, std::move(node));
    }
    uint64_t start = op_start(r, *ctx, *s);
    op_finish(*s, start + memset_ns(bytes));
    start_device_work(r);
  }
  switch (elem_size) {
  case 1:
    std::memset(reinterpret_cast<void*>(dst), static_cast<int>(value & 0xff), bytes);
    break;
  case 2: {
    auto* p = reinterpret_cast<uint16_t*>(dst);
    std::fill(p, p + count, static_cast<uint16_t>(value));
    break;
  }
  default: {
    auto* p = reinterpret_cast<uint32_t*>(dst);
    std::fill(p, p + count, value);
    break;
  }
  }
  done_device_work(r);
  return CUDA_SUCCESS;
}

CUresult alloc(uint64_t& out, size_t bytes, AllocKind kind, unsigned host_flags) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  Context* ctx = nullptr;
  if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  auto base = memory().allocate(bytes, kind, ctx->memory_owner());
  if (!base) {
    log(LogLevel::info, base.error().message);
    return base.error().code != 0 ? static_cast<CUresult>(base.error().code)
                                  : CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (kind == AllocKind::host) r.host_alloc_flags[*base] = host_flags;
  out = *base;
  return CUDA_SUCCESS;
}

CUresult free_allocation(uint64_t base, bool host) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  Registry& r = registry();
  std::unique_lock lock(r.mutex);
  wait_device_idle(r, lock);
  Context* ctx = nullptr;
  if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
  if (base == 0 && !host) return CUDA_SUCCESS; // cuMemFree(0) is a no-op, as cudaFree(NULL)
  // Memory of a graph's allocation node: freed for the graph (its address stays the graph's).
  if (CUresult status = CUDA_SUCCESS; !host && graph_memory_free(r, base, status)) return status;
  auto a = memory().find(base);
  // Only what cuMemAlloc (resp. cuMemAllocHost/cuMemHostAlloc) returned, by its base address.
  if (!a || a->base != base) return CUDA_ERROR_INVALID_VALUE;
  if (host != (a->kind == AllocKind::host)) return CUDA_ERROR_INVALID_VALUE;
  // Device memory of cuMemAlloc, cuMemAllocManaged or a pool (cuMemFree may free what
  // cuMemAllocAsync returned); never a module variable.
  if (!host && a->kind != AllocKind::device) return CUDA_ERROR_INVALID_VALUE;
  if (host) r.host_alloc_flags.erase(base);
  memory().release(base);
  if (a->pool != 0) pool_forget(r, base, a->size);
  return CUDA_SUCCESS;
}

// The context a piece of device memory belongs to: its owner is a context, or a module's program.
CUcontext owner_context(Registry& r, const void* owner) {
  Handle h = reinterpret_cast<uintptr_t>(owner);
  if (r.context(h) != nullptr) return to_cu<CUcontext>(h);
  for (const auto& [mh, mod] : r.modules) {
    if (mod->program.get() == owner) return to_cu<CUcontext>(mod->ctx);
  }
  return nullptr;
}

template <class T> void put(void* data, T value) {
  std::memcpy(data, &value, sizeof(T));
}

// One pointer attribute. `a` is the allocation holding `ptr`, or nullopt: then every attribute
// gets its "not a CUDA pointer" default (cuPointerGetAttributes semantics).
CUresult pointer_attribute(Registry& r, const std::optional<Allocation>& a, uint64_t ptr,
                           int attribute, void* data) {
  const bool host = a && is_host_memory(*a);
  switch (attribute) {
  case CU_POINTER_ATTRIBUTE_CONTEXT:
    put(data, a ? owner_context(r, a->owner) : CUcontext{});
    break;
  case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
    put<unsigned>(data, !a ? 0u : unsigned(host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE));
    break;
  case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    put<CUdeviceptr>(data, a ? ptr : 0);
    break;
  case CU_POINTER_ATTRIBUTE_HOST_POINTER:
    // Device memory has no host mapping; managed memory is the same address on both sides.
    if (a && !host && !a->managed) return CUDA_ERROR_INVALID_VALUE;
    put<void*>(data, a ? reinterpret_cast<void*>(ptr) : nullptr);
    break;
  case CU_POINTER_ATTRIBUTE_P2P_TOKENS:
    return CUDA_ERROR_NOT_SUPPORTED;
  case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
    put<bool>(data, a.has_value());
    break;
  case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    put<unsigned long long>(data, a ? a->base : 0);
    break;
  case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    put<bool>(data, a && a->managed);
    break;
  case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
    put<int>(data, a ? 0 : -2);
    break;
  case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
    put<bool>(data, false);
    break;
  case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
  case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
    put<void*>(data, a ? reinterpret_cast<void*>(a->base) : nullptr);
    break;
  case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
  case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
    put<size_t>(data, a ? a->size : 0);
    break;
  case CU_POINTER_ATTRIBUTE_MAPPED:
    put<bool>(data, a.has_value());
    break;
  case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
    put<unsigned long long>(data, 0);
    break;
  case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
    put<bool>(data, false);
    break;
  case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
    put<int>(data, !a            ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_NONE
                   : a->read_only ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READ
                                  : CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE);
    break;
  case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
    put<CUmemoryPool>(data, a && a->pool ? to_cu<CUmemoryPool>(a->pool) : CUmemoryPool{});
    break;
  case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
    put<unsigned long long>(data, a ? a->base : 0);
    break;
  default:
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

using D = CopyKind;

// --- 2D copies and memsets -----------------------------------------------------------------------

// cuMemAllocPitch rounds rows up to this: what GPUs of this class return.
constexpr uint64_t k_pitch_alignment = 512;

// One side of a 2D copy: where its first row starts, and whether it is device memory.
struct Plane {
  uint64_t start = 0;
  bool device = false;
};

// The side of a CUDA_MEMCPY2D described by these fields, checked: rows of `width` bytes `pitch`
// apart, `height` of them, from (x, y); a device side must lie inside one allocation or adjacent
// mappings (writable for the destination). Arrays are not emulated.
CUresult plane(CUmemorytype type, const void* host, CUdeviceptr dev, size_t x, size_t y,
               size_t pitch, size_t width, size_t height, bool dst, Plane& out) {
  uint64_t base = 0;
  switch (type) {
  case CU_MEMORYTYPE_HOST:
    base = reinterpret_cast<uint64_t>(host);
    out.device = false;
    break;
  case CU_MEMORYTYPE_DEVICE:
  case CU_MEMORYTYPE_UNIFIED:
    base = dev;
    out.device = true;
    break;
  case CU_MEMORYTYPE_ARRAY:
    return CUDA_ERROR_NOT_SUPPORTED;
  default:
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (base == 0 || width > pitch) return CUDA_ERROR_INVALID_VALUE;
  // [start, start + extent): the bytes the rows cover, checked for overflow.
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  if (y != 0 && pitch > (max - x) / y) return CUDA_ERROR_INVALID_VALUE;
  const uint64_t offset = uint64_t(y) * pitch + x;
  if (height - 1 != 0 && pitch > (max - width) / (height - 1)) return CUDA_ERROR_INVALID_VALUE;
  const uint64_t extent = uint64_t(height - 1) * pitch + width;
  if (base > max - offset || base + offset > max - extent) return CUDA_ERROR_INVALID_VALUE;
  out.start = base + offset;
  if (type == CU_MEMORYTYPE_UNIFIED) {
    Side s = side_of(out.start, extent);
    if (s == Side::bad) return CUDA_ERROR_INVALID_VALUE;
    out.device = s == Side::device;
  }
  if (out.device) {
    if (!(dst ? inside_writable(out.start, extent) : inside_allocation(out.start, extent)))
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

// The 3D form of a 2D copy (what a captured cuMemcpy2DAsync becomes as a graph node).
CUDA_MEMCPY3D copy_3d_of(const CUDA_MEMCPY2D& c) {
  CUDA_MEMCPY3D m{};
  m.srcXInBytes = c.srcXInBytes;
  m.srcY = c.srcY;
  m.srcMemoryType = c.srcMemoryType;
  m.srcHost = c.srcHost;
  m.srcDevice = c.srcDevice;
  m.srcArray = c.srcArray;
  m.srcPitch = c.srcPitch;
  m.srcHeight = c.Height;
  m.dstXInBytes = c.dstXInBytes;
  m.dstY = c.dstY;
  m.dstMemoryType = c.dstMemoryType;
  m.dstHost = c.dstHost;
  m.dstDevice = c.dstDevice;
  m.dstArray = c.dstArray;
  m.dstPitch = c.dstPitch;
  m.dstHeight = c.Height;
  m.WidthInBytes = c.WidthInBytes;
  m.Height = c.Height;
  m.Depth = 1;
  return m;
}

// A checked 3D copy: both sides as planes of `rows` rows (the slices laid end to end).
struct Copy3d {
  Plane src, dst;
  size_t src_pitch = 0, dst_pitch = 0;
  size_t src_slice_rows = 0, dst_slice_rows = 0;
  CopyKind kind = CopyKind::host_to_host;
};

CUresult check_3d(const CUDA_MEMCPY3D& c, Copy3d& out) {
  if (c.reserved0 != nullptr || c.reserved1 != nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (c.srcLOD != 0 || c.dstLOD != 0) return CUDA_ERROR_INVALID_VALUE;
  if (c.WidthInBytes == 0 || c.Height == 0 || c.Depth == 0) return CUDA_ERROR_INVALID_VALUE;
  const bool flat = c.Height == 1 && c.Depth == 1;
  // A 1D copy needs no pitch; a 3D one needs slices at least Height rows tall.
  out.src_pitch = flat && c.srcPitch == 0 ? c.WidthInBytes : c.srcPitch;
  out.dst_pitch = flat && c.dstPitch == 0 ? c.WidthInBytes : c.dstPitch;
  out.src_slice_rows = c.Depth > 1 ? c.srcHeight : c.Height;
  out.dst_slice_rows = c.Depth > 1 ? c.dstHeight : c.Height;
  if (c.Depth > 1 && (c.srcHeight < c.Height || c.dstHeight < c.Height))
    return CUDA_ERROR_INVALID_VALUE;
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  auto rows = [&](size_t slice_rows, size_t y, size_t z, uint64_t& first, uint64_t& count) {
    if (z != 0 && slice_rows > (max - y) / z) return false;
    first = uint64_t(z) * slice_rows + y;
    if (c.Depth - 1 != 0 && slice_rows > (max - c.Height) / (c.Depth - 1)) return false;
    count = uint64_t(c.Depth - 1) * slice_rows + c.Height;
    return true;
  };
  uint64_t sy = 0, sn = 0, dy = 0, dn = 0;
  if (!rows(out.src_slice_rows, c.srcY, c.srcZ, sy, sn)) return CUDA_ERROR_INVALID_VALUE;
  if (!rows(out.dst_slice_rows, c.dstY, c.dstZ, dy, dn)) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult rc = plane(c.srcMemoryType, c.srcHost, c.srcDevice, c.srcXInBytes, sy,
                          out.src_pitch, c.WidthInBytes, sn, false, out.src);
      rc != CUDA_SUCCESS) {
    return rc;
  }
  if (CUresult rc = plane(c.dstMemoryType, c.dstHost, c.dstDevice, c.dstXInBytes, dy,
                          out.dst_pitch, c.WidthInBytes, dn, true, out.dst);
      rc != CUDA_SUCCESS) {
    return rc;
  }
  out.kind = copy_kind(out.dst.device ? Side::device : Side::host,
                       out.src.device ? Side::device : Side::host);
  return CUDA_SUCCESS;
}

CUresult check_memset(uint64_t dst, size_t pitch, size_t width, size_t height, unsigned elem_size,
                      uint64_t& bytes) {
  if (elem_size != 1 && elem_size != 2 && elem_size != 4) return CUDA_ERROR_INVALID_VALUE;
  if (dst == 0 || dst % elem_size != 0 || width == 0 || height == 0)
    return CUDA_ERROR_INVALID_VALUE;
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  if (width > max / elem_size) return CUDA_ERROR_INVALID_VALUE;
  const uint64_t row_bytes = uint64_t(width) * elem_size;
  if (height > 1 && (pitch < row_bytes || pitch % elem_size != 0)) return CUDA_ERROR_INVALID_VALUE;
  if (height - 1 != 0 && pitch > (max - row_bytes) / (height - 1)) return CUDA_ERROR_INVALID_VALUE;
  const uint64_t extent = uint64_t(height - 1) * pitch + row_bytes;
  if (!inside_writable(dst, extent)) return CUDA_ERROR_INVALID_VALUE;
  bytes = row_bytes * height;
  return CUDA_SUCCESS;
}

void fill_rows(uint64_t dst, size_t pitch, uint32_t value, size_t width, size_t height,
               unsigned elem_size) {
  const uint64_t row_bytes = uint64_t(width) * elem_size;
  for (size_t row = 0; row < height; ++row) {
    uint64_t p = dst + row * pitch;
    switch (elem_size) {
    case 1:
      std::memset(reinterpret_cast<void*>(p), int(value & 0xff), row_bytes);
      break;
    case 2:
      std::fill_n(reinterpret_cast<uint16_t*>(p), width, uint16_t(value));
      break;
    default:
      std::fill_n(reinterpret_cast<uint32_t*>(p), width, value);
      break;
    }
  }
}

CUresult copy_2d(const CUDA_MEMCPY2D* c, CUstream hs, bool per_thread, bool host_sync) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (c == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Registry& r = registry();
  Plane src, dst;
  {
    std::lock_guard lock(r.mutex);
    Context* ctx = nullptr;
    if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
    Stream* s = nullptr;
    if (CUresult rc = resolve_stream(r, *ctx, hs, per_thread, s); rc != CUDA_SUCCESS) return rc;
    if (c->WidthInBytes == 0 || c->Height == 0) return CUDA_SUCCESS;
    if (CUresult rc = plane(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcXInBytes, c->srcY,
                            c->srcPitch, c->WidthInBytes, c->Height, false, src);
        rc != CUDA_SUCCESS) {
      return rc;
    }
    if (CUresult rc = plane(c->dstMemoryType, c->dstHost, c->dstDevice, c->dstXInBytes, c->dstY,
                            c->dstPitch, c->WidthInBytes, c->Height, true, dst);
        rc != CUDA_SUCCESS) {
      return rc;
    }
    if (host_sync) {
      if (CUresult rc = capture_forbids_unsafe(r); rc != CUDA_SUCCESS) return rc;
    }
    bool captured = false;
    if (CUresult rc = capture_check(r, *ctx, *s, captured); rc != CUDA_SUCCESS) return rc;
    if (captured) {
      GraphNode node;
      node.type = CU_GRAPH_NODE_TYPE_MEMCPY;
      node.copy = copy_3d_of(*c);
      node.op_ctx = ctx->handle;
      return capture_node(r, *s, std::move(node));
    }
    const CopyKind kind = copy_kind(dst.device ? Side::device : Side::host,
                                    src.device ? Side::device : Side::host);
    // Charged as one copy of all the rows' bytes (the per-copy latency once, not per row).
    uint64_t start = op_start(r, *ctx, *s);
    uint64_t end = start + copy_ns(kind, uint64_t(c->WidthInBytes) * c->Height);
    op_finish(*s, end);
    if (host_sync && kind != CopyKind::device_to_device) host_waits(*ctx, end);
    start_device_work(r);
  }
  for (size_t row = 0; row < c->Height; ++row) {
    std::memmove(reinterpret_cast<void*>(dst.start + row * c->dstPitch),
                 reinterpret_cast<const void*>(src.start + row * c->srcPitch), c->WidthInBytes);
  }
  done_device_work(r);
  return CUDA_SUCCESS;
}

CUresult memset_2d(uint64_t dst, size_t pitch, uint32_t value, size_t width, size_t height,
                   unsigned elem_size, CUstream hs, bool per_thread, bool sync) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  Registry& r = registry();
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  if (width > max / elem_size) return CUDA_ERROR_INVALID_VALUE;
  const uint64_t row_bytes = uint64_t(width) * elem_size;
  {
    std::lock_guard lock(r.mutex);
    Context* ctx = nullptr;
    if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
    Stream* s = nullptr;
    if (CUresult rc = resolve_stream(r, *ctx, hs, per_thread, s); rc != CUDA_SUCCESS) return rc;
    if (dst % elem_size != 0 || pitch % elem_size != 0) return CUDA_ERROR_INVALID_VALUE;
    if (width == 0 || height == 0) return CUDA_SUCCESS;
    if (row_bytes > pitch) return CUDA_ERROR_INVALID_VALUE;
    if (height - 1 != 0 && pitch > (max - row_bytes) / (height - 1)) return CUDA_ERROR_INVALID_VALUE;
    const uint64_t extent = uint64_t(height - 1) * pitch + row_bytes;
    if (!inside_writable(dst, extent)) return CUDA_ERROR_INVALID_VALUE;
    if (sync) {
      if (CUresult rc = capture_forbids_unsafe(r); rc != CUDA_SUCCESS) return rc;
    }
    bool captured = false;
    if (CUresult rc = capture_check(r, *ctx, *s, captured); rc != CUDA_SUCCESS) return rc;
    if (captured) {
      GraphNode node;
      node.type = CU_GRAPH_NODE_TYPE_MEMSET;
      node.memset.dst = dst;
      node.memset.pitch = pitch;
      node.memset.value = value;
      node.memset.elementSize = elem_size;
      node.memset.width = width;
      node.memset.height = height;
      node.op_ctx = ctx->handle;
      return capture_node(r, *s, std::move(node));
    }
    uint64_t start = op_start(r, *ctx, *s);
    op_finish(*s, start + memset_ns(row_bytes * height));
    start_device_work(r);
  }
  for (size_t row = 0; row < height; ++row) {
    uint64_t p = dst + row * pitch;
    switch (elem_size) {
    case 1:
      std::memset(reinterpret_cast<void*>(p), int(value & 0xff), row_bytes);
      break;
    case 2:
      std::fill_n(reinterpret_cast<uint16_t*>(p), width, uint16_t(value));
      break;
    default:
      std::fill_n(reinterpret_cast<uint32_t*>(p), width, value);
      break;
    }
  }
  done_device_work(r);
  return CUDA_SUCCESS;
}

} // namespace

CUDA_MEMCPY3D linear_copy(uint64_t dst, uint64_t src, size_t bytes) {
  CUDA_MEMCPY3D m{};
  m.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
  m.srcDevice = src;
  m.srcPitch = bytes;
  m.srcHeight = 1;
  m.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
  m.dstDevice = dst;
  m.dstPitch = bytes;
  m.dstHeight = 1;
  m.WidthInBytes = bytes;
  m.Height = 1;
  m.Depth = 1;
  return m;
}

CUresult check_copy_3d(const CUDA_MEMCPY3D& c) {
  Copy3d plan;
  return check_3d(c, plan);
}

CUresult run_copy_3d(const CUDA_MEMCPY3D& c, uint64_t& modeled_ns) {
  Registry& r = registry();
  Copy3d p;
  {
    std::lock_guard lock(r.mutex);
    // Checked again at every launch: the memory may have been freed since the node was made.
    if (CUresult rc = check_3d(c, p); rc != CUDA_SUCCESS) return rc;
    modeled_ns = copy_ns(p.kind, uint64_t(c.WidthInBytes) * c.Height * c.Depth);
    start_device_work(r);
  }
  for (size_t z = 0; z < c.Depth; ++z) {
    for (size_t y = 0; y < c.Height; ++y) {
      std::memmove(
          reinterpret_cast<void*>(p.dst.start + (uint64_t(z) * p.dst_slice_rows + y) * p.dst_pitch),
          reinterpret_cast<const void*>(p.src.start +
                                        (uint64_t(z) * p.src_slice_rows + y) * p.src_pitch),
          c.WidthInBytes);
    }
  }
  done_device_work(r);
  return CUDA_SUCCESS;
}

CUresult check_memset_2d(uint64_t dst, size_t pitch, size_t width, size_t height,
                         unsigned elem_size) {
  uint64_t bytes = 0;
  return check_memset(dst, pitch, width, height, elem_size, bytes);
}

CUresult run_memset_2d(uint64_t dst, size_t pitch, uint32_t value, size_t width, size_t height,
                       unsigned elem_size, uint64_t& modeled_ns) {
  Registry& r = registry();
  {
    std::lock_guard lock(r.mutex);
    uint64_t bytes = 0;
    if (CUresult rc = check_memset(dst, pitch, width, height, elem_size, bytes); rc != CUDA_SUCCESS)
      return rc;
    modeled_ns = memset_ns(bytes);
    start_device_work(r);
  }
  fill_rows(dst, height > 1 ? pitch : uint64_t(width) * elem_size, value, width, height, elem_size);
  done_device_work(r);
  return CUDA_SUCCESS;
}

} // namespace hone::emu

using namespace hone::emu;

namespace {

uint64_t addr(const void* p) {
  return reinterpret_cast<uint64_t>(p);
}

} // namespace

extern "C" {

// --- 2D copies, memsets and pitched allocation ---------------------------------------------------

CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pPitch, size_t WidthInBytes,
                                    size_t Height, unsigned int ElementSizeBytes) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (dptr == nullptr || pPitch == nullptr || WidthInBytes == 0 || Height == 0)
      return CUDA_ERROR_INVALID_VALUE;
    if (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16)
      return CUDA_ERROR_INVALID_VALUE;
    if (WidthInBytes > std::numeric_limits<size_t>::max() - k_pitch_alignment)
      return CUDA_ERROR_INVALID_VALUE;
    const size_t pitch = (WidthInBytes + k_pitch_alignment - 1) / k_pitch_alignment *
                         k_pitch_alignment;
    if (Height > std::numeric_limits<size_t>::max() / pitch) return CUDA_ERROR_INVALID_VALUE;
    uint64_t base = 0;
    CUresult rc = alloc(base, pitch * Height, AllocKind::device, 0);
    if (rc != CUDA_SUCCESS) return rc;
    *dptr = base;
    *pPitch = pitch;
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuMemcpy2D_v2(const CUDA_MEMCPY2D* pCopy) {
  return guarded([&] { return copy_2d(pCopy, nullptr, false, true); });
}
CUresult CUDAAPI cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D* pCopy) {
  return guarded([&] { return copy_2d(pCopy, nullptr, true, true); });
}
// Pitches need no alignment here, so the unaligned form is the same copy.
CUresult CUDAAPI cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D* pCopy) {
  return guarded([&] { return copy_2d(pCopy, nullptr, false, true); });
}
CUresult CUDAAPI cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D* pCopy) {
  return guarded([&] { return copy_2d(pCopy, nullptr, true, true); });
}
CUresult CUDAAPI cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D* pCopy, CUstream hStream) {
  return guarded([&] { return copy_2d(pCopy, hStream, false, false); });
}
CUresult CUDAAPI cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D* pCopy, CUstream hStream) {
  return guarded([&] { return copy_2d(pCopy, hStream, true, false); });
}

CUresult CUDAAPI cuMemsetD2D8_v2(CUdeviceptr dst, size_t pitch, unsigned char uc, size_t w,
                                 size_t h) {
  return guarded([&] { return memset_2d(dst, pitch, uc, w, h, 1, nullptr, false, true); });
}
CUresult CUDAAPI cuMemsetD2D8_v2_ptds(CUdeviceptr dst, size_t pitch, unsigned char uc, size_t w,
                                      size_t h) {
  return guarded([&] { return memset_2d(dst, pitch, uc, w, h, 1, nullptr, true, true); });
}
CUresult CUDAAPI cuMemsetD2D16_v2(CUdeviceptr dst, size_t pitch, unsigned short us, size_t w,
                                  size_t h) {
  return guarded([&] { return memset_2d(dst, pitch, us, w, h, 2, nullptr, false, true); });
}
CUresult CUDAAPI cuMemsetD2D16_v2_ptds(CUdeviceptr dst, size_t pitch, unsigned short us, size_t w,
                                       size_t h) {
  return guarded([&] { return memset_2d(dst, pitch, us, w, h, 2, nullptr, true, true); });
}
CUresult CUDAAPI cuMemsetD2D32_v2(CUdeviceptr dst, size_t pitch, unsigned int ui, size_t w,
                                  size_t h) {
  return guarded([&] { return memset_2d(dst, pitch, ui, w, h, 4, nullptr, false, true); });
}
CUresult CUDAAPI cuMemsetD2D32_v2_ptds(CUdeviceptr dst, size_t pitch, unsigned int ui, size_t w,
                                       size_t h) {
  return guarded([&] { return memset_2d(dst, pitch, ui, w, h, 4, nullptr, true, true); });
}
CUresult CUDAAPI cuMemsetD2D8Async(CUdeviceptr dst, size_t pitch, unsigned char uc, size_t w,
                                   size_t h, CUstream s) {
  return guarded([&] { return memset_2d(dst, pitch, uc, w, h, 1, s, false, false); });
}
CUresult CUDAAPI cuMemsetD2D8Async_ptsz(CUdeviceptr dst, size_t pitch, unsigned char uc, size_t w,
                                        size_t h, CUstream s) {
  return guarded([&] { return memset_2d(dst, pitch, uc, w, h, 1, s, true, false); });
}
CUresult CUDAAPI cuMemsetD2D16Async(CUdeviceptr dst, size_t pitch, unsigned short us, size_t w,
                                    size_t h, CUstream s) {
  return guarded([&] { return memset_2d(dst, pitch, us, w, h, 2, s, false, false); });
}
CUresult CUDAAPI cuMemsetD2D16Async_ptsz(CUdeviceptr dst, size_t pitch, unsigned short us,
                                         size_t w, size_t h, CUstream s) {
  return guarded([&] { return memset_2d(dst, pitch, us, w, h, 2, s, true, false); });
}
CUresult CUDAAPI cuMemsetD2D32Async(CUdeviceptr dst, size_t pitch, unsigned int ui, size_t w,
                                    size_t h, CUstream s) {
  return guarded([&] { return memset_2d(dst, pitch, ui, w, h, 4, s, false, false); });
}
CUresult CUDAAPI cuMemsetD2D32Async_ptsz(CUdeviceptr dst, size_t pitch, unsigned int ui, size_t w,
                                         size_t h, CUstream s) {
  return guarded([&] { return memset_2d(dst, pitch, ui, w, h, 4, s, true, false); });
}

// --- allocation --------------------------------------------------------------------------------

CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  return guarded([&] {
    if (dptr == nullptr)
      return initialized() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    uint64_t base = 0;
    CUresult rc = alloc(base, bytesize, AllocKind::device, 0);
    if (rc == CUDA_SUCCESS) *dptr = base;
    return rc;
  });
}

CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr) {
  return guarded([&] { return free_allocation(dptr, false); });
}

CUresult CUDAAPI cuMemHostAlloc(void** pp, size_t bytesize, unsigned int Flags) {
  return guarded([&] {
    if (pp == nullptr || (Flags & ~k_host_alloc_flags) != 0)
      return initialized() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    uint64_t base = 0;
    CUresult rc = alloc(base, bytesize, AllocKind::host, Flags);
    if (rc == CUDA_SUCCESS) *pp = reinterpret_cast<void*>(base);
    return rc;
  });
}

CUresult CUDAAPI cuMemAllocHost_v2(void** pp, size_t bytesize) {
  return cuMemHostAlloc(pp, bytesize, 0);
}

CUresult CUDAAPI cuMemAllocHost(void** pp, unsigned int bytesize) {
  return cuMemHostAlloc(pp, bytesize, 0);
}

CUresult CUDAAPI cuMemFreeHost(void* p) {
  return guarded([&] { return free_allocation(addr(p), true); });
}

CUresult CUDAAPI cuMemHostGetDevicePointer_v2(CUdeviceptr* pdptr, void* p, unsigned int Flags) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (pdptr == nullptr || p == nullptr || Flags != 0) return CUDA_ERROR_INVALID_VALUE;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    Context* ctx = nullptr;
    if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
    auto a = memory().find(addr(p));
    if (!a || !is_host_memory(*a)) return CUDA_ERROR_INVALID_VALUE;
    // Unified addressing: pinned and registered host memory is visible to kernels at its host
    // address.
    *pdptr = addr(p);
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuMemHostGetFlags(unsigned int* pFlags, void* p) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (pFlags == nullptr || p == nullptr) return CUDA_ERROR_INVALID_VALUE;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    Context* ctx = nullptr;
    if (CUresult rc = current_context(r, ctx); rc != CUDA_SUCCESS) return rc;
    auto a = memory().find(addr(p));
    if (!a || !is_host_memory(*a)) return CUDA_ERROR_INVALID_VALUE;
    auto it = r.host_alloc_flags.find(a->base);
    *pFlags = it != r.host_alloc_flags.end() ? it->second : 0;
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuMemGetInfo_v2(size_t* free, size_t* total) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (free == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    Context* ctx = nullptr;
    if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
    uint64_t used = memory().used_bytes();
    *total = Memory::k_total_bytes;
    *free = used < Memory::k_total_bytes ? Memory::k_total_bytes - used : 0;
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuMemGetAddressRange_v2(CUdeviceptr* pbase, size_t* psize, CUdeviceptr dptr) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    Context* ctx = nullptr;
    if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
    auto a = memory().find(dptr);
    if (!a) return CUDA_ERROR_NOT_FOUND;
    if (pbase != nullptr) *pbase = a->base;
    if (psize != nullptr) *psize = a->size;
    return CUDA_SUCCESS;
  });
}

// --- copies --------------------------------------------------------------------------------------

CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount) {
  return guarded([&] {
    return copy(dstDevice, addr(srcHost), ByteCount, D::host_to_device, nullptr, false, true);
  });
}
CUresult CUDAAPI cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void* srcHost,
                                      size_t ByteCount) {
  return guarded([&] {
    return copy(dstDevice, addr(srcHost), ByteCount, D::host_to_device, nullptr, true, true);
  });
}
CUresult CUDAAPI cuMemcpyDtoH_v2(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
  return guarded([&] {
    return copy(addr(dstHost), srcDevice, ByteCount, D::device_to_host, nullptr, false, true);
  });
}
CUresult CUDAAPI cuMemcpyDtoH_v2_ptds(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
  return guarded([&] {
    return copy(addr(dstHost), srcDevice, ByteCount, D::device_to_host, nullptr, true, true);
  });
}
CUresult CUDAAPI cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount) {
  return guarded([&] {
    return copy(dstDevice, srcDevice, ByteCount, D::device_to_device, nullptr, false, true);
  });
}
CUresult CUDAAPI cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                      size_t ByteCount) {
  return guarded([&] {
    return copy(dstDevice, srcDevice, ByteCount, D::device_to_device, nullptr, true, true);
  });
}
CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount) {
  return guarded([&] { return copy(dst, src, ByteCount, std::nullopt, nullptr, false, true); });
}
CUresult CUDAAPI cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount) {
  return guarded([&] { return copy(dst, src, ByteCount, std::nullopt, nullptr, true, true); });
}

CUresult CUDAAPI cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount,
                                      CUstream hStream) {
  return guarded([&] {
    return copy(dstDevice, addr(srcHost), ByteCount, D::host_to_device, hStream, false, false);
  });
}
CUresult CUDAAPI cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void* srcHost,
                                           size_t ByteCount, CUstream hStream) {
  return guarded([&] {
    return copy(dstDevice, addr(srcHost), ByteCount, D::host_to_device, hStream, true, false);
  });
}
CUresult CUDAAPI cuMemcpyDtoHAsync_v2(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                      CUstream hStream) {
  return guarded([&] {
    return copy(addr(dstHost), srcDevice, ByteCount, D::device_to_host, hStream, false, false);
  });
}
CUresult CUDAAPI cuMemcpyDtoHAsync_v2_ptsz(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                           CUstream hStream) {
  return guarded([&] {
    return copy(addr(dstHost), srcDevice, ByteCount, D::device_to_host, hStream, true, false);
  });
}
CUresult CUDAAPI cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                      size_t ByteCount, CUstream hStream) {
  return guarded([&] {
    return copy(dstDevice, srcDevice, ByteCount, D::device_to_device, hStream, false, false);
  });
}
CUresult CUDAAPI cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                           size_t ByteCount, CUstream hStream) {
  return guarded([&] {
    return copy(dstDevice, srcDevice, ByteCount, D::device_to_device, hStream, true, false);
  });
}
CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
                               CUstream hStream) {
  return guarded([&] { return copy(dst, src, ByteCount, std::nullopt, hStream, false, false); });
}
CUresult CUDAAPI cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
                                    CUstream hStream) {
  return guarded([&] { return copy(dst, src, ByteCount, std::nullopt, hStream, true, false); });
}

// --- memset
// ----------------------------------------------------------------------------------------

CUresult CUDAAPI cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N) {
  return guarded([&] { return memset_elements(dstDevice, uc, N, 1, nullptr, false, true); });
}
CUresult CUDAAPI cuMemsetD8_v2_ptds(CUdeviceptr dstDevice, unsigned char uc, size_t N) {
  return guarded([&] { return memset_elements(dstDevice, uc, N, 1, nullptr, true, true); });
}
CUresult CUDAAPI cuMemsetD16_v2(CUdeviceptr dstDevice, unsigned short us, size_t N) {
  return guarded([&] { return memset_elements(dstDevice, us, N, 2, nullptr, false, true); });
}
CUresult CUDAAPI cuMemsetD16_v2_ptds(CUdeviceptr dstDevice, unsigned short us, size_t N) {
  return guarded([&] { return memset_elements(dstDevice, us, N, 2, nullptr, true, true); });
}
CUresult CUDAAPI cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N) {
  return guarded([&] { return memset_elements(dstDevice, ui, N, 4, nullptr, false, true); });
}
CUresult CUDAAPI cuMemsetD32_v2_ptds(CUdeviceptr dstDevice, unsigned int ui, size_t N) {
  return guarded([&] { return memset_elements(dstDevice, ui, N, 4, nullptr, true, true); });
}
CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N,
                                 CUstream hStream) {
  return guarded([&] { return memset_elements(dstDevice, uc, N, 1, hStream, false, false); });
}
CUresult CUDAAPI cuMemsetD8Async_ptsz(CUdeviceptr dstDevice, unsigned char uc, size_t N,
                                      CUstream hStream) {
  return guarded([&] { return memset_elements(dstDevice, uc, N, 1, hStream, true, false); });
}
CUresult CUDAAPI cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N,
                                  CUstream hStream) {
  return guarded([&] { return memset_elements(dstDevice, us, N, 2, hStream, false, false); });
}
CUresult CUDAAPI cuMemsetD16Async_ptsz(CUdeviceptr dstDevice, unsigned short us, size_t N,
                                       CUstream hStream) {
  return guarded([&] { return memset_elements(dstDevice, us, N, 2, hStream, true, false); });
}
CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N,
                                  CUstream hStream) {
  return guarded([&] { return memset_elements(dstDevice, ui, N, 4, hStream, false, false); });
}
CUresult CUDAAPI cuMemsetD32Async_ptsz(CUdeviceptr dstDevice, unsigned int ui, size_t N,
                                       CUstream hStream) {
  return guarded([&] { return memset_elements(dstDevice, ui, N, 4, hStream, true, false); });
}

// --- pointer attributes
// ----------------------------------------------------------------------------

CUresult CUDAAPI cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    auto a = memory().find(ptr);
    if (!a) return CUDA_ERROR_INVALID_VALUE; // not memory the driver knows
    return pointer_attribute(r, a, ptr, enum_value(attribute), data);
  });
}

CUresult CUDAAPI cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute* attributes,
                                        void** data, CUdeviceptr ptr) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (numAttributes == 0 || attributes == nullptr || data == nullptr)
      return CUDA_ERROR_INVALID_VALUE;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    auto a = memory().find(ptr);
    for (unsigned i = 0; i < numAttributes; ++i) {
      if (data[i] == nullptr) return CUDA_ERROR_INVALID_VALUE;
      const int attribute = enum_value(attributes[i]);
      CUresult rc = pointer_attribute(r, a, ptr, attribute, data[i]);
      // Unlike cuPointerGetAttribute, an unknown pointer or a missing host mapping is not an
      // error here: the attribute gets its NULL default.
      if (rc == CUDA_ERROR_INVALID_VALUE && attribute == CU_POINTER_ATTRIBUTE_HOST_POINTER) {
        put<void*>(data[i], nullptr);
        continue;
      }
      if (rc != CUDA_SUCCESS) return rc;
    }
    return CUDA_SUCCESS;
  });
}

} // extern "C"
