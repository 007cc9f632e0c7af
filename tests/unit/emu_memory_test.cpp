// What runtime-API programs need of the emulated driver's memory (emu/driver_managed.cpp,
// emu/driver_pool.cpp, the 2D copies of emu/driver_memory.cpp): managed memory and managed module
// variables, stream-ordered allocation and pools, pitched 2D copies and memsets, registered host
// memory, and cooperative launches with a grid-wide barrier. An ordinary driver-API program linked
// with the emulated libcuda.so.1.
#include <cuda.h>

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <string>
#include <vector>

namespace {

constexpr const char* k_ptx = R"(
.version 8.0
.target sm_90
.address_size 64

.global .attribute(.managed) .align 4 .u32 counter;

// p[i] = p[i] * 2 + 1 for i < n
.visible .entry twice_plus_one(.param .u64 p, .param .u32 n)
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
    mad.lo.s32 %r6, %r6, 2, 1;
    st.global.u32 [%rd3], %r6;
DONE:
    ret;
}

// counter += 1 (one thread)
.visible .entry bump()
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<2>;
    mov.u64 %rd1, counter;
    atom.global.add.u32 %r1, [%rd1], 1;
    ret;
}
)";

// A grid-wide barrier as cooperative groups compiles it (cg::this_grid().sync(), CUDA 13): the
// workspace address in %envreg1:%envreg2, an arrival counter at offset 4. Each block writes its
// slot, waits for the grid, then reads its neighbour's.
constexpr const char* k_grid_ptx = R"(
.version 8.0
.target sm_90
.address_size 64

.visible .entry rotate(.param .u64 in, .param .u64 out)
{
    .reg .pred %p<5>;
    .reg .b32 %r<26>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd9, [in];
    ld.param.u64 %rd10, [out];
    mov.u32 %r2, %envreg2;
    cvt.u64.u32 %rd4, %r2;
    mov.u32 %r3, %envreg1;
    cvt.u64.u32 %rd5, %r3;
    bfi.b64 %rd1, %rd5, %rd4, 32, 32;
    setp.ne.s64 %p1, %rd1, 0;
    @%p1 bra HAVE;
    trap;
HAVE:
    mov.u32 %r4, %ctaid.x;
    mul.wide.u32 %rd2, %r4, 4;
    add.s64 %rd3, %rd9, %rd2;
    st.global.u32 [%rd3], %r4;
    barrier.sync 0;
    mov.u32 %r11, %nctaid.x;
    mov.u32 %r5, %tid.x;
    setp.ne.s32 %p2, %r5, 0;
    @%p2 bra WAITED;
    add.s64 %rd6, %rd1, 4;
    setp.eq.s32 %p3, %r4, 0;
    mov.u32 %r21, -2147483647;
    sub.s32 %r22, %r21, %r11;
    selp.b32 %r10, %r22, 1, %p3;
    atom.add.release.gpu.u32 %r9, [%rd6], %r10;
SPIN:
    ld.acquire.gpu.u32 %r23, [%rd6];
    xor.b32 %r24, %r23, %r9;
    setp.gt.s32 %p4, %r24, -1;
    @%p4 bra SPIN;
WAITED:
    barrier.sync 0;
    add.s32 %r12, %r4, 1;
    rem.u32 %r13, %r12, %r11;
    mul.wide.u32 %rd7, %r13, 4;
    add.s64 %rd8, %rd9, %rd7;
    ld.global.u32 %r14, [%rd8];
    add.s64 %rd11, %rd10, %rd2;
    st.global.u32 [%rd11], %r14;
    ret;
}
)";

#define CU_OK(call) ASSERT_EQ(CUDA_SUCCESS, (call)) << #call
#define CU_IS(want, call) EXPECT_EQ(want, (call)) << #call

class Memory : public ::testing::Test {
protected:
  void SetUp() override {
    CU_OK(cuInit(0));
    CU_OK(cuDeviceGet(&m_dev, 0));
    CU_OK(cuDevicePrimaryCtxRetain(&m_ctx, m_dev));
    CU_OK(cuCtxSetCurrent(m_ctx));
    CU_OK(cuLibraryLoadData(&m_lib, k_ptx, nullptr, nullptr, 0, nullptr, nullptr, 0));
    CU_OK(cuLibraryGetKernel(&m_twice, m_lib, "twice_plus_one"));
    CU_OK(cuLibraryGetKernel(&m_bump, m_lib, "bump"));
  }
  void TearDown() override {
    cuDevicePrimaryCtxReset(m_dev); // clears a sticky error a test left
    cuLibraryUnload(m_lib);
  }
  // twice_plus_one over `n` words at `p`, in the current context.
  CUresult twice(CUdeviceptr p, unsigned n) {
    void* args[] = {&p, &n};
    CUresult r = cuLaunchKernel(reinterpret_cast<CUfunction>(m_twice), (n + 127) / 128, 1, 1, 128,
                                1, 1, 0, nullptr, args, nullptr);
    return r != CUDA_SUCCESS ? r : cuCtxSynchronize();
  }
  CUdevice m_dev = 0;
  CUcontext m_ctx = nullptr;
  CUlibrary m_lib = nullptr;
  CUkernel m_twice = nullptr, m_bump = nullptr;
};

TEST_F(Memory, ManagedMemoryIsOneAddressForTheHostAndKernels) {
  CUdeviceptr p = 0;
  CU_OK(cuMemAllocManaged(&p, 1000 * 4, CU_MEM_ATTACH_GLOBAL));
  auto* host = reinterpret_cast<unsigned*>(p);
  std::iota(host, host + 1000, 0u);
  CU_OK(twice(p, 1000));
  for (unsigned i = 0; i < 1000; ++i) ASSERT_EQ(host[i], 2 * i + 1) << i;

  unsigned managed = 0, type = 0;
  void* host_pointer = nullptr;
  CU_OK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p));
  EXPECT_EQ(managed & 0xff, 1u);
  CU_OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p));
  EXPECT_EQ(type, unsigned(CU_MEMORYTYPE_DEVICE));
  CU_OK(cuPointerGetAttribute(&host_pointer, CU_POINTER_ATTRIBUTE_HOST_POINTER, p + 8));
  EXPECT_EQ(host_pointer, reinterpret_cast<void*>(p + 8));
  CUdeviceptr base = 0;
  size_t size = 0;
  CU_OK(cuMemGetAddressRange(&base, &size, p + 100));
  EXPECT_EQ(base, p);
  EXPECT_EQ(size, 4000u);

  // Prefetches, advice and attachment: accepted on managed memory, refused elsewhere.
  CUmemLocation dev{CU_MEM_LOCATION_TYPE_DEVICE, 0}, cpu{CU_MEM_LOCATION_TYPE_HOST, 0};
  CU_OK(cuMemPrefetchAsync(p, 4000, dev, 0, nullptr));
  CU_OK(cuMemPrefetchAsync(p, 4000, cpu, 0, nullptr));
  CU_OK(cuMemAdvise(p, 4000, CU_MEM_ADVISE_SET_READ_MOSTLY, dev));
  CU_OK(cuMemAdvise(p, 4000, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, dev));
  CU_OK(cuStreamAttachMemAsync(nullptr, p, 0, CU_MEM_ATTACH_HOST));
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemPrefetchAsync(p, 4001, dev, 0, nullptr));
  CU_IS(CUDA_ERROR_INVALID_DEVICE,
        cuMemPrefetchAsync(p, 4000, CUmemLocation{CU_MEM_LOCATION_TYPE_DEVICE, 3}, 0, nullptr));
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuStreamAttachMemAsync(nullptr, p, 12, CU_MEM_ATTACH_HOST));
  CUdeviceptr plain = 0;
  CU_OK(cuMemAlloc(&plain, 4000));
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemPrefetchAsync(plain, 4000, dev, 0, nullptr));
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemAdvise(plain, 4000, CU_MEM_ADVISE_SET_READ_MOSTLY, dev));
  CU_OK(cuMemFree(plain));

  CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemAllocManaged(&p, 16, 7));
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemAllocManaged(&p, 0, CU_MEM_ATTACH_GLOBAL));
  CU_OK(cuMemFree(reinterpret_cast<CUdeviceptr>(host)));
  int v = 0;
  CU_OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 0));
  EXPECT_EQ(v, 1);
}

TEST_F(Memory, AManagedModuleVariableIsOneForEveryContext) {
  CUdeviceptr address = 0;
  size_t bytes = 0;
  CU_OK(cuLibraryGetManaged(&address, &bytes, m_lib, "counter"));
  EXPECT_EQ(bytes, 4u);
  auto* counter = reinterpret_cast<unsigned*>(address);
  *counter = 40; // the host writes it directly
  CU_OK(cuLaunchKernel(reinterpret_cast<CUfunction>(m_bump), 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr,
                       nullptr));
  CU_OK(cuCtxSynchronize());
  EXPECT_EQ(*counter, 41u);
  CUdeviceptr global = 0;
  CU_OK(cuLibraryGetGlobal(&global, &bytes, m_lib, "counter"));
  EXPECT_EQ(global, address);

  // A second context loads the library's module again: its kernels see the same variable.
  CUcontext other = nullptr;
  CU_OK(cuCtxCreate(&other, nullptr, 0, m_dev));
  CU_OK(cuLaunchKernel(reinterpret_cast<CUfunction>(m_bump), 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr,
                       nullptr));
  CU_OK(cuCtxSynchronize());
  EXPECT_EQ(*counter, 42u);
  CU_OK(cuLibraryGetGlobal(&global, &bytes, m_lib, "counter"));
  EXPECT_EQ(global, address);
  CU_OK(cuCtxDestroy(other));
  // The first context's module still has it, unchanged by the other context going away.
  CU_OK(cuCtxSetCurrent(m_ctx));
  CU_OK(cuLaunchKernel(reinterpret_cast<CUfunction>(m_bump), 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr,
                       nullptr));
  CU_OK(cuCtxSynchronize());
  EXPECT_EQ(*counter, 43u);
  CU_IS(CUDA_ERROR_NOT_FOUND, cuLibraryGetManaged(&address, &bytes, m_lib, "nothing"));
}

TEST_F(Memory, PoolsCountWhatTheyHandOut) {
  CUmemoryPool def = nullptr, current = nullptr;
  CU_OK(cuDeviceGetDefaultMemPool(&def, m_dev));
  CU_OK(cuDeviceGetMemPool(&current, m_dev));
  EXPECT_EQ(def, current);
  auto used = [&](CUmemoryPool p, CUmemPool_attribute a) {
    cuuint64_t v = ~0ull;
    EXPECT_EQ(CUDA_SUCCESS, cuMemPoolGetAttribute(p, a, &v));
    return v;
  };
  const cuuint64_t before = used(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT);
  CUstream s = nullptr;
  CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr a = 0, b = 0;
  CU_OK(cuMemAllocAsync(&a, 1 << 20, s));
  CU_OK(cuMemAllocAsync(&b, 3 << 20, s));
  EXPECT_EQ(used(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), before + (4 << 20));
  EXPECT_EQ(used(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), before + (4 << 20));
  CUmemoryPool owner = nullptr;
  CU_OK(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, a));
  EXPECT_EQ(owner, def);
  std::vector<unsigned> host(256, 7);
  CU_OK(cuMemcpyHtoDAsync(a, host.data(), 1024, s));
  CU_OK(cuStreamSynchronize(s));
  CU_OK(twice(a, 256));
  CU_OK(cuMemcpyDtoH(host.data(), a, 1024));
  EXPECT_EQ(host[255], 15u);
  CU_OK(cuMemFreeAsync(b, s));
  EXPECT_EQ(used(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), before + (1 << 20));
  EXPECT_EQ(used(def, CU_MEMPOOL_ATTR_USED_MEM_HIGH) >= before + (4 << 20), true);
  cuuint64_t zero = 0, one = 1;
  CU_OK(cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero));
  EXPECT_EQ(used(def, CU_MEMPOOL_ATTR_USED_MEM_HIGH), before + (1 << 20));
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &one));
  CU_IS(CUDA_ERROR_INVALID_VALUE,
        cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &zero));
  cuuint64_t threshold = 1 << 30;
  CU_OK(cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
  EXPECT_EQ(used(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), cuuint64_t(1) << 30);
  // cuMemFree may free a pool's memory; freeing it twice is an error.
  CU_OK(cuMemFree(a));
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemFreeAsync(a, s));
  EXPECT_EQ(used(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), before);

  // A pool of its own: allocations from it, the device's current pool while set, its destruction
  // waiting for its last allocation.
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  CUmemoryPool mine = nullptr;
  CU_OK(cuMemPoolCreate(&mine, &props));
  CU_OK(cuMemAllocFromPoolAsync(&a, 4096, mine, s));
  EXPECT_EQ(used(mine, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 4096u);
  CU_OK(cuDeviceSetMemPool(m_dev, mine));
  CU_OK(cuMemAllocAsync(&b, 100, s));
  EXPECT_EQ(used(mine, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 4196u);
  CU_OK(cuMemPoolDestroy(mine)); // outstanding allocations keep it, as documented
  CU_OK(cuDeviceGetMemPool(&current, m_dev));
  EXPECT_EQ(current, def);
  CU_OK(cuMemFreeAsync(a, s));
  CU_OK(cuMemFreeAsync(b, s));
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemAllocFromPoolAsync(&a, 16, mine, s));
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemPoolDestroy(def));

  // Properties the emulated device cannot give are refused.
  props.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  CU_IS(CUDA_ERROR_NOT_SUPPORTED, cuMemPoolCreate(&mine, &props));
  props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
  props.location.id = 1;
  CU_IS(CUDA_ERROR_INVALID_DEVICE, cuMemPoolCreate(&mine, &props));
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemAllocAsync(&a, 0, s));
  CU_OK(cuStreamDestroy(s));
}

TEST_F(Memory, TwoDimensionalCopiesMoveExactlyTheirRectangle) {
  CUdeviceptr d = 0;
  size_t pitch = 0;
  CU_OK(cuMemAllocPitch(&d, &pitch, 100, 20, 4));
  EXPECT_GE(pitch, 100u);
  EXPECT_EQ(pitch % 512, 0u);
  CU_OK(cuMemsetD8(d, 0xee, pitch * 20));
  // The host image: 40 rows of 160 bytes, each byte its coordinates.
  std::vector<unsigned char> image(160 * 40);
  for (size_t i = 0; i < image.size(); ++i) image[i] = static_cast<unsigned char>(i * 7 + i / 160);
  // Host (x 8, y 3) -> device (x 4, y 2): 64 bytes x 10 rows.
  CUDA_MEMCPY2D c{};
  c.srcMemoryType = CU_MEMORYTYPE_HOST;
  c.srcHost = image.data();
  c.srcPitch = 160;
  c.srcXInBytes = 8;
  c.srcY = 3;
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.dstDevice = d;
  c.dstPitch = pitch;
  c.dstXInBytes = 4;
  c.dstY = 2;
  c.WidthInBytes = 64;
  c.Height = 10;
  CU_OK(cuMemcpy2D(&c));
  std::vector<unsigned char> back(pitch * 20);
  CU_OK(cuMemcpyDtoH(back.data(), d, back.size()));
  for (size_t y = 0; y < 20; ++y) {
    for (size_t x = 0; x < pitch; ++x) {
      bool inside = y >= 2 && y < 12 && x >= 4 && x < 68;
      unsigned char want = inside ? image[(y - 2 + 3) * 160 + (x - 4 + 8)] : 0xee;
      ASSERT_EQ(back[y * pitch + x], want) << "row " << y << " byte " << x;
    }
  }
  // Device -> device within the allocation, then device -> host through unified addressing.
  CUdeviceptr e = 0;
  CU_OK(cuMemAlloc(&e, 64 * 10));
  CUDA_MEMCPY2D dd{};
  dd.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  dd.srcDevice = d;
  dd.srcPitch = pitch;
  dd.srcXInBytes = 4;
  dd.srcY = 2;
  dd.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
  dd.dstDevice = e;
  dd.dstPitch = 64;
  dd.WidthInBytes = 64;
  dd.Height = 10;
  CU_OK(cuMemcpy2DAsync(&dd, nullptr));
  std::vector<unsigned char> packed(64 * 10);
  CU_OK(cuMemcpyDtoH(packed.data(), e, packed.size()));
  for (size_t y = 0; y < 10; ++y)
    for (size_t x = 0; x < 64; ++x) ASSERT_EQ(packed[y * 64 + x], image[(y + 3) * 160 + x + 8]);

  // A 2D memset of 16-bit elements, then what it left around.
  CU_OK(cuMemsetD2D16(d + 2 * pitch, pitch, 0xabcd, 10, 3));
  CU_OK(cuMemcpyDtoH(back.data(), d, back.size()));
  for (size_t y = 2; y < 5; ++y) {
    for (size_t i = 0; i < 10; ++i) {
      uint16_t v;
      std::memcpy(&v, &back[y * pitch + 2 * i], 2);
      ASSERT_EQ(v, 0xabcd);
    }
  }
  EXPECT_EQ(back[2 * pitch + 20], image[3 * 160 + 8 + 16]);

  // Refused: rows past the allocation, a width over the pitch, an array, a bad element size.
  c.dstY = 15;
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemcpy2D(&c));
  c.dstY = 0;
  c.WidthInBytes = pitch + 1;
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemcpy2D(&c));
  c.WidthInBytes = 64;
  c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
  CU_IS(CUDA_ERROR_NOT_SUPPORTED, cuMemcpy2D(&c));
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemsetD2D32(d + 1, pitch, 0, 4, 2));
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemsetD2D8(d, pitch, 0, pitch + 1, 2));
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemsetD2D8(d, pitch, 0, 16, 21));
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemAllocPitch(&d, &pitch, 100, 20, 3));
  CU_OK(cuMemFree(e));
}

TEST_F(Memory, RegisteredHostMemoryIsTheApplicationsAndKernelsUseIt) {
  std::vector<unsigned> mine(300);
  std::iota(mine.begin(), mine.end(), 10u);
  CU_OK(cuMemHostRegister(mine.data(), mine.size() * 4, CU_MEMHOSTREGISTER_DEVICEMAP));
  CUdeviceptr d = 0;
  CU_OK(cuMemHostGetDevicePointer(&d, mine.data(), 0));
  EXPECT_EQ(d, reinterpret_cast<CUdeviceptr>(mine.data()));
  CU_OK(twice(d, 300));
  for (unsigned i = 0; i < 300; ++i) ASSERT_EQ(mine[i], 2 * (i + 10) + 1);
  unsigned flags = 0;
  CU_OK(cuMemHostGetFlags(&flags, mine.data() + 5));
  EXPECT_EQ(flags, unsigned(CU_MEMHOSTREGISTER_DEVICEMAP));
  CU_IS(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, cuMemHostRegister(mine.data() + 10, 16, 0));
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemFreeHost(mine.data())); // not the driver's to free
  CU_IS(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, cuMemHostUnregister(mine.data() + 1));
  CU_OK(cuMemHostUnregister(mine.data()));
  mine[0] = 99; // still the application's memory
  EXPECT_EQ(mine[0], 99u);
  CU_IS(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, cuMemHostUnregister(mine.data()));

  // Read-only registration: a kernel that writes it faults (sticky, as every fault).
  CU_OK(cuMemHostRegister(mine.data(), mine.size() * 4, CU_MEMHOSTREGISTER_READ_ONLY));
  CUdeviceptr p = reinterpret_cast<CUdeviceptr>(mine.data());
  unsigned n = 32;
  void* args[] = {&p, &n};
  CU_OK(cuLaunchKernel(reinterpret_cast<CUfunction>(m_twice), 1, 1, 1, 32, 1, 1, 0, nullptr, args,
                       nullptr));
  CU_IS(CUDA_ERROR_ILLEGAL_ADDRESS, cuCtxSynchronize());
  EXPECT_EQ(mine[0], 99u); // unchanged
  CU_IS(CUDA_ERROR_NOT_SUPPORTED, cuMemHostRegister(mine.data(), 64, CU_MEMHOSTREGISTER_IOMEMORY));
}

TEST_F(Memory, CooperativeLaunchesHaveAGridWideBarrier) {
  CUmodule mod = nullptr;
  CU_OK(cuModuleLoadData(&mod, k_grid_ptx));
  CUfunction rotate = nullptr;
  CU_OK(cuModuleGetFunction(&rotate, mod, "rotate"));
  const unsigned blocks = 24;
  CUdeviceptr in = 0, out = 0;
  CU_OK(cuMemAlloc(&in, blocks * 4));
  CU_OK(cuMemAlloc(&out, blocks * 4));
  void* args[] = {&in, &out};
  // More blocks than the host has threads for the ordinary launch path: only running all of them
  // at once lets the barrier open.
  CU_OK(cuLaunchCooperativeKernel(rotate, blocks, 1, 1, 64, 1, 1, 0, nullptr, args));
  CU_OK(cuCtxSynchronize());
  std::vector<unsigned> got(blocks);
  CU_OK(cuMemcpyDtoH(got.data(), out, blocks * 4));
  for (unsigned b = 0; b < blocks; ++b) EXPECT_EQ(got[b], (b + 1) % blocks) << b;
  // Launched without cooperation there is no workspace: the kernel's own check traps, as on a GPU.
  CU_OK(cuLaunchKernel(rotate, 2, 1, 1, 64, 1, 1, 0, nullptr, args, nullptr));
  CU_IS(CUDA_ERROR_LAUNCH_FAILED, cuCtxSynchronize());
  cuModuleUnload(mod);
}

} // namespace
