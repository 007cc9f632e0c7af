#include "shim/capture_bounds.hpp"

#include "cuda/fatbin.hpp"
#include "ptx/bounds_probe.hpp"
#include "ptx/parser.hpp"
#include "shim/real.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include <dlfcn.h>

namespace hone::shim {

namespace {

using CUctx = void*;
using GetCurrent = int (*)(CUctx*);
using LoadData = int (*)(void**, const void*);
using GetFunction = int (*)(void**, void*, const char*);
using GetGlobal = int (*)(uint64_t*, size_t*, void*, const char*);
using MemAlloc = int (*)(uint64_t*, size_t);
using MemFree = int (*)(uint64_t);
using CopyHtoD = int (*)(uint64_t, const void*, size_t, void*);
using CopyDtoH = int (*)(void*, uint64_t, size_t, void*);
using Sync = int (*)(void*);
using FuncGetAttr = int (*)(int*, int, void*);
using FuncSetAttr = int (*)(void*, int, int);
using Launch = int (*)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                       void*, void**, void**);

constexpr int k_success = 0;
constexpr int k_attr_max_dynamic_shared = 8; // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
constexpr unsigned k_default_dynamic_shared = 48 << 10;

// A kernel's probe, loaded in one context. Its mutex is held for a whole run: the table pointer
// is a module variable, so two runs at once would share it.
struct Probe {
  std::mutex mutex;
  std::string error; // non-empty: no probe (why)
  void* module = nullptr;
  void* function = nullptr;
  uint64_t table_var = 0;
};

std::mutex g_mutex;
// (kernel, context) -> its probe; never freed (a probe module lives as long as its context).
auto* g_probes = new std::map<std::pair<const KernelRecord*, CUctx>, std::unique_ptr<Probe>>();

std::string driver_error(int r) {
  using ErrorString = int (*)(int, const char**);
  const char* s = nullptr;
  if (auto f = real_as<ErrorString>(Fn::cuGetErrorString)) f(r, &s);
  return s ? std::string(s) : "error " + std::to_string(r);
}

// libzstd, loaded when a fatbin's PTX is zstd-compressed (nvcc's default): the shim links no
// zstd (cuda/CMakeLists.txt), so it takes the system's at run time, or refuses the entry.
Result<std::vector<uint8_t>> zstd_at_run_time(std::span<const uint8_t> in, uint64_t expected) {
  using Decompress = size_t (*)(void*, size_t, const void*, size_t);
  using IsError = unsigned (*)(size_t);
  static void* lib = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
  auto sym = real_dlsym();
  auto decompress = lib && sym ? reinterpret_cast<Decompress>(sym(lib, "ZSTD_decompress")) : nullptr;
  auto is_error = lib && sym ? reinterpret_cast<IsError>(sym(lib, "ZSTD_isError")) : nullptr;
  if (!decompress || !is_error) {
    return make_error("the PTX is zstd-compressed and libzstd.so.1 could not be loaded");
  }
  if (expected > cuda::k_max_uncompressed_size) return make_error("compressed PTX too large");
  std::vector<uint8_t> out(expected);
  size_t n = decompress(out.data(), out.size(), in.data(), in.size());
  if (is_error(n) || n != expected) return make_error("the compressed PTX does not decompress");
  return out;
}

// The device's SM number (90 for sm_90), for picking a fatbin's PTX as the driver would.
uint32_t device_arch() {
  using DeviceGet = int (*)(int*, int);
  using DeviceAttr = int (*)(int*, int, int);
  auto get = real_as<DeviceGet>(Fn::cuDeviceGet);
  auto attr = real_as<DeviceAttr>(Fn::cuDeviceGetAttribute);
  int dev = 0, major = 0, minor = 0;
  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75, _MINOR = 76
  if (!get || !attr || get(&dev, 0) != 0 || attr(&major, 75, dev) != 0 ||
      attr(&minor, 76, dev) != 0) {
    return 0;
  }
  return uint32_t(major * 10 + minor);
}

// The PTX of the kernel's image: the image itself, the PTX input of the JIT link that made it
// (shim/links.hpp), or the fatbin's PTX entry the driver would JIT.
Result<std::string> image_ptx(KernelRecord* r) {
  if (auto ptx = registry().entry_ptx(r->key)) return std::string(*ptx);
  proto::ImageFormat format = proto::ImageFormat::unknown;
  auto bytes = registry().image_bytes(r->key.image, &format);
  if (!bytes) {
    return make_error("the shim did not keep the kernel's image (HONE_IMAGE_CACHE_MB)");
  }
  if (format == proto::ImageFormat::ptx) return std::string(*bytes);
  if (format != proto::ImageFormat::fatbin) {
    return make_error("the kernel's image is a cubin: SASS only, no PTX to instrument");
  }
  std::span<const uint8_t> all(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size());
  auto fatbin = cuda::parse_fatbin(all);
  if (!fatbin) return make_error("its fatbin does not parse: " + fatbin.error().message);
  const uint32_t arch = device_arch();
  const cuda::FatbinEntry* entry = cuda::select_ptx(*fatbin, arch ? arch : 0xffff);
  if (!entry) return make_error("its fatbin holds no PTX for sm_" + std::to_string(arch));
  return cuda::entry_ptx(*entry, &zstd_at_run_time);
}

void build(Probe& p, KernelRecord* r) {
  auto bytes = image_ptx(r);
  if (!bytes) {
    p.error = bytes.error().message;
    return;
  }
  auto module = ptx::parse(std::string_view(*bytes), "bounds_probe");
  if (!module) {
    p.error = "its PTX does not parse: " + module.error().message;
    return;
  }
  auto text = ptx::bounds_probe(*module, r->key.entry);
  if (!text) {
    p.error = "no bounds probe: " + text.error().message;
    return;
  }
  auto load = real_as<LoadData>(Fn::cuModuleLoadData);
  auto get = real_as<GetFunction>(Fn::cuModuleGetFunction);
  auto global = real_as<GetGlobal>(Fn::cuModuleGetGlobal_v2);
  if (!load || !get || !global) {
    p.error = "the driver lacks a function the bounds probe needs";
    return;
  }
  int res = load(&p.module, text->c_str());
  if (res == k_success) res = get(&p.function, p.module, r->key.entry.c_str());
  size_t var_bytes = 0;
  if (res == k_success) {
    res = global(&p.table_var, &var_bytes, p.module,
                 std::string(ptx::k_probe_table_symbol).c_str());
  }
  if (res != k_success) p.error = "loading the bounds probe failed: " + driver_error(res);
}

} // namespace

void probes_reset_after_fork() {
  // Leaked: a mutex in the old map may be held by a thread the child does not have.
  g_probes = new std::map<std::pair<const KernelRecord*, CUctx>, std::unique_ptr<Probe>>();
}

void captured_range(const TouchedRange& t, uint64_t pointer, uint64_t* start, uint64_t* size) {
  const uint64_t end = t.base + t.size;
  uint64_t lo = t.touched() ? t.lo : std::clamp(pointer, t.base, end);
  uint64_t hi = t.touched() ? t.hi : lo;
  lo = std::max(t.base, lo / k_range_alignment * k_range_alignment);
  hi = std::min(end, (hi + k_range_alignment - 1) / k_range_alignment * k_range_alignment);
  if (hi <= lo) { // nothing touched: one aligned block where the pointer is
    hi = std::min(end, lo + k_range_alignment);
    lo = hi > lo ? lo : std::max(t.base, hi - std::min(hi, k_range_alignment));
  }
  *start = lo;
  *size = hi - lo;
}

Result<void> probe_launch(KernelRecord* r, void* function, const LaunchArgs& a,
                          std::vector<TouchedRange>& ranges) {
  auto get_current = real_as<GetCurrent>(Fn::cuCtxGetCurrent);
  auto alloc = real_as<MemAlloc>(Fn::cuMemAlloc_v2);
  auto release = real_as<MemFree>(Fn::cuMemFree_v2);
  auto to_device = real_as<CopyHtoD>(a.per_thread ? Fn::cuMemcpyHtoDAsync_v2_ptsz
                                                  : Fn::cuMemcpyHtoDAsync_v2);
  auto to_host = real_as<CopyDtoH>(a.per_thread ? Fn::cuMemcpyDtoHAsync_v2_ptsz
                                                : Fn::cuMemcpyDtoHAsync_v2);
  auto sync = real_as<Sync>(a.per_thread ? Fn::cuStreamSynchronize_ptsz : Fn::cuStreamSynchronize);
  auto launch = real_as<Launch>(a.per_thread ? Fn::cuLaunchKernel_ptsz : Fn::cuLaunchKernel);
  auto get_attr = real_as<FuncGetAttr>(Fn::cuFuncGetAttribute);
  auto set_attr = real_as<FuncSetAttr>(Fn::cuFuncSetAttribute);
  if (!get_current || !alloc || !release || !to_device || !to_host || !sync || !launch) {
    return make_error("the driver lacks a function the bounds probe needs");
  }
  CUctx ctx = nullptr;
  if (get_current(&ctx) != k_success || !ctx) return make_error("no current context");
  Probe* p;
  {
    std::lock_guard lock(g_mutex);
    auto& slot = (*g_probes)[{r, ctx}];
    if (!slot) slot = std::make_unique<Probe>();
    p = slot.get();
  }
  std::lock_guard lock(p->mutex);
  if (!p->module && p->error.empty()) build(*p, r);
  if (!p->error.empty()) return make_error(p->error);

  // The table (ptx/bounds_probe.hpp): N, then {base, end, lowest, one past highest} per range.
  std::vector<uint64_t> table(1 + 4 * ranges.size());
  table[0] = ranges.size();
  for (size_t i = 0; i < ranges.size(); ++i) {
    table[1 + 4 * i] = ranges[i].base;
    table[2 + 4 * i] = ranges[i].base + ranges[i].size;
    table[3 + 4 * i] = ~0ull;
    table[4 + 4 * i] = 0;
  }
  const size_t bytes = table.size() * 8;
  uint64_t device = 0;
  if (int res = alloc(&device, bytes); res != k_success) {
    return make_error("no device memory for the bounds probe's table: " + driver_error(res));
  }
  if (a.shared_bytes > k_default_dynamic_shared && get_attr && set_attr) {
    int max = 0;
    if (get_attr(&max, k_attr_max_dynamic_shared, function) == k_success)
      set_attr(p->function, k_attr_max_dynamic_shared, max);
  }
  // Stream-ordered before the probe; pageable sources are staged before the calls return.
  int res = to_device(device, table.data(), bytes, a.stream);
  if (res == k_success) res = to_device(p->table_var, &device, 8, a.stream);
  const char* step = "copying the table";
  if (res == k_success) {
    step = "launching the probe";
    res = launch(p->function, a.grid[0], a.grid[1], a.grid[2], a.block[0], a.block[1], a.block[2],
                 a.shared_bytes, a.stream, a.params, a.extra);
  }
  if (res == k_success) {
    step = "reading the table";
    res = to_host(table.data(), device, bytes, a.stream);
  }
  int synced = sync(a.stream);
  if (res == k_success) {
    step = "running the probe";
    res = synced;
  }
  release(device);
  if (res != k_success) return make_error(std::string(step) + " failed: " + driver_error(res));
  for (size_t i = 0; i < ranges.size(); ++i) {
    ranges[i].lo = table[3 + 4 * i];
    ranges[i].hi = table[4 + 4 * i];
  }
  return ok();
}

} // namespace hone::shim
