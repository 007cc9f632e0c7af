// Virtual memory management on the emulated device (emu/driver_vmm.cpp, emu/memory.cpp):
// reservations at a hint address, physical allocations, mappings, access, aliasing, faults, and
// the validation worker's use of them: restoring captured buffers at their original addresses in
// another process, so that pointers stored inside the buffers stay valid.
//
// An ordinary driver-API program linked with the emulated libcuda.so.1. The cross-process scenario
// runs this binary again as probes (HONE_EMU_VMM_TEST_PROBE), since each side needs a process of
// its own.
#include <cuda.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <spawn.h>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

extern char** environ;

namespace {

constexpr const char* k_vmm_ptx = R"(
.version 8.0
.target sm_90
.address_size 64

// p[i] += 1 for i < n
.visible .entry add_one(.param .u64 p, .param .u32 n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<7>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra DONE;
    mul.wide.u32 %rd2, %r5, 4;
    add.s64 %rd3, %rd1, %rd2;
    ld.global.u32 %r6, [%rd3];
    add.s32 %r6, %r6, 1;
    st.global.u32 [%rd3], %r6;
DONE:
    ret;
}

// dst[tid] = src[tid]
.visible .entry copy_u32(.param .u64 src, .param .u64 dst)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [src];
    ld.param.u64 %rd2, [dst];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd1, %rd3;
    add.s64 %rd5, %rd2, %rd3;
    ld.global.u32 %r2, [%rd4];
    st.global.u32 [%rd5], %r2;
    ret;
}

// *p = 1
.visible .entry store_to(.param .u64 p)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [p];
    mov.u32 %r1, 1;
    st.global.u32 [%rd1], %r1;
    ret;
}

// out[tid] = ((u32*)*(u64*)a)[tid]: follows a pointer stored inside a buffer.
.visible .entry follow(.param .u64 a, .param .u64 out)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<7>;
    ld.param.u64 %rd1, [a];
    ld.param.u64 %rd2, [out];
    ld.global.u64 %rd3, [%rd1];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd4, %r1, 4;
    add.s64 %rd5, %rd3, %rd4;
    ld.global.u32 %r2, [%rd5];
    add.s64 %rd6, %rd2, %rd4;
    st.global.u32 [%rd6], %r2;
    ret;
}
)";

constexpr size_t k_gran = size_t(2) << 20;

std::string error_name(CUresult rc) {
  const char* name = nullptr;
  return cuGetErrorName(rc, &name) == CUDA_SUCCESS ? name : std::to_string(rc);
}

#define CU_OK(call) ASSERT_EQ(error_name(CUDA_SUCCESS), error_name(call))
#define EXPECT_CU(expected, call) EXPECT_EQ(error_name(expected), error_name(call))
#define ASSERT_CU(expected, call) ASSERT_EQ(error_name(expected), error_name(call))

CUmemAllocationProp device_prop() {
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = 0;
  return p;
}

CUmemAccessDesc access_desc(CUmemAccess_flags flags) {
  CUmemAccessDesc d{};
  d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  d.location.id = 0;
  d.flags = flags;
  return d;
}

CUresult set_access(CUdeviceptr p, size_t size, CUmemAccess_flags flags) {
  CUmemAccessDesc d = access_desc(flags);
  return cuMemSetAccess(p, size, &d, 1);
}

std::filesystem::path scratch_dir() {
  auto dir = std::filesystem::path(HONE_BINARY_DIR) / "tests" / "emu_vmm";
  std::filesystem::create_directories(dir);
  return dir;
}

size_t free_memory() {
  size_t free = 0, total = 0;
  EXPECT_EQ(CUDA_SUCCESS, cuMemGetInfo(&free, &total));
  return free;
}

// --- child processes -------------------------------------------------------------------------

struct ChildResult {
  int exit_code = -1;
  std::string stderr_text;
};

// Run this binary again as the probe `probe` (see k_probe_ran below).
ChildResult run_probe(const std::string& probe) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  env_strings.push_back("HONE_EMU_VMM_TEST_PROBE=" + probe);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string err_path = (scratch_dir() / ("probe_" + probe + ".stderr")).string();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  char* argv[] = {self.data(), nullptr};
  pid_t pid = 0;
  ChildResult result;
  int rc = posix_spawn(&pid, self.c_str(), &actions, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return result;
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream in(err_path);
  std::ostringstream text;
  text << in.rdbuf();
  result.stderr_text = text.str();
  return result;
}

#define PROBE_CHECK(cond)                                                                          \
  do {                                                                                             \
    if (!(cond)) return __LINE__;                                                                  \
  } while (0)

// The restore probe's exit status when a window it needs is taken in its own address space: the
// hint was not honoured, which is not a failure of the driver (the parent tries again).
constexpr int k_window_taken = 77;

std::string capture_path() {
  return (scratch_dir() / "capture.bin").string();
}

// One captured buffer: its device address and bytes.
struct Captured {
  uint64_t address = 0;
  std::vector<uint8_t> bytes;
};

// What the capture probe saw, as the shim would hand it to the worker: buffer a holds, at offset 0,
// a pointer into buffer b (b + 64); b holds b[i] = 7i + 3.
int probe_capture() {
  PROBE_CHECK(cuInit(0) == CUDA_SUCCESS);
  CUcontext ctx = nullptr;
  PROBE_CHECK(cuCtxCreate(&ctx, nullptr, 0, 0) == CUDA_SUCCESS);
  CUdeviceptr a = 0, b = 0;
  PROBE_CHECK(cuMemAlloc(&a, 256) == CUDA_SUCCESS);
  PROBE_CHECK(cuMemAlloc(&b, 4096) == CUDA_SUCCESS);
  std::vector<uint32_t> bv(1024);
  for (uint32_t i = 0; i < bv.size(); ++i) bv[i] = 7 * i + 3;
  PROBE_CHECK(cuMemcpyHtoD(b, bv.data(), 4096) == CUDA_SUCCESS);
  uint64_t inner = b + 64;
  PROBE_CHECK(cuMemsetD8(a, 0, 256) == CUDA_SUCCESS);
  PROBE_CHECK(cuMemcpyHtoD(a, &inner, 8) == CUDA_SUCCESS);
  std::ofstream out(capture_path(), std::ios::binary | std::ios::trunc);
  for (auto [p, size] : {std::pair{a, size_t(256)}, std::pair{b, size_t(4096)}}) {
    std::vector<uint8_t> bytes(size);
    PROBE_CHECK(cuMemcpyDtoH(bytes.data(), p, size) == CUDA_SUCCESS);
    uint64_t addr = p, n = size;
    out.write(reinterpret_cast<const char*>(&addr), 8);
    out.write(reinterpret_cast<const char*>(&n), 8);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(n));
  }
  PROBE_CHECK(out.good());
  return 0;
}

// The worker's side: reserve the granularity-aligned windows around the captured buffers at their
// original addresses, back them, restore the bytes, and run a kernel that follows the pointer
// stored in a.
int probe_restore() {
  std::vector<Captured> buffers;
  {
    std::ifstream in(capture_path(), std::ios::binary);
    uint64_t addr = 0, n = 0;
    while (in.read(reinterpret_cast<char*>(&addr), 8) && in.read(reinterpret_cast<char*>(&n), 8)) {
      Captured c;
      c.address = addr;
      c.bytes.resize(n);
      in.read(reinterpret_cast<char*>(c.bytes.data()), std::streamsize(n));
      buffers.push_back(std::move(c));
    }
  }
  PROBE_CHECK(buffers.size() == 2);
  PROBE_CHECK(cuInit(0) == CUDA_SUCCESS);
  CUcontext ctx = nullptr;
  PROBE_CHECK(cuCtxCreate(&ctx, nullptr, 0, 0) == CUDA_SUCCESS);
  CUmemAllocationProp prop = device_prop();
  size_t gran = 0;
  PROBE_CHECK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) ==
              CUDA_SUCCESS);
  // Windows: [start, end) rounded out to the granularity, overlapping ones merged.
  std::map<uint64_t, uint64_t> windows;
  for (const auto& c : buffers) {
    uint64_t start = c.address / gran * gran;
    uint64_t end = (c.address + c.bytes.size() + gran - 1) / gran * gran;
    auto it = windows.upper_bound(end);
    while (it != windows.begin()) {
      auto prev = std::prev(it);
      if (prev->second < start) break;
      start = std::min(start, prev->first);
      end = std::max(end, prev->second);
      windows.erase(prev);
      it = windows.upper_bound(end);
    }
    windows[start] = end;
  }
  for (auto [start, end] : windows) {
    CUdeviceptr got = 0;
    PROBE_CHECK(cuMemAddressReserve(&got, end - start, 0, start, 0) == CUDA_SUCCESS);
    if (got != start) return k_window_taken;
    CUmemGenericAllocationHandle h = 0;
    PROBE_CHECK(cuMemCreate(&h, end - start, &prop, 0) == CUDA_SUCCESS);
    PROBE_CHECK(cuMemMap(start, end - start, 0, h, 0) == CUDA_SUCCESS);
    PROBE_CHECK(cuMemRelease(h) == CUDA_SUCCESS); // the mapping keeps the memory
    PROBE_CHECK(set_access(start, end - start, CU_MEM_ACCESS_FLAGS_PROT_READWRITE) == CUDA_SUCCESS);
  }
  for (const auto& c : buffers) {
    PROBE_CHECK(cuMemcpyHtoD(c.address, c.bytes.data(), c.bytes.size()) == CUDA_SUCCESS);
  }
  CUmodule m = nullptr;
  PROBE_CHECK(cuModuleLoadData(&m, k_vmm_ptx) == CUDA_SUCCESS);
  CUfunction follow = nullptr;
  PROBE_CHECK(cuModuleGetFunction(&follow, m, "follow") == CUDA_SUCCESS);
  CUdeviceptr out = 0;
  PROBE_CHECK(cuMemAlloc(&out, 64 * 4) == CUDA_SUCCESS);
  CUdeviceptr a = buffers[0].address;
  void* args[] = {&a, &out};
  PROBE_CHECK(cuLaunchKernel(follow, 1, 1, 1, 64, 1, 1, 0, nullptr, args, nullptr) == CUDA_SUCCESS);
  PROBE_CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
  std::vector<uint32_t> got(64);
  PROBE_CHECK(cuMemcpyDtoH(got.data(), out, 64 * 4) == CUDA_SUCCESS);
  for (uint32_t t = 0; t < 64; ++t) PROBE_CHECK(got[t] == 7 * (16 + t) + 3);
  return 0;
}

// Runs before main() in a probe child: the checks, then exit with their result.
const int k_probe_ran = [] {
  const char* probe = std::getenv("HONE_EMU_VMM_TEST_PROBE");
  if (probe == nullptr) return 0;
  int rc = 99;
  if (std::strcmp(probe, "capture") == 0) rc = probe_capture();
  if (std::strcmp(probe, "restore") == 0) rc = probe_restore();
  std::fflush(stderr);
  _exit(rc);
}();

// Every test runs in a context of its own, created fresh and destroyed after.
class Vmm : public ::testing::Test {
protected:
  static void SetUpTestSuite() { ASSERT_EQ(CUDA_SUCCESS, cuInit(0)); }

  void SetUp() override {
    CU_OK(cuCtxCreate(&m_ctx, nullptr, 0, 0));
    CU_OK(cuModuleLoadData(&m_module, k_vmm_ptx));
  }

  void TearDown() override {
    if (m_ctx != nullptr) cuCtxDestroy(m_ctx);
    CUcontext c = nullptr;
    while (cuCtxPopCurrent(&c) == CUDA_SUCCESS) {
    }
  }

  CUfunction function(const char* name) {
    CUfunction f = nullptr;
    EXPECT_EQ(CUDA_SUCCESS, cuModuleGetFunction(&f, m_module, name));
    return f;
  }

  // A reservation of `size` bytes and a physical allocation of `size` mapped over it.
  struct Mapped {
    CUdeviceptr base = 0;
    CUmemGenericAllocationHandle handle = 0;
  };
  Mapped reserve_and_map(size_t size) {
    Mapped m;
    CUmemAllocationProp prop = device_prop();
    EXPECT_EQ(CUDA_SUCCESS, cuMemAddressReserve(&m.base, size, 0, 0, 0));
    EXPECT_EQ(CUDA_SUCCESS, cuMemCreate(&m.handle, size, &prop, 0));
    EXPECT_EQ(CUDA_SUCCESS, cuMemMap(m.base, size, 0, m.handle, 0));
    return m;
  }

  CUresult launch_store(CUdeviceptr p) {
    void* args[] = {&p};
    return cuLaunchKernel(function("store_to"), 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr);
  }

  CUcontext m_ctx = nullptr;
  CUmodule m_module = nullptr;
};

// ================================================================================================

TEST_F(Vmm, GranularityIsTwoMebibytesAndThePropertiesAreChecked) {
  CUmemAllocationProp prop = device_prop();
  size_t g = 0;
  CU_OK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  EXPECT_EQ(k_gran, g);
  g = 0;
  CU_OK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  EXPECT_EQ(k_gran, g);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuMemGetAllocationGranularity(&g, &prop, CUmemAllocationGranularity_flags(2)));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuMemGetAllocationGranularity(nullptr, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuMemGetAllocationGranularity(&g, nullptr, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  CUmemAllocationProp other = prop;
  other.location.id = 1;
  EXPECT_CU(CUDA_ERROR_INVALID_DEVICE,
            cuMemGetAllocationGranularity(&g, &other, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  other = prop;
  other.type = CU_MEM_ALLOCATION_TYPE_INVALID;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuMemGetAllocationGranularity(&g, &other, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  other = prop;
  other.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  CUmemGenericAllocationHandle h = 0;
  EXPECT_CU(CUDA_ERROR_NOT_SUPPORTED, cuMemCreate(&h, k_gran, &other, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemCreate(&h, k_gran / 2, &prop, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemCreate(&h, k_gran, &prop, 1));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemCreate(nullptr, k_gran, &prop, 0));

  int supported = 0;
  CU_OK(
      cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0));
  EXPECT_EQ(1, supported);
}

TEST_F(Vmm, AReservationLandsAtAFreeHintAndIsAlignedOtherwise) {
  CUdeviceptr first = 0;
  CU_OK(cuMemAddressReserve(&first, 2 * k_gran, 0, 0, 0));
  EXPECT_EQ(0u, first % k_gran) << "default alignment: the granularity";
  CU_OK(cuMemAddressFree(first, 2 * k_gran));
  // The range is free again: a hint there is honoured.
  CUdeviceptr again = 0;
  CU_OK(cuMemAddressReserve(&again, 2 * k_gran, 0, first, 0));
  EXPECT_EQ(first, again);
  // A hint inside a reservation is taken: the new one lands elsewhere, and does not overlap.
  CUdeviceptr other = 0;
  CU_OK(cuMemAddressReserve(&other, k_gran, 0, again + k_gran, 0));
  EXPECT_NE(again + k_gran, other);
  EXPECT_TRUE(other + k_gran <= again || other >= again + 2 * k_gran);
  CU_OK(cuMemAddressFree(other, k_gran));
  // A larger alignment is honoured.
  CUdeviceptr aligned = 0;
  CU_OK(cuMemAddressReserve(&aligned, k_gran, size_t(1) << 30, 0, 0));
  EXPECT_EQ(0u, aligned % (size_t(1) << 30));
  CU_OK(cuMemAddressFree(aligned, k_gran));

  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  CUdeviceptr p = 0;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemAddressReserve(&p, page + 1, 0, 0, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemAddressReserve(&p, 0, 0, 0, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemAddressReserve(&p, k_gran, 3, 0, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemAddressReserve(&p, k_gran, 0, first + 1, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemAddressReserve(&p, k_gran, 0, 0, 1));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemAddressReserve(nullptr, k_gran, 0, 0, 0));
  // Freeing takes exactly what was reserved.
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemAddressFree(again, k_gran));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemAddressFree(again + k_gran, k_gran));
  CU_OK(cuMemAddressFree(again, 2 * k_gran));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemAddressFree(again, 2 * k_gran));
}

TEST_F(Vmm, AHintOverAnAllocationLandsElsewhereAndLeavesTheAllocationAlone) {
  CUdeviceptr buffer = 0;
  CU_OK(cuMemAlloc(&buffer, 1 << 20));
  std::vector<uint8_t> pattern(1 << 20, 0x5a);
  CU_OK(cuMemcpyHtoD(buffer, pattern.data(), pattern.size()));
  // cuda.h: "when it is non-zero then the driver treats it as a hint about where to place the
  // reservation": a taken hint still reserves, elsewhere (callers compare).
  CUdeviceptr p = 0;
  CU_OK(cuMemAddressReserve(&p, k_gran, 0, buffer, 0));
  EXPECT_NE(buffer, p);
  EXPECT_TRUE(p + k_gran <= buffer || p >= buffer + (1 << 20));
  std::vector<uint8_t> back(pattern.size());
  CU_OK(cuMemcpyDtoH(back.data(), buffer, back.size()));
  EXPECT_EQ(pattern, back);
  CU_OK(cuMemAddressFree(p, k_gran));
  CU_OK(cuMemFree(buffer));
}

TEST_F(Vmm, MapGrantAccessLaunchUnmap) {
  const size_t before = free_memory();
  Mapped m = reserve_and_map(k_gran);
  EXPECT_EQ(before - k_gran, free_memory());
  // Mapped but not accessible: no allocation there yet, for copies and kernels alike.
  CUdeviceptr base = 0;
  size_t size = 0;
  EXPECT_CU(CUDA_ERROR_NOT_FOUND, cuMemGetAddressRange(&base, &size, m.base));
  std::vector<uint32_t> host(1024);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD(m.base, host.data(), 4096));
  CUmemLocation dev{};
  dev.type = CU_MEM_LOCATION_TYPE_DEVICE;
  unsigned long long flags = 99;
  CU_OK(cuMemGetAccess(&flags, &dev, m.base));
  EXPECT_EQ(unsigned(CU_MEM_ACCESS_FLAGS_PROT_NONE), flags);

  CU_OK(set_access(m.base, k_gran, CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
  CU_OK(cuMemGetAccess(&flags, &dev, m.base + 12345));
  EXPECT_EQ(unsigned(CU_MEM_ACCESS_FLAGS_PROT_READWRITE), flags);
  CU_OK(cuMemGetAddressRange(&base, &size, m.base + 100));
  EXPECT_EQ(m.base, base);
  EXPECT_EQ(k_gran, size);

  // A kernel reads and writes through the mapping.
  for (uint32_t i = 0; i < host.size(); ++i) host[i] = 10 * i;
  const CUdeviceptr data = m.base + k_gran - 4096; // the last page: the whole range is backed
  CU_OK(cuMemcpyHtoD(data, host.data(), 4096));
  unsigned n = 1024;
  CUdeviceptr arg = data;
  void* args[] = {&arg, &n};
  CU_OK(cuLaunchKernel(function("add_one"), 8, 1, 1, 128, 1, 1, 0, nullptr, args, nullptr));
  CU_OK(cuCtxSynchronize());
  std::vector<uint32_t> back(1024);
  CU_OK(cuMemcpyDtoH(back.data(), data, 4096));
  for (uint32_t i = 0; i < back.size(); ++i) ASSERT_EQ(10 * i + 1, back[i]) << i;

  // The handle behind any address of the mapping, and its properties.
  CUmemGenericAllocationHandle retained = 0;
  CU_OK(cuMemRetainAllocationHandle(&retained, reinterpret_cast<void*>(m.base + 777)));
  EXPECT_EQ(m.handle, retained);
  CU_OK(cuMemRelease(retained));
  CUmemAllocationProp prop{};
  CU_OK(cuMemGetAllocationPropertiesFromHandle(&prop, m.handle));
  EXPECT_EQ(CU_MEM_ALLOCATION_TYPE_PINNED, prop.type);
  EXPECT_EQ(CU_MEM_LOCATION_TYPE_DEVICE, prop.location.type);
  EXPECT_EQ(0, prop.location.id);

  // Released while mapped: the memory stays until the mapping goes.
  CU_OK(cuMemRelease(m.handle));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemGetAllocationPropertiesFromHandle(&prop, m.handle));
  CU_OK(cuMemcpyDtoH(back.data(), data, 4096));
  EXPECT_EQ(1u, back[0]);
  EXPECT_EQ(before - k_gran, free_memory());
  CU_OK(cuMemUnmap(m.base, k_gran));
  EXPECT_EQ(before, free_memory());
  EXPECT_CU(CUDA_ERROR_NOT_FOUND, cuMemGetAddressRange(&base, &size, m.base));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemGetAccess(&flags, &dev, m.base));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuMemRetainAllocationHandle(&retained, reinterpret_cast<void*>(m.base)));
  CU_OK(cuMemAddressFree(m.base, k_gran));
}

TEST_F(Vmm, MisuseIsInvalidValue) {
  CUmemAllocationProp prop = device_prop();
  CUdeviceptr r = 0;
  CU_OK(cuMemAddressReserve(&r, 2 * k_gran, 0, 0, 0));
  CUmemGenericAllocationHandle h = 0;
  CU_OK(cuMemCreate(&h, k_gran, &prop, 0));

  // Alignment, size, offset, flags.
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemMap(r + 4096, k_gran, 0, h, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemMap(r, k_gran / 2, 0, h, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemMap(r, k_gran, k_gran, h, 0)); // "must be zero"
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemMap(r, k_gran, 0, h, 1));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemMap(r, 2 * k_gran, 0, h, 0)); // beyond the allocation
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemMap(r, k_gran, 0, h + 1, 0)); // not a handle
  // Not reserved, or not inside one reservation.
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemMap(r + 2 * k_gran, k_gran, 0, h, 0));
  CUmemGenericAllocationHandle big = 0;
  CU_OK(cuMemCreate(&big, 2 * k_gran, &prop, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemMap(r + k_gran, 2 * k_gran, 0, big, 0));
  // Mapped twice.
  CU_OK(cuMemMap(r, k_gran, 0, h, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemMap(r, k_gran, 0, h, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemMap(r, 2 * k_gran, 0, big, 0));
  // Access: the range must be made of whole mappings; one device.
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            set_access(r, 2 * k_gran, CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            set_access(r + k_gran, k_gran, CU_MEM_ACCESS_FLAGS_PROT_READ));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, set_access(r, k_gran, CUmemAccess_flags(2)));
  CUmemAccessDesc d = access_desc(CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  d.location.id = 1;
  EXPECT_CU(CUDA_ERROR_INVALID_DEVICE, cuMemSetAccess(r, k_gran, &d, 1));
  d = access_desc(CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemSetAccess(r, k_gran, &d, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemSetAccess(r, k_gran, nullptr, 1));
  // Unmap: whole mappings only.
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemUnmap(r, k_gran / 2));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemUnmap(r + k_gran, k_gran));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemUnmap(r, 2 * k_gran));
  // A reservation with a mapping cannot be freed; a mapping is not cuMemFree's.
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemAddressFree(r, 2 * k_gran));
  CU_OK(set_access(r, k_gran, CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemFree(r));
  // A released handle is gone for new mappings.
  CU_OK(cuMemRelease(big));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemMap(r + k_gran, k_gran, 0, big, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemRelease(big));

  CU_OK(cuMemUnmap(r, k_gran));
  CU_OK(cuMemRelease(h));
  CU_OK(cuMemAddressFree(r, 2 * k_gran));
}

TEST_F(Vmm, TwoMappingsOfOneAllocationAlias) {
  CUmemAllocationProp prop = device_prop();
  CUdeviceptr r = 0;
  CU_OK(cuMemAddressReserve(&r, 2 * k_gran, 0, 0, 0));
  CUmemGenericAllocationHandle h = 0;
  CU_OK(cuMemCreate(&h, k_gran, &prop, 0));
  CU_OK(cuMemMap(r, k_gran, 0, h, 0));
  CU_OK(cuMemMap(r + k_gran, k_gran, 0, h, 0));
  // One call grants access over both mappings.
  CU_OK(set_access(r, 2 * k_gran, CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
  std::vector<uint32_t> host(256);
  for (uint32_t i = 0; i < host.size(); ++i) host[i] = i;
  CU_OK(cuMemcpyHtoD(r + k_gran, host.data(), 1024)); // written through the second
  unsigned n = 256;
  CUdeviceptr first = r;
  void* args[] = {&first, &n};
  CU_OK(cuLaunchKernel(function("add_one"), 1, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr));
  std::vector<uint32_t> back(256);
  CU_OK(cuMemcpyDtoH(back.data(), r + k_gran, 1024)); // read through the second
  for (uint32_t i = 0; i < back.size(); ++i) ASSERT_EQ(i + 1, back[i]) << i;
  CU_OK(cuMemRelease(h));
  CU_OK(cuMemUnmap(r, 2 * k_gran)); // both mappings in one call
  CU_OK(cuMemAddressFree(r, 2 * k_gran));
}

TEST_F(Vmm, ReadOnlyAccessFaultsOnWrite) {
  Mapped m = reserve_and_map(k_gran);
  CU_OK(set_access(m.base, k_gran, CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
  std::vector<uint32_t> host(32, 42);
  CU_OK(cuMemcpyHtoD(m.base, host.data(), 128));
  CU_OK(set_access(m.base, k_gran, CU_MEM_ACCESS_FLAGS_PROT_READ));
  int access = -1;
  CU_OK(cuPointerGetAttribute(&access, CU_POINTER_ATTRIBUTE_ACCESS_FLAGS, m.base));
  EXPECT_EQ(CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READ, access);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD(m.base, host.data(), 128));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemsetD32(m.base, 0, 32));
  // Kernels may read...
  CUdeviceptr out = 0;
  CU_OK(cuMemAlloc(&out, 128));
  CUdeviceptr src = m.base;
  void* args[] = {&src, &out};
  CU_OK(cuLaunchKernel(function("copy_u32"), 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr));
  std::vector<uint32_t> back(32);
  CU_OK(cuMemcpyDtoH(back.data(), out, 128));
  EXPECT_EQ(host, back);
  // ...but not write.
  CU_OK(launch_store(m.base));
  EXPECT_CU(CUDA_ERROR_ILLEGAL_ADDRESS, cuCtxSynchronize());
}

TEST_F(Vmm, AKernelBeforeAccessIsGrantedFaults) {
  Mapped m = reserve_and_map(k_gran);
  // cuda.h: "calling cuMemMap does not make the address accessible".
  CU_OK(launch_store(m.base)); // asynchronous, as on a GPU
  EXPECT_CU(CUDA_ERROR_ILLEGAL_ADDRESS, cuCtxSynchronize());
  EXPECT_CU(CUDA_ERROR_ILLEGAL_ADDRESS,
            set_access(m.base, k_gran, CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
}

TEST_F(Vmm, AKernelAfterUnmapFaults) {
  Mapped m = reserve_and_map(k_gran);
  CU_OK(set_access(m.base, k_gran, CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
  CU_OK(launch_store(m.base));
  CU_OK(cuCtxSynchronize());
  uint32_t v = 0;
  CU_OK(cuMemcpyDtoH(&v, m.base, 4));
  EXPECT_EQ(1u, v);
  CU_OK(cuMemUnmap(m.base, k_gran));
  CU_OK(launch_store(m.base));
  EXPECT_CU(CUDA_ERROR_ILLEGAL_ADDRESS, cuCtxSynchronize());
}

TEST_F(Vmm, AccessTakenAwayFaults) {
  Mapped m = reserve_and_map(k_gran);
  CU_OK(set_access(m.base, k_gran, CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
  CU_OK(set_access(m.base, k_gran, CU_MEM_ACCESS_FLAGS_PROT_NONE));
  CU_OK(launch_store(m.base));
  EXPECT_CU(CUDA_ERROR_ILLEGAL_ADDRESS, cuCtxSynchronize());
}

TEST_F(Vmm, DestroyingTheContextFreesWhatItHolds) {
  const size_t before = free_memory();
  Mapped m = reserve_and_map(2 * k_gran);
  CU_OK(set_access(m.base, 2 * k_gran, CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
  CUdeviceptr spare = 0;
  CU_OK(cuMemAddressReserve(&spare, k_gran, 0, 0, 0));
  EXPECT_EQ(before - 2 * k_gran, free_memory());
  CU_OK(cuCtxDestroy(m_ctx));
  m_ctx = nullptr;
  CU_OK(cuCtxCreate(&m_ctx, nullptr, 0, 0));
  EXPECT_EQ(before, free_memory());
  CUdeviceptr base = 0;
  size_t size = 0;
  EXPECT_CU(CUDA_ERROR_NOT_FOUND, cuMemGetAddressRange(&base, &size, m.base));
  CUmemAllocationProp prop{};
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemGetAllocationPropertiesFromHandle(&prop, m.handle));
  // Both ranges are free address space again.
  CUdeviceptr p = 0;
  CU_OK(cuMemAddressReserve(&p, 2 * k_gran, 0, m.base, 0));
  EXPECT_EQ(m.base, p);
  CUdeviceptr q = 0;
  CU_OK(cuMemAddressReserve(&q, k_gran, 0, spare, 0));
  EXPECT_EQ(spare, q);
}

// Two physical allocations mapped one after the other in one reservation, each granted access on
// its own: how llama.cpp's VMM pool grows, handing out buffers that straddle two mappings.
struct TwoMappings {
  CUdeviceptr base = 0; // the reservation: 3 granules, the third left unmapped
  CUmemGenericAllocationHandle h1 = 0, h2 = 0;
  CUdeviceptr seam() const { return base + k_gran; }
};

TwoMappings map_two(CUmemAccess_flags second = CU_MEM_ACCESS_FLAGS_PROT_READWRITE) {
  TwoMappings t;
  CUmemAllocationProp prop = device_prop();
  EXPECT_EQ(CUDA_SUCCESS, cuMemAddressReserve(&t.base, 3 * k_gran, 0, 0, 0));
  EXPECT_EQ(CUDA_SUCCESS, cuMemCreate(&t.h1, k_gran, &prop, 0));
  EXPECT_EQ(CUDA_SUCCESS, cuMemCreate(&t.h2, k_gran, &prop, 0));
  EXPECT_EQ(CUDA_SUCCESS, cuMemMap(t.base, k_gran, 0, t.h1, 0));
  EXPECT_EQ(CUDA_SUCCESS, cuMemMap(t.base + k_gran, k_gran, 0, t.h2, 0));
  EXPECT_EQ(CUDA_SUCCESS, set_access(t.base, k_gran, CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
  if (second != CU_MEM_ACCESS_FLAGS_PROT_NONE) {
    EXPECT_EQ(CUDA_SUCCESS, set_access(t.base + k_gran, k_gran, second));
  }
  return t;
}

TEST_F(Vmm, CopiesAndMemsetsSpanAdjacentMappingsOfOneReservation) {
  TwoMappings t = map_two();
  const CUdeviceptr straddle = t.seam() - 512; // 1 KiB: half in each mapping
  std::vector<uint32_t> host(256), back(256);
  for (uint32_t i = 0; i < host.size(); ++i) host[i] = 0x1000 + i;
  CU_OK(cuMemcpyHtoD(straddle, host.data(), 1024));
  CU_OK(cuMemcpyDtoH(back.data(), straddle, 1024));
  EXPECT_EQ(host, back);
  // Each half landed in its own physical allocation: read them through a mapping of each alone.
  CUdeviceptr r2 = 0;
  CU_OK(cuMemAddressReserve(&r2, k_gran, 0, 0, 0));
  CU_OK(cuMemMap(r2, k_gran, 0, t.h2, 0));
  CU_OK(set_access(r2, k_gran, CU_MEM_ACCESS_FLAGS_PROT_READ));
  uint32_t first_of_h2 = 0;
  CU_OK(cuMemcpyDtoH(&first_of_h2, r2, 4));
  EXPECT_EQ(0x1000u + 128, first_of_h2);

  // Memsets of every width, synchronous and stream-ordered.
  CUstream stream = nullptr;
  CU_OK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CU_OK(cuMemsetD32(straddle, 0x5a5a5a5a, 256));
  CU_OK(cuMemcpyDtoH(back.data(), straddle, 1024));
  EXPECT_EQ(std::vector<uint32_t>(256, 0x5a5a5a5a), back);
  CU_OK(cuMemsetD16Async(straddle, 0x1234, 512, stream));
  CU_OK(cuMemsetD8Async(straddle + 1000, 0x77, 24, stream));
  CU_OK(cuStreamSynchronize(stream));
  std::vector<uint8_t> bytes(1024);
  CU_OK(cuMemcpyDtoH(bytes.data(), straddle, 1024));
  for (size_t i = 0; i < 1024; ++i) {
    const uint8_t want = i >= 1000 ? 0x77 : (i % 2 == 0 ? 0x34 : 0x12);
    ASSERT_EQ(want, bytes[i]) << i;
  }

  // Device to device in both directions, async and unified (cuMemcpy), with a cuMemAlloc buffer.
  CUdeviceptr plain = 0;
  CU_OK(cuMemAlloc(&plain, 1024));
  CU_OK(cuMemcpyHtoD(plain, host.data(), 1024));
  CU_OK(cuMemcpyDtoDAsync(straddle, plain, 1024, stream));
  CU_OK(cuStreamSynchronize(stream));
  CU_OK(cuMemsetD32(plain, 0, 256));
  CU_OK(cuMemcpy(plain, straddle, 1024));
  CU_OK(cuMemcpyDtoH(back.data(), plain, 1024));
  EXPECT_EQ(host, back);
  CU_OK(cuMemcpyHtoDAsync(straddle, host.data(), 1024, stream));
  CU_OK(cuMemcpyDtoHAsync(back.data(), straddle, 1024, stream));
  CU_OK(cuStreamSynchronize(stream));
  EXPECT_EQ(host, back);

  // A 2D copy whose rows cross the seam.
  CUDA_MEMCPY2D c{};
  c.srcMemoryType = CU_MEMORYTYPE_HOST;
  c.srcHost = host.data();
  c.srcPitch = 64;
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.dstDevice = t.seam() - 96;
  c.dstPitch = 64;
  c.WidthInBytes = 64;
  c.Height = 3;
  CU_OK(cuMemcpy2D(&c));
  CU_OK(cuMemcpyDtoH(back.data(), t.seam() - 96, 192));
  for (uint32_t i = 0; i < 48; ++i) ASSERT_EQ(host[i], back[i]) << i;

  CU_OK(cuStreamDestroy(stream));
  CU_OK(cuMemFree(plain));
  CU_OK(cuMemUnmap(r2, k_gran));
  CU_OK(cuMemAddressFree(r2, k_gran));
}

TEST_F(Vmm, ARangeWithAGapInaccessibleOrReadOnlyPartIsStillRefused) {
  std::vector<uint32_t> host(256, 9), back(256);
  // Past the second mapping: the third granule of the reservation is not mapped.
  TwoMappings t = map_two();
  const CUdeviceptr end = t.base + 2 * k_gran;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD(end - 512, host.data(), 1024));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemsetD32(end - 512, 0, 256));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoH(back.data(), end - 512, 1024));
  // The second mapping without access.
  TwoMappings none = map_two(CU_MEM_ACCESS_FLAGS_PROT_NONE);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD(none.seam() - 512, host.data(), 1024));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoH(back.data(), none.seam() - 512, 1024));
  // Read-only: a source, never a destination.
  TwoMappings ro = map_two(CU_MEM_ACCESS_FLAGS_PROT_READ);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD(ro.seam() - 512, host.data(), 1024));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemsetD8(ro.seam() - 512, 0, 1024));
  CU_OK(cuMemcpyDtoH(back.data(), ro.seam() - 512, 1024));
  // Two reservations that touch: adjacent addresses, but not one reserved range.
  CUdeviceptr probe = 0;
  CU_OK(cuMemAddressReserve(&probe, 2 * k_gran, 0, 0, 0));
  CU_OK(cuMemAddressFree(probe, 2 * k_gran));
  CUdeviceptr a = 0, b = 0;
  CU_OK(cuMemAddressReserve(&a, k_gran, 0, probe, 0));
  CU_OK(cuMemAddressReserve(&b, k_gran, 0, probe + k_gran, 0));
  if (a == probe && b == probe + k_gran) {
    CUmemAllocationProp prop = device_prop();
    CUmemGenericAllocationHandle ha = 0, hb = 0;
    CU_OK(cuMemCreate(&ha, k_gran, &prop, 0));
    CU_OK(cuMemCreate(&hb, k_gran, &prop, 0));
    CU_OK(cuMemMap(a, k_gran, 0, ha, 0));
    CU_OK(cuMemMap(b, k_gran, 0, hb, 0));
    CU_OK(set_access(a, k_gran, CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
    CU_OK(set_access(b, k_gran, CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
    EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD(b - 512, host.data(), 1024));
    CU_OK(cuMemcpyHtoD(b - 512, host.data(), 512)); // each side alone is fine
  }
}

// One load never straddles two mappings (it is aligned to its size and mappings to 2 MiB), but a
// warp's lanes can fall in two: each lane is checked on its own, on every execution path.
TEST_F(Vmm, AWarpWhoseLanesFallInTwoMappingsRuns) {
  TwoMappings t = map_two();
  const char* saved = std::getenv("HONE_EMU_EXEC");
  const std::string restore = saved ? saved : "";
  for (const char* path : {"interpret", "compile", "reference"}) {
    SCOPED_TRACE(path);
    setenv("HONE_EMU_EXEC", path, 1); // read at every launch
    // Lanes 0-15 read the first mapping, 16-31 the second.
    const CUdeviceptr src = t.seam() - 64;
    std::vector<uint32_t> host(32);
    for (uint32_t i = 0; i < 32; ++i) host[i] = 7 * i + 1;
    CU_OK(cuMemcpyHtoD(src, host.data(), 128));
    CUdeviceptr out = 0;
    CU_OK(cuMemAlloc(&out, 128));
    void* copy_args[] = {const_cast<CUdeviceptr*>(&src), &out};
    CU_OK(cuLaunchKernel(function("copy_u32"), 1, 1, 1, 32, 1, 1, 0, nullptr, copy_args, nullptr));
    std::vector<uint32_t> back(32);
    CU_OK(cuMemcpyDtoH(back.data(), out, 128));
    EXPECT_EQ(host, back);
    // 256 threads from 512 bytes before the seam: eight warps, one of them split.
    unsigned n = 256;
    CUdeviceptr p = t.seam() - 512;
    std::vector<uint32_t> values(256);
    for (uint32_t i = 0; i < 256; ++i) values[i] = i;
    CU_OK(cuMemcpyHtoD(p, values.data(), 1024));
    void* args[] = {&p, &n};
    CU_OK(cuLaunchKernel(function("add_one"), 1, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr));
    CU_OK(cuCtxSynchronize());
    CU_OK(cuMemcpyDtoH(values.data(), p, 1024));
    for (uint32_t i = 0; i < 256; ++i) ASSERT_EQ(i + 1, values[i]) << i;
    CU_OK(cuMemFree(out));
  }
  if (saved) setenv("HONE_EMU_EXEC", restore.c_str(), 1);
  else unsetenv("HONE_EMU_EXEC");
}

TEST_F(Vmm, TheEntryPointsAreNotStubs) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(nullptr, lib);
  for (const char* name :
       {"cuMemGetAllocationGranularity", "cuMemAddressReserve", "cuMemAddressFree", "cuMemCreate",
        "cuMemRelease", "cuMemMap", "cuMemUnmap", "cuMemSetAccess", "cuMemGetAccess",
        "cuMemGetAllocationPropertiesFromHandle", "cuMemRetainAllocationHandle"}) {
    void* fn = nullptr;
    CUdriverProcAddressQueryResult status{};
    ASSERT_EQ(CUDA_SUCCESS, cuGetProcAddress(name, &fn, 13000, 0, &status)) << name;
    EXPECT_EQ(dlsym(lib, name), fn) << name;
  }
  void* fn = nullptr;
  ASSERT_EQ(CUDA_SUCCESS,
            cuGetProcAddress("cuMemGetAllocationGranularity", &fn, 13000, 0, nullptr));
  CUmemAllocationProp prop = device_prop();
  size_t g = 0;
  auto granularity = reinterpret_cast<decltype(&cuMemGetAllocationGranularity)>(fn);
  CU_OK(granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  EXPECT_EQ(k_gran, g);
}

// The validation worker's scenario: a process captures two buffers, one holding a pointer to the
// other, and exits; a fresh process restores them at their original addresses and runs a kernel
// that follows the stored pointer. The restoring process may find a window taken by its own
// mappings (address space layouts are randomized): then the hint lands elsewhere and the scenario
// is run again with new addresses.
TEST(VmmProcess, RestoreAtTheOriginalAddressesInAnotherProcess) {
  bool done = false;
  for (int attempt = 0; attempt < 8 && !done; ++attempt) {
    ChildResult capture = run_probe("capture");
    ASSERT_EQ(0, capture.exit_code)
        << "failed check at emu_vmm_test.cpp line " << capture.exit_code << "\n"
        << capture.stderr_text;
    ChildResult restore = run_probe("restore");
    if (restore.exit_code == k_window_taken) continue;
    ASSERT_EQ(0, restore.exit_code)
        << "failed check at emu_vmm_test.cpp line " << restore.exit_code << "\n"
        << restore.stderr_text;
    done = true;
  }
  EXPECT_TRUE(done) << "every attempt found its window taken";
}

} // namespace
