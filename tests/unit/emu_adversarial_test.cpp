// The emulated device survives kernels that misbehave.
//
// Each case runs a faulting kernel (out-of-bounds and misaligned accesses, an endless loop, a
// barrier no thread can pass, a trap) and checks three things: the right CUresult, reported by the launch or by the next synchronizing call; the error is sticky
// (every later call that needs the context returns it, as on a GPU after an asynchronous fault);
// and a fresh context afterwards runs a correct kernel correctly. Integer division by zero must
// neither fault nor bring the host process down. Launch-configuration errors are the opposite:
// reported at once and not sticky. And code that only looks like it hangs must finish: threads
// that exited count as arrived at a barrier, and a spin lock taken by lanes of one warp makes
// progress (sm_70+ independent thread scheduling).
//
// The kernels are CUDA C++ compiled by NVRTC at test time, or hand-written PTX where a compiler
// would refuse the code or optimize it away. Only the public driver API (cuda.h) is used.

#include "cuda/nvrtc.hpp"

#include <cuda.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace {

// The executor ends a launch with CUDA_ERROR_LAUNCH_TIMEOUT after this many thread-instructions
// (HONE_EMU_INSTRUCTION_BUDGET, read at the first launch of the process): small enough that the
// endless loops below end in well under a second, far above what the correct kernels need.
const bool k_budget_set = [] {
  return setenv("HONE_EMU_INSTRUCTION_BUDGET", "20000000", 1) == 0;
}();

std::string error_text(CUresult r) {
  const char* name = "?";
  cuGetErrorName(r, &name);
  return std::string(name) + " (" + std::to_string(int(r)) + ")";
}

// Prints CUresults by name in assertion messages.
struct Cu {
  CUresult r;
  bool operator==(const Cu& o) const { return r == o.r; }
};
void PrintTo(const Cu& c, std::ostream* os) {
  *os << error_text(c.r);
}

const char* k_cuda_source = R"(
extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

extern "C" __global__ void write_at(float* p, long long index, float v)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) p[index] = v;
}

extern "C" __global__ void read_at(const float* p, long long index, float* out)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) out[0] = p[index];
}

// Spins until *flag becomes non-zero, which nothing ever does.
extern "C" __global__ void spin_on_flag(const volatile int* flag, int* out)
{
    while (*flag == 0) {
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = 1;
}

extern "C" __global__ void shared_at(float* out, int index)
{
    extern __shared__ float dyn[];
    dyn[index] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = dyn[threadIdx.x];
}

__constant__ int k_table[4] = {1, 2, 3, 4};

extern "C" __global__ void store_int(int* p, int v)
{
    *p = v;
}

extern "C" __global__ void trap_now(int* out)
{
    out[0] = 1;
    __trap();
}

// Threads 16.. return before the barrier: exited threads count as arrived (sm_70+).
extern "C" __global__ void exit_then_sync(int* out)
{
    if (threadIdx.x >= 16) return;
    __syncthreads();
    out[threadIdx.x] = 7;
}

// Every thread takes one global spin lock in turn, lanes of one warp included. Deadlocks under
// lock-step warp execution; with independent thread scheduling (sm_70+) the holder always gets to
// release it.
extern "C" __global__ void spin_lock_count(int* lock, volatile int* counter)
{
    bool done = false;
    while (!done) {
        if (atomicCAS(lock, 0, 1) == 0) {
            *counter = *counter + 1;
            __threadfence();
            atomicExch(lock, 0);
            done = true;
        }
    }
}

// The same lock the way sm_70+ code may write it: spin until acquired, then the critical section
// after the loop. Only independent thread scheduling lets the holder, which left the loop, run
// while the other lanes of its warp still spin.
extern "C" __global__ void spin_lock_count_its(int* lock, volatile int* counter)
{
    while (atomicCAS(lock, 0, 1) != 0) {
    }
    *counter = *counter + 1;
    __threadfence();
    atomicExch(lock, 0);
}

// Division and remainder by run-time divisors: by zero, and the one overflowing quotient.
extern "C" __global__ void divide_all(const int* a, const int* d, int* out32, const long long* a64,
                                      const long long* d64, long long* out64, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out32[4 * i + 0] = a[i] / d[i];
        out32[4 * i + 1] = a[i] % d[i];
        out32[4 * i + 2] = (int)((unsigned)a[i] / (unsigned)d[i]);
        out32[4 * i + 3] = (int)((unsigned)a[i] % (unsigned)d[i]);
        out64[4 * i + 0] = a64[i] / d64[i];
        out64[4 * i + 1] = a64[i] % d64[i];
        out64[4 * i + 2] = (long long)((unsigned long long)a64[i] / (unsigned long long)d64[i]);
        out64[4 * i + 3] = (long long)((unsigned long long)a64[i] % (unsigned long long)d64[i]);
    }
}
)";

// Hand-written PTX: what no compiler would emit from source.
const char* k_ptx_source = R"(
.version 8.0
.target sm_90
.address_size 64

// Warp 0 waits at barrier 0, warp 1 at barrier 1; each barrier waits for the whole block.
.visible .entry split_barriers(.param .u64 out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<2>;
    .reg .b64 %rd<4>;
    mov.u32 %r1, %tid.x;
    setp.lt.u32 %p1, %r1, 32;
    @%p1 bra WARP0;
    bar.sync 1;
    bra.uni DONE;
WARP0:
    bar.sync 0;
DONE:
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd3, %rd2, %rd3;
    st.global.u32 [%rd3], %r1;
    ret;
}

// A barrier for 64 threads in a block of 32: it can never complete.
.visible .entry unreachable_count(.param .u64 out)
{
    .reg .b64 %rd<2>;
    bar.sync 1, 64;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    st.global.u32 [%rd1], 1;
    ret;
}

// A branch to itself.
.visible .entry self_loop()
{
LOOP:
    bra.uni LOOP;
}

// A 4-byte load from an odd address.
.visible .entry misaligned_load(.param .u64 in, .param .u64 out)
{
    .reg .f32 %f1;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [in];
    cvta.to.global.u64 %rd2, %rd1;
    ld.global.f32 %f1, [%rd2+1];
    ld.param.u64 %rd3, [out];
    cvta.to.global.u64 %rd3, %rd3;
    st.global.f32 [%rd3], %f1;
    ret;
}

// An 8-byte store to an address that is only 4-byte aligned.
.visible .entry misaligned_store(.param .u64 out)
{
    .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u64 %rd1, 42;
    st.global.u64 [%rd2+4], %rd1;
    ret;
}

// The generic address of the first __shared__ variable (offset 0 in the shared window): a GPU's
// cvta gives the window's base there, not a null pointer, and a store through it lands.
.visible .entry first_shared_generic(.param .u64 out)
{
    .shared .align 8 .b8 smem[64];
    .reg .b32 %r<3>;
    .reg .b64 %rd<3>;
    cvta.shared.u64 %rd1, smem;
    mov.u32 %r1, 77;
    st.u32 [%rd1], %r1;
    bar.sync 0;
    ld.shared.u32 %r2, [smem];
    ld.param.u64 %rd2, [out];
    st.global.u32 [%rd2], %r2;
    ret;
}

// An atomic add on a misaligned 4-byte word, through a generic address.
.visible .entry misaligned_atomic(.param .u64 out)
{
    .reg .b32 %r1;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [out];
    atom.add.u32 %r1, [%rd1+2], 1;
    ret;
}
)";

// Compiled once for the whole test binary.
const std::string& cuda_ptx() {
  static const std::string ptx = [] {
    auto out = hone::cuda::nvrtc_compile(k_cuda_source, "adversarial.cu",
                                         {"--gpu-architecture=compute_90"});
    return out ? out->ptx : std::string("NVRTC failed: ") + out.error().message;
  }();
  return ptx;
}

class EmuAdversarial : public testing::Test {
protected:
  void SetUp() override {
    ASSERT_TRUE(k_budget_set);
    ASSERT_EQ(Cu{cuInit(0)}, Cu{CUDA_SUCCESS});
    ASSERT_EQ(Cu{cuDeviceGet(&m_device, 0)}, Cu{CUDA_SUCCESS});
    ASSERT_NE(cuda_ptx().find(".entry"), std::string::npos) << cuda_ptx();
    ASSERT_NO_FATAL_FAILURE(fresh_context());
  }
  void TearDown() override {
    if (m_ctx) cuCtxDestroy(m_ctx);
  }

  // Destroy the current context (if any) and make a new one current, with both modules loaded.
  void fresh_context() {
    if (m_ctx) {
      ASSERT_EQ(Cu{cuCtxDestroy(m_ctx)}, Cu{CUDA_SUCCESS});
      m_ctx = nullptr;
      m_scratch = 0; // freed with its context
    }
    ASSERT_EQ(Cu{cuCtxCreate(&m_ctx, nullptr, 0, m_device)}, Cu{CUDA_SUCCESS});
    ASSERT_EQ(Cu{cuModuleLoadData(&m_cuda, cuda_ptx().c_str())}, Cu{CUDA_SUCCESS});
    ASSERT_EQ(Cu{cuModuleLoadData(&m_ptx, k_ptx_source)}, Cu{CUDA_SUCCESS});
    ASSERT_EQ(Cu{cuMemAlloc(&m_scratch, 256)}, Cu{CUDA_SUCCESS});
  }

  CUfunction fn(const char* name) {
    CUfunction f = nullptr;
    CUresult r = cuModuleGetFunction(&f, m_cuda, name);
    if (r != CUDA_SUCCESS) r = cuModuleGetFunction(&f, m_ptx, name);
    EXPECT_EQ(Cu{r}, Cu{CUDA_SUCCESS}) << name;
    return f;
  }

  CUdeviceptr alloc(size_t bytes) {
    CUdeviceptr p = 0;
    EXPECT_EQ(Cu{cuMemAlloc(&p, bytes)}, Cu{CUDA_SUCCESS});
    EXPECT_EQ(Cu{cuMemsetD8(p, 0, bytes)}, Cu{CUDA_SUCCESS});
    return p;
  }

  template <class... A>
  CUresult launch(const char* name, unsigned grid, unsigned block, unsigned shared, A... args) {
    void* params[] = {static_cast<void*>(&args)..., nullptr};
    return cuLaunchKernel(fn(name), grid, 1, 1, block, 1, 1, shared, nullptr, params, nullptr);
  }

  // The launch (or the synchronization after it) ended with `err`, and the context keeps
  // reporting it, whatever is asked of it next.
  void expect_fault(CUresult launched, CUresult err) {
    EXPECT_TRUE(launched == CUDA_SUCCESS || launched == err)
        << "launch returned " << error_text(launched) << ", expected success or "
        << error_text(err);
    EXPECT_EQ(Cu{cuCtxSynchronize()}, Cu{err}) << "cuCtxSynchronize after the faulting launch";
    EXPECT_EQ(Cu{cuCtxSynchronize()}, Cu{err}) << "the error is sticky";
    CUdeviceptr p = 0;
    EXPECT_EQ(Cu{cuMemAlloc(&p, 256)}, Cu{err}) << "cuMemAlloc in the faulted context";
    CUdeviceptr none = 0;
    EXPECT_EQ(Cu{launch("vector_add", 1, 32, 0, none, none, none, 0)}, Cu{err})
        << "a launch in the faulted context";
    CUstream stream = nullptr;
    EXPECT_EQ(Cu{cuStreamSynchronize(stream)}, Cu{err})
        << "cuStreamSynchronize in the faulted context";
    if (m_scratch) {
      int host = 0;
      EXPECT_EQ(Cu{cuMemcpyHtoD(m_scratch, &host, 4)}, Cu{err})
          << "cuMemcpyHtoD in the faulted context";
      EXPECT_EQ(Cu{cuMemcpyDtoH(&host, m_scratch, 4)}, Cu{err})
          << "cuMemcpyDtoH in the faulted context";
      EXPECT_EQ(Cu{cuMemsetD8(m_scratch, 0, 4)}, Cu{err}) << "cuMemsetD8 in the faulted context";
    }
    CUmodule another = nullptr;
    EXPECT_EQ(Cu{cuModuleLoadData(&another, k_ptx_source)}, Cu{err})
        << "cuModuleLoadData in the faulted context";
  }

  // A correct kernel gives correct results in the current context.
  void expect_working() {
    const int n = 1000;
    std::vector<float> a(n), b(n), c(n, -1.0f);
    for (int i = 0; i < n; ++i) {
      a[i] = float(i);
      b[i] = float(3 * i + 1);
    }
    CUdeviceptr da = alloc(n * 4), db = alloc(n * 4), dc = alloc(n * 4);
    ASSERT_EQ(Cu{cuMemcpyHtoD(da, a.data(), n * 4)}, Cu{CUDA_SUCCESS});
    ASSERT_EQ(Cu{cuMemcpyHtoD(db, b.data(), n * 4)}, Cu{CUDA_SUCCESS});
    ASSERT_EQ(Cu{launch("vector_add", (n + 127) / 128, 128, 0, da, db, dc, n)}, Cu{CUDA_SUCCESS});
    ASSERT_EQ(Cu{cuCtxSynchronize()}, Cu{CUDA_SUCCESS});
    ASSERT_EQ(Cu{cuMemcpyDtoH(c.data(), dc, n * 4)}, Cu{CUDA_SUCCESS});
    for (int i = 0; i < n; ++i) ASSERT_EQ(c[i], float(4 * i + 1)) << "c[" << i << "]";
    cuMemFree(da);
    cuMemFree(db);
    cuMemFree(dc);
  }

  // The whole story for one faulting launch: the error, its stickiness, then a fresh context.
  void expect_fault_then_recovery(CUresult launched, CUresult err) {
    expect_fault(launched, err);
    ASSERT_NO_FATAL_FAILURE(fresh_context());
    EXPECT_EQ(Cu{cuCtxSynchronize()}, Cu{CUDA_SUCCESS}) << "the new context starts clean";
    expect_working();
  }

  CUdevice m_device = 0;
  CUcontext m_ctx = nullptr;
  CUmodule m_cuda = nullptr;
  CUmodule m_ptx = nullptr;
  CUdeviceptr m_scratch = 0; // an allocation of the current context, for copies after a fault
};

TEST_F(EmuAdversarial, CorrectKernelRuns) {
  expect_working();
}

// The emulated device checks accesses against the size asked for, not the allocation granule a
// GPU maps: one element past the end is caught (a GPU would only catch it past the page).
TEST_F(EmuAdversarial, WriteJustPastTheEnd) {
  CUdeviceptr p = alloc(1000 * sizeof(float));
  expect_fault_then_recovery(launch("write_at", 1, 32, 0, p, 1000ll, 1.0f),
                             CUDA_ERROR_ILLEGAL_ADDRESS);
}

TEST_F(EmuAdversarial, WriteBeforeTheStart) {
  CUdeviceptr p = alloc(1000 * sizeof(float));
  expect_fault_then_recovery(launch("write_at", 1, 32, 0, p, -1ll, 1.0f),
                             CUDA_ERROR_ILLEGAL_ADDRESS);
}

TEST_F(EmuAdversarial, ReadJustPastTheEnd) {
  CUdeviceptr p = alloc(1000 * sizeof(float)), out = alloc(4);
  expect_fault_then_recovery(launch("read_at", 1, 32, 0, p, 1000ll, out),
                             CUDA_ERROR_ILLEGAL_ADDRESS);
}

TEST_F(EmuAdversarial, ReadFarAway) {
  CUdeviceptr p = alloc(1000 * sizeof(float)), out = alloc(4);
  expect_fault_then_recovery(launch("read_at", 1, 32, 0, p, 1ll << 28, out),
                             CUDA_ERROR_ILLEGAL_ADDRESS);
}

TEST_F(EmuAdversarial, ReadThroughNull) {
  CUdeviceptr out = alloc(4);
  expect_fault_then_recovery(launch("read_at", 1, 32, 0, CUdeviceptr(0), 0ll, out),
                             CUDA_ERROR_ILLEGAL_ADDRESS);
}

TEST_F(EmuAdversarial, WriteAfterFree) {
  CUdeviceptr p = alloc(1000 * sizeof(float));
  ASSERT_EQ(Cu{cuMemFree(p)}, Cu{CUDA_SUCCESS});
  expect_fault_then_recovery(launch("write_at", 1, 32, 0, p, 0ll, 1.0f),
                             CUDA_ERROR_ILLEGAL_ADDRESS);
}

TEST_F(EmuAdversarial, SharedMemoryPastTheEnd) {
  CUdeviceptr out = alloc(64 * 4);
  // 64 floats of dynamic shared memory; index 100000 is far outside the block's shared memory.
  expect_fault_then_recovery(launch("shared_at", 1, 64, 64 * 4, out, 100000),
                             CUDA_ERROR_ILLEGAL_ADDRESS);
}

TEST_F(EmuAdversarial, InfiniteLoopOnAFlag) {
  CUdeviceptr flag = alloc(4), out = alloc(8 * 64 * 4);
  expect_fault_then_recovery(launch("spin_on_flag", 8, 64, 0, flag, out),
                             CUDA_ERROR_LAUNCH_TIMEOUT);
}

TEST_F(EmuAdversarial, BranchToItself) {
  expect_fault_then_recovery(launch("self_loop", 1, 1, 0), CUDA_ERROR_LAUNCH_TIMEOUT);
}

// A GPU hangs until its watchdog fires; the emulated device sees that no thread can move.
TEST_F(EmuAdversarial, WarpsAtDifferentBarriers) {
  CUdeviceptr out = alloc(64 * 4);
  expect_fault_then_recovery(launch("split_barriers", 1, 64, 0, out), CUDA_ERROR_LAUNCH_TIMEOUT);
}

TEST_F(EmuAdversarial, BarrierCountNeverReached) {
  CUdeviceptr out = alloc(4);
  expect_fault_then_recovery(launch("unreachable_count", 1, 32, 0, out), CUDA_ERROR_LAUNCH_TIMEOUT);
}

// Not a fault: threads that exited count as arrived at a barrier (sm_70+).
TEST_F(EmuAdversarial, ExitedThreadsCountAsArrived) {
  CUdeviceptr out = alloc(64 * 4);
  ASSERT_EQ(Cu{launch("exit_then_sync", 1, 64, 0, out)}, Cu{CUDA_SUCCESS});
  ASSERT_EQ(Cu{cuCtxSynchronize()}, Cu{CUDA_SUCCESS});
  std::vector<int> got(64);
  ASSERT_EQ(Cu{cuMemcpyDtoH(got.data(), out, 64 * 4)}, Cu{CUDA_SUCCESS});
  for (int t = 0; t < 64; ++t) EXPECT_EQ(got[t], t < 16 ? 7 : 0) << "out[" << t << "]";
}

TEST_F(EmuAdversarial, MisalignedLoad) {
  CUdeviceptr in = alloc(64), out = alloc(4);
  expect_fault_then_recovery(launch("misaligned_load", 1, 1, 0, in, out),
                             CUDA_ERROR_MISALIGNED_ADDRESS);
}

TEST_F(EmuAdversarial, MisalignedStore) {
  CUdeviceptr out = alloc(64);
  expect_fault_then_recovery(launch("misaligned_store", 1, 1, 0, out),
                             CUDA_ERROR_MISALIGNED_ADDRESS);
}

TEST_F(EmuAdversarial, MisalignedAtomic) {
  CUdeviceptr out = alloc(64);
  expect_fault_then_recovery(launch("misaligned_atomic", 1, 1, 0, out),
                             CUDA_ERROR_MISALIGNED_ADDRESS);
}

// PTX has no st.const; a kernel can only store to the symbol's address through a global pointer
// (cuModuleGetGlobal's), which a GPU allows: the constant bank is backed by device memory. hashcat
// zeroes its __constant__ buffers that way before every attack. Not a fault here either.
TEST_F(EmuAdversarial, StoreToConstantMemoryThroughAGlobalPointer) {
  CUdeviceptr table = 0;
  size_t bytes = 0;
  ASSERT_EQ(Cu{cuModuleGetGlobal(&table, &bytes, m_cuda, "k_table")}, Cu{CUDA_SUCCESS});
  ASSERT_EQ(bytes, 16u);
  ASSERT_EQ(Cu{launch("store_int", 1, 1, 0, table + 4, 99)}, Cu{CUDA_SUCCESS});
  ASSERT_EQ(Cu{cuCtxSynchronize()}, Cu{CUDA_SUCCESS});
  int values[4] = {};
  ASSERT_EQ(Cu{cuMemcpyDtoH(values, table, sizeof values)}, Cu{CUDA_SUCCESS});
  EXPECT_EQ(values[0], 1);
  EXPECT_EQ(values[1], 99);
  EXPECT_EQ(values[2], 3);
}

TEST_F(EmuAdversarial, TheFirstSharedVariableHasANonNullGenericAddress) {
  CUdeviceptr out = alloc(4);
  ASSERT_EQ(Cu{launch("first_shared_generic", 1, 32, 0, out)}, Cu{CUDA_SUCCESS});
  ASSERT_EQ(Cu{cuCtxSynchronize()}, Cu{CUDA_SUCCESS});
  int value = 0;
  ASSERT_EQ(Cu{cuMemcpyDtoH(&value, out, 4)}, Cu{CUDA_SUCCESS});
  EXPECT_EQ(value, 77);
}

TEST_F(EmuAdversarial, Trap) {
  CUdeviceptr out = alloc(4);
  expect_fault_then_recovery(launch("trap_now", 1, 32, 0, out), CUDA_ERROR_LAUNCH_FAILED);
}

// The primary context recovers through cuDevicePrimaryCtxReset, the runtime API's
// cudaDeviceReset.
TEST_F(EmuAdversarial, PrimaryContextResetRecovers) {
  ASSERT_EQ(Cu{cuCtxDestroy(m_ctx)}, Cu{CUDA_SUCCESS});
  m_ctx = nullptr;
  m_scratch = 0;
  CUcontext primary = nullptr;
  ASSERT_EQ(Cu{cuDevicePrimaryCtxRetain(&primary, m_device)}, Cu{CUDA_SUCCESS});
  ASSERT_EQ(Cu{cuCtxSetCurrent(primary)}, Cu{CUDA_SUCCESS});
  ASSERT_EQ(Cu{cuModuleLoadData(&m_cuda, cuda_ptx().c_str())}, Cu{CUDA_SUCCESS});
  ASSERT_EQ(Cu{cuModuleLoadData(&m_ptx, k_ptx_source)}, Cu{CUDA_SUCCESS});
  CUdeviceptr p = alloc(16);
  m_scratch = p;
  expect_fault(launch("write_at", 1, 1, 0, p, 1ll << 30, 1.0f), CUDA_ERROR_ILLEGAL_ADDRESS);
  m_scratch = 0; // the reset frees it

  ASSERT_EQ(Cu{cuDevicePrimaryCtxReset(m_device)}, Cu{CUDA_SUCCESS});
  ASSERT_EQ(Cu{cuDevicePrimaryCtxRetain(&primary, m_device)}, Cu{CUDA_SUCCESS});
  ASSERT_EQ(Cu{cuCtxSetCurrent(primary)}, Cu{CUDA_SUCCESS});
  EXPECT_EQ(Cu{cuCtxSynchronize()}, Cu{CUDA_SUCCESS}) << "the reset primary context starts clean";
  ASSERT_EQ(Cu{cuModuleLoadData(&m_cuda, cuda_ptx().c_str())}, Cu{CUDA_SUCCESS});
  ASSERT_EQ(Cu{cuModuleLoadData(&m_ptx, k_ptx_source)}, Cu{CUDA_SUCCESS});
  expect_working();
  // Whether the reset also dropped the first retain is not specified; release what is held.
  EXPECT_EQ(Cu{cuDevicePrimaryCtxRelease(m_device)}, Cu{CUDA_SUCCESS});
  cuDevicePrimaryCtxRelease(m_device);
}

// Not a fault: a spin lock taken by the lanes of one warp in turn must make progress.
TEST_F(EmuAdversarial, SpinLockWithinAWarpMakesProgress) {
  CUdeviceptr lock = alloc(4), counter = alloc(4);
  ASSERT_EQ(Cu{launch("spin_lock_count", 2, 64, 0, lock, counter)}, Cu{CUDA_SUCCESS});
  ASSERT_EQ(Cu{cuCtxSynchronize()}, Cu{CUDA_SUCCESS});
  int got = 0;
  ASSERT_EQ(Cu{cuMemcpyDtoH(&got, counter, 4)}, Cu{CUDA_SUCCESS});
  EXPECT_EQ(got, 128);
}

// Independent thread scheduling (sm_70+) guarantees every thread eventually makes progress: the
// lane holding the lock runs while the other lanes of its warp spin.
TEST_F(EmuAdversarial, SpinLockLeftInTheLoopMakesProgress) {
  CUdeviceptr lock = alloc(4), counter = alloc(4);
  ASSERT_EQ(Cu{launch("spin_lock_count_its", 2, 64, 0, lock, counter)}, Cu{CUDA_SUCCESS});
  ASSERT_EQ(Cu{cuCtxSynchronize()}, Cu{CUDA_SUCCESS})
      << "the lock holder never ran while lanes of its warp spun on the lock";
  int got = 0;
  ASSERT_EQ(Cu{cuMemcpyDtoH(&got, counter, 4)}, Cu{CUDA_SUCCESS});
  EXPECT_EQ(got, 128);
}

// PTX leaves the quotient and remainder of a division by zero unspecified, and x86 traps on it
// (and on INT_MIN / -1): the executor must produce some value, not a SIGFPE.
TEST_F(EmuAdversarial, IntegerDivisionByZeroDoesNotCrash) {
  const int n = 8;
  std::vector<int> a = {7, -7, 0, INT32_MIN, INT32_MIN, 5, INT32_MAX, -1};
  std::vector<int> d = {0, 0, 0, 0, -1, 0, 0, 0};
  std::vector<long long> a64 = {7, -7, 0, INT64_MIN, INT64_MIN, 5, INT64_MAX, -1};
  std::vector<long long> d64 = {0, 0, 0, 0, -1, 0, 0, 0};
  CUdeviceptr da = alloc(n * 4), dd = alloc(n * 4), o32 = alloc(4 * n * 4);
  CUdeviceptr da64 = alloc(n * 8), dd64 = alloc(n * 8), o64 = alloc(4 * n * 8);
  ASSERT_EQ(Cu{cuMemcpyHtoD(da, a.data(), n * 4)}, Cu{CUDA_SUCCESS});
  ASSERT_EQ(Cu{cuMemcpyHtoD(dd, d.data(), n * 4)}, Cu{CUDA_SUCCESS});
  ASSERT_EQ(Cu{cuMemcpyHtoD(da64, a64.data(), n * 8)}, Cu{CUDA_SUCCESS});
  ASSERT_EQ(Cu{cuMemcpyHtoD(dd64, d64.data(), n * 8)}, Cu{CUDA_SUCCESS});
  EXPECT_EQ(Cu{launch("divide_all", 1, 32, 0, da, dd, o32, da64, dd64, o64, n)}, Cu{CUDA_SUCCESS});
  EXPECT_EQ(Cu{cuCtxSynchronize()}, Cu{CUDA_SUCCESS});
  std::vector<int> got(4 * n);
  EXPECT_EQ(Cu{cuMemcpyDtoH(got.data(), o32, 4 * n * 4)}, Cu{CUDA_SUCCESS});
  expect_working();
}

// Launch-shape errors are reported by the launch itself and leave the context usable.
TEST_F(EmuAdversarial, TooManyThreadsIsNotSticky) {
  CUdeviceptr p = 0;
  EXPECT_EQ(Cu{launch("vector_add", 1, 1025, 0, p, p, p, 0)}, Cu{CUDA_ERROR_INVALID_VALUE});
  EXPECT_EQ(Cu{cuCtxSynchronize()}, Cu{CUDA_SUCCESS});
  expect_working();
}

TEST_F(EmuAdversarial, TooMuchSharedMemoryIsNotSticky) {
  CUdeviceptr out = alloc(64 * 4);
  // 64 KiB of dynamic shared memory without cuFuncSetAttribute's opt-in (the limit is 48 KiB).
  EXPECT_EQ(Cu{launch("shared_at", 1, 64, 64 * 1024, out, 0)}, Cu{CUDA_ERROR_INVALID_VALUE});
  EXPECT_EQ(Cu{cuCtxSynchronize()}, Cu{CUDA_SUCCESS});
  expect_working();
}

// One faulting context does not affect another one that is alive at the same time.
TEST_F(EmuAdversarial, OtherContextsStayUsable) {
  CUcontext faulty = nullptr;
  ASSERT_EQ(Cu{cuCtxCreate(&faulty, nullptr, 0, m_device)}, Cu{CUDA_SUCCESS});
  CUmodule mod = nullptr;
  ASSERT_EQ(Cu{cuModuleLoadData(&mod, cuda_ptx().c_str())}, Cu{CUDA_SUCCESS});
  CUfunction write_at = nullptr;
  ASSERT_EQ(Cu{cuModuleGetFunction(&write_at, mod, "write_at")}, Cu{CUDA_SUCCESS});
  CUdeviceptr p = 0;
  long long index = 1ll << 30;
  float v = 1.0f;
  void* params[] = {&p, &index, &v};
  CUresult launched = cuLaunchKernel(write_at, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr);
  EXPECT_TRUE(launched == CUDA_SUCCESS || launched == CUDA_ERROR_ILLEGAL_ADDRESS)
      << error_text(launched);
  EXPECT_EQ(Cu{cuCtxSynchronize()}, Cu{CUDA_ERROR_ILLEGAL_ADDRESS});
  // Back to the fixture's context: untouched.
  ASSERT_EQ(Cu{cuCtxSetCurrent(m_ctx)}, Cu{CUDA_SUCCESS});
  EXPECT_EQ(Cu{cuCtxSynchronize()}, Cu{CUDA_SUCCESS});
  expect_working();
  EXPECT_EQ(Cu{cuCtxDestroy(faulty)}, Cu{CUDA_SUCCESS});
  ASSERT_EQ(Cu{cuCtxSetCurrent(m_ctx)}, Cu{CUDA_SUCCESS});
  expect_working();
}

} // namespace
