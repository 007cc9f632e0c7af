// The worker (daemon/worker/) driven for real: a worker process on the emulated device, spoken to
// over a socket pair exactly as honed does (Hello, HelloAck, `job` frames with the bundle in a
// sealed memfd, `verdict` frames back). The kernels are CUDA C++ compiled by NVRTC at test time;
// the captures are made in this process the way the shim makes them: buffers allocated on the
// emulated device, their allocations found with cuMemGetAddressRange and copied before the launch.
//
// Each case asserts the verdict a candidate must get — verified, not faster, mismatch, a race,
// out-of-bounds writes and reads, a hang, a compile error, different parameters, and what the
// worker does with pointers stored inside buffers, nondeterministic originals and tolerances —
// and that the worker exits with status 3 after a fault that leaves its context unusable.
#include "common/cheats.hpp"
#include "common/job.hpp"
#include "cuda/driver_api.hpp"
#include "cuda/jit_options.hpp"
#include "cuda/nvrtc.hpp"
#include "daemon/worker/bench.hpp"
#include "daemon/worker/channel.hpp"
#include "daemon/worker/compare.hpp"
#include "daemon/worker/compile.hpp"
#include "daemon/worker/worker.hpp"
#include "ptx/analysis.hpp"
#include "ptx/parser.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace hone;
using nlohmann::json;

namespace {

// The emulated device; HONE_TEST_DRIVER names another driver (tests/gpu/run.sh runs the scrub's
// test on a GPU's libcuda.so.1).
const std::string k_driver = std::getenv("HONE_TEST_DRIVER") ? std::getenv("HONE_TEST_DRIVER")
                                                               : HONE_BINARY_DIR
                                                                 "/lib/emu/libcuda.so.1";

// --- kernels ---------------------------------------------------------------------------------

// The originals, as an application would have loaded them (one module).
const char* k_originals = R"(
extern "C" __global__ void scale(float a, const float* x, float* y, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = a * x[i];
}

// The same result with redundant work the compiler must keep: four volatile loads per element.
extern "C" __global__ void scale_slow(float a, const float* x, float* y, int n)
{
    const volatile float* vx = x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float v = vx[i];
        v = vx[i];
        v = vx[i];
        v = vx[i];
        y[i] = a * v;
    }
}

// y[i] = a * x[i rotated by one warp within the block]
extern "C" __global__ void rotate(float a, const float* x, float* y, int n)
{
    int base = blockIdx.x * blockDim.x;
    int i = base + threadIdx.x;
    int j = base + (threadIdx.x + 32) % blockDim.x;
    if (i < n) y[i] = a * x[j];
}

extern "C" __global__ void atomic_sum(const float* x, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(out, x[i]);
}

extern "C" __global__ void row_sum(const float* x, float* out, int cols)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    float s = 0.0f;
    for (int j = 0; j < cols; ++j) s += x[row * cols + j];
    out[row] = s;
}

// -1 (all bits set, the poison's own value) where x is not positive.
extern "C" __global__ void sign_flags(const float* x, int* flags, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) flags[i] = x[i] > 0.0f ? 1 : -1;
}

// A latency-bound walk: each warp follows a chain of dependent loads through a table, one sector
// per load, with 64 loop-invariant salts that ptxas keeps in registers when it may (78 per thread
// for sm_90) and recomputes where they are used under a limit of 32, without spilling.
extern "C" __global__ void chase(const unsigned* table, unsigned mask, unsigned steps, unsigned* out)
{
    unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned warp = tid / 32;
    unsigned salt[64];
#pragma unroll
    for (unsigned c = 0; c < 64; ++c) salt[c] = warp ^ (c * 0x9E3779B9u);
    unsigned p = (warp * 2654435761u) & mask;
#pragma unroll 1
    for (unsigned s = 0; s < steps; ++s) {
#pragma unroll
        for (int c = 0; c < 64; ++c) p = table[(p + salt[c]) & mask];
    }
    out[tid] = p;
}

// A tree sum per block in shared memory (128 threads).
extern "C" __global__ void block_sum(const int* x, int* out, int n)
{
    __shared__ int s[128];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    s[threadIdx.x] = i < n ? x[i] : 0;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}

// Follows a pointer stored in a buffer: table[0] points into src's allocation.
extern "C" __global__ void gather(const float* const* table, const float* src, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    const volatile float* p = table[0];
    if (i < n) out[i] = 2.0f * p[i];
}

// out[i] = data[idx[i * stride]]: the launch's indices are every stride-th of idx; the others
// hold garbage.
extern "C" __global__ void strided_gather(const int* idx, const float* data, float* out, int n,
                                          int stride)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = data[idx[i * stride]];
}

// y[i] = 2 x[off + i]: a window of x at an offset the launch is given.
extern "C" __global__ void window(const float* x, float* y, int n, int off)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[off + i];
}

// scale for a programmatic dependent launch: it waits for the kernel before it in the stream
// (cudaGridDependencySynchronize) before reading x, and lets the next one start at its end.
extern "C" __global__ void scale_pdl(float a, const float* x, float* y, int n)
{
    asm volatile("griddepcontrol.wait;" ::: "memory");
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = a * x[i];
    asm volatile("griddepcontrol.launch_dependents;" :::);
}
)";

std::string compile_ptx(const std::string& source) {
  auto r = cuda::nvrtc_compile(source, "test.cu", {"--gpu-architecture=compute_90"});
  if (!r) throw std::runtime_error(r.error().message);
  return r->ptx;
}

const std::string& originals_ptx() {
  static const std::string ptx = compile_ptx(k_originals);
  return ptx;
}

// --- the emulated device in this process ------------------------------------------------------

class Emu {
public:
  static Emu& get() {
    static Emu e;
    return e;
  }
  const cuda::DriverApi& api() const { return *m_api; }
  bool vmm() const {
    int v = 0;
    return m_api->has_vmm() &&
           m_api->cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                                       0) == CUDA_SUCCESS &&
           v != 0;
  }

  CUfunction original(const std::string& entry) {
    CUfunction f = nullptr;
    check(HONE_CU(*m_api, cuModuleGetFunction, &f, m_originals, entry.c_str()));
    return f;
  }

  template <class T> uint64_t upload(const std::vector<T>& v) {
    CUdeviceptr p = 0;
    size_t bytes = v.size() * sizeof(T);
    check(HONE_CU(*m_api, cuMemAlloc, &p, bytes));
    check(HONE_CU(*m_api, cuMemcpyHtoD, p, v.data(), bytes));
    m_allocations.push_back(p);
    return p;
  }

  void free_all() {
    for (auto p : m_allocations) m_api->cuMemFree(p);
    m_allocations.clear();
  }

private:
  Emu() {
    auto api = cuda::DriverApi::open(k_driver);
    if (!api) throw std::runtime_error(api.error().message);
    m_api = *api;
    check(HONE_CU(*m_api, cuInit, 0u));
    CUcontext ctx = nullptr;
    check(HONE_CU(*m_api, cuDevicePrimaryCtxRetain, &ctx, 0));
    check(HONE_CU(*m_api, cuCtxSetCurrent, ctx));
    check(HONE_CU(*m_api, cuModuleLoadDataEx, &m_originals, originals_ptx().c_str(), 0u, nullptr,
                  nullptr));
  }
  static void check(const Result<void>& r) {
    if (!r) throw std::runtime_error(r.error().message);
  }

  std::shared_ptr<const cuda::DriverApi> m_api;
  CUmodule m_originals = nullptr;
  std::vector<CUdeviceptr> m_allocations;
};

// One launch as the application makes it.
struct Launch {
  std::array<uint32_t, 3> grid{1, 1, 1};
  std::array<uint32_t, 3> block{1, 1, 1};
  struct Arg {
    bool pointer = false;
    std::string bytes;
  };
  std::vector<Arg> args;

  Launch& ptr(uint64_t p) {
    args.push_back({true, std::string(reinterpret_cast<const char*>(&p), 8)});
    return *this;
  }
  template <class T> Launch& scalar(T v) {
    args.push_back({false, std::string(reinterpret_cast<const char*>(&v), sizeof v)});
    return *this;
  }
};

struct Captured {
  Capture capture;
  std::string data;
};

// Capture `launch` of the original `entry` as the shim does: the parameter buffer laid out as the
// driver says, and for every pointer the whole allocation it points into, copied before the launch.
Captured capture(const std::string& entry, const Launch& launch) {
  Emu& emu = Emu::get();
  const auto& api = emu.api();
  CUfunction fn = emu.original(entry);
  Captured out;
  Capture& c = out.capture;
  c.grid = launch.grid;
  c.block = launch.block;
  c.key.entry = entry;
  c.arch = "sm_90";
  c.pointers_from_analysis = true;
  for (size_t i = 0;; ++i) {
    size_t off = 0, size = 0;
    if (api.cuFuncGetParamInfo(fn, i, &off, &size) != CUDA_SUCCESS) break;
    c.params.push_back({uint32_t(off), uint32_t(size)});
  }
  EXPECT_EQ(c.params.size(), launch.args.size()) << entry;
  if (!c.params.empty()) c.param_bytes.assign(c.params.back().offset + c.params.back().size, '\0');
  std::map<uint64_t, uint64_t> before_of;
  for (size_t i = 0; i < launch.args.size() && i < c.params.size(); ++i) {
    const auto& a = launch.args[i];
    std::memcpy(c.param_bytes.data() + c.params[i].offset, a.bytes.data(),
                std::min<size_t>(a.bytes.size(), c.params[i].size));
    if (!a.pointer) continue;
    uint64_t p = 0;
    std::memcpy(&p, a.bytes.data(), 8);
    CUdeviceptr base = 0;
    size_t size = 0;
    EXPECT_EQ(api.cuMemGetAddressRange(&base, &size, p), CUDA_SUCCESS);
    auto it = before_of.find(base);
    if (it == before_of.end()) {
      uint64_t at = out.data.size();
      out.data.resize(at + size);
      EXPECT_EQ(api.cuMemcpyDtoH(out.data.data() + at, base, size), CUDA_SUCCESS);
      it = before_of.emplace(base, at).first;
    }
    c.buffers.push_back({uint32_t(i), 0, p, base, size, it->second, ~0ull});
  }
  c.data_bytes = out.data.size();
  return out;
}

Job make_job(const std::string& entry, CandidateKind kind, std::string candidate,
             std::string candidate_entry, std::vector<const Captured*> captures) {
  static uint64_t next_id = 100;
  Job j;
  j.id = next_id++;
  j.kernel.entry = entry;
  j.original_format = proto::ImageFormat::ptx;
  j.original_image = originals_ptx();
  j.original_image.push_back('\0');
  j.original_entry = entry;
  j.kind = kind;
  j.candidate = std::move(candidate);
  j.candidate_entry = std::move(candidate_entry);
  j.bench.warmup = 1;
  j.bench.runs = 5;
  for (const auto* c : captures) j.captures.push_back(c->capture);
  return j;
}

std::vector<std::string_view> data_of(const std::vector<const Captured*>& captures) {
  std::vector<std::string_view> out;
  for (const auto* c : captures) out.push_back(c->data);
  return out;
}

// --- the worker process ----------------------------------------------------------------------

class WorkerProcess {
public:
  explicit WorkerProcess(std::vector<std::pair<std::string, std::string>> env = {}) {
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
      throw std::runtime_error("socketpair");
    std::string fd_arg = std::to_string(pair[1]);
    m_pid = ::fork();
    if (m_pid == 0) {
      ::fcntl(pair[1], F_SETFD, 0); // the worker's end survives exec
      for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
      // HONE_TEST_WORKER_HOST: where the build's path is not this machine's (tests/gpu/run.sh).
      const char* host = std::getenv("HONE_TEST_WORKER_HOST") ? std::getenv("HONE_TEST_WORKER_HOST")
                                                              : HONE_WORKER_HOST;
      const char* argv[] = {host, "--fd", fd_arg.c_str(), "--driver", k_driver.c_str(), nullptr};
      ::execv(host, const_cast<char* const*>(argv));
      ::_exit(127);
    }
    ::close(pair[1]);
    m_channel = std::make_unique<worker::Channel>(pair[0]);
    auto hello = receive(std::chrono::seconds(30));
    if (!hello || hello->header.type != proto::MsgType::hello) {
      throw std::runtime_error("the worker did not say hello");
    }
    wire::Reader r(hello->payload);
    if (!proto::decode(r, m_hello)) throw std::runtime_error("the worker's hello does not decode");
    proto::HelloAck ack;
    ack.daemon_version = "test";
    (void)m_channel->send(proto::frame_of(proto::MsgType::hello_ack, hello->header.seq, ack));
  }

  ~WorkerProcess() {
    m_channel.reset();
    if (m_pid > 0 && !m_reaped) {
      if (exit_status(std::chrono::seconds(10)) == -1000) ::kill(m_pid, SIGKILL);
      ::waitpid(m_pid, nullptr, 0);
    }
  }

  const proto::Hello& hello() const { return m_hello; }

  // Send a job (the bundle in a sealed memfd) and wait for its verdict.
  Verdict run(const Job& job, const std::vector<std::string_view>& data) {
    return run_bundle(encode_bundle(job, data), job.id);
  }

  Verdict run_bundle(const std::string& bundle, uint64_t job_id) {
    int fd = ::memfd_create("hone-job", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::write(fd, bundle.data(), bundle.size()), ssize_t(bundle.size()));
    ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
    uint32_t seq = ++m_seq;
    wire::Writer w;
    w.u64(job_id);
    auto sent = m_channel->send(proto::frame(proto::MsgType::job, seq, w, proto::k_flag_fd), fd);
    ::close(fd);
    EXPECT_TRUE(sent) << (sent ? "" : sent.error().message);
    auto f = receive(std::chrono::seconds(120));
    Verdict v;
    if (!f) {
      v.message = "no verdict from the worker";
      ADD_FAILURE() << v.message;
      return v;
    }
    EXPECT_EQ(f->header.type, proto::MsgType::verdict);
    EXPECT_EQ(f->header.seq, seq);
    wire::Reader r(f->payload);
    EXPECT_TRUE(decode(r, v));
    return v;
  }

  // The worker's exit status once it has exited (within `timeout`); -1000 when it has not,
  // -signal when a signal ended it.
  int exit_status(std::chrono::seconds timeout) {
    if (m_reaped) return m_status;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      pid_t r = ::waitpid(m_pid, &status, WNOHANG);
      if (r == m_pid) {
        m_reaped = true;
        m_status = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
        return m_status;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1000;
  }

  void close() { m_channel.reset(); }

private:
  std::optional<Frame> receive(std::chrono::seconds timeout) {
    pollfd p{m_channel->fd(), POLLIN, 0};
    if (::poll(&p, 1, int(std::chrono::milliseconds(timeout).count())) <= 0) return std::nullopt;
    auto f = m_channel->receive();
    if (!f || !*f) return std::nullopt;
    return std::move(**f);
  }

  pid_t m_pid = -1;
  bool m_reaped = false;
  int m_status = 0;
  uint32_t m_seq = 0;
  std::unique_ptr<worker::Channel> m_channel;
  proto::Hello m_hello;
};

std::string describe(const Verdict& v) {
  return std::string(to_string(v.kind)) + ": " + v.message + "\nevidence: " + v.evidence_json;
}

// --- fixtures --------------------------------------------------------------------------------

std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1, float hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// One worker for the cases that leave it usable: starting one costs a driver load.
class WorkerTest : public ::testing::Test {
protected:
  static void SetUpTestSuite() { s_worker = std::make_unique<WorkerProcess>(); }
  static void TearDownTestSuite() { s_worker.reset(); }
  void TearDown() override { Emu::get().free_all(); }
  static WorkerProcess& worker() { return *s_worker; }

  // scale/scale_slow on n elements: a grid-stride loop over few blocks, so that the work, not the
  // launch overhead, dominates the modeled time.
  static Captured scale_capture(const std::string& entry, int n = 16384, uint32_t blocks = 4) {
    Emu& emu = Emu::get();
    uint64_t x = emu.upload(random_floats(size_t(n), 1));
    uint64_t y = emu.upload(std::vector<float>(size_t(n), 0.0f));
    Launch l;
    l.grid = {blocks, 1, 1};
    l.block = {128, 1, 1};
    l.scalar(1.5f).ptr(x).ptr(y).scalar(n);
    return capture(entry, l);
  }

  static inline std::unique_ptr<WorkerProcess> s_worker;
};

Verdict run_cuda(WorkerProcess& w, const std::string& entry, const Captured& cap,
                 const std::string& source, const std::string& candidate_entry,
                 Comparison comparison = Comparison::bitwise) {
  Job job = make_job(entry, CandidateKind::cuda, source, candidate_entry, {&cap});
  job.comparison = comparison;
  return w.run(job, data_of({&cap}));
}

} // namespace

// --- the analysis the worker relies on -------------------------------------------------------

TEST(WorkerAnalysis, PointerUsesRecordTheirElementTypes) {
  auto module = ptx::parse(originals_ptx(), "originals");
  ASSERT_TRUE(module) << module.error().message;
  auto infos = ptx::analyze(*module);
  auto find = [&](const std::string& name) {
    for (const auto& i : infos) {
      if (i.name == name) return i;
    }
    ADD_FAILURE() << name << " missing";
    return ptx::EntryInfo{};
  };
  auto scale = find("scale");
  ASSERT_EQ(scale.params.size(), 4u);
  ASSERT_EQ(scale.params[1].pointers.size(), 1u);
  EXPECT_EQ(scale.params[1].pointers[0].types, std::vector<ptx::Type>{ptx::Type::f32});
  EXPECT_EQ(scale.params[2].pointers[0].types, std::vector<ptx::Type>{ptx::Type::f32});
  EXPECT_EQ(worker::element_type(scale.params[2].pointers[0].types).dtype, worker::Dtype::f32);
  // The table of gather is read as 64-bit integers (pointers): compared exactly.
  auto gather = find("gather");
  ASSERT_FALSE(gather.params[0].pointers.empty());
  EXPECT_EQ(worker::element_type(gather.params[0].pointers[0].types).dtype, worker::Dtype::exact);
  EXPECT_EQ(worker::element_type({ptx::Type::f32, ptx::Type::b32}).dtype, worker::Dtype::exact);
}

// A C int is usually a .u32 in PTX: a mismatch on a negative value also reads as signed.
TEST(WorkerCompare, UnsignedElementsWithTheTopBitSetAlsoReadAsSigned) {
  using namespace hone::worker;
  auto bytes = [](std::vector<uint32_t> v) {
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
  };
  CompareSpec spec;
  spec.type = {Dtype::exact, Display::u32, 4};
  std::string want = bytes({1, 0xfffffffeu}), got = bytes({1, 0xffffffffu});
  Difference d = compare(want, got, spec);
  EXPECT_EQ(describe(d),
            "element 1: got 4294967295 (signed -1), want 4294967294 (signed -2) (1 of 2 elements "
            "differ)");
  d = compare(bytes({7}), bytes({9}), spec);
  EXPECT_EQ(describe(d), "element 0: got 9, want 7 (1 of 1 elements differ)");
}

TEST(WorkerJitOptions, NamesMapToCUjitOptions) {
  auto ok = cuda::parse_jit_options(
      {"MAX_REGISTERS=32", "OPTIMIZATION_LEVEL=3", "CU_JIT_THREADS_PER_BLOCK=128"});
  ASSERT_TRUE(ok) << ok.error().message;
  ASSERT_EQ(ok->size(), 3u);
  EXPECT_EQ((*ok)[0].option, CU_JIT_MAX_REGISTERS);
  EXPECT_EQ((*ok)[0].value, 32u);
  EXPECT_FALSE(cuda::parse_jit_options({"NO_SUCH_OPTION=1"}));
  EXPECT_FALSE(cuda::parse_jit_options({"MAX_REGISTERS=lots"}));
  EXPECT_FALSE(cuda::parse_jit_options({"ERROR_LOG_BUFFER=0"}));
}

// --- verdicts --------------------------------------------------------------------------------

TEST_F(WorkerTest, SaysHelloAsAWorkerWithTheDevice) {
  EXPECT_EQ(worker().hello().kind, proto::ClientKind::worker);
  EXPECT_EQ(worker().hello().arch, "sm_90");
  EXPECT_FALSE(worker().hello().device_name.empty());
}

TEST_F(WorkerTest, FasterCorrectCandidateIsVerified) {
  // Enough blocks to fill every SM: the original's four volatile loads per element (each one
  // performed at L2) then cost L2 bandwidth, where with a few blocks both kernels would only wait
  // out the same load latency.
  const int n = 1 << 20;
  auto cap = scale_capture("scale_slow", n, 132 * 16);
  const char* fast = R"(
extern "C" __global__ void scale_fast(float a, const float* __restrict__ x, float* __restrict__ y, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = a * x[i];
})";
  Job job = make_job("scale_slow", CandidateKind::cuda, fast, "scale_fast", {&cap});
  job.bench.suspicious = 1.2; // exercise the re-check of large speedups too
  Verdict v = worker().run(job, data_of({&cap}));
  ASSERT_EQ(v.kind, VerdictKind::verified) << describe(v);
  EXPECT_FALSE(v.worker_exits); // the worker goes on with the next job
  EXPECT_EQ(v.job, job.id);
  EXPECT_GT(v.speedup, 1.2);
  EXPECT_GT(v.original_ns, v.candidate_ns);
  EXPECT_EQ(v.captures_used, 1u);
  EXPECT_EQ(v.comparison, Comparison::bitwise);
  // The PTX NVRTC made of the source: what honed stores and shims load.
  EXPECT_NE(v.compiled_ptx.find(".entry scale_fast"), std::string::npos) << v.compiled_ptx;

  auto e = json::parse(v.evidence_json);
  EXPECT_EQ(e["runs"], 5);
  EXPECT_EQ(e["runs_max"], 5);
  EXPECT_EQ(e["stopped_early"], false);
  EXPECT_EQ(e["times_ns"]["original"].size(), 5u);
  EXPECT_EQ(e["times_ns"]["candidate"].size(), 5u);
  EXPECT_EQ(e["revalidated"], true);
  EXPECT_EQ(e["seeds"].size(), 4u);
  ASSERT_EQ(e["captures"].size(), 1u);
  auto allocs = e["captures"][0]["allocations"];
  ASSERT_EQ(allocs.size(), 2u);
  EXPECT_EQ(allocs[0]["param"], 1);
  EXPECT_EQ(allocs[0]["role"], "input");
  EXPECT_EQ(allocs[0]["poisoned_bytes"], 0);
  EXPECT_EQ(allocs[1]["param"], 2);
  EXPECT_EQ(allocs[1]["role"], "output");
  EXPECT_EQ(allocs[1]["poisoned_bytes"], n * 4);
  EXPECT_EQ(allocs[1]["dtype"], "f32");
  EXPECT_EQ(allocs[1]["compared_bytes"], n * 4);
  EXPECT_GE(allocs[1]["guard_bytes"].get<uint64_t>(), 4096u);
}

// The LLM's tools (Job::check): a compile check stops once the candidate is loaded and its
// parameters match; a validate check stops after validation. Neither is timed.
TEST_F(WorkerTest, ChecksCompileOrValidateWithoutTiming) {
  auto cap = scale_capture("scale");
  const char* right = R"(
extern "C" __global__ void hone_candidate(float a, const float* x, float* y, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = a * x[i];
})";
  const char* wrong = R"(
extern "C" __global__ void hone_candidate(float a, const float* x, float* y, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = a + x[i];
})";
  auto run = [&](const char* code, JobCheck check) {
    Job job = make_job("scale", CandidateKind::cuda, code, "hone_candidate", {&cap});
    job.check = check;
    return worker().run(job, data_of({&cap}));
  };

  Verdict compiled = run(wrong, JobCheck::compile); // compiles: its results are not looked at
  ASSERT_EQ(compiled.kind, VerdictKind::verified) << describe(compiled);
  EXPECT_NE(compiled.message.find("check: compiled and loaded; it takes the original's 4 "
                                  "parameters [0:4, 8:8, 16:8, 24:4]"),
            std::string::npos)
      << compiled.message;
  EXPECT_NE(compiled.message.find(" registers"), std::string::npos) << compiled.message;
  auto e = json::parse(compiled.evidence_json);
  EXPECT_EQ(e["check"], "compile");
  EXPECT_FALSE(e.contains("times_ns")) << compiled.evidence_json;
  EXPECT_EQ(compiled.candidate_ns, 0);

  Verdict broken = run("extern \"C\" __global__ void hone_candidate(float a) { a += ; }",
                       JobCheck::compile);
  EXPECT_EQ(broken.kind, VerdictKind::compile_error) << describe(broken);

  Verdict mismatch = run(wrong, JobCheck::validate);
  EXPECT_EQ(mismatch.kind, VerdictKind::mismatch) << describe(mismatch);

  Verdict correct = run(right, JobCheck::validate);
  ASSERT_EQ(correct.kind, VerdictKind::verified) << describe(correct);
  EXPECT_EQ(correct.message, "check: correct on 1 capture (bitwise); not timed");
  e = json::parse(correct.evidence_json);
  EXPECT_EQ(e["check"], "validate");
  EXPECT_FALSE(e.contains("times_ns")) << correct.evidence_json;
  EXPECT_FALSE(e.contains("profile")) << correct.evidence_json;
}

TEST_F(WorkerTest, IdenticalReJitIsNotFaster) {
  auto cap = scale_capture("scale");
  Job job = make_job("scale", CandidateKind::ptx, originals_ptx(), "scale", {&cap});
  job.jit_options = {"OPTIMIZATION_LEVEL=4"};
  Verdict v = worker().run(job, data_of({&cap}));
  ASSERT_EQ(v.kind, VerdictKind::not_faster) << describe(v);
  EXPECT_DOUBLE_EQ(v.speedup, 1.0);
  EXPECT_NE(v.message.find("1.00x"), std::string::npos) << v.message;
}

// On a latency-bound kernel, a register limit that raises occupancy is faster: the emulated
// device's occupancy follows the registers ptxas allocates under the JIT option, as a GPU's does.
TEST_F(WorkerTest, RegisterLimitOnALatencyBoundKernelIsVerifiedFaster) {
  Emu& emu = Emu::get();
  std::vector<uint32_t> words(1 << 20);
  uint64_t state = 7;
  for (auto& w : words) w = uint32_t((state = state * 6364136223846793005ull + 1) >> 33);
  uint64_t table = emu.upload(words);
  // 78 registers: 6 blocks of 128 per SM, two waves; at 32 registers 16 blocks fit, one wave.
  const uint32_t blocks = 132 * 7, threads = 128;
  uint64_t out = emu.upload(std::vector<uint32_t>(size_t(blocks) * threads, 0));
  Launch l;
  l.grid = {blocks, 1, 1};
  l.block = {threads, 1, 1};
  l.ptr(table).scalar(uint32_t(words.size() - 1)).scalar(1u).ptr(out);
  auto cap = capture("chase", l);
  Job job = make_job("chase", CandidateKind::ptx, originals_ptx(), "chase", {&cap});
  job.jit_options = {"MAX_REGISTERS=32"};
  Verdict v = worker().run(job, data_of({&cap}));
  ASSERT_EQ(v.kind, VerdictKind::verified) << describe(v);
  EXPECT_GT(v.speedup, 1.5) << describe(v);

  // The verdict says why: what the cost model found bounds each kernel, and their occupancy.
  auto p = json::parse(v.evidence_json)["profile"];
  ASSERT_TRUE(p.is_object()) << v.evidence_json;
  EXPECT_EQ(p["source"], "emulated device cost model");
  EXPECT_EQ(p["buffer_bytes"], words.size() * 4 + size_t(blocks) * threads * 4);
  const auto& o = p["original"];
  const auto& c = p["candidate"];
  EXPECT_EQ(o["bound"], "latency") << p;
  EXPECT_EQ(o["occupancy_limit"], "registers") << p;
  EXPECT_GT(o["registers"].get<int>(), 32) << p;
  EXPECT_LE(c["registers"].get<int>(), 32) << p;
  EXPECT_EQ(o["waves"], 2) << p;
  EXPECT_EQ(c["waves"], 1) << p;
  EXPECT_GT(c["warps_per_sm"].get<int>(), o["warps_per_sm"].get<int>()) << p;
  EXPECT_EQ(o["warps_per_sm"], 6 * 4) << p; // 6 blocks of 4 warps
  EXPECT_EQ(o["max_warps_per_sm"], 64) << p;
  EXPECT_EQ(o["ns"].get<double>(), std::round(v.original_ns)) << p;
  EXPECT_GT(o["terms_ns"]["latency"].get<uint64_t>(), o["terms_ns"]["DRAM"].get<uint64_t>()) << p;
  EXPECT_GT(o["dram_bytes"].get<uint64_t>(), 0u) << p;
  EXPECT_GT(o["dram_bytes_per_s_peak"].get<double>(), 4e12) << p;
}

TEST_F(WorkerTest, WrongResultIsAMismatchNamingBufferIndexAndValues) {
  auto cap = scale_capture("scale");
  const char* wrong = R"(
extern "C" __global__ void scale_wrong(float a, const float* x, float* y, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = i == 100 ? 0.25f : a * x[i];
})";
  Verdict v = run_cuda(worker(), "scale", cap, wrong, "scale_wrong");
  ASSERT_EQ(v.kind, VerdictKind::mismatch) << describe(v);
  EXPECT_NE(v.message.find("parameter 2"), std::string::npos) << v.message;
  EXPECT_NE(v.message.find("element 100"), std::string::npos) << v.message;
  EXPECT_NE(v.message.find("got 0.25"), std::string::npos) << v.message;
  EXPECT_NE(v.message.find("want "), std::string::npos) << v.message;
  EXPECT_NE(v.message.find("(1 of 16384 elements differ)"), std::string::npos) << v.message;
}

// The original's runs on a capture do not depend on the candidate: a worker runs them for the
// first candidate of a kernel and reuses them for the next on the same capture (the evidence names
// the job that ran them), which is still checked in full against them. Another capture, or another
// original, gets runs of its own.
TEST_F(WorkerTest, OriginalRunsOnACaptureAreReusedByTheNextCandidate) {
  WorkerProcess fresh; // nothing kept from other cases
  auto cap = scale_capture("scale");
  auto other = scale_capture("scale", 8192);
  const char* same = R"(
extern "C" __global__ void scale_same(float a, const float* x, float* y, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = a * x[i];
})";
  const char* wrong = R"(
extern "C" __global__ void scale_wrong(float a, const float* x, float* y, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = i == 7 ? 0.5f : a * x[i];
})";
  auto capture_evidence = [](const Verdict& v) {
    auto e = json::parse(v.evidence_json);
    EXPECT_EQ(e["captures"].size(), 1u) << e.dump();
    return e["captures"].empty() ? json::object() : e["captures"][0];
  };
  Job first = make_job("scale", CandidateKind::cuda, same, "scale_same", {&cap});
  Verdict v1 = fresh.run(first, data_of({&cap}));
  ASSERT_EQ(v1.kind, VerdictKind::not_faster) << describe(v1);
  json c1 = capture_evidence(v1);
  EXPECT_FALSE(c1.contains("original_runs_from_job")) << c1.dump();

  Job second = make_job("scale", CandidateKind::cuda, same, "scale_same", {&cap});
  Verdict v2 = fresh.run(second, data_of({&cap}));
  ASSERT_EQ(v2.kind, VerdictKind::not_faster) << describe(v2);
  json c2 = capture_evidence(v2);
  EXPECT_EQ(c2.value("original_runs_from_job", uint64_t(0)), first.id) << c2.dump();
  // Only the candidate's runs: twice under the two schedules, once with the second poison; then
  // the original and the candidate on each perturbed copy (other values, then halved sizes).
  ASSERT_EQ(c2.value("perturbed", json::array()).size(), 2u) << c2.dump();
  EXPECT_EQ(c2.value("runs", 0), 3 + 2 * 2) << c2.dump();
  EXPECT_GT(c1.value("runs", 0), 3 + 2 * 2) << c1.dump();
  // What the first job learned about the buffers stands.
  EXPECT_EQ(c2["allocations"][1]["role"], "output") << c2.dump();
  EXPECT_EQ(c2["allocations"][1]["poisoned_bytes"], c1["allocations"][1]["poisoned_bytes"]);

  // A wrong candidate is compared with the kept results as with fresh ones.
  Job wrong_job = make_job("scale", CandidateKind::cuda, wrong, "scale_wrong", {&cap});
  Verdict vw = fresh.run(wrong_job, data_of({&cap}));
  ASSERT_EQ(vw.kind, VerdictKind::mismatch) << describe(vw);
  EXPECT_NE(vw.message.find("element 7"), std::string::npos) << vw.message;
  EXPECT_EQ(capture_evidence(vw).value("original_runs_from_job", uint64_t(0)), first.id);

  // Another capture of the same kernel: its own runs.
  Job third = make_job("scale", CandidateKind::cuda, same, "scale_same", {&other});
  Verdict v3 = fresh.run(third, data_of({&other}));
  ASSERT_EQ(v3.kind, VerdictKind::not_faster) << describe(v3);
  EXPECT_FALSE(capture_evidence(v3).contains("original_runs_from_job")) << v3.evidence_json;
}

TEST_F(WorkerTest, RaceIsNondeterministic) {
  Emu& emu = Emu::get();
  int n = 1024;
  uint64_t x = emu.upload(random_floats(size_t(n), 2));
  uint64_t y = emu.upload(std::vector<float>(size_t(n), 0.0f));
  Launch l;
  l.grid = {4, 1, 1};
  l.block = {256, 1, 1};
  l.scalar(2.0f).ptr(x).ptr(y).scalar(n);
  auto cap = capture("rotate", l);
  // Stages x in shared memory without a barrier: a warp reads another warp's slot whether or not
  // that warp has written it yet.
  const char* racy = R"(
extern "C" __global__ void rotate_racy(float a, const float* x, float* y, int n)
{
    __shared__ float s[1024];
    int base = blockIdx.x * blockDim.x;
    int i = base + threadIdx.x;
    s[threadIdx.x] = i < n ? x[i] : 0.0f;
    if (i < n) y[i] = a * s[(threadIdx.x + 32) % blockDim.x];
})";
  Verdict v = run_cuda(worker(), "rotate", cap, racy, "rotate_racy");
  ASSERT_EQ(v.kind, VerdictKind::nondeterministic) << describe(v);
  EXPECT_NE(v.message.find("parameter 2"), std::string::npos) << v.message;
  EXPECT_NE(v.message.find("element "), std::string::npos) << v.message;
}

TEST_F(WorkerTest, WriteJustPastTheEndIsCaughtByTheGuardAndTheWorkerGoesOn) {
  auto cap = scale_capture("scale");
  const char* oob = R"(
extern "C" __global__ void scale_oob(float a, const float* x, float* y, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = a * x[i];
    if (blockIdx.x == 0 && threadIdx.x == 0) y[n + 2] = 1.0f;
})";
  Verdict v = run_cuda(worker(), "scale", cap, oob, "scale_oob");
  ASSERT_EQ(v.kind, VerdictKind::illegal_address) << describe(v);
  EXPECT_NE(v.message.find("8 bytes past the end of parameter 2"), std::string::npos) << v.message;
  // Not a fault the context remembers: the same worker takes the next job.
  Job job = make_job("scale", CandidateKind::ptx, originals_ptx(), "scale", {&cap});
  Verdict next = worker().run(job, data_of({&cap}));
  EXPECT_EQ(next.kind, VerdictKind::not_faster) << describe(next);
}

TEST_F(WorkerTest, WritingABufferTheOriginalNeverWritesIsRefused) {
  auto cap = scale_capture("scale");
  const char* writes_input = R"(
extern "C" __global__ void scale_clobber(float a, float* x, float* y, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        y[i] = a * x[i];
        x[i] = 0.0f;
    }
})";
  // Refused from its code (the static checks), and, with those off, by the byte comparison.
  Verdict v = run_cuda(worker(), "scale", cap, writes_input, "scale_clobber");
  ASSERT_EQ(v.kind, VerdictKind::refused) << describe(v);
  EXPECT_NE(v.message.find("parameter 1"), std::string::npos) << v.message;
  Job job = make_job("scale", CandidateKind::cuda, writes_input, "scale_clobber", {&cap});
  job.static_checks = false;
  v = worker().run(job, data_of({&cap}));
  ASSERT_EQ(v.kind, VerdictKind::mismatch) << describe(v);
  EXPECT_NE(v.message.find("parameter 1"), std::string::npos) << v.message;
  EXPECT_NE(v.message.find("does not change"), std::string::npos) << v.message;
  EXPECT_EQ(json::parse(v.evidence_json).value("pattern", ""), "input-modification");
}

TEST_F(WorkerTest, ReadingTheOutputsPreviousContentsIsCaughtByPoisoning) {
  // y holds zeros before the launch, so y += a*x equals y = a*x on the captured bytes: only the
  // poison tells them apart.
  auto cap = scale_capture("scale");
  const char* accumulate = R"(
extern "C" __global__ void scale_acc(float a, const float* x, float* y, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] += a * x[i];
})";
  Verdict v = run_cuda(worker(), "scale", cap, accumulate, "scale_acc");
  ASSERT_EQ(v.kind, VerdictKind::mismatch) << describe(v);
  EXPECT_NE(v.message.find("parameter 2"), std::string::npos) << v.message;
  EXPECT_NE(v.message.find("got nan"), std::string::npos) << v.message;
}

TEST_F(WorkerTest, LeavingBytesThatHappenToEqualThePoisonIsCaughtByTheSecondPoison) {
  // flags holds zeros before the launch; the original writes 1 or -1 (0xFFFFFFFF) everywhere. A
  // candidate that writes only the 1s leaves the poison where the original writes -1: equal to
  // the first poison, not to the second.
  Emu& emu = Emu::get();
  uint64_t x = emu.upload(random_floats(1024, 9));
  uint64_t flags = emu.upload(std::vector<int32_t>(1024, 0));
  Launch l;
  l.grid = {8, 1, 1};
  l.block = {128, 1, 1};
  l.ptr(x).ptr(flags).scalar(1024);
  auto cap = capture("sign_flags", l);
  const char* lazy = R"(
extern "C" __global__ void sign_flags_lazy(const float* x, int* flags, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && x[i] > 0.0f) flags[i] = 1;
})";
  Verdict v = run_cuda(worker(), "sign_flags", cap, lazy, "sign_flags_lazy");
  ASSERT_EQ(v.kind, VerdictKind::mismatch) << describe(v);
  EXPECT_NE(v.message.find("depends on what the outputs held"), std::string::npos) << v.message;
  EXPECT_NE(v.message.find("parameter 1"), std::string::npos) << v.message;
  // The honest version passes.
  const char* full = R"(
extern "C" __global__ void sign_flags2(const float* x, int* flags, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) flags[i] = x[i] > 0.0f ? 1 : -1;
})";
  Verdict ok = run_cuda(worker(), "sign_flags", cap, full, "sign_flags2");
  EXPECT_TRUE(ok.kind == VerdictKind::verified || ok.kind == VerdictKind::not_faster)
      << describe(ok);
}

TEST_F(WorkerTest, CandidateThatDoesNotCompileIsACompileErrorWithTheLog) {
  auto cap = scale_capture("scale", 1024, 1);
  Verdict v =
      run_cuda(worker(), "scale", cap,
               "extern \"C\" __global__ void broken(float a) { this is not C++; }", "broken");
  ASSERT_EQ(v.kind, VerdictKind::compile_error) << describe(v);
  EXPECT_NE(v.message.find("error"), std::string::npos) << v.message;
  EXPECT_NE(v.message.find("candidate.cu"), std::string::npos) << v.message;

  // Bad PTX: the JIT's error log. An unknown JIT option: refused before loading.
  Job job = make_job("scale", CandidateKind::ptx, ".version 9.0\n.target sm_90\nnonsense;\n", "x",
                     {&cap});
  Verdict p = worker().run(job, data_of({&cap}));
  EXPECT_EQ(p.kind, VerdictKind::compile_error) << describe(p);
  job = make_job("scale", CandidateKind::ptx, originals_ptx(), "scale", {&cap});
  job.jit_options = {"TURBO=1"};
  Verdict o = worker().run(job, data_of({&cap}));
  EXPECT_EQ(o.kind, VerdictKind::compile_error) << describe(o);
  EXPECT_NE(o.message.find("TURBO"), std::string::npos) << o.message;
}

TEST_F(WorkerTest, DifferentParametersOrAMissingEntryAreLoadErrors) {
  auto cap = scale_capture("scale", 1024, 1);
  const char* extra = R"(
extern "C" __global__ void scale_extra(float a, const float* x, float* y, int n, int m)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + m;
})";
  Verdict v = run_cuda(worker(), "scale", cap, extra, "scale_extra");
  ASSERT_EQ(v.kind, VerdictKind::load_error) << describe(v);
  EXPECT_NE(v.message.find("parameters differ"), std::string::npos) << v.message;

  Job job = make_job("scale", CandidateKind::ptx, originals_ptx(), "no_such_kernel", {&cap});
  Verdict m = worker().run(job, data_of({&cap}));
  EXPECT_EQ(m.kind, VerdictKind::load_error) << describe(m);
  EXPECT_NE(m.message.find("no_such_kernel"), std::string::npos) << m.message;
}

TEST_F(WorkerTest, ABadBundleGetsAnInternalVerdictForItsJob) {
  Verdict v = worker().run_bundle("definitely not a job bundle", 77);
  EXPECT_EQ(v.kind, VerdictKind::internal);
  EXPECT_EQ(v.job, 77u);
  EXPECT_NE(v.message.find("bad job bundle"), std::string::npos) << v.message;
}

TEST_F(WorkerTest, InconsistentCapturesAreRefusedAndTheWorkerGoesOn) {
  auto cap = scale_capture("scale", 1024, 1);
  auto run = [&](const Captured& c) {
    Job job = make_job("scale", CandidateKind::ptx, originals_ptx(), "scale", {&c});
    return worker().run(job, data_of({&c}));
  };
  {
    Captured c = cap; // the parameter no longer holds the pointer the buffer lists
    c.capture.param_bytes[c.capture.params[1].offset] ^= 0x40;
    Verdict v = run(c);
    EXPECT_EQ(v.kind, VerdictKind::internal) << describe(v);
    EXPECT_NE(v.message.find("does not hold the pointer"), std::string::npos) << v.message;
  }
  {
    Captured c = cap; // two allocations that overlap
    c.capture.buffers[1].base = c.capture.buffers[0].base + 4;
    c.capture.buffers[1].pointer = c.capture.buffers[1].base;
    std::memcpy(c.capture.param_bytes.data() + c.capture.params[2].offset,
                &c.capture.buffers[1].pointer, 8);
    Verdict v = run(c);
    EXPECT_EQ(v.kind, VerdictKind::internal) << describe(v);
    EXPECT_NE(v.message.find("overlap"), std::string::npos) << v.message;
  }
  {
    Captured c = cap; // a parameter layout that is not the kernel's
    c.capture.params.pop_back();
    Verdict v = run(c);
    EXPECT_EQ(v.kind, VerdictKind::internal) << describe(v);
    EXPECT_NE(v.message.find("does not match the original kernel"), std::string::npos) << v.message;
  }
  {
    Captured c = cap; // a capture that failed in the shim is not used, and says why
    c.capture.status = CaptureStatus::too_large;
    c.capture.reason = "the launch's buffers take 8951168 bytes, over the capture cap";
    Verdict v = run(c);
    EXPECT_EQ(v.kind, VerdictKind::unsupported) << describe(v);
    EXPECT_NE(v.message.find("no usable capture"), std::string::npos) << v.message;
    EXPECT_NE(v.message.find("8951168 bytes, over the capture cap"), std::string::npos)
        << v.message;
  }
  Verdict ok = run(cap);
  EXPECT_EQ(ok.kind, VerdictKind::not_faster) << describe(ok);
}

TEST_F(WorkerTest, NondeterministicOriginalIsComparedWithTolerance) {
  Emu& emu = Emu::get();
  int n = 8192;
  uint64_t x = emu.upload(random_floats(size_t(n), 3, 0.0f, 1.0f));
  uint64_t out = emu.upload(std::vector<float>{0.0f});
  Launch l;
  l.grid = {64, 1, 1};
  l.block = {128, 1, 1};
  l.ptr(x).ptr(out).scalar(n);
  auto cap = capture("atomic_sum", l);
  // One atomic per warp instead of one per thread: a different order of the same additions.
  const char* warp_sum = R"(
extern "C" __global__ void warp_sum(const float* x, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : 0.0f;
    for (int d = 16; d > 0; d /= 2) v += __shfl_down_sync(0xffffffffu, v, d);
    if ((threadIdx.x & 31) == 0) atomicAdd(out, v);
})";
  Verdict v = run_cuda(worker(), "atomic_sum", cap, warp_sum, "warp_sum");
  ASSERT_TRUE(v.kind == VerdictKind::verified || v.kind == VerdictKind::not_faster) << describe(v);
  EXPECT_EQ(v.comparison, Comparison::tolerance);
  auto e = json::parse(v.evidence_json);
  EXPECT_EQ(e["comparison"], "tolerance");
  ASSERT_EQ(e["original_nondeterministic_buffers"].size(), 1u) << v.evidence_json;
  auto a = e["captures"][0]["allocations"][1];
  EXPECT_EQ(a["original_nondeterministic"], true);
  EXPECT_EQ(a["compared"], "tolerance");
  EXPECT_EQ(a["poisoned_bytes"], "read-modify-write");
}

TEST_F(WorkerTest, ReorderedSumPassesWithToleranceAndFailsBitwise) {
  Emu& emu = Emu::get();
  int rows = 256, cols = 64;
  std::vector<float> data = random_floats(size_t(rows * cols), 4, 0.0f, 1.0f);
  for (size_t i = 0; i < data.size(); i += 7) data[i] *= 1000.0f; // mixed magnitudes
  uint64_t x = emu.upload(data);
  uint64_t out = emu.upload(std::vector<float>(size_t(rows), 0.0f));
  Launch l;
  l.grid = {2, 1, 1};
  l.block = {128, 1, 1};
  l.ptr(x).ptr(out).scalar(cols);
  auto cap = capture("row_sum", l);
  const char* pairwise = R"(
extern "C" __global__ void row_sum2(const float* __restrict__ x, float* __restrict__ out, int cols)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    float s0 = 0.0f, s1 = 0.0f;
    for (int j = 0; j + 1 < cols; j += 2) {
        s0 += x[row * cols + j];
        s1 += x[row * cols + j + 1];
    }
    if (cols % 2) s0 += x[row * cols + cols - 1];
    out[row] = s0 + s1;
})";
  Verdict tol = run_cuda(worker(), "row_sum", cap, pairwise, "row_sum2", Comparison::tolerance);
  ASSERT_TRUE(tol.kind == VerdictKind::verified || tol.kind == VerdictKind::not_faster)
      << describe(tol);
  EXPECT_EQ(tol.comparison, Comparison::tolerance);
  auto e = json::parse(tol.evidence_json);
  EXPECT_GT(e["captures"][0]["allocations"][1]["max_abs_err"].get<double>(), 0.0);

  Verdict bitwise = run_cuda(worker(), "row_sum", cap, pairwise, "row_sum2", Comparison::bitwise);
  ASSERT_EQ(bitwise.kind, VerdictKind::mismatch) << describe(bitwise);
  EXPECT_NE(bitwise.message.find("parameter 1"), std::string::npos) << bitwise.message;
}

TEST_F(WorkerTest, OnlyCapturesThatPassTheGuardAreUsed) {
  auto narrow = scale_capture("scale", 4096, 4);
  Emu& emu = Emu::get();
  uint64_t x = emu.upload(random_floats(4096, 8));
  uint64_t y = emu.upload(std::vector<float>(4096, 0.0f));
  Launch l;
  l.grid = {4, 1, 1};
  l.block = {256, 1, 1};
  l.scalar(1.5f).ptr(x).ptr(y).scalar(4096);
  auto wide = capture("scale", l);
  // Right only for blocks of 128 threads, as a variant specialized for them may be.
  const char* specialized = R"(
extern "C" __global__ void scale128(float a, const float* x, float* y, int n)
{
    float k = blockDim.x == 128 ? 1.0f : 2.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = k * a * x[i];
})";
  Job job = make_job("scale", CandidateKind::cuda, specialized, "scale128", {&narrow, &wide});
  Verdict unguarded = worker().run(job, data_of({&narrow, &wide}));
  EXPECT_EQ(unguarded.kind, VerdictKind::mismatch) << describe(unguarded);
  EXPECT_NE(unguarded.message.find("capture 1"), std::string::npos) << unguarded.message;

  job.guard.block = {128, 0, 0};
  Verdict guarded = worker().run(job, data_of({&narrow, &wide}));
  ASSERT_TRUE(guarded.kind == VerdictKind::verified || guarded.kind == VerdictKind::not_faster)
      << describe(guarded);
  EXPECT_EQ(guarded.captures_used, 1u);
  EXPECT_EQ(json::parse(guarded.evidence_json)["captures_outside_guard"], 1);

  job.guard.block = {512, 0, 0};
  Verdict none = worker().run(job, data_of({&narrow, &wide}));
  // The candidate does not apply to these launches: not hone's fault, and the message says why.
  EXPECT_EQ(none.kind, VerdictKind::not_applicable) << describe(none);
  EXPECT_EQ(std::string(to_string(none.kind)), "not applicable");
  EXPECT_NE(none.message.find("no capture passes the candidate's guard (2 of 2 "
                              "fail it; capture 0: its block is 128x1x1, the candidate is for "
                              "512x0x0)"),
            std::string::npos)
      << none.message;
}

TEST_F(WorkerTest, FatbinOriginalIsLoadedAndAnalyzed) {
  // nvcc's fatbin of the originals, PTX only (what the emulated device runs).
  std::string dir = HONE_BINARY_DIR "/tests/worker_test.files";
  std::string cu = dir + "/originals.cu", fatbin = dir + "/originals.fatbin";
  std::filesystem::create_directories(dir);
  {
    std::ofstream out(cu);
    out << k_originals;
  }
  std::string cmd = std::string(HONE_NVCC) + " -fatbin -gencode arch=compute_90,code=compute_90 " +
                    cu + " -o " + fatbin;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(fatbin, std::ios::binary);
  std::string image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(image.empty());

  auto cap = scale_capture("scale", 4096, 4);
  Job job = make_job("scale", CandidateKind::ptx, originals_ptx(), "scale", {&cap});
  job.original_format = proto::ImageFormat::fatbin;
  job.original_image = image;
  Verdict v = worker().run(job, data_of({&cap}));
  ASSERT_TRUE(v.kind == VerdictKind::not_faster || v.kind == VerdictKind::verified) << describe(v);
  auto e = json::parse(v.evidence_json);
  EXPECT_EQ(e["captures"][0]["allocations"][1]["dtype"], "f32"); // from the fatbin's PTX
}

// --- pointers stored inside buffers ------------------------------------------------------------

namespace {

Captured gather_capture(int n) {
  Emu& emu = Emu::get();
  uint64_t src = emu.upload(random_floats(size_t(n), 5));
  uint64_t table = emu.upload(std::vector<uint64_t>{src, 0});
  uint64_t out = emu.upload(std::vector<float>(size_t(n), 0.0f));
  Launch l;
  l.grid = {uint32_t((n + 127) / 128), 1, 1};
  l.block = {128, 1, 1};
  l.ptr(table).ptr(src).ptr(out).scalar(n);
  return capture("gather", l);
}

const char* k_gather_candidate = R"(
extern "C" __global__ void gather2(const float* const* __restrict__ table, const float* src, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * table[0][i];
})";

} // namespace

TEST_F(WorkerTest, PointersInsideBuffersWorkAtTheOriginalAddresses) {
  if (!Emu::get().vmm()) {
    GTEST_SKIP() << "the emulated driver has no VMM (cuMemAddressReserve ...): buffers cannot be "
                    "restored at their original addresses";
  }
  auto cap = gather_capture(2048);
  Verdict v = run_cuda(worker(), "gather", cap, k_gather_candidate, "gather2");
  ASSERT_TRUE(v.kind == VerdictKind::verified || v.kind == VerdictKind::not_faster) << describe(v);
  auto e = json::parse(v.evidence_json);
  for (const auto& a : e["captures"][0]["allocations"]) {
    EXPECT_EQ(a["restored_at_original_address"], true) << v.evidence_json;
  }
  EXPECT_NE(e["captures"][0]["restore"].get<std::string>().find("VMM"), std::string::npos);
}

TEST(WorkerRelocation, PointersInsideBuffersCannotBeMoved) {
  WorkerProcess w(
      std::vector<std::pair<std::string, std::string>>{{"HONE_WORKER_RESTORE", "relocate"}});
  auto cap = gather_capture(512);
  Verdict v = run_cuda(w, "gather", cap, k_gather_candidate, "gather2");
  EXPECT_EQ(v.kind, VerdictKind::unsupported) << describe(v);
  EXPECT_NE(
      v.message.find("buffers hold pointers into other captured buffers; they cannot be moved"),
      std::string::npos)
      << v.message;
  // Without pointers inside, relocated buffers are fine (and their pointers patched).
  Emu& emu = Emu::get();
  uint64_t x = emu.upload(random_floats(512, 6));
  uint64_t y = emu.upload(std::vector<float>(512, 0.0f));
  Launch l;
  l.grid = {4, 1, 1};
  l.block = {128, 1, 1};
  l.scalar(3.0f).ptr(x).ptr(y).scalar(512);
  auto plain = capture("scale", l);
  Job job = make_job("scale", CandidateKind::ptx, originals_ptx(), "scale", {&plain});
  Verdict r = w.run(job, data_of({&plain}));
  EXPECT_EQ(r.kind, VerdictKind::not_faster) << describe(r);
  auto e = json::parse(r.evidence_json);
  EXPECT_EQ(e["captures"][0]["allocations"][0]["restored_at_original_address"], false);
  Emu::get().free_all();
}

// --- faults that end the worker ---------------------------------------------------------------

namespace {

Captured small_scale_capture() {
  Emu& emu = Emu::get();
  uint64_t x = emu.upload(random_floats(1024, 7));
  uint64_t y = emu.upload(std::vector<float>(1024, 0.0f));
  Launch l;
  l.grid = {8, 1, 1};
  l.block = {128, 1, 1};
  l.scalar(1.5f).ptr(x).ptr(y).scalar(1024);
  return capture("scale", l);
}

// The worker sends the verdict, then exits with status 3 for a fresh one.
void expect_fatal(const std::string& source, const std::string& entry, VerdictKind kind,
                  std::vector<std::pair<std::string, std::string>> env = {}) {
  WorkerProcess w(std::move(env));
  auto cap = small_scale_capture();
  Verdict v = run_cuda(w, "scale", cap, source, entry);
  EXPECT_EQ(v.kind, kind) << describe(v);
  EXPECT_NE(v.message.find("the candidate failed on capture 0"), std::string::npos) << v.message;
  EXPECT_TRUE(v.worker_exits) << "the verdict must say the worker leaves: honed sends it no more";
  EXPECT_EQ(w.exit_status(std::chrono::seconds(30)), worker::k_exit_context_lost);
  Emu::get().free_all();
}

} // namespace

TEST(WorkerFaults, FarOutOfBoundsWriteIsAnIllegalAddressAndTheWorkerExits3) {
  expect_fatal(R"(
extern "C" __global__ void scale_far(float a, const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i + (1ll << 36)] = a * x[i];
})",
               "scale_far", VerdictKind::illegal_address);
}

TEST(WorkerFaults, OutOfBoundsReadIsAnIllegalAddress) {
  expect_fatal(R"(
extern "C" __global__ void scale_read(float a, const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i - (1ll << 36)];
})",
               "scale_read", VerdictKind::illegal_address);
}

TEST(WorkerFaults, EndlessLoopIsATimeout) {
  expect_fatal(R"(
extern "C" __global__ void scale_spin(float a, const float* x, float* y, int n)
{
    const volatile float* vx = x;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        while (vx[i] != 12345.0f) {
        }
        y[i] = a * x[i];
    }
})",
               "scale_spin", VerdictKind::timeout, {{"HONE_EMU_INSTRUCTION_BUDGET", "2000000"}});
}

TEST(WorkerLifecycle, ExitsZeroWhenHonedClosesTheSocket) {
  WorkerProcess w;
  w.close();
  EXPECT_EQ(w.exit_status(std::chrono::seconds(30)), worker::k_exit_ok);
}

TEST(WorkerLifecycle, WithoutADriverEveryJobGetsAnInternalVerdict) {
  // main() in this process, on a driver path that does not exist: it still speaks the protocol.
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(worker::main(pair[1], "/nonexistent/libcuda.so.1"));
  ::close(pair[1]);
  worker::Channel ch(pair[0]);
  auto hello = ch.receive();
  ASSERT_TRUE(hello && *hello);
  EXPECT_EQ((*hello)->header.type, proto::MsgType::hello);
  ASSERT_TRUE(ch.send(proto::frame_of(proto::MsgType::hello_ack, 1, proto::HelloAck{})));
  auto cap = small_scale_capture();
  Job job = make_job("scale", CandidateKind::ptx, originals_ptx(), "scale", {&cap});
  std::string bundle = encode_bundle(job, data_of({&cap}));
  int fd = ::memfd_create("hone-job", MFD_CLOEXEC);
  ASSERT_EQ(::write(fd, bundle.data(), bundle.size()), ssize_t(bundle.size()));
  wire::Writer w;
  w.u64(job.id);
  ASSERT_TRUE(ch.send(proto::frame(proto::MsgType::job, 5, w, proto::k_flag_fd), fd));
  ::close(fd);
  auto f = ch.receive();
  ASSERT_TRUE(f && *f);
  EXPECT_EQ((*f)->header.seq, 5u);
  wire::Reader r((*f)->payload);
  Verdict v;
  ASSERT_TRUE(decode(r, v));
  EXPECT_EQ(v.kind, VerdictKind::internal);
  EXPECT_EQ(v.job, job.id);
  EXPECT_NE(v.message.find("/nonexistent/libcuda.so.1"), std::string::npos) << v.message;
  ::shutdown(ch.fd(), SHUT_WR);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  Emu::get().free_all();
}

// The benchmark's early stop (bench.hpp): a verdict is certain once the next runs cannot change
// it, given the noise measured so far.
TEST(Benchmark, StopsOnlyWhenTheVerdictCannotChange) {
  using hone::worker::accepted;
  using hone::worker::Measurement;
  using hone::worker::summarize;
  using hone::worker::verdict_certain;
  BenchSettings b; // min_speedup 1.05, noise_factor 3
  auto m = [](std::vector<double> original, std::vector<double> candidate) {
    Measurement x;
    x.original_ns = std::move(original);
    x.candidate_ns = std::move(candidate);
    summarize(x);
    return x;
  };
  // Times that do not vary (the emulated device): any verdict is certain.
  EXPECT_TRUE(verdict_certain(m({100, 100, 100}, {80, 80, 80}), b));   // 1.25x, accepted
  EXPECT_TRUE(verdict_certain(m({100, 100, 100}, {100, 100, 100}), b)); // 1.00x, refused
  // A clear gain over small noise: certain.
  EXPECT_TRUE(verdict_certain(m({100, 101, 99, 100, 100}, {50, 51, 49, 50, 50}), b));
  // A gain just over the bar with noise: the next runs could refuse it.
  Measurement close = m({100, 102, 98, 100, 103}, {92, 94, 90, 92, 95});
  EXPECT_TRUE(accepted(close, b));
  EXPECT_FALSE(verdict_certain(close, b));
  // A gain just under the bar, with noise: the next runs could still show enough.
  Measurement under = m({100, 104, 96, 100, 102}, {96, 99, 93, 96, 98});
  EXPECT_FALSE(accepted(under, b));
  EXPECT_FALSE(verdict_certain(under, b));
  // No gain within noise so large that no plausible gain would pass: refused for certain.
  EXPECT_TRUE(verdict_certain(m({100, 130, 70, 100, 120}, {100, 125, 75, 95, 110}), b));
}

// On the emulated device, whose times do not vary, a verdict costs min_runs pairs, not runs; the
// evidence says how many were made.
TEST_F(WorkerTest, BenchmarkStopsAtTheFloorWhenTimesDoNotVary) {
  auto cap = scale_capture("scale");
  Job job = make_job("scale", CandidateKind::ptx, originals_ptx(), "scale", {&cap});
  job.bench.runs = 21;
  job.bench.min_runs = 4;
  Verdict v = worker().run(job, data_of({&cap}));
  ASSERT_EQ(v.kind, VerdictKind::not_faster) << describe(v);
  auto e = json::parse(v.evidence_json);
  EXPECT_EQ(e["runs"], 4);
  EXPECT_EQ(e["runs_max"], 21);
  EXPECT_EQ(e["stopped_early"], true);
  EXPECT_NE(v.message.find("4 runs each"), std::string::npos) << v.message;
}

// --- the corpus of hostile candidates (tests/cheats/) ----------------------------------------

namespace {

struct CheatCase {
  std::string file;
  std::map<std::string, std::string> header; // pattern, original, capture, comparison, verdict
  std::string source;
};

std::vector<CheatCase> cheat_corpus() {
  std::vector<CheatCase> out;
  const char* source = std::getenv("HONE_TEST_SOURCE_DIR"); // where the checkout moved
  const std::filesystem::path dir =
      std::filesystem::path(source ? source : HONE_SOURCE_DIR) / "tests" / "cheats";
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".cu") continue;
    CheatCase c;
    c.file = e.path().filename().string();
    std::ifstream in(e.path());
    std::stringstream ss;
    ss << in.rdbuf();
    c.source = ss.str();
    std::istringstream lines(c.source);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("// ", 0) != 0) break;
      auto colon = line.find(": ");
      if (colon == std::string::npos || line.find(' ', 3) < colon) continue;
      c.header[line.substr(3, colon - 3)] = line.substr(colon + 2);
    }
    out.push_back(std::move(c));
  }
  std::sort(out.begin(), out.end(),
            [](const CheatCase& a, const CheatCase& b) { return a.file < b.file; });
  return out;
}

// The captures the corpus names.
Captured cheat_capture(const std::string& name) {
  Emu& emu = Emu::get();
  if (name == "scale" || name == "scale_tiny" || name == "scale_pdl") {
    const int n = 16384;
    uint64_t x = emu.upload(random_floats(size_t(n), 1));
    uint64_t y = emu.upload(std::vector<float>(size_t(n), 0.0f));
    Launch l;
    l.grid = {4, 1, 1};
    l.block = {128, 1, 1};
    l.scalar(name == "scale_tiny" ? 1e-7f : 1.5f).ptr(x).ptr(y).scalar(n);
    return capture(name == "scale_pdl" ? "scale_pdl" : "scale", l);
  }
  if (name == "rotate") {
    const int n = 1024;
    uint64_t x = emu.upload(random_floats(size_t(n), 2));
    uint64_t y = emu.upload(std::vector<float>(size_t(n), 0.0f));
    Launch l;
    l.grid = {4, 1, 1};
    l.block = {256, 1, 1};
    l.scalar(2.0f).ptr(x).ptr(y).scalar(n);
    return capture("rotate", l);
  }
  if (name == "block_sum") {
    const int n = 1000;
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) v[size_t(i)] = (i * 7919) % 201 - 100;
    uint64_t x = emu.upload(v);
    uint64_t out = emu.upload(std::vector<int32_t>(8, 0));
    Launch l;
    l.grid = {8, 1, 1};
    l.block = {128, 1, 1};
    l.ptr(x).ptr(out).scalar(n);
    return capture("block_sum", l);
  }
  throw std::runtime_error("no capture named " + name);
}

void PrintTo(const CheatCase& c, std::ostream* os) {
  *os << "tests/cheats/" << c.file;
}

class CheatCorpus : public WorkerTest, public ::testing::WithParamInterface<CheatCase> {};

} // namespace

// Every hostile candidate of the corpus is refused, with the verdict its file names and the
// evidence naming its pattern; the message ends with the pattern too.
TEST_P(CheatCorpus, IsRefusedNamingItsPattern) {
  const CheatCase& c = GetParam();
  for (const char* key : {"pattern", "original", "capture", "comparison", "verdict"})
    ASSERT_TRUE(c.header.count(key)) << c.file << " has no '" << key << "' line";
  ASSERT_NE(cheat_pattern(c.header.at("pattern")), nullptr)
      << c.file << ": " << c.header.at("pattern") << " is not in common/cheats.hpp";
  Captured cap = cheat_capture(c.header.at("capture"));
  Verdict v = run_cuda(worker(), c.header.at("original"), cap, c.source, "cheat",
                       c.header.at("comparison") == "tolerance" ? Comparison::tolerance
                                                                : Comparison::bitwise);
  EXPECT_EQ(to_string(v.kind), c.header.at("verdict")) << c.file << "\n" << describe(v);
  auto e = json::parse(v.evidence_json);
  EXPECT_EQ(e.value("pattern", ""), c.header.at("pattern")) << c.file << "\n" << describe(v);
  EXPECT_NE(v.message.find("[pattern " + c.header.at("pattern") + ":"), std::string::npos)
      << v.message;
  // What the dynamic defences alone make of it, where the file says: static_checks = false.
  if (!c.header.count("dynamic-verdict")) return;
  Job job = make_job(c.header.at("original"), CandidateKind::cuda, c.source, "cheat", {&cap});
  job.comparison =
      c.header.at("comparison") == "tolerance" ? Comparison::tolerance : Comparison::bitwise;
  job.static_checks = false;
  Verdict d = worker().run(job, data_of({&cap}));
  EXPECT_EQ(to_string(d.kind), c.header.at("dynamic-verdict"))
      << c.file << " without static checks\n" << describe(d);
  EXPECT_EQ(json::parse(d.evidence_json).value("pattern", ""), c.header.at("pattern"))
      << c.file << " without static checks\n" << describe(d);
}

// A candidate that reads shared memory it never wrote (tests/cheats/uninitialized_shared.cu) gives
// two results where each validation run starts from other garbage: the emulated device's fill
// seed, or on a GPU the scrub kernel ([validation] gpu_scrub). Without the scrub a GPU leaves
// what the previous kernel left, often the same in both runs; what it then gives is printed (it
// depends on the hardware), and on the emulated device gpu_scrub changes nothing.
TEST_F(WorkerTest, UninitializedSharedMemoryIsCaughtWithTheScrub) {
  const auto corpus = cheat_corpus();
  auto it = std::find_if(corpus.begin(), corpus.end(),
                         [](const CheatCase& c) { return c.file == "uninitialized_shared.cu"; });
  ASSERT_NE(it, corpus.end());
  Captured cap = cheat_capture(it->header.at("capture"));
  const bool emulated = Emu::get().api().path().find("/lib/emu/") != std::string::npos;
  for (bool scrub : {true, false}) {
    Job job = make_job(it->header.at("original"), CandidateKind::cuda, it->source, "cheat", {&cap});
    job.gpu_scrub = scrub;
    Verdict v = worker().run(job, data_of({&cap}));
    auto e = json::parse(v.evidence_json);
    std::printf("gpu_scrub = %s: %s, memory_scrub \"%s\"\n", scrub ? "true" : "false",
                to_string(v.kind), e.value("memory_scrub", "?").c_str());
    if (emulated) {
      EXPECT_EQ(e.value("memory_scrub", ""), "fill seed (emulated device)") << describe(v);
    } else {
      EXPECT_EQ(e.value("memory_scrub", ""),
                scrub ? "scrub kernel" : "off ([validation] gpu_scrub = false)")
          << describe(v);
    }
    if (scrub || emulated) {
      EXPECT_EQ(v.kind, VerdictKind::nondeterministic) << describe(v);
      EXPECT_EQ(e.value("pattern", ""), "uninitialized-memory") << describe(v);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Corpus, CheatCorpus, ::testing::ValuesIn(cheat_corpus()),
                         [](const ::testing::TestParamInfo<CheatCase>& info) {
                           std::string n = info.param.file.substr(0, info.param.file.size() - 3);
                           for (char& ch : n) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return n;
                         });

// The honest versions of the corpus's originals pass the same checks: the defences refuse the
// cheats, not rewrites.
TEST_F(WorkerTest, HonestRewritesPassTheCorpusDefences) {
  struct Honest {
    const char* capture;
    const char* original;
    Comparison comparison;
    const char* source;
  };
  const Honest cases[] = {
      {"scale", "scale", Comparison::bitwise, R"(
extern "C" __global__ void cheat(float a, const float* x, float* y, int n)
{
    int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) y[i] = a * x[i];
})"},
      // Reads the global timer, but only to wait half a microsecond: the static check allows it,
      // and the reruns' other epochs change nothing.
      {"scale", "scale", Comparison::bitwise, R"(
extern "C" __global__ void cheat(float a, const float* x, float* y, int n)
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < 500);
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = a * x[i];
})"},
      {"scale_tiny", "scale", Comparison::tolerance, R"(
extern "C" __global__ void cheat(float a, const float* x, float* y, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = x[i] * a;
})"},
      // A read-only table in constant memory: module-scope, but not writable memory.
      {"scale", "scale", Comparison::bitwise, R"(
__constant__ float unit[2] = {1.0f, 1.0f};
extern "C" __global__ void cheat(float a, const float* x, float* y, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = a * x[i] * unit[i & 1];
})"},
      {"block_sum", "block_sum", Comparison::bitwise, R"(
extern "C" __global__ void cheat(const int* x, int* out, int n)
{
    __shared__ int acc;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (threadIdx.x == 0) acc = 0;
    __syncthreads();
    atomicAdd(&acc, i < n ? x[i] : 0);
    __syncthreads();
    if (threadIdx.x == 0) out[blockIdx.x] = acc;
})"},
  };
  for (const auto& h : cases) {
    Captured cap = cheat_capture(h.capture);
    Verdict v = run_cuda(worker(), h.original, cap, h.source, "cheat", h.comparison);
    EXPECT_TRUE(v.kind == VerdictKind::verified || v.kind == VerdictKind::not_faster)
        << h.capture << "\n" << describe(v);
    auto e = json::parse(v.evidence_json);
    EXPECT_FALSE(e.contains("pattern")) << describe(v);
    // The perturbed copies ran and matched.
    ASSERT_FALSE(e["captures"].empty());
    bool perturbed = false;
    for (const auto& p : e["captures"][0].value("perturbed", json::array()))
      perturbed = perturbed || p.value("result", "") == "equal";
    EXPECT_TRUE(perturbed) << h.capture << ": " << v.evidence_json;
  }
}


// A shadow check: the capture is of a launch a variant served, with the buffers after it. The
// original on the same inputs must leave what the variant left; one element off is a mismatch
// naming the pattern.
TEST_F(WorkerTest, ShadowCheckComparesTheServedOutputsWithTheOriginals) {
  const int n = 4096;
  Captured cap = scale_capture("scale", n, 4);
  // What the original computes: y = 1.5 * x (x is captured in the first buffer's allocation).
  const CaptureBuffer& xb = cap.capture.buffers[0];
  const CaptureBuffer& yb = cap.capture.buffers[1];
  std::vector<float> y(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    float x;
    std::memcpy(&x, cap.data.data() + xb.before + size_t(i) * 4, 4);
    y[size_t(i)] = 1.5f * x;
  }
  auto with_after = [&](const std::vector<float>& after) {
    Captured c = cap;
    c.capture.buffers[1].after = c.data.size();
    c.data.append(reinterpret_cast<const char*>(after.data()), after.size() * 4);
    c.capture.data_bytes = c.data.size();
    return c;
  };
  auto shadow_job = [&](const Captured& c) {
    Job j = make_job("scale", CandidateKind::ptx, "", "", {&c});
    j.shadow_check = true;
    return worker().run(j, data_of({&c}));
  };
  ASSERT_EQ(yb.size, size_t(n) * 4);
  Captured right = with_after(y);
  Verdict ok = shadow_job(right);
  EXPECT_EQ(ok.kind, VerdictKind::verified) << describe(ok);
  EXPECT_NE(ok.message.find("shadow check"), std::string::npos) << ok.message;

  std::vector<float> off = y;
  off[100] += 1.0f;
  Captured wrong = with_after(off);
  Verdict bad = shadow_job(wrong);
  ASSERT_EQ(bad.kind, VerdictKind::mismatch) << describe(bad);
  EXPECT_NE(bad.message.find("element 100"), std::string::npos) << bad.message;
  EXPECT_EQ(json::parse(bad.evidence_json).value("pattern", ""), "correct-while-checked");
}

// With the static checks off, a candidate that keeps a launch counter in module-scope memory and
// stops working after its tenth launch passes validation (its first launches), and is caught by
// the check of its outputs after the benchmark's launches.
TEST_F(WorkerTest, OutputsAreCheckedAgainAfterTheBenchmark) {
  auto cap = scale_capture("scale");
  const char* late = R"(
__device__ unsigned launches;

extern "C" __global__ void scale_late(float a, const float* x, float* y, int n)
{
    __shared__ unsigned seen;
    if (threadIdx.x == 0) seen = launches;
    __syncthreads();
    if (blockIdx.x == 0 && threadIdx.x == 0) atomicAdd(&launches, 1u);
    if (seen >= 10) return;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = a * x[i];
})";
  Job job = make_job("scale", CandidateKind::cuda, late, "scale_late", {&cap});
  job.static_checks = false;
  job.bench.warmup = 1;
  job.bench.runs = 8;
  job.bench.min_runs = 8;
  Verdict v = worker().run(job, data_of({&cap}));
  ASSERT_EQ(v.kind, VerdictKind::mismatch) << describe(v);
  EXPECT_NE(v.message.find("after 9 launches in the benchmark"), std::string::npos) << v.message;
  EXPECT_EQ(json::parse(v.evidence_json).value("pattern", ""), "correct-while-checked");
  // With them on, it never runs.
  job.static_checks = true;
  v = worker().run(job, data_of({&cap}));
  EXPECT_EQ(v.kind, VerdictKind::refused) << describe(v);
}

// The toolkit's device headers are on the candidate's include path: a candidate may include
// cuda_fp16.h (many answers of models do, for a kernel that does not even use it).
TEST_F(WorkerTest, CandidatesMayIncludeTheToolkitsDeviceHeaders) {
  auto cap = scale_capture("scale", 1024, 1);
  const char* with_header = R"(
#include <cuda_fp16.h>
extern "C" __global__ void scale_h(float a, const float* x, float* y, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = a * x[i];
})";
  Verdict v = run_cuda(worker(), "scale", cap, with_header, "scale_h");
  EXPECT_TRUE(v.kind == VerdictKind::verified || v.kind == VerdictKind::not_faster)
      << describe(v);
}

// --- bounded captures (shim/README.md, "Bounded captures") -----------------------------------

namespace {

// `c` as the shim captures it with a bounds probe: buffer `i`'s allocation (buffers list the
// pointer parameters only: scale's x is buffer 0, y buffer 1) by the range
// [lo, hi) of it (offsets from the allocation's base), the other buffers whole.
Captured bounded(const Captured& c, uint32_t i, uint64_t lo, uint64_t hi) {
  Captured out = c;
  out.data.clear();
  for (uint32_t k = 0; k < c.capture.buffers.size(); ++k) {
    const CaptureBuffer& from = c.capture.buffers[k];
    CaptureBuffer& b = out.capture.buffers[k];
    b.before = out.data.size();
    if (k != i) {
      out.data += c.data.substr(from.before, from.size);
      continue;
    }
    out.data += c.data.substr(from.before + lo, hi - lo);
    b.bounded = true;
    b.alloc_base = from.base;
    b.alloc_size = from.size;
    b.base = from.base + lo;
    b.size = hi - lo;
  }
  out.capture.data_bytes = out.data.size();
  // Through the wire format, as honed hands it on.
  wire::Writer w;
  encode(w, out.capture);
  std::string bytes = w.out();
  wire::Reader r(bytes);
  Capture decoded;
  EXPECT_TRUE(decode(r, decoded)) << r.error();
  EXPECT_TRUE(decoded.buffers == out.capture.buffers);
  return out;
}

// scale on n elements of x read from 1024 elements into a larger allocation, into y, which has
// room for 2n: the launch touches x[1024, 1024 + n) and y[0, n).
Captured scale_in_larger_buffers(int n) {
  Emu& emu = Emu::get();
  uint64_t x = emu.upload(random_floats(size_t(n) * 2 + 2048, 1));
  uint64_t y = emu.upload(std::vector<float>(size_t(n) * 2, 0.0f));
  Launch l;
  l.grid = {4, 1, 1};
  l.block = {128, 1, 1};
  l.scalar(1.5f).ptr(x + 1024 * 4).ptr(y).scalar(n);
  return capture("scale", l);
}

} // namespace

TEST_F(WorkerTest, BoundedRangesAreRestoredAtTheirOffsetFromThePointer) {
  const int n = 4096;
  Captured whole = scale_in_larger_buffers(n);
  // x by the bytes the launch reads, which start past the pointer's allocation base; y by the
  // bytes it writes.
  Captured c = bounded(bounded(whole, 0, 1024 * 4, (1024 + n) * 4), 1, 0, n * 4);
  EXPECT_LT(c.data.size(), whole.data.size() / 2);
  Job job = make_job("scale", CandidateKind::ptx, originals_ptx(), "scale", {&c});
  Verdict v = worker().run(job, data_of({&c}));
  EXPECT_EQ(v.kind, VerdictKind::not_faster) << describe(v);
}

TEST_F(WorkerTest, CandidateWritingOneElementPastTheBoundedRangeIsCaught) {
  const int n = 4096;
  Captured c = bounded(scale_in_larger_buffers(n), 1, 0, n * 4);
  // y[n] lies inside the application's allocation, but outside what the original can touch.
  const char* past = R"(
extern "C" __global__ void scale_past(float a, const float* x, float* y, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = a * x[i];
    if (blockIdx.x == 0 && threadIdx.x == 0) y[n] = 1.0f;
})";
  Verdict v = run_cuda(worker(), "scale", c, past, "scale_past");
  ASSERT_EQ(v.kind, VerdictKind::illegal_address) << describe(v);
  EXPECT_NE(v.message.find("outside the bytes the original can touch"), std::string::npos)
      << v.message;
  EXPECT_NE(v.message.find("past the end of parameter 2"), std::string::npos) << v.message;
}

TEST_F(WorkerTest, BoundedRangeTheOriginalWritesPastMakesTheCaptureUnusable) {
  const int n = 4096;
  // A wrong bound: y's range ends 256 bytes before the last byte the original writes.
  Captured c = bounded(scale_in_larger_buffers(n), 1, 0, n * 4 - 256);
  Job job = make_job("scale", CandidateKind::ptx, originals_ptx(), "scale", {&c});
  Verdict v = worker().run(job, data_of({&c}));
  ASSERT_EQ(v.kind, VerdictKind::unsupported) << describe(v);
  EXPECT_NE(v.message.find("unusable"), std::string::npos) << v.message;
  EXPECT_NE(v.message.find("the range was wrong"), std::string::npos) << v.message;
  // honed reads this and asks the application for whole allocations.
  EXPECT_EQ(json::parse(v.evidence_json).value("capture_unusable", ""), "bounded")
      << v.evidence_json;
}

// A perturbed copy halves the window's offset, so the original itself reads 2 MiB below the range
// of x the process copied (the emulated device faults, and the fault ends the context). That copy
// proves nothing about the candidate; the job still judges it on the capture, and only then does
// the worker give up its context.
TEST_F(WorkerTest, OriginalFaultingOnAPerturbedBoundedCopyDoesNotEndTheJob) {
  const int n = 4096, off = 1 << 20;
  Emu& emu = Emu::get();
  uint64_t x = emu.upload(random_floats(size_t(off) + n, 3));
  uint64_t y = emu.upload(std::vector<float>(n, 0.0f));
  Launch l;
  l.grid = {n / 128, 1, 1};
  l.block = {128, 1, 1};
  l.ptr(x).ptr(y).scalar(n).scalar(off);
  Captured c = bounded(capture("window", l), 0, uint64_t(off) * 4, (uint64_t(off) + n) * 4);
  EXPECT_LT(c.data.size(), 64u << 10);
  const char* same = R"(
extern "C" __global__ void window_c(const float* x, float* y, int n, int off)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[off + i];
})";
  WorkerProcess w1; // it exits after this job
  Verdict v = run_cuda(w1, "window", c, same, "window_c");
  ASSERT_TRUE(v.kind == VerdictKind::verified || v.kind == VerdictKind::not_faster) << describe(v);
  EXPECT_TRUE(v.worker_exits) << describe(v);
  auto e = json::parse(v.evidence_json);
  ASSERT_EQ(e["captures"].size(), 1u) << v.evidence_json;
  const auto& perturbed = e["captures"][0]["perturbed"];
  ASSERT_FALSE(perturbed.empty()) << v.evidence_json;
  EXPECT_NE(perturbed.back()["result"].get<std::string>().find(
                "the original reaches outside the capture's bounded ranges"),
            std::string::npos)
      << v.evidence_json;
  EXPECT_TRUE(e.contains("times_ns")) << v.evidence_json;

  // The same capture whole: the halved offset stays inside x, and the copy is compared.
  Captured whole = capture("window", l);
  Verdict w = run_cuda(worker(), "window", whole, same, "window_c");
  ASSERT_TRUE(w.kind == VerdictKind::verified || w.kind == VerdictKind::not_faster) << describe(w);
  EXPECT_FALSE(w.worker_exits);
  auto we = json::parse(w.evidence_json);
  EXPECT_EQ(we["captures"][0]["perturbed"].back()["result"], "equal") << w.evidence_json;
}

// A whole capture too: halving the stride makes the original read garbage indices and fault far
// outside `data` (sticky). The copy is skipped, the job is judged on the rest, and the worker
// exits after the verdict.
TEST_F(WorkerTest, OriginalFaultingOnAPerturbedCopyIsSkippedOnWholeCapturesToo) {
  const int n = 2048;
  Emu& emu = Emu::get();
  std::vector<int32_t> idx(size_t(n) * 2);
  for (int i = 0; i < n; ++i) {
    idx[size_t(i) * 2] = i;
    idx[size_t(i) * 2 + 1] = 0x7fffffff;
  }
  uint64_t d_idx = emu.upload(idx);
  uint64_t data = emu.upload(random_floats(size_t(n), 5));
  uint64_t out = emu.upload(std::vector<float>(size_t(n), 0.0f));
  Launch l;
  l.grid = {n / 128, 1, 1};
  l.block = {128, 1, 1};
  l.ptr(d_idx).ptr(data).ptr(out).scalar(n).scalar(2);
  Captured c = capture("strided_gather", l);
  const char* same = R"(
extern "C" __global__ void strided_gather_c(const int* idx, const float* data, float* out, int n,
                                            int stride)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = data[idx[i * stride]];
})";
  WorkerProcess w1; // it exits after this job
  Verdict v = run_cuda(w1, "strided_gather", c, same, "strided_gather_c");
  ASSERT_TRUE(v.kind == VerdictKind::verified || v.kind == VerdictKind::not_faster) << describe(v);
  EXPECT_TRUE(v.worker_exits) << describe(v);
  auto e = json::parse(v.evidence_json);
  const auto& perturbed = e["captures"][0]["perturbed"];
  ASSERT_FALSE(perturbed.empty()) << v.evidence_json;
  EXPECT_NE(perturbed.back()["result"].get<std::string>().find("skipped: the original faults on it"),
            std::string::npos)
      << v.evidence_json;
  EXPECT_TRUE(e.contains("context_lost_after")) << v.evidence_json;
}
