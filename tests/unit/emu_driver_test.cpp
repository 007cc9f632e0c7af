// Conformance of the emulated driver's API layer (emu/driver_*.cpp): every entry point it
// implements, its error paths, cuGetProcAddress, the stream/event clock model, sticky errors.
//
// This is an ordinary driver-API program: it includes cuda.h and links the emulated libcuda.so.1.
// What must happen before cuInit, or must watch stderr, runs in a child (this binary re-executed
// with HONE_EMU_DRIVER_TEST_PROBE set), since cuInit cannot be undone in a process.
// Deprecated entry points (cuDeviceComputeCapability, ...) are part of what is tested.
#define CUDA_ENABLE_DEPRECATED
#include <cuda.h>
#include <cudaProfiler.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cctype>
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
#include <thread>
#include <unistd.h>
#include <vector>

extern char** environ;

namespace {

// --- kernels
// ---------------------------------------------------------------------------------------

// c[i] = a[i] + b[i] for i < n.
constexpr const char* k_vec_add_ptx = R"(
.version 8.0
.target sm_90
.address_size 64

.visible .entry vec_add(
    .param .u64 a, .param .u64 b, .param .u64 c, .param .u32 n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<11>;
    ld.param.u64 %rd1, [a];
    ld.param.u64 %rd2, [b];
    ld.param.u64 %rd3, [c];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd4, %rd1;
    cvta.to.global.u64 %rd5, %rd2;
    cvta.to.global.u64 %rd6, %rd3;
    mul.wide.u32 %rd7, %r5, 4;
    add.s64 %rd8, %rd4, %rd7;
    add.s64 %rd9, %rd5, %rd7;
    add.s64 %rd10, %rd6, %rd7;
    ld.global.f32 %f1, [%rd8];
    ld.global.f32 %f2, [%rd9];
    add.f32 %f3, %f1, %f2;
    st.global.f32 [%rd10], %f3;
DONE:
    ret;
}
)";

// A module with a variable, a constant, dynamic shared memory, a faulting store, an endless loop
// and a call the executor cannot run.
constexpr const char* k_misc_ptx = R"(
.version 8.0
.target sm_90
.address_size 64

.global .align 4 .u32 counter = 7;
.const .align 4 .f32 scale = 2.0;
.extern .shared .align 4 .b8 dyn[];

// out[i] = in[i] * scale + counter
.visible .entry scale_add(.param .u64 in, .param .u64 out)
{
    .reg .b32 %r<4>;
    .reg .f32 %f<5>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd1, %rd3;
    add.s64 %rd5, %rd2, %rd3;
    ld.global.f32 %f1, [%rd4];
    ld.const.f32 %f2, [scale];
    ld.global.u32 %r2, [counter];
    cvt.rn.f32.u32 %f3, %r2;
    fma.rn.f32 %f4, %f1, %f2, %f3;
    st.global.f32 [%rd5], %f4;
    ret;
}

// out[tid] = tid, through dynamic shared memory.
.visible .entry through_shared(.param .u64 out)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    mov.u64 %rd3, dyn;
    add.s64 %rd3, %rd3, %rd2;
    st.shared.u32 [%rd3], %r1;
    bar.sync 0;
    ld.shared.u32 %r2, [%rd3];
    add.s64 %rd4, %rd1, %rd2;
    st.global.u32 [%rd4], %r2;
    ret;
}

// Stores to the address it is given: a bad one faults.
.visible .entry store_to(.param .u64 p)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [p];
    mov.u32 %r1, 1;
    st.global.u32 [%rd1], %r1;
    ret;
}

.visible .entry spin()
{
LOOP:
    bra.uni LOOP;
}

.visible .entry no_params()
{
    ret;
}
)";

constexpr const char* k_unsupported_ptx = R"(
.version 8.0
.target sm_90
.address_size 64

.extern .func ext_fn();

.visible .entry needs_ext()
{
    call ext_fn;
    ret;
}
)";

// Kernels whose results depend on the order of racing accesses (HONE_EMU_SCHEDULE_SEED).
constexpr const char* k_racy_ptx = R"(
.version 8.0
.target sm_90
.address_size 64

// Each block takes a ticket and writes its index at it: out lists the blocks in the order they
// ran. Launched with one thread per block.
.visible .entry ticket(.param .u64 counter, .param .u64 out)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [counter];
    ld.param.u64 %rd2, [out];
    atom.global.add.u32 %r1, [%rd1], 1;
    mov.u32 %r2, %ctaid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r2;
    ret;
}

// Lane 0 of every warp writes its warp index to one shared slot, with no barrier between the
// writes; after a barrier thread 0 copies the slot out: the warp that wrote last.
.visible .entry last_writer(.param .u64 out)
{
    .reg .pred %p<3>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<4>;
    .shared .align 4 .u32 slot;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    shr.u32 %r2, %r1, 5;
    and.b32 %r3, %r1, 31;
    setp.ne.u32 %p1, %r3, 0;
    @%p1 bra SYNC;
    st.shared.u32 [slot], %r2;
SYNC:
    bar.sync 0;
    setp.ne.u32 %p2, %r1, 0;
    @%p2 bra DONE;
    ld.shared.u32 %r4, [slot];
    mov.u32 %r5, %ctaid.x;
    mul.wide.u32 %rd2, %r5, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r4;
DONE:
    ret;
}
)";

// --- helpers
// ------------------------------------------------------------------------------------------

#define CU_OK(call) ASSERT_EQ(CUDA_SUCCESS, (call))

std::string error_name(CUresult rc) {
  const char* name = nullptr;
  return cuGetErrorName(rc, &name) == CUDA_SUCCESS ? name : std::to_string(rc);
}

// Compare CUresults by name, so failures read CUDA_ERROR_INVALID_VALUE rather than 1.
#define EXPECT_CU(expected, call) EXPECT_EQ(error_name(expected), error_name(call))
#define ASSERT_CU(expected, call) ASSERT_EQ(error_name(expected), error_name(call))

void* libcuda() {
  static void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  return lib;
}

// The address of an exported function of the emulated driver, by ABI name.
void* exported(const char* name) {
  return dlsym(libcuda(), name);
}

std::filesystem::path scratch_dir() {
  auto dir = std::filesystem::path(HONE_BINARY_DIR) / "tests" / "emu_driver";
  std::filesystem::create_directories(dir);
  return dir;
}

std::string write_file(const std::string& name, const std::string& text) {
  auto path = scratch_dir() / name;
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Run a command; true if it exits 0.
bool run(const std::string& cmd) {
  return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0;
}

// The identifiers of C source text and where each ends (for the header scans below; std::regex
// trips GCC 12's -Wmaybe-uninitialized in sanitizer builds).
struct Word {
  std::string text;
  size_t end = 0;
};

std::vector<Word> words(const std::string& text) {
  std::vector<Word> out;
  auto is_word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t i = 0; i < text.size();) {
    if (!is_word(text[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() && is_word(text[j])) ++j;
    out.push_back({text.substr(i, j - i), j});
    i = j;
  }
  return out;
}

// The first character at or after `pos` that is not white space, or '\0'.
char next_char(const std::string& text, size_t pos) {
  while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos]))) ++pos;
  return pos < text.size() ? text[pos] : '\0';
}

uint64_t copy_ns_pcie(uint64_t bytes) {
  return 2000 + (bytes + 24) / 25;
}
uint64_t copy_ns_device(uint64_t bytes) {
  return 1000 + (bytes + 1499) / 1500;
}

float elapsed(CUevent a, CUevent b) {
  float ms = -1;
  EXPECT_EQ(CUDA_SUCCESS, cuEventElapsedTime(&ms, a, b));
  return ms;
}

// Every test runs in a context of its own, created fresh and destroyed after.
class Driver : public ::testing::Test {
protected:
  static void SetUpTestSuite() { ASSERT_EQ(CUDA_SUCCESS, cuInit(0)); }

  void SetUp() override { CU_OK(cuCtxCreate(&m_ctx, nullptr, 0, 0)); }

  void TearDown() override {
    if (m_ctx != nullptr) cuCtxDestroy(m_ctx);
    CUcontext c = nullptr;
    while (cuCtxPopCurrent(&c) == CUDA_SUCCESS) {
    }
  }

  CUmodule load(const char* ptx) {
    CUmodule m = nullptr;
    EXPECT_EQ(CUDA_SUCCESS, cuModuleLoadData(&m, ptx));
    return m;
  }

  CUfunction function(CUmodule m, const char* name) {
    CUfunction f = nullptr;
    EXPECT_EQ(CUDA_SUCCESS, cuModuleGetFunction(&f, m, name));
    return f;
  }

  CUdeviceptr alloc(size_t bytes) {
    CUdeviceptr p = 0;
    EXPECT_EQ(CUDA_SUCCESS, cuMemAlloc(&p, bytes));
    return p;
  }

  // Run vec_add on n elements of a[i] = i, b[i] = 2i and return c.
  std::vector<float> vec_add(CUfunction f, unsigned n, CUstream stream = nullptr) {
    std::vector<float> a(n), b(n), c(n, -1.0f);
    for (unsigned i = 0; i < n; ++i) {
      a[i] = float(i);
      b[i] = float(2 * i);
    }
    CUdeviceptr da = alloc(n * 4), db = alloc(n * 4), dc = alloc(n * 4);
    EXPECT_EQ(CUDA_SUCCESS, cuMemcpyHtoD(da, a.data(), n * 4));
    EXPECT_EQ(CUDA_SUCCESS, cuMemcpyHtoD(db, b.data(), n * 4));
    void* args[] = {&da, &db, &dc, &n};
    EXPECT_EQ(CUDA_SUCCESS,
              cuLaunchKernel(f, (n + 127) / 128, 1, 1, 128, 1, 1, 0, stream, args, nullptr));
    EXPECT_EQ(CUDA_SUCCESS, cuMemcpyDtoH(c.data(), dc, n * 4));
    cuMemFree(da);
    cuMemFree(db);
    cuMemFree(dc);
    return c;
  }

  static bool vec_add_ok(const std::vector<float>& c) {
    for (size_t i = 0; i < c.size(); ++i) {
      if (c[i] != float(3 * i)) return false;
    }
    return true;
  }

  CUcontext m_ctx = nullptr;
};

// --- child processes
// ------------------------------------------------------------------------------

struct ChildResult {
  int exit_code = -1;
  std::string stderr_text;
};

// Re-run this binary as a probe (see probe_main below) with extra environment variables.
ChildResult run_probe(const std::string& probe, const std::vector<std::string>& env_extra = {}) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "HONE_EMU_LOG=", 13) != 0) env_strings.emplace_back(*e);
  }
  env_strings.push_back("HONE_EMU_DRIVER_TEST_PROBE=" + probe);
  for (const auto& e : env_extra) env_strings.push_back(e);
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
  if (posix_spawn(&pid, self.c_str(), &actions, nullptr, argv, envp.data()) != 0) return result;
  posix_spawn_file_actions_destroy(&actions);
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.stderr_text = read_file(err_path);
  return result;
}

// What a probe checks. Returns 0, or the line of the first failed check.
#define PROBE_CHECK(cond)                                                                          \
  do {                                                                                             \
    if (!(cond)) return __LINE__;                                                                  \
  } while (0)

int probe_not_initialized() {
  int n = -1;
  CUdevice dev = -1;
  CUcontext ctx = nullptr;
  CUdeviceptr p = 0;
  PROBE_CHECK(cuDeviceGetCount(&n) == CUDA_ERROR_NOT_INITIALIZED);
  PROBE_CHECK(cuDeviceGet(&dev, 0) == CUDA_ERROR_NOT_INITIALIZED);
  PROBE_CHECK(cuCtxGetCurrent(&ctx) == CUDA_ERROR_NOT_INITIALIZED);
  PROBE_CHECK(cuCtxCreate(&ctx, nullptr, 0, 0) == CUDA_ERROR_NOT_INITIALIZED);
  PROBE_CHECK(cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_ERROR_NOT_INITIALIZED);
  PROBE_CHECK(cuMemAlloc(&p, 16) == CUDA_ERROR_NOT_INITIALIZED);
  PROBE_CHECK(cuModuleLoadData(nullptr, k_vec_add_ptx) == CUDA_ERROR_NOT_INITIALIZED);
  PROBE_CHECK(cuStreamSynchronize(nullptr) == CUDA_ERROR_NOT_INITIALIZED);
  // These work before cuInit on the real driver too.
  int version = 0;
  PROBE_CHECK(cuDriverGetVersion(&version) == CUDA_SUCCESS && version == 13000);
  const char* name = nullptr;
  PROBE_CHECK(cuGetErrorName(CUDA_ERROR_NOT_INITIALIZED, &name) == CUDA_SUCCESS);
  void* fn = nullptr;
  PROBE_CHECK(cuGetProcAddress("cuInit", &fn, 13000, 0, nullptr) == CUDA_SUCCESS && fn != nullptr);
  PROBE_CHECK(cuInit(1) == CUDA_ERROR_INVALID_VALUE);
  PROBE_CHECK(cuDeviceGetCount(&n) == CUDA_ERROR_NOT_INITIALIZED);
  PROBE_CHECK(reinterpret_cast<CUresult (*)(unsigned)>(fn)(0) == CUDA_SUCCESS);
  PROBE_CHECK(cuDeviceGetCount(&n) == CUDA_SUCCESS && n == 1);
  return 0;
}

// Calls a stub twice and faults a kernel: what the log says is checked by the parent.
int probe_log() {
  PROBE_CHECK(cuInit(0) == CUDA_SUCCESS);
  CUcontext ctx = nullptr;
  PROBE_CHECK(cuCtxCreate(&ctx, nullptr, 0, 0) == CUDA_SUCCESS);
  PROBE_CHECK(cuArrayDestroy(nullptr) == CUDA_ERROR_NOT_SUPPORTED);
  PROBE_CHECK(cuArrayDestroy(nullptr) == CUDA_ERROR_NOT_SUPPORTED);
  CUmodule m = nullptr;
  PROBE_CHECK(cuModuleLoadData(&m, k_misc_ptx) == CUDA_SUCCESS);
  CUfunction f = nullptr;
  PROBE_CHECK(cuModuleGetFunction(&f, m, "store_to") == CUDA_SUCCESS);
  CUdeviceptr bad = 0x10;
  void* args[] = {&bad};
  PROBE_CHECK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr) == CUDA_SUCCESS);
  PROBE_CHECK(cuCtxSynchronize() == CUDA_ERROR_ILLEGAL_ADDRESS);
  PROBE_CHECK(cuCtxSynchronize() == CUDA_ERROR_ILLEGAL_ADDRESS);
  return 0;
}

// HONE_EMU_SCHEDULE_SEED as the validation worker sets it between runs: nullptr unsets it.
void set_schedule_seed(const char* seed) {
  if (seed == nullptr) {
    unsetenv("HONE_EMU_SCHEDULE_SEED");
  } else {
    setenv("HONE_EMU_SCHEDULE_SEED", seed, 1);
  }
}

// One racy launch under `seed`: its output and its modeled time.
struct RacyRun {
  std::vector<uint32_t> out;
  float ms = -1;
  bool ok = false;
};

constexpr unsigned k_ticket_blocks = 1000; // not a power of two: the permutation cycle-walks
constexpr unsigned k_writer_blocks = 16;
constexpr unsigned k_writer_warps = 8;

RacyRun run_racy(CUmodule m, const char* kernel, const char* seed) {
  RacyRun run;
  const bool tickets = std::strcmp(kernel, "ticket") == 0;
  const unsigned blocks = tickets ? k_ticket_blocks : k_writer_blocks;
  CUfunction f = nullptr;
  CUdeviceptr counter = 0, out = 0;
  CUevent start = nullptr, end = nullptr;
  if (cuModuleGetFunction(&f, m, kernel) != CUDA_SUCCESS ||
      cuMemAlloc(&counter, 4) != CUDA_SUCCESS || cuMemAlloc(&out, blocks * 4) != CUDA_SUCCESS || cuMemsetD32(counter, 0, 1) != CUDA_SUCCESS ||
      cuMemsetD32(out, 0xffffffffu, blocks) != CUDA_SUCCESS ||
      cuEventCreate(&start, 0) != CUDA_SUCCESS || cuEventCreate(&end, 0) != CUDA_SUCCESS)
    return run;
  set_schedule_seed(seed);
  void* ticket_args[] = {&counter, &out};
  void* writer_args[] = {&out};
  const unsigned threads = tickets ? 1 : k_writer_warps * 32;
  bool launched = cuEventRecord(start, nullptr) == CUDA_SUCCESS &&
                  cuLaunchKernel(f, blocks, 1, 1, threads, 1, 1, 0, nullptr,
                                 tickets ? ticket_args : writer_args, nullptr) == CUDA_SUCCESS &&
                  cuEventRecord(end, nullptr) == CUDA_SUCCESS;
  set_schedule_seed(nullptr);
  run.out.resize(blocks);
  run.ok = launched && cuCtxSynchronize() == CUDA_SUCCESS &&
           cuMemcpyDtoH(run.out.data(), out, blocks * 4) == CUDA_SUCCESS &&
           cuEventElapsedTime(&run.ms, start, end) == CUDA_SUCCESS;
  cuMemFree(counter);
  cuMemFree(out);
  cuEventDestroy(start);
  cuEventDestroy(end);
  return run;
}

// On one executor thread (HONE_EMU_THREADS=1), racy kernels give the fixed schedule's result
// without a seed, one result per seed, and a different one for seeds 1 and 2; the modeled time
// never changes.
int probe_schedule() {
  set_schedule_seed(nullptr);
  PROBE_CHECK(cuInit(0) == CUDA_SUCCESS);
  CUcontext ctx = nullptr;
  PROBE_CHECK(cuCtxCreate(&ctx, nullptr, 0, 0) == CUDA_SUCCESS);
  CUmodule m = nullptr;
  PROBE_CHECK(cuModuleLoadData(&m, k_racy_ptx) == CUDA_SUCCESS);

  // Blocks in grid order without a seed; a permutation of them with one.
  RacyRun fixed = run_racy(m, "ticket", nullptr);
  PROBE_CHECK(fixed.ok);
  for (uint32_t i = 0; i < k_ticket_blocks; ++i) PROBE_CHECK(fixed.out[i] == i);
  RacyRun one = run_racy(m, "ticket", "1");
  RacyRun one_again = run_racy(m, "ticket", "1");
  RacyRun two = run_racy(m, "ticket", "2");
  PROBE_CHECK(one.ok && one_again.ok && two.ok);
  PROBE_CHECK(one.out == one_again.out);
  PROBE_CHECK(one.out != two.out);
  PROBE_CHECK(one.out != fixed.out);
  std::vector<uint32_t> sorted = one.out;
  std::sort(sorted.begin(), sorted.end());
  PROBE_CHECK(sorted == fixed.out); // every block ran once
  PROBE_CHECK(one.ms == fixed.ms && two.ms == fixed.ms);
  // 0 and what is not a number mean the fixed schedule.
  PROBE_CHECK(run_racy(m, "ticket", "0").out == fixed.out);
  PROBE_CHECK(run_racy(m, "ticket", "not-a-seed").out == fixed.out);

  // Warps of a block: in index order without a seed, so warp 7 writes last everywhere.
  RacyRun writers = run_racy(m, "last_writer", nullptr);
  PROBE_CHECK(writers.ok);
  for (uint32_t w : writers.out) PROBE_CHECK(w == k_writer_warps - 1);
  RacyRun w1 = run_racy(m, "last_writer", "1");
  RacyRun w1_again = run_racy(m, "last_writer", "1");
  RacyRun w2 = run_racy(m, "last_writer", "2");
  PROBE_CHECK(w1.ok && w1_again.ok && w2.ok);
  PROBE_CHECK(w1.out == w1_again.out);
  PROBE_CHECK(w1.out != w2.out);
  PROBE_CHECK(w1.out != writers.out);
  for (uint32_t w : w1.out) PROBE_CHECK(w < k_writer_warps);
  PROBE_CHECK(w1.ms == writers.ms && w2.ms == writers.ms);
  return 0;
}

// Runs before main() in a probe child: the checks, then exit with their result.
const int k_probe_ran = [] {
  const char* probe = std::getenv("HONE_EMU_DRIVER_TEST_PROBE");
  if (probe == nullptr) {
    // Keep runaway kernels short in this process (read once by the executor).
    setenv("HONE_EMU_INSTRUCTION_BUDGET", "2000000", 0);
    return 0;
  }
  int rc = 99;
  if (std::strcmp(probe, "not_initialized") == 0) rc = probe_not_initialized();
  if (std::strcmp(probe, "log") == 0) rc = probe_log();
  if (std::strcmp(probe, "schedule") == 0) rc = probe_schedule();
  std::fflush(stderr);
  _exit(rc);
}();

// ==================================================================================================
// Initialization, driver and device
// ==================================================================================================

TEST(DriverProcess, EverythingButQueriesFailsBeforeCuInit) {
  ChildResult r = run_probe("not_initialized");
  EXPECT_EQ(0, r.exit_code) << "failed check at emu_driver_test.cpp line " << r.exit_code << "\n"
                            << r.stderr_text;
}

TEST(DriverProcess, LogsAStubOnceAndAFaultOnceWithThePrefix) {
  ChildResult r = run_probe("log");
  ASSERT_EQ(0, r.exit_code) << "failed check at line " << r.exit_code << "\n" << r.stderr_text;
  auto count = [&](const std::string& needle) {
    size_t n = 0;
    for (size_t pos = r.stderr_text.find(needle); pos != std::string::npos;
         pos = r.stderr_text.find(needle, pos + 1))
      ++n;
    return n;
  };
  EXPECT_EQ(1u, count("cuArrayDestroy")) << r.stderr_text;
  EXPECT_EQ(1u, count("CUDA_ERROR_ILLEGAL_ADDRESS")) << r.stderr_text;
  std::istringstream lines(r.stderr_text);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_EQ(0u, line.rfind("hone-emu: ", 0)) << line;
  }
  // The executor's message names the kernel.
  EXPECT_NE(std::string::npos, r.stderr_text.find("store_to")) << r.stderr_text;
}

TEST(DriverProcess, LogOffIsSilent) {
  ChildResult r = run_probe("log", {"HONE_EMU_LOG=off"});
  ASSERT_EQ(0, r.exit_code) << r.stderr_text;
  EXPECT_EQ("", r.stderr_text);
}

TEST(DriverProcess, TheScheduleSeedVariesRacyResultsDeterministically) {
  ChildResult r = run_probe("schedule", {"HONE_EMU_THREADS=1"});
  EXPECT_EQ(0, r.exit_code) << "failed check at emu_driver_test.cpp line " << r.exit_code << "\n"
                            << r.stderr_text;
}

TEST_F(Driver, VersionAndDevice) {
  int version = 0;
  CU_OK(cuDriverGetVersion(&version));
  EXPECT_EQ(13000, version);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuDriverGetVersion(nullptr));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuInit(1));

  int count = 0;
  CU_OK(cuDeviceGetCount(&count));
  EXPECT_EQ(1, count);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuDeviceGetCount(nullptr));
  CUdevice dev = -1;
  CU_OK(cuDeviceGet(&dev, 0));
  EXPECT_EQ(0, dev);
  EXPECT_CU(CUDA_ERROR_INVALID_DEVICE, cuDeviceGet(&dev, 1));
  EXPECT_CU(CUDA_ERROR_INVALID_DEVICE, cuDeviceGet(&dev, -1));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuDeviceGet(nullptr, 0));

  char name[256];
  CU_OK(cuDeviceGetName(name, sizeof name, 0));
  EXPECT_STREQ("hone emulated device (sm_90)", name);
  char small[5];
  CU_OK(cuDeviceGetName(small, sizeof small, 0));
  EXPECT_STREQ("hone", small);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuDeviceGetName(nullptr, 10, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuDeviceGetName(name, 0, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_DEVICE, cuDeviceGetName(name, sizeof name, 3));

  size_t total = 0;
  CU_OK(cuDeviceTotalMem(&total, 0));
  EXPECT_EQ(80ull << 30, total);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuDeviceTotalMem(nullptr, 0));
  int major = 0, minor = -1;
  CU_OK(cuDeviceComputeCapability(&major, &minor, 0));
  EXPECT_EQ(9, major);
  EXPECT_EQ(0, minor);

  CUuuid uuid1{}, uuid2{};
  CU_OK(cuDeviceGetUuid(&uuid1, 0));
  CU_OK(cuDeviceGetUuid(&uuid2, 0));
  EXPECT_EQ(0, std::memcmp(&uuid1, &uuid2, sizeof uuid1));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuDeviceGetUuid(nullptr, 0));

  char bus[32];
  CU_OK(cuDeviceGetPCIBusId(bus, sizeof bus, 0));
  EXPECT_STREQ("0000:01:00.0", bus);
  CUdevice by_bus = -1;
  CU_OK(cuDeviceGetByPCIBusId(&by_bus, bus));
  EXPECT_EQ(0, by_bus);
  EXPECT_CU(CUDA_ERROR_INVALID_DEVICE, cuDeviceGetByPCIBusId(&by_bus, "0000:02:00.0"));

  int peer = -1;
  CU_OK(cuDeviceCanAccessPeer(&peer, 0, 0));
  EXPECT_EQ(0, peer);
  EXPECT_CU(CUDA_ERROR_INVALID_DEVICE, cuDeviceCanAccessPeer(&peer, 0, 1));

  CUdevprop prop{};
  CU_OK(cuDeviceGetProperties(&prop, 0));
  EXPECT_EQ(1024, prop.maxThreadsPerBlock);
  EXPECT_EQ(32, prop.SIMDWidth);
}

TEST_F(Driver, DeviceAttributes) {
  std::map<CUdevice_attribute, int> expected = {
      {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 132},
      {CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32},
      {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024},
      {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, 1024},
      {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, 64},
      {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, 2147483647},
      {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, 65535},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, 48 * 1024},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 227 * 1024},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, 228 * 1024},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0},
      {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, 2048},
      {CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1},
      {CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, 1},
      {CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 1},
      {CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 1},
      {CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 1},
      {CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES, 0},
      {CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED, 1},
      {CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1},
  };
  for (int a = 1; a < CU_DEVICE_ATTRIBUTE_MAX; ++a) {
    int v = -12345;
    ASSERT_CU(CUDA_SUCCESS, cuDeviceGetAttribute(&v, CUdevice_attribute(a), 0))
        << "attribute " << a;
    EXPECT_NE(-12345, v);
    auto it = expected.find(CUdevice_attribute(a));
    if (it != expected.end()) {
      EXPECT_EQ(it->second, v) << "attribute " << a;
    }
  }
  int v = 0;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuDeviceGetAttribute(&v, CUdevice_attribute(0), 0));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuDeviceGetAttribute(&v, CUdevice_attribute(-3), 0));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuDeviceGetAttribute(nullptr, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_DEVICE, cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 1));
}

// Every CUresult cuda.h defines has its own name and a string.
TEST(DriverErrors, EveryCUresultHasANameAndAString) {
  std::string header = read_file(std::string(HONE_CUDA_INCLUDE) + "/cuda.h");
  size_t begin = header.find("typedef enum cudaError_enum");
  size_t end = header.find("} CUresult;", begin);
  ASSERT_NE(std::string::npos, begin);
  std::string body = header.substr(begin, end - begin);
  size_t n = 0;
  std::vector<Word> w = words(body);
  for (size_t i = 0; i + 1 < w.size(); ++i) {
    const std::string& id = w[i].text;
    if (id != "CUDA_SUCCESS" && id.rfind("CUDA_ERROR_", 0) != 0) continue;
    if (next_char(body, w[i].end) != '=') continue;
    auto code = CUresult(std::stoi(w[i + 1].text));
    const char* name = nullptr;
    const char* text = nullptr;
    ASSERT_CU(CUDA_SUCCESS, cuGetErrorName(code, &name)) << id;
    EXPECT_EQ(id, name);
    ASSERT_CU(CUDA_SUCCESS, cuGetErrorString(code, &text)) << id;
    EXPECT_GT(std::strlen(text), 0u);
    ++n;
  }
  EXPECT_GT(n, 90u);
  const char* s = "unchanged";
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGetErrorName(CUresult(12345), &s));
  EXPECT_EQ(nullptr, s);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGetErrorString(CUresult(12345), &s));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGetErrorName(CUDA_SUCCESS, nullptr));
  const char* text = nullptr;
  CU_OK(cuGetErrorString(CUDA_ERROR_ILLEGAL_ADDRESS, &text));
  EXPECT_STREQ("an illegal memory access was encountered", text);
}

// ==================================================================================================
// Contexts
// ==================================================================================================

TEST_F(Driver, CreateMakesCurrentAndValidates) {
  CUcontext cur = nullptr;
  CU_OK(cuCtxGetCurrent(&cur));
  EXPECT_EQ(m_ctx, cur);
  CUdevice dev = -1;
  CU_OK(cuCtxGetDevice(&dev));
  EXPECT_EQ(0, dev);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuCtxGetCurrent(nullptr));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuCtxGetDevice(nullptr));

  CUcontext c = nullptr;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuCtxCreate(nullptr, nullptr, 0, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_DEVICE, cuCtxCreate(&c, nullptr, 0, 1));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuCtxCreate(&c, nullptr, 0x100, 0));
  CUexecAffinityParam affinity{};
  CUctxCreateParams params{&affinity, 1, nullptr};
  EXPECT_CU(CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY, cuCtxCreate(&c, &params, 0, 0));

  // The legacy entry points create contexts too.
  using CreateV2 = CUresult (*)(CUcontext*, unsigned, CUdevice);
  auto create_v2 = reinterpret_cast<CreateV2>(exported("cuCtxCreate_v2"));
  ASSERT_NE(nullptr, create_v2);
  CU_OK(create_v2(&c, CU_CTX_SCHED_BLOCKING_SYNC, 0));
  unsigned flags = 0;
  CU_OK(cuCtxGetFlags(&flags));
  EXPECT_EQ(unsigned(CU_CTX_SCHED_BLOCKING_SYNC), flags);
  CU_OK(cuCtxSetFlags(CU_CTX_SCHED_SPIN));
  CU_OK(cuCtxGetFlags(&flags));
  EXPECT_EQ(unsigned(CU_CTX_SCHED_SPIN), flags);
  unsigned long long id1 = 0, id2 = 0;
  CU_OK(cuCtxGetId(c, &id1));
  CU_OK(cuCtxGetId(m_ctx, &id2));
  EXPECT_NE(id1, id2);
  unsigned api = 0;
  CU_OK(cuCtxGetApiVersion(nullptr, &api));
  EXPECT_EQ(3020u, api);
  CU_OK(cuCtxSynchronize_v2(m_ctx)); // the explicit-context forms
  CUdevice dev2 = -1;
  CU_OK(cuCtxGetDevice_v2(&dev2, m_ctx));
  EXPECT_EQ(0, dev2);
  CU_OK(cuCtxDestroy(c));
  CU_OK(cuCtxGetCurrent(&cur));
  EXPECT_EQ(m_ctx, cur); // destroying the current context popped it
}

TEST_F(Driver, PushPopAndSetCurrent) {
  CUcontext second = nullptr;
  CU_OK(cuCtxCreate(&second, nullptr, 0, 0));
  CUcontext cur = nullptr, popped = nullptr;
  CU_OK(cuCtxPopCurrent(&popped));
  EXPECT_EQ(second, popped);
  CU_OK(cuCtxGetCurrent(&cur));
  EXPECT_EQ(m_ctx, cur);
  CU_OK(cuCtxPushCurrent(second));
  CU_OK(cuCtxGetCurrent(&cur));
  EXPECT_EQ(second, cur);
  CU_OK(cuCtxSetCurrent(m_ctx)); // replaces the top
  CU_OK(cuCtxGetCurrent(&cur));
  EXPECT_EQ(m_ctx, cur);
  CU_OK(cuCtxPopCurrent(&popped));
  EXPECT_EQ(m_ctx, popped);
  CU_OK(cuCtxPopCurrent(&popped)); // the original push of m_ctx
  CU_OK(cuCtxGetCurrent(&cur));
  EXPECT_EQ(nullptr, cur);
  EXPECT_CU(CUDA_ERROR_INVALID_CONTEXT, cuCtxPopCurrent(&popped));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuCtxPushCurrent(nullptr));
  CU_OK(cuCtxSetCurrent(second));
  CU_OK(cuCtxSetCurrent(nullptr)); // pops
  CU_OK(cuCtxGetCurrent(&cur));
  EXPECT_EQ(nullptr, cur);
  CU_OK(cuCtxSetCurrent(nullptr)); // no-op on an empty stack
  CU_OK(cuCtxDestroy(second));
  EXPECT_CU(CUDA_ERROR_INVALID_CONTEXT, cuCtxPushCurrent(second));
  EXPECT_CU(CUDA_ERROR_INVALID_CONTEXT, cuCtxSetCurrent(second));
  EXPECT_CU(CUDA_ERROR_INVALID_CONTEXT, cuCtxDestroy(second));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuCtxDestroy(nullptr));
}

TEST_F(Driver, TheContextStackIsPerThread) {
  CUcontext seen = m_ctx;
  CUresult rc = CUDA_ERROR_UNKNOWN;
  std::thread([&] { rc = cuCtxGetCurrent(&seen); }).join();
  CU_OK(rc);
  EXPECT_EQ(nullptr, seen);
}

TEST_F(Driver, NoCurrentContextIsInvalidContext) {
  CUmodule m = load(k_vec_add_ptx);
  CUfunction f = function(m, "vec_add");
  CUdeviceptr p = alloc(64);
  CUcontext popped = nullptr;
  CU_OK(cuCtxPopCurrent(&popped));
  CUdeviceptr q = 0;
  EXPECT_CU(CUDA_ERROR_INVALID_CONTEXT, cuMemAlloc(&q, 64));
  EXPECT_CU(CUDA_ERROR_INVALID_CONTEXT, cuMemFree(p));
  EXPECT_CU(CUDA_ERROR_INVALID_CONTEXT, cuMemsetD8(p, 0, 64));
  EXPECT_CU(CUDA_ERROR_INVALID_CONTEXT, cuCtxSynchronize());
  CUstream s = nullptr;
  EXPECT_CU(CUDA_ERROR_INVALID_CONTEXT, cuStreamCreate(&s, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_CONTEXT, cuStreamSynchronize(nullptr));
  CUevent e = nullptr;
  EXPECT_CU(CUDA_ERROR_INVALID_CONTEXT, cuEventCreate(&e, 0));
  CUmodule m2 = nullptr;
  EXPECT_CU(CUDA_ERROR_INVALID_CONTEXT, cuModuleLoadData(&m2, k_vec_add_ptx));
  CUfunction f2 = nullptr;
  EXPECT_CU(CUDA_ERROR_INVALID_CONTEXT, cuModuleGetFunction(&f2, m, "vec_add"));
  EXPECT_CU(CUDA_ERROR_INVALID_CONTEXT,
            cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr));
  EXPECT_CU(CUDA_ERROR_INVALID_CONTEXT, cuModuleUnload(m));
  size_t free_bytes = 0, total = 0;
  EXPECT_CU(CUDA_ERROR_INVALID_CONTEXT, cuMemGetInfo(&free_bytes, &total));
  CU_OK(cuCtxPushCurrent(popped));
}

TEST_F(Driver, ADestroyedContextIsDestroyedForThreadsThatStillHaveIt) {
  CUcontext other = nullptr;
  CU_OK(cuCtxCreate(&other, nullptr, 0, 0));
  CUresult sync = CUDA_SUCCESS;
  std::atomic<int> step{0};
  std::thread t([&] {
    cuCtxSetCurrent(other);
    step = 1;
    while (step != 2) std::this_thread::yield();
    sync = cuCtxSynchronize();
  });
  while (step != 1) std::this_thread::yield();
  CU_OK(cuCtxDestroy(other));
  step = 2;
  t.join();
  EXPECT_CU(CUDA_ERROR_CONTEXT_IS_DESTROYED, sync);
}

TEST_F(Driver, DestroyingAContextFreesWhatItOwns) {
  CUcontext other = nullptr;
  CU_OK(cuCtxCreate(&other, nullptr, 0, 0));
  CUdeviceptr p = alloc(4096);
  void* host = nullptr;
  CU_OK(cuMemAllocHost(&host, 4096));
  CUmodule m = load(k_vec_add_ptx);
  CUfunction f = function(m, "vec_add");
  CUstream s = nullptr;
  CU_OK(cuStreamCreate(&s, 0));
  CUevent e = nullptr;
  CU_OK(cuEventCreate(&e, 0));
  CU_OK(cuCtxDestroy(other));
  // m_ctx is current again; everything of `other` is gone.
  CUdeviceptr base = 0;
  EXPECT_CU(CUDA_ERROR_NOT_FOUND, cuMemGetAddressRange(&base, nullptr, p));
  EXPECT_CU(CUDA_ERROR_NOT_FOUND, cuMemGetAddressRange(&base, nullptr, CUdeviceptr(host)));
  CUfunction f2 = nullptr;
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuModuleGetFunction(&f2, m, "vec_add"));
  int v = 0;
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, f));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE,
            cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuStreamSynchronize(s));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuEventQuery(e));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuModuleUnload(m));
}

TEST_F(Driver, PrimaryContextIsRefcountedAndKeepsItsHandle) {
  unsigned flags = 99;
  int active = -1;
  CU_OK(cuDevicePrimaryCtxReset(0));
  CU_OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
  EXPECT_EQ(0, active);
  EXPECT_CU(CUDA_ERROR_INVALID_CONTEXT, cuDevicePrimaryCtxRelease(0));
  CU_OK(cuDevicePrimaryCtxSetFlags(0, CU_CTX_SCHED_YIELD));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuDevicePrimaryCtxSetFlags(0, 0x1000));
  EXPECT_CU(CUDA_ERROR_INVALID_DEVICE, cuDevicePrimaryCtxGetState(1, &flags, &active));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuDevicePrimaryCtxGetState(0, nullptr, &active));
  CUcontext none = nullptr;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuDevicePrimaryCtxRetain(nullptr, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_DEVICE, cuDevicePrimaryCtxRetain(&none, 1));

  CUcontext p1 = nullptr, p2 = nullptr;
  CU_OK(cuDevicePrimaryCtxRetain(&p1, 0));
  CU_OK(cuDevicePrimaryCtxRetain(&p2, 0));
  EXPECT_EQ(p1, p2);
  CU_OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
  EXPECT_EQ(1, active);
  EXPECT_EQ(unsigned(CU_CTX_SCHED_YIELD), flags);
  EXPECT_CU(CUDA_ERROR_INVALID_CONTEXT, cuCtxDestroy(p1)); // released, never destroyed

  CU_OK(cuCtxPushCurrent(p1));
  CUdeviceptr p = alloc(256);
  CU_OK(cuDevicePrimaryCtxRelease(0));
  CU_OK(cuMemsetD8(p, 1, 256)); // one reference left
  CU_OK(cuDevicePrimaryCtxRelease(0));
  CU_OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
  EXPECT_EQ(0, active);
  // Inactive but still current: the context is "destroyed" until retained again.
  EXPECT_CU(CUDA_ERROR_CONTEXT_IS_DESTROYED, cuCtxSynchronize());
  CUcontext p3 = nullptr;
  CU_OK(cuDevicePrimaryCtxRetain(&p3, 0));
  EXPECT_EQ(p1, p3);
  CU_OK(cuCtxSynchronize());
  CUdeviceptr base = 0;
  EXPECT_CU(CUDA_ERROR_NOT_FOUND, cuMemGetAddressRange(&base, nullptr, p)); // freed on release
  CU_OK(cuDevicePrimaryCtxReset(0));
  CU_OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
  EXPECT_EQ(0, active);
  CU_OK(cuDevicePrimaryCtxSetFlags(0, 0));
}

TEST_F(Driver, LimitsPriorityRangeAndCacheConfig) {
  size_t v = 0;
  CU_OK(cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE));
  EXPECT_EQ(1024u, v);
  CU_OK(cuCtxGetLimit(&v, CU_LIMIT_PRINTF_FIFO_SIZE));
  EXPECT_EQ(1u << 20, v);
  CU_OK(cuCtxGetLimit(&v, CU_LIMIT_MALLOC_HEAP_SIZE));
  EXPECT_EQ(8u << 20, v);
  CU_OK(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 4096));
  CU_OK(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 64 << 20));
  CU_OK(cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE));
  EXPECT_EQ(4096u, v);
  CU_OK(cuCtxGetLimit(&v, CU_LIMIT_MALLOC_HEAP_SIZE));
  EXPECT_EQ(64u << 20, v);
  EXPECT_CU(CUDA_ERROR_UNSUPPORTED_LIMIT, cuCtxGetLimit(&v, CU_LIMIT_MAX));
  EXPECT_CU(CUDA_ERROR_UNSUPPORTED_LIMIT, cuCtxSetLimit(CUlimit(77), 1));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuCtxGetLimit(nullptr, CU_LIMIT_STACK_SIZE));

  int least = 1, greatest = 1;
  CU_OK(cuCtxGetStreamPriorityRange(&least, &greatest));
  EXPECT_EQ(0, least);
  EXPECT_EQ(-5, greatest);
  CU_OK(cuCtxGetStreamPriorityRange(nullptr, nullptr));

  CUfunc_cache cache = CU_FUNC_CACHE_PREFER_L1;
  CU_OK(cuCtxGetCacheConfig(&cache));
  EXPECT_EQ(CU_FUNC_CACHE_PREFER_NONE, cache);
  CU_OK(cuCtxSetCacheConfig(CU_FUNC_CACHE_PREFER_SHARED));
  CU_OK(cuCtxGetCacheConfig(&cache));
  EXPECT_EQ(CU_FUNC_CACHE_PREFER_SHARED, cache);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuCtxSetCacheConfig(CUfunc_cache(9)));

  CU_OK(cuProfilerStart());
  CU_OK(cuProfilerStop());
}

// ==================================================================================================
// Memory
// ==================================================================================================

TEST_F(Driver, AllocFreeAndInfo) {
  size_t free0 = 0, total = 0;
  CU_OK(cuMemGetInfo(&free0, &total));
  EXPECT_EQ(80ull << 30, total);
  CUdeviceptr p = alloc(1ull << 30);
  size_t free1 = 0;
  CU_OK(cuMemGetInfo(&free1, &total));
  EXPECT_EQ(free0 - (1ull << 30), free1);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemGetInfo(nullptr, &total));

  CUdeviceptr q = 0;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemAlloc(nullptr, 16));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemAlloc(&q, 0));
  EXPECT_CU(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc(&q, 100ull << 30));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemFree(p + 16)); // not a base
  CU_OK(cuMemFree(p));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemFree(p)); // twice
  CU_OK(cuMemFree(0));
  EXPECT_EQ(0u, p % 256);
}

TEST_F(Driver, AddressRange) {
  CUdeviceptr p = alloc(1000);
  CUdeviceptr base = 0;
  size_t size = 0;
  CU_OK(cuMemGetAddressRange(&base, &size, p + 999));
  EXPECT_EQ(p, base);
  EXPECT_EQ(1000u, size);
  CU_OK(cuMemGetAddressRange(nullptr, &size, p));
  CU_OK(cuMemGetAddressRange(&base, nullptr, p));
  int on_stack = 0;
  EXPECT_CU(CUDA_ERROR_NOT_FOUND, cuMemGetAddressRange(&base, &size, CUdeviceptr(&on_stack)));
}

TEST_F(Driver, PinnedHostMemory) {
  void* h = nullptr;
  CU_OK(cuMemAllocHost(&h, 4096));
  std::memset(h, 0xab, 4096); // ordinary host memory
  CUdeviceptr d = 0;
  CU_OK(cuMemHostGetDevicePointer(&d, h, 0));
  EXPECT_EQ(CUdeviceptr(h), d);
  CU_OK(cuMemHostGetDevicePointer(&d, static_cast<char*>(h) + 100, 0));
  EXPECT_EQ(CUdeviceptr(h) + 100, d);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemHostGetDevicePointer(&d, h, 1));
  CUdeviceptr dev = alloc(64);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuMemHostGetDevicePointer(&d, reinterpret_cast<void*>(dev), 0));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemFreeHost(reinterpret_cast<void*>(dev)));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemFree(CUdeviceptr(h)));

  void* h2 = nullptr;
  CU_OK(cuMemHostAlloc(&h2, 128, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
  unsigned flags = 0;
  CU_OK(cuMemHostGetFlags(&flags, h2));
  EXPECT_EQ(unsigned(CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE), flags);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemHostAlloc(&h2, 128, 0x80));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemHostAlloc(nullptr, 128, 0));
  CU_OK(cuMemFreeHost(h2));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemFreeHost(h2));
  CU_OK(cuMemFreeHost(h));
}

TEST_F(Driver, CopiesAndTheirRangeChecks) {
  std::vector<uint8_t> src(1000), dst(1000, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t(i * 7);
  CUdeviceptr a = alloc(1000), b = alloc(1000);
  CU_OK(cuMemcpyHtoD(a, src.data(), 1000));
  CU_OK(cuMemcpyDtoD(b, a, 1000));
  CU_OK(cuMemcpyDtoH(dst.data(), b, 1000));
  EXPECT_EQ(src, dst);

  // Unified copies infer the direction; host-to-host works as on the real driver.
  std::vector<uint8_t> dst2(1000, 0);
  CU_OK(cuMemcpy(CUdeviceptr(dst2.data()), a, 1000));
  EXPECT_EQ(src, dst2);
  std::vector<uint8_t> dst3(1000, 0);
  CU_OK(cuMemcpy(CUdeviceptr(dst3.data()), CUdeviceptr(dst2.data()), 1000));
  EXPECT_EQ(src, dst3);

  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD(a, src.data(), 1001));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD(a + 500, src.data(), 501));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoH(dst.data(), a + 1, 1000));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoD(a, b + 1, 1000));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD(0x1000, src.data(), 10));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD(a, nullptr, 10));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemcpy(a + 900, CUdeviceptr(src.data()), 200));
  CU_OK(cuMemcpyHtoD(a, src.data(), 0)); // nothing to do
  CU_OK(cuMemFree(b));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD(b, src.data(), 10)); // freed

  CUstream s = nullptr;
  CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  std::vector<uint8_t> back(1000, 0);
  CUdeviceptr c = alloc(1000);
  CU_OK(cuMemcpyHtoDAsync(c, src.data(), 1000, s));
  CU_OK(cuMemcpyDtoDAsync(a, c, 1000, s));
  CU_OK(cuMemcpyAsync(CUdeviceptr(back.data()), a, 1000, s));
  CU_OK(cuStreamSynchronize(s));
  EXPECT_EQ(src, back);
  CU_OK(cuMemcpyDtoHAsync(back.data(), c, 1000, nullptr));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoHAsync(back.data(), c, 1001, s));
  CU_OK(cuStreamDestroy(s));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuMemcpyHtoDAsync(c, src.data(), 10, s));
}

TEST_F(Driver, Memsets) {
  CUdeviceptr p = alloc(64);
  std::vector<uint8_t> b(64);
  CU_OK(cuMemsetD8(p, 0x5a, 64));
  CU_OK(cuMemcpyDtoH(b.data(), p, 64));
  EXPECT_TRUE(std::all_of(b.begin(), b.end(), [](uint8_t v) { return v == 0x5a; }));
  std::vector<uint16_t> h(32);
  CU_OK(cuMemsetD16(p, 0x1234, 32));
  CU_OK(cuMemcpyDtoH(h.data(), p, 64));
  EXPECT_TRUE(std::all_of(h.begin(), h.end(), [](uint16_t v) { return v == 0x1234; }));
  std::vector<uint32_t> w(16);
  CU_OK(cuMemsetD32(p, 0xdeadbeef, 16));
  CU_OK(cuMemcpyDtoH(w.data(), p, 64));
  EXPECT_TRUE(std::all_of(w.begin(), w.end(), [](uint32_t v) { return v == 0xdeadbeef; }));
  CU_OK(cuMemsetD32Async(p, 7, 16, nullptr));
  CU_OK(cuMemsetD16Async(p, 9, 2, nullptr));
  CU_OK(cuMemsetD8Async(p + 63, 1, 1, nullptr));
  CU_OK(cuMemcpyDtoH(w.data(), p, 64));
  EXPECT_EQ(0x00090009u, w[0]);
  EXPECT_EQ(7u, w[1]);
  EXPECT_EQ(0x01000007u, w[15]);

  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemsetD8(p, 0, 65));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemsetD32(p + 2, 0, 1)); // misaligned
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemsetD16(p + 1, 0, 1));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemsetD32(p + 4, 0, 16));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemsetD8(0x1000, 0, 1));
  CU_OK(cuMemsetD8(p, 0, 0));
}

TEST_F(Driver, PointerAttributes) {
  CUdeviceptr d = alloc(100);
  void* h = nullptr;
  CU_OK(cuMemAllocHost(&h, 100));

  CUcontext ctx = nullptr;
  CU_OK(cuPointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, d + 10));
  EXPECT_EQ(m_ctx, ctx);
  unsigned type = 0;
  CU_OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d));
  EXPECT_EQ(unsigned(CU_MEMORYTYPE_DEVICE), type);
  CU_OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CUdeviceptr(h)));
  EXPECT_EQ(unsigned(CU_MEMORYTYPE_HOST), type);
  CUdeviceptr dp = 0;
  CU_OK(cuPointerGetAttribute(&dp, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, d + 5));
  EXPECT_EQ(d + 5, dp);
  void* hp = nullptr;
  CU_OK(cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, CUdeviceptr(h)));
  EXPECT_EQ(h, hp);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, d));
  void* start = nullptr;
  CU_OK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, d + 99));
  EXPECT_EQ(reinterpret_cast<void*>(d), start);
  size_t size = 0;
  CU_OK(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, d + 99));
  EXPECT_EQ(100u, size);
  bool managed = true;
  CU_OK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, d));
  EXPECT_FALSE(managed);
  int ordinal = -1;
  CU_OK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, d));
  EXPECT_EQ(0, ordinal);
  unsigned long long id1 = 0, id2 = 0;
  CU_OK(cuPointerGetAttribute(&id1, CU_POINTER_ATTRIBUTE_BUFFER_ID, d));
  CU_OK(cuPointerGetAttribute(&id2, CU_POINTER_ATTRIBUTE_BUFFER_ID, CUdeviceptr(h)));
  EXPECT_NE(id1, id2);

  int local = 0;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CUdeviceptr(&local)));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuPointerGetAttribute(nullptr, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d));

  // The batch form reports an unknown pointer with NULL defaults instead of failing.
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_CONTEXT, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                 CU_POINTER_ATTRIBUTE_HOST_POINTER};
  CUcontext actx = m_ctx;
  unsigned atype = 99;
  void* ahost = &local;
  void* data[] = {&actx, &atype, &ahost};
  CU_OK(cuPointerGetAttributes(3, attrs, data, CUdeviceptr(&local)));
  EXPECT_EQ(nullptr, actx);
  EXPECT_EQ(0u, atype);
  EXPECT_EQ(nullptr, ahost);
  CU_OK(cuPointerGetAttributes(3, attrs, data, d));
  EXPECT_EQ(m_ctx, actx);
  EXPECT_EQ(unsigned(CU_MEMORYTYPE_DEVICE), atype);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuPointerGetAttributes(0, attrs, data, d));
}

// ==================================================================================================
// Modules, libraries, functions
// ==================================================================================================

TEST_F(Driver, ModuleLoadDataAndFunctions) {
  CUmodule m = load(k_vec_add_ptx);
  CUfunction f = function(m, "vec_add");
  CUfunction again = function(m, "vec_add");
  EXPECT_EQ(f, again); // one handle per function
  CUfunction g = nullptr;
  EXPECT_CU(CUDA_ERROR_NOT_FOUND, cuModuleGetFunction(&g, m, "nope"));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuModuleGetFunction(&g, m, nullptr));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuModuleGetFunction(nullptr, m, "vec_add"));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE,
            cuModuleGetFunction(&g, reinterpret_cast<CUmodule>(0x1234), "vec_add"));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE,
            cuModuleGetFunction(&g, reinterpret_cast<CUmodule>(f), "vec_add"));

  const char* name = nullptr;
  CU_OK(cuFuncGetName(&name, f));
  EXPECT_STREQ("vec_add", name);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuFuncGetName(nullptr, f));
  CUmodule owner = nullptr;
  CU_OK(cuFuncGetModule(&owner, f));
  EXPECT_EQ(m, owner);
  unsigned count = 0;
  CU_OK(cuModuleGetFunctionCount(&count, m));
  EXPECT_EQ(1u, count);
  CUfunction all[2] = {};
  CU_OK(cuModuleEnumerateFunctions(all, 2, m));
  EXPECT_EQ(f, all[0]);
  CUfunctionLoadingState state = CU_FUNCTION_LOADING_STATE_UNLOADED;
  CU_OK(cuFuncIsLoaded(&state, f));
  EXPECT_EQ(CU_FUNCTION_LOADING_STATE_LOADED, state);
  CU_OK(cuFuncLoad(f));
  CUmoduleLoadingMode mode = CU_MODULE_LAZY_LOADING;
  CU_OK(cuModuleGetLoadingMode(&mode));
  EXPECT_EQ(CU_MODULE_EAGER_LOADING, mode);

  size_t offset = 0, size = 0;
  const size_t offsets[] = {0, 8, 16, 24}, sizes[] = {8, 8, 8, 4};
  for (size_t i = 0; i < 4; ++i) {
    CU_OK(cuFuncGetParamInfo(f, i, &offset, &size));
    EXPECT_EQ(offsets[i], offset);
    EXPECT_EQ(sizes[i], size);
  }
  CU_OK(cuFuncGetParamInfo(f, 3, &offset, nullptr));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuFuncGetParamInfo(f, 4, &offset, &size));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuFuncGetParamInfo(f, 0, nullptr, &size));

  EXPECT_TRUE(vec_add_ok(vec_add(f, 1000)));
  CU_OK(cuModuleUnload(m));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuModuleUnload(m));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuFuncGetName(&name, f));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE,
            cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr));
}

TEST_F(Driver, BadImages) {
  CUmodule m = nullptr;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuModuleLoadData(&m, nullptr));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuModuleLoadData(nullptr, k_vec_add_ptx));
  EXPECT_CU(CUDA_ERROR_INVALID_IMAGE, cuModuleLoadData(&m, "not an image at all"));
  EXPECT_CU(
      CUDA_ERROR_INVALID_PTX,
      cuModuleLoadData(&m, ".version 8.0\n.target sm_90\n.address_size 64\nthis is not ptx;\n"));

  // The error log JIT option receives the reason.
  char error_log[512] = {};
  char info_log[64] = "untouched";
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                            CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                            CU_JIT_OPTIMIZATION_LEVEL};
  void* values[] = {error_log, reinterpret_cast<void*>(uintptr_t(sizeof error_log)), info_log,
                    reinterpret_cast<void*>(uintptr_t(sizeof info_log)),
                    reinterpret_cast<void*>(3)};
  EXPECT_CU(CUDA_ERROR_INVALID_PTX,
            cuModuleLoadDataEx(&m, ".version 8.0\n.target sm_90\nbogus;\n", 5, options, values));
  EXPECT_GT(std::strlen(error_log), 0u);
  EXPECT_STREQ("", info_log);
  EXPECT_EQ(std::strlen(error_log) + 1, reinterpret_cast<uintptr_t>(values[1]));
  CU_OK(cuModuleLoadDataEx(&m, k_vec_add_ptx, 5, options, values));
  EXPECT_STREQ("", error_log);
  CU_OK(cuModuleLoadDataEx(&m, k_vec_add_ptx, 0, nullptr, nullptr));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuModuleLoadDataEx(&m, k_vec_add_ptx, 1, nullptr, nullptr));

  EXPECT_CU(CUDA_ERROR_FILE_NOT_FOUND, cuModuleLoad(&m, "/nonexistent/kernel.ptx"));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuModuleLoad(&m, nullptr));
}

TEST_F(Driver, ModuleFromFileAndFatbins) {
  std::string ptx_path = write_file("vec_add.ptx", k_vec_add_ptx);
  CUmodule m = nullptr;
  CU_OK(cuModuleLoad(&m, ptx_path.c_str()));
  EXPECT_TRUE(vec_add_ok(vec_add(function(m, "vec_add"), 300)));

  std::string nvcc = HONE_NVCC;
  std::string ptxas = HONE_PTXAS;
  if (!std::filesystem::exists(nvcc) || !std::filesystem::exists(ptxas)) {
    GTEST_SKIP() << "no nvcc/ptxas at " << nvcc << ": fatbin and cubin images not tested";
  }
  auto dir = scratch_dir();
  std::string fat_ptx = (dir / "vec_add_ptx.fatbin").string();
  std::string fat_sass = (dir / "vec_add_sass.fatbin").string();
  std::string cubin = (dir / "vec_add.cubin").string();
  ASSERT_TRUE(run(nvcc + " -fatbin -gencode arch=compute_90,code=compute_90 " + ptx_path + " -o " +
                  fat_ptx));
  ASSERT_TRUE(
      run(nvcc + " -fatbin -gencode arch=compute_90,code=sm_90 " + ptx_path + " -o " + fat_sass));
  ASSERT_TRUE(run(ptxas + " -arch=sm_90 " + ptx_path + " -o " + cubin));

  std::string image = read_file(fat_ptx);
  CU_OK(cuModuleLoadData(&m, image.data()));
  EXPECT_TRUE(vec_add_ok(vec_add(function(m, "vec_add"), 300)));
  CU_OK(cuModuleLoadFatBinary(&m, image.data()));
  EXPECT_TRUE(vec_add_ok(vec_add(function(m, "vec_add"), 300)));
  CU_OK(cuModuleLoad(&m, fat_ptx.c_str()));

  // SASS-only images cannot run on the emulated device.
  std::string sass = read_file(fat_sass);
  EXPECT_CU(CUDA_ERROR_NO_BINARY_FOR_GPU, cuModuleLoadData(&m, sass.data()));
  std::string elf = read_file(cubin);
  EXPECT_CU(CUDA_ERROR_NO_BINARY_FOR_GPU, cuModuleLoadData(&m, elf.data()));
  EXPECT_CU(CUDA_ERROR_NO_BINARY_FOR_GPU, cuModuleLoad(&m, cubin.c_str()));

  CUlibrary lib = nullptr;
  CU_OK(cuLibraryLoadData(&lib, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  CU_OK(cuLibraryUnload(lib));
}

TEST_F(Driver, GlobalsAndConstants) {
  CUmodule m = load(k_misc_ptx);
  CUdeviceptr counter = 0, scale = 0;
  size_t bytes = 0;
  CU_OK(cuModuleGetGlobal(&counter, &bytes, m, "counter"));
  EXPECT_EQ(4u, bytes);
  CU_OK(cuModuleGetGlobal(&scale, nullptr, m, "scale"));
  CU_OK(cuModuleGetGlobal(nullptr, &bytes, m, "scale"));
  EXPECT_CU(CUDA_ERROR_NOT_FOUND, cuModuleGetGlobal(&counter, &bytes, m, "absent"));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuModuleGetGlobal(&counter, &bytes, m, nullptr));
  uint32_t initial = 0;
  CU_OK(cuMemcpyDtoH(&initial, counter, 4));
  EXPECT_EQ(7u, initial); // the initializer
  float three = 3.0f;
  uint32_t ten = 10;
  CU_OK(cuMemcpyHtoD(scale, &three, 4)); // the host may write constant memory
  CU_OK(cuMemcpyHtoD(counter, &ten, 4));

  CUcontext ctx = nullptr;
  CU_OK(cuPointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, counter));
  EXPECT_EQ(m_ctx, ctx);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemFree(counter)); // owned by the module

  std::vector<float> in(32), out(32);
  for (int i = 0; i < 32; ++i) in[i] = float(i);
  CUdeviceptr din = alloc(128), dout = alloc(128);
  CU_OK(cuMemcpyHtoD(din, in.data(), 128));
  void* args[] = {&din, &dout};
  CU_OK(cuLaunchKernel(function(m, "scale_add"), 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr));
  CU_OK(cuMemcpyDtoH(out.data(), dout, 128));
  for (int i = 0; i < 32; ++i) EXPECT_EQ(float(i) * 3.0f + 10.0f, out[i]) << i;

  unsigned count = 0;
  CU_OK(cuModuleGetFunctionCount(&count, m));
  EXPECT_EQ(5u, count);
  CU_OK(cuModuleUnload(m));
  CUdeviceptr base = 0;
  EXPECT_CU(CUDA_ERROR_NOT_FOUND, cuMemGetAddressRange(&base, nullptr, counter));
}

TEST_F(Driver, LibrariesAndKernels) {
  CUcontext popped = nullptr;
  CU_OK(cuCtxPopCurrent(&popped));
  // Libraries are context-independent: loading needs no current context.
  CUlibrary lib = nullptr;
  CU_OK(cuLibraryLoadData(&lib, k_vec_add_ptx, nullptr, nullptr, 0, nullptr, nullptr, 0));
  CUkernel k = nullptr, k2 = nullptr;
  CU_OK(cuLibraryGetKernel(&k, lib, "vec_add"));
  CU_OK(cuLibraryGetKernel(&k2, lib, "vec_add"));
  EXPECT_EQ(k, k2);
  EXPECT_CU(CUDA_ERROR_NOT_FOUND, cuLibraryGetKernel(&k2, lib, "other"));
  unsigned count = 0;
  CU_OK(cuLibraryGetKernelCount(&count, lib));
  EXPECT_EQ(1u, count);
  CUkernel listed[1] = {};
  CU_OK(cuLibraryEnumerateKernels(listed, 1, lib));
  EXPECT_EQ(k, listed[0]);
  const char* name = nullptr;
  CU_OK(cuKernelGetName(&name, k));
  EXPECT_STREQ("vec_add", name);
  CUlibrary owner = nullptr;
  CU_OK(cuKernelGetLibrary(&owner, k));
  EXPECT_EQ(lib, owner);
  size_t offset = 0, size = 0;
  CU_OK(cuKernelGetParamInfo(k, 3, &offset, &size));
  EXPECT_EQ(24u, offset);
  EXPECT_EQ(4u, size);
  CU_OK(cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 100000, k, 0));
  int v = 0;
  CU_OK(cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k, 0));
  EXPECT_EQ(100000, v);
  CUfunction f = nullptr;
  EXPECT_CU(CUDA_ERROR_INVALID_CONTEXT, cuKernelGetFunction(&f, k));
  CUmodule mod = nullptr;
  EXPECT_CU(CUDA_ERROR_INVALID_CONTEXT, cuLibraryGetModule(&mod, lib));

  CU_OK(cuCtxPushCurrent(popped));
  CU_OK(cuKernelGetFunction(&f, k));
  CUfunction f2 = nullptr;
  CU_OK(cuKernelGetFunction(&f2, k));
  EXPECT_EQ(f, f2);
  CU_OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f));
  EXPECT_EQ(100000, v); // the kernel's attribute applies in the context
  CU_OK(cuLibraryGetModule(&mod, lib));
  CUmodule fmod = nullptr;
  CU_OK(cuFuncGetModule(&fmod, f));
  EXPECT_EQ(mod, fmod);
  EXPECT_TRUE(vec_add_ok(vec_add(f, 500)));
  // A CUkernel may be launched (and queried) as a CUfunction.
  EXPECT_TRUE(vec_add_ok(vec_add(reinterpret_cast<CUfunction>(k), 500)));
  CU_OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                           reinterpret_cast<CUfunction>(k)));
  EXPECT_EQ(1024, v);

  // Another context gets its own module of the same library.
  CUcontext other = nullptr;
  CU_OK(cuCtxCreate(&other, nullptr, 0, 0));
  CUfunction f_other = nullptr;
  CU_OK(cuKernelGetFunction(&f_other, k));
  EXPECT_NE(f, f_other);
  EXPECT_TRUE(vec_add_ok(vec_add(reinterpret_cast<CUfunction>(k), 100)));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE,
            cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr));
  CU_OK(cuCtxDestroy(other));

  CU_OK(cuLibraryUnload(lib));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuLibraryUnload(lib));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuKernelGetFunction(&f, k));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuFuncGetName(&name, f));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuLibraryLoadData(&lib, nullptr, nullptr, nullptr, 0, nullptr, nullptr, 0));

  std::string path = write_file("lib_vec_add.ptx", k_vec_add_ptx);
  CU_OK(cuLibraryLoadFromFile(&lib, path.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  CU_OK(cuLibraryGetKernel(&k, lib, "vec_add"));
  EXPECT_TRUE(vec_add_ok(vec_add(reinterpret_cast<CUfunction>(k), 64)));
  CUdeviceptr g = 0;
  EXPECT_CU(CUDA_ERROR_NOT_FOUND, cuLibraryGetGlobal(&g, nullptr, lib, "counter"));
  CU_OK(cuLibraryUnload(lib));
  EXPECT_CU(CUDA_ERROR_FILE_NOT_FOUND, cuLibraryLoadFromFile(&lib, "/nonexistent.ptx", nullptr,
                                                             nullptr, 0, nullptr, nullptr, 0));
}

TEST_F(Driver, FunctionAttributes) {
  CUmodule m = load(k_misc_ptx);
  CUfunction f = function(m, "through_shared");
  int v = 0;
  CU_OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f));
  EXPECT_EQ(1024, v);
  CU_OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_PTX_VERSION, f));
  EXPECT_EQ(80, v);
  CU_OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_BINARY_VERSION, f));
  EXPECT_EQ(90, v);
  CU_OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f));
  EXPECT_EQ(48 * 1024, v);
  for (int a = 0; a < CU_FUNC_ATTRIBUTE_MAX; ++a) {
    EXPECT_CU(CUDA_SUCCESS, cuFuncGetAttribute(&v, CUfunction_attribute(a), f)) << a;
  }
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX, f));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuFuncGetAttribute(&v, CUfunction_attribute(-1), f));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuFuncGetAttribute(nullptr, CU_FUNC_ATTRIBUTE_NUM_REGS, f));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE,
            cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, reinterpret_cast<CUfunction>(0x99)));

  CU_OK(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 227 * 1024));
  CU_OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f));
  EXPECT_EQ(227 * 1024, v);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 227 * 1024 + 1));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, -1));
  CU_OK(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 50));
  CU_OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, f));
  EXPECT_EQ(50, v);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 101));
  CU_OK(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT, 2));
  CU_OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT, f));
  EXPECT_EQ(2, v);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_NUM_REGS, 32)); // read-only
  CU_OK(cuFuncSetCacheConfig(f, CU_FUNC_CACHE_PREFER_SHARED));
}

// ==================================================================================================
// Launches
// ==================================================================================================

TEST_F(Driver, LaunchWithKernelParamsAndWithExtraBuffer) {
  CUfunction f = function(load(k_vec_add_ptx), "vec_add");
  EXPECT_TRUE(vec_add_ok(vec_add(f, 1000)));

  unsigned n = 256;
  std::vector<float> a(n, 1.5f), b(n, 2.0f), c(n, 0);
  CUdeviceptr da = alloc(n * 4), db = alloc(n * 4), dc = alloc(n * 4);
  CU_OK(cuMemcpyHtoD(da, a.data(), n * 4));
  CU_OK(cuMemcpyHtoD(db, b.data(), n * 4));
  struct {
    CUdeviceptr a, b, c;
    unsigned n;
  } packed{da, db, dc, n};
  size_t size = 28; // the kernel's parameter bytes; more is fine, less is not
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                   CU_LAUNCH_PARAM_END};
  CU_OK(cuLaunchKernel(f, 2, 1, 1, 128, 1, 1, 0, nullptr, nullptr, extra));
  CU_OK(cuMemcpyDtoH(c.data(), dc, n * 4));
  EXPECT_TRUE(std::all_of(c.begin(), c.end(), [](float v) { return v == 3.5f; }));
  size = sizeof packed;
  CU_OK(cuLaunchKernel(f, 2, 1, 1, 128, 1, 1, 0, nullptr, nullptr, extra));
  size = 20;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuLaunchKernel(f, 2, 1, 1, 128, 1, 1, 0, nullptr, nullptr, extra));
  size = 28;
  void* args[] = {&da, &db, &dc, &n};
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuLaunchKernel(f, 2, 1, 1, 128, 1, 1, 0, nullptr, args, extra));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuLaunchKernel(f, 2, 1, 1, 128, 1, 1, 0, nullptr, nullptr, nullptr));
  void* missing_size[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_END};
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuLaunchKernel(f, 2, 1, 1, 128, 1, 1, 0, nullptr, nullptr, missing_size));
  void* bad_key[] = {reinterpret_cast<void*>(7), &packed, CU_LAUNCH_PARAM_END};
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuLaunchKernel(f, 2, 1, 1, 128, 1, 1, 0, nullptr, nullptr, bad_key));
  void* null_arg[] = {&da, nullptr, &dc, &n};
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuLaunchKernel(f, 2, 1, 1, 128, 1, 1, 0, nullptr, null_arg, nullptr));

  // A kernel without parameters needs neither.
  CUfunction none = function(load(k_misc_ptx), "no_params");
  CU_OK(cuLaunchKernel(none, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr));
}

TEST_F(Driver, LaunchShapeAndHandleChecks) {
  CUfunction f = function(load(k_misc_ptx), "no_params");
  auto launch = [&](unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz) {
    return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, 0, nullptr, nullptr, nullptr);
  };
  EXPECT_CU(CUDA_SUCCESS, launch(2, 2, 2, 4, 4, 4));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, launch(0, 1, 1, 1, 1, 1));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, launch(1, 0, 1, 1, 1, 1));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, launch(1, 1, 1, 0, 1, 1));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, launch(1, 1, 1, 1025, 1, 1));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, launch(1, 1, 1, 1, 1, 65));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, launch(1, 1, 1, 64, 32, 1)); // 2048 threads
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, launch(1, 65536, 1, 1, 1, 1));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, launch(0x80000000u, 1, 1, 1, 1, 1));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE,
            cuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuLaunchKernel(reinterpret_cast<CUfunction>(0xdead0), 1, 1,
                                                      1, 1, 1, 1, 0, nullptr, nullptr, nullptr));
  CUstream dead = nullptr;
  CU_OK(cuStreamCreate(&dead, 0));
  CU_OK(cuStreamDestroy(dead));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE,
            cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, dead, nullptr, nullptr));

  // Handles of another context.
  CUcontext other = nullptr;
  CU_OK(cuCtxCreate(&other, nullptr, 0, 0));
  CUstream foreign = nullptr;
  CU_OK(cuStreamCreate(&foreign, 0));
  CUfunction g = function(load(k_misc_ptx), "no_params");
  CU_OK(cuCtxPopCurrent(nullptr));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE,
            cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, foreign, nullptr, nullptr));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE,
            cuLaunchKernel(g, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr));
  CU_OK(cuCtxDestroy(other));
}

TEST_F(Driver, DynamicSharedMemoryAndOptIn) {
  CUfunction f = function(load(k_misc_ptx), "through_shared");
  CUdeviceptr out = alloc(256 * 4);
  void* args[] = {&out};
  CU_OK(cuLaunchKernel(f, 1, 1, 1, 256, 1, 1, 48 * 1024, nullptr, args, nullptr));
  std::vector<uint32_t> got(256);
  CU_OK(cuMemcpyDtoH(got.data(), out, 1024));
  for (uint32_t i = 0; i < 256; ++i) ASSERT_EQ(i, got[i]);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuLaunchKernel(f, 1, 1, 1, 256, 1, 1, 48 * 1024 + 1, nullptr, args, nullptr));
  CU_OK(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 100 * 1024));
  CU_OK(cuLaunchKernel(f, 1, 1, 1, 256, 1, 1, 100 * 1024, nullptr, args, nullptr));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuLaunchKernel(f, 1, 1, 1, 256, 1, 1, 100 * 1024 + 4, nullptr, args, nullptr));
}

TEST_F(Driver, LaunchKernelExAttributes) {
  CUfunction f = function(load(k_vec_add_ptx), "vec_add");
  unsigned n = 128;
  std::vector<float> a(n, 1.0f), c(n, 0);
  CUdeviceptr da = alloc(n * 4), dc = alloc(n * 4);
  CU_OK(cuMemcpyHtoD(da, a.data(), n * 4));
  void* args[] = {&da, &da, &dc, &n};
  CUevent done = nullptr;
  CU_OK(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));
  CUlaunchAttribute attrs[5] = {};
  attrs[0].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
  attrs[0].value.priority = -2;
  attrs[1].id = CU_LAUNCH_ATTRIBUTE_IGNORE;
  attrs[2].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attrs[2].value.programmaticStreamSerializationAllowed = 1;
  attrs[3].id = CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT;
  attrs[3].value.launchCompletionEvent.event = done;
  attrs[4].id = CUlaunchAttributeID(1000); // unknown: ignored
  CUlaunchConfig config{};
  config.gridDimX = 1;
  config.gridDimY = 1;
  config.gridDimZ = 1;
  config.blockDimX = 128;
  config.blockDimY = 1;
  config.blockDimZ = 1;
  config.attrs = attrs;
  config.numAttrs = 5;
  CU_OK(cuLaunchKernelEx(&config, f, args, nullptr));
  CU_OK(cuMemcpyDtoH(c.data(), dc, n * 4));
  EXPECT_TRUE(std::all_of(c.begin(), c.end(), [](float v) { return v == 2.0f; }));
  CU_OK(cuEventQuery(done));

  // Clusters would change what cluster-aware kernels compute: refused, never ignored.
  CUlaunchAttribute cluster{};
  cluster.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  cluster.value.clusterDim.x = 2;
  cluster.value.clusterDim.y = 1;
  cluster.value.clusterDim.z = 1;
  config.attrs = &cluster;
  config.numAttrs = 1;
  config.gridDimX = 2;
  EXPECT_CU(CUDA_ERROR_NOT_SUPPORTED, cuLaunchKernelEx(&config, f, args, nullptr));
  config.gridDimX = 3;
  EXPECT_CU(CUDA_ERROR_INVALID_CLUSTER_SIZE, cuLaunchKernelEx(&config, f, args, nullptr));
  cluster.value.clusterDim.x = 1;
  CU_OK(cuLaunchKernelEx(&config, f, args, nullptr)); // 1x1x1 is no cluster at all

  config.attrs = nullptr;
  config.numAttrs = 1;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuLaunchKernelEx(&config, f, args, nullptr));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuLaunchKernelEx(nullptr, f, args, nullptr));
  config.numAttrs = 0;
  CU_OK(cuLaunchKernelEx(&config, f, args, nullptr));

  CUlaunchAttribute coop{};
  coop.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
  coop.value.cooperative = 1;
  config.attrs = &coop;
  config.numAttrs = 1;
  config.gridDimX = 100000;
  EXPECT_CU(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, cuLaunchKernelEx(&config, f, args, nullptr));
}

TEST_F(Driver, CooperativeLaunchAndOccupancy) {
  CUfunction f = function(load(k_vec_add_ptx), "vec_add");
  unsigned n = 64;
  CUdeviceptr d = alloc(n * 4);
  CU_OK(cuMemsetD32(d, 0, n));
  void* args[] = {&d, &d, &d, &n};
  CU_OK(cuLaunchCooperativeKernel(f, 1, 1, 1, 64, 1, 1, 0, nullptr, args));
  int blocks = 0;
  CU_OK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, 1024, 0));
  EXPECT_GE(blocks, 1);
  EXPECT_LE(blocks, 2);
  CU_OK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, 32, 0));
  EXPECT_GE(blocks, 1);
  EXPECT_LE(blocks, 32);
  unsigned too_many = unsigned(blocks) * 132 + 1;
  EXPECT_CU(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
            cuLaunchCooperativeKernel(f, too_many, 1, 1, 32, 1, 1, 0, nullptr, args));
  int min_grid = 0, block = 0;
  CU_OK(cuOccupancyMaxPotentialBlockSize(&min_grid, &block, f, nullptr, 0, 0));
  EXPECT_GT(block, 0);
  EXPECT_LE(block, 1024);
  EXPECT_GT(min_grid, 0);
  size_t dyn = 0;
  CU_OK(cuOccupancyAvailableDynamicSMemPerBlock(&dyn, f, 1, 128));
  EXPECT_GT(dyn, 0u);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuOccupancyMaxActiveBlocksPerMultiprocessor(nullptr, f, 32, 0));
}

TEST_F(Driver, HostFunctionsRunInStreamOrder) {
  std::vector<int> order;
  CUstream s = nullptr;
  CU_OK(cuStreamCreate(&s, 0));
  CU_OK(cuLaunchHostFunc(
      s, [](void* p) { static_cast<std::vector<int>*>(p)->push_back(1); }, &order));
  CU_OK(cuStreamAddCallback(
      s,
      [](CUstream, CUresult status, void* p) {
        static_cast<std::vector<int>*>(p)->push_back(status == CUDA_SUCCESS ? 2 : -2);
      },
      &order, 0));
  EXPECT_EQ((std::vector<int>{1, 2}), order);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuLaunchHostFunc(s, nullptr, nullptr));
}

// ==================================================================================================
// Sticky errors
// ==================================================================================================

TEST_F(Driver, AFaultMakesTheContextStickyUntilItIsDestroyed) {
  CUmodule m = load(k_misc_ptx);
  CUfunction store = function(m, "store_to");
  CUfunction add = function(load(k_vec_add_ptx), "vec_add");
  CUdeviceptr good = alloc(64);
  CUstream s = nullptr;
  CU_OK(cuStreamCreate(&s, 0));
  CUevent e = nullptr;
  CU_OK(cuEventCreate(&e, 0));
  CUdeviceptr bad = 0x10;
  void* args[] = {&bad};
  CU_OK(cuLaunchKernel(store, 1, 1, 1, 1, 1, 1, 0, nullptr, args,
                       nullptr)); // asynchronous, as on a GPU

  std::vector<uint8_t> host(64);
  CUdeviceptr p = 0;
  CUstream s2 = nullptr;
  CUmodule m2 = nullptr;
  EXPECT_CU(CUDA_ERROR_ILLEGAL_ADDRESS, cuCtxSynchronize());
  EXPECT_CU(CUDA_ERROR_ILLEGAL_ADDRESS, cuStreamSynchronize(s));
  EXPECT_CU(CUDA_ERROR_ILLEGAL_ADDRESS, cuStreamQuery(nullptr));
  EXPECT_CU(CUDA_ERROR_ILLEGAL_ADDRESS, cuMemAlloc(&p, 64));
  EXPECT_CU(CUDA_ERROR_ILLEGAL_ADDRESS, cuMemcpyHtoD(good, host.data(), 64));
  EXPECT_CU(CUDA_ERROR_ILLEGAL_ADDRESS, cuMemcpyDtoHAsync(host.data(), good, 64, s));
  EXPECT_CU(CUDA_ERROR_ILLEGAL_ADDRESS, cuMemsetD8(good, 0, 64));
  EXPECT_CU(CUDA_ERROR_ILLEGAL_ADDRESS, cuMemFree(good));
  EXPECT_CU(CUDA_ERROR_ILLEGAL_ADDRESS, cuStreamCreate(&s2, 0));
  EXPECT_CU(CUDA_ERROR_ILLEGAL_ADDRESS, cuEventRecord(e, s));
  EXPECT_CU(CUDA_ERROR_ILLEGAL_ADDRESS, cuEventSynchronize(e));
  EXPECT_CU(CUDA_ERROR_ILLEGAL_ADDRESS, cuModuleLoadData(&m2, k_vec_add_ptx));
  EXPECT_CU(CUDA_ERROR_ILLEGAL_ADDRESS,
            cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr));
  // Queries that do not touch the device still answer.
  CUcontext cur = nullptr;
  CU_OK(cuCtxGetCurrent(&cur));
  int v = 0;
  CU_OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0));

  // A fresh context works normally.
  CU_OK(cuCtxDestroy(m_ctx));
  m_ctx = nullptr;
  CU_OK(cuCtxCreate(&m_ctx, nullptr, 0, 0));
  CU_OK(cuCtxSynchronize());
  EXPECT_TRUE(vec_add_ok(vec_add(function(load(k_vec_add_ptx), "vec_add"), 100)));
}

TEST_F(Driver, ATimeoutIsStickyAndAPrimaryContextResetRecovers) {
  CUcontext primary = nullptr;
  CU_OK(cuDevicePrimaryCtxRetain(&primary, 0));
  CU_OK(cuCtxPushCurrent(primary));
  CUfunction spin = function(load(k_misc_ptx), "spin");
  CU_OK(cuLaunchKernel(spin, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr));
  EXPECT_CU(CUDA_ERROR_LAUNCH_TIMEOUT, cuCtxSynchronize());
  CU_OK(cuDevicePrimaryCtxReset(0));
  CUcontext again = nullptr;
  CU_OK(cuDevicePrimaryCtxRetain(&again, 0));
  EXPECT_EQ(primary, again);
  CU_OK(cuCtxSynchronize()); // still current on this thread, and working
  EXPECT_TRUE(vec_add_ok(vec_add(function(load(k_vec_add_ptx), "vec_add"), 100)));
  CU_OK(cuDevicePrimaryCtxRelease(0));
  CU_OK(cuCtxPopCurrent(nullptr));
}

TEST_F(Driver, AnUnsupportedInstructionIsReturnedDirectlyAndNotSticky) {
  CUmodule m = nullptr;
  CUresult load_rc = cuModuleLoadData(&m, k_unsupported_ptx);
  if (load_rc != CUDA_SUCCESS) {
    EXPECT_CU(CUDA_ERROR_NOT_SUPPORTED, load_rc); // refused at load time instead: also fine
  } else {
    CUfunction f = function(m, "needs_ext");
    EXPECT_CU(CUDA_ERROR_NOT_SUPPORTED,
              cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr));
  }
  CU_OK(cuCtxSynchronize());
  EXPECT_TRUE(vec_add_ok(vec_add(function(load(k_vec_add_ptx), "vec_add"), 10)));
}

// ==================================================================================================
// Streams, events and the clock model
// ==================================================================================================

TEST_F(Driver, StreamsCreateQueryDestroy) {
  CUstream s = nullptr;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuStreamCreate(nullptr, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuStreamCreate(&s, 0x4));
  CU_OK(cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, -3));
  int priority = 0;
  unsigned flags = 0;
  CU_OK(cuStreamGetPriority(s, &priority));
  EXPECT_EQ(-3, priority);
  CU_OK(cuStreamGetFlags(s, &flags));
  EXPECT_EQ(unsigned(CU_STREAM_NON_BLOCKING), flags);
  CUstream clamped = nullptr;
  CU_OK(cuStreamCreateWithPriority(&clamped, 0, -100));
  CU_OK(cuStreamGetPriority(clamped, &priority));
  EXPECT_EQ(-5, priority);
  CU_OK(cuStreamGetPriority(nullptr, &priority));
  EXPECT_EQ(0, priority);
  CU_OK(cuStreamGetFlags(CU_STREAM_LEGACY, &flags));
  EXPECT_EQ(0u, flags);
  CUcontext ctx = nullptr;
  CU_OK(cuStreamGetCtx(s, &ctx));
  EXPECT_EQ(m_ctx, ctx);
  unsigned long long id1 = 0, id2 = 0;
  CU_OK(cuStreamGetId(s, &id1));
  CU_OK(cuStreamGetId(clamped, &id2));
  EXPECT_NE(id1, id2);
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  CU_OK(cuStreamIsCapturing(s, &capture));
  EXPECT_EQ(CU_STREAM_CAPTURE_STATUS_NONE, capture);
  CU_OK(cuStreamQuery(s));
  CU_OK(cuStreamSynchronize(s));
  CU_OK(cuStreamSynchronize(nullptr));
  CU_OK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuStreamGetPriority(s, nullptr));
  CU_OK(cuStreamDestroy(s));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuStreamQuery(s));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuStreamDestroy(s));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuStreamGetFlags(s, &flags));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuStreamSynchronize(reinterpret_cast<CUstream>(0x77770)));
  CU_OK(cuStreamDestroy(clamped));
}

TEST_F(Driver, EventsCreateRecordQueryDestroy) {
  CUevent e = nullptr, t = nullptr, untimed = nullptr;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuEventCreate(nullptr, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuEventCreate(&e, 0x10));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuEventCreate(&e, CU_EVENT_INTERPROCESS));
  CU_OK(cuEventCreate(&e, CU_EVENT_BLOCKING_SYNC));
  CU_OK(cuEventCreate(&t, 0));
  CU_OK(cuEventCreate(&untimed, CU_EVENT_DISABLE_TIMING));
  float ms = 0;
  CU_OK(cuEventQuery(e)); // never recorded: complete
  CU_OK(cuEventSynchronize(e));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuEventElapsedTime(&ms, e, t)); // never recorded
  CU_OK(cuEventRecord(e, nullptr));
  CU_OK(cuEventRecord(t, nullptr));
  CU_OK(cuEventRecord(untimed, nullptr));
  CU_OK(cuEventElapsedTime(&ms, e, t));
  EXPECT_EQ(0.0f, ms);
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuEventElapsedTime(&ms, e, untimed));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuEventElapsedTime(nullptr, e, t));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuEventRecordWithFlags(e, nullptr, CU_EVENT_RECORD_EXTERNAL));
  CU_OK(cuEventRecordWithFlags(e, nullptr, 0));
  CUstream s = nullptr;
  CU_OK(cuStreamCreate(&s, 0));
  CU_OK(cuStreamWaitEvent(s, e, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuStreamWaitEvent(s, e, 0x8));
  CU_OK(cuEventDestroy(e));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuEventQuery(e));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuEventRecord(e, nullptr));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuEventDestroy(e));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuStreamWaitEvent(s, e, 0));

  // An event and a stream must share a context.
  CUcontext other = nullptr;
  CU_OK(cuCtxCreate(&other, nullptr, 0, 0));
  CUstream foreign = nullptr;
  CU_OK(cuStreamCreate(&foreign, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuEventRecord(t, nullptr));
  CU_OK(cuStreamWaitEvent(foreign, t, 0)); // cross-context waits are allowed
  CU_OK(cuCtxDestroy(other));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuEventRecord(t, foreign));
}

TEST_F(Driver, CopyTimesFollowTheCostModel) {
  const size_t bytes = 1 << 20;
  std::vector<uint8_t> host(bytes, 1);
  CUdeviceptr a = alloc(bytes), b = alloc(bytes);
  CUstream s = nullptr;
  CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUevent e0 = nullptr, e1 = nullptr, e2 = nullptr, e3 = nullptr;
  for (CUevent* e : {&e0, &e1, &e2, &e3}) CU_OK(cuEventCreate(e, 0));
  CU_OK(cuEventRecord(e0, s));
  CU_OK(cuMemcpyHtoDAsync(a, host.data(), bytes, s));
  CU_OK(cuEventRecord(e1, s));
  CU_OK(cuMemcpyDtoDAsync(b, a, bytes, s));
  CU_OK(cuEventRecord(e2, s));
  CU_OK(cuMemsetD32Async(b, 0, bytes / 4, s));
  CU_OK(cuEventRecord(e3, s));
  EXPECT_FLOAT_EQ(float(copy_ns_pcie(bytes) / 1e6), elapsed(e0, e1));
  EXPECT_FLOAT_EQ(float(copy_ns_device(bytes) / 1e6), elapsed(e1, e2));
  EXPECT_FLOAT_EQ(float(copy_ns_device(bytes) / 1e6), elapsed(e2, e3));
  EXPECT_FLOAT_EQ(-float(copy_ns_pcie(bytes) / 1e6), elapsed(e1, e0));
}

TEST_F(Driver, TheLegacyStreamSynchronizesWithBlockingStreamsOnly) {
  const size_t bytes = 16 << 20;
  std::vector<uint8_t> host(bytes, 3);
  CUdeviceptr d = alloc(bytes), small = alloc(1 << 20);
  CUstream blocking = nullptr, nonblocking = nullptr, later = nullptr;
  CU_OK(cuStreamCreate(&blocking, 0));
  CU_OK(cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING));
  CU_OK(cuStreamCreate(&later, 0));
  CUevent start = nullptr, legacy = nullptr, nb = nullptr, nb2 = nullptr, blk = nullptr,
          waited = nullptr;
  for (CUevent* e : {&start, &legacy, &nb, &nb2, &blk, &waited}) CU_OK(cuEventCreate(e, 0));
  const float copy_ms = float(copy_ns_pcie(bytes) / 1e6);

  CU_OK(cuEventRecord(start, blocking));
  CU_OK(cuMemcpyHtoDAsync(d, host.data(), bytes, blocking));
  CU_OK(cuEventRecord(legacy, nullptr)); // waits for the blocking stream
  EXPECT_FLOAT_EQ(copy_ms, elapsed(start, legacy));
  CU_OK(cuEventRecord(nb, nonblocking)); // does not wait
  EXPECT_FLOAT_EQ(0.0f, elapsed(start, nb));
  CU_OK(cuMemsetD8Async(small, 0, 1 << 20, nonblocking));
  CU_OK(cuEventRecord(nb2, nonblocking));
  EXPECT_FLOAT_EQ(float(copy_ns_device(1 << 20) / 1e6), elapsed(start, nb2));
  CU_OK(cuEventRecord(blk, later)); // a blocking stream waits for the legacy stream's work
  EXPECT_FLOAT_EQ(copy_ms, elapsed(start, blk));
  CU_OK(cuStreamWaitEvent(nonblocking, legacy, 0)); // an explicit wait
  CU_OK(cuEventRecord(waited, nonblocking));
  EXPECT_FLOAT_EQ(copy_ms, elapsed(start, waited));
}

TEST_F(Driver, WhatTheHostWaitedForBoundsLaterWork) {
  CUstream a = nullptr, b = nullptr;
  CU_OK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  CU_OK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CUdeviceptr d = alloc(1 << 20);
  CUevent start = nullptr, after = nullptr;
  CU_OK(cuEventCreate(&start, 0));
  CU_OK(cuEventCreate(&after, 0));
  CU_OK(cuEventRecord(start, a));
  CU_OK(cuMemsetD8Async(d, 0, 1 << 20, a));
  CU_OK(cuStreamSynchronize(a));
  CU_OK(cuEventRecord(after, b)); // issued after the host waited for stream a
  EXPECT_FLOAT_EQ(float(copy_ns_device(1 << 20) / 1e6), elapsed(start, after));
}

// The same work takes the same modeled time, every time: benchmarks on the emulated device are
// deterministic.
TEST_F(Driver, KernelTimingIsMonotonicAndDeterministic) {
  auto measure = [&]() {
    CUcontext ctx = nullptr;
    EXPECT_EQ(CUDA_SUCCESS, cuCtxCreate(&ctx, nullptr, 0, 0));
    CUfunction f = function(load(k_vec_add_ptx), "vec_add");
    unsigned n = 4096;
    CUdeviceptr a = alloc(n * 4), c = alloc(n * 4);
    std::vector<float> host(n, 1.0f);
    CUstream s = nullptr;
    EXPECT_EQ(CUDA_SUCCESS, cuStreamCreate(&s, 0));
    CUevent e[4] = {};
    for (auto& ev : e) EXPECT_EQ(CUDA_SUCCESS, cuEventCreate(&ev, 0));
    void* args[] = {&a, &a, &c, &n};
    EXPECT_EQ(CUDA_SUCCESS, cuEventRecord(e[0], s));
    EXPECT_EQ(CUDA_SUCCESS, cuMemcpyHtoDAsync(a, host.data(), n * 4, s));
    EXPECT_EQ(CUDA_SUCCESS, cuEventRecord(e[1], s));
    EXPECT_EQ(CUDA_SUCCESS, cuLaunchKernel(f, n / 256, 1, 1, 256, 1, 1, 0, s, args, nullptr));
    EXPECT_EQ(CUDA_SUCCESS, cuEventRecord(e[2], s));
    EXPECT_EQ(CUDA_SUCCESS, cuLaunchKernel(f, n / 256, 1, 1, 256, 1, 1, 0, s, args, nullptr));
    EXPECT_EQ(CUDA_SUCCESS, cuLaunchKernel(f, n / 256, 1, 1, 256, 1, 1, 0, s, args, nullptr));
    EXPECT_EQ(CUDA_SUCCESS, cuEventRecord(e[3], s));
    std::vector<float> t = {elapsed(e[0], e[1]), elapsed(e[1], e[2]), elapsed(e[2], e[3])};
    EXPECT_EQ(CUDA_SUCCESS, cuCtxDestroy(ctx));
    return t;
  };
  auto first = measure();
  auto second = measure();
  EXPECT_GT(first[0], 0.0f);
  EXPECT_GT(first[1], 0.0f);
  EXPECT_FLOAT_EQ(2 * first[1], first[2]); // two launches take twice one
  EXPECT_EQ(first, second);
}

// Each thread stages 40 words of a 40 KiB tile, then reads the first word its neighbour warp
// staged (as a convolution reads its window): without the barrier (sync = 0) that is a race the
// reader wins only when it runs its whole staging loop (some 760 steps) before the neighbour
// starts, which turns of 64 to 512 steps never let it do.
constexpr const char* k_staged_ptx = R"(
.version 8.0
.target sm_90
.address_size 64

.visible .entry staged(.param .u64 out, .param .u32 sync)
{
    .reg .pred %p<3>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<4>;
    .shared .align 4 .b8 tile[40960];
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r10, [sync];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %r1;
    mov.u32 %r4, tile;
STAGE:
    shl.b32 %r3, %r2, 2;
    add.u32 %r5, %r4, %r3;
    xor.b32 %r12, %r2, 0x5a5a;
    xor.b32 %r12, %r12, 0x5a5a;
    add.u32 %r13, %r12, 1;
    sub.u32 %r13, %r13, 1;
    add.u32 %r13, %r13, 2;
    sub.u32 %r13, %r13, 2;
    add.u32 %r13, %r13, 3;
    sub.u32 %r13, %r13, 3;
    add.u32 %r13, %r13, 4;
    sub.u32 %r13, %r13, 4;
    add.u32 %r13, %r13, 5;
    sub.u32 %r13, %r13, 5;
    st.shared.u32 [%r5], %r13;
    add.u32 %r2, %r2, 256;
    setp.lt.u32 %p1, %r2, 10240;
    @%p1 bra STAGE;
    setp.eq.u32 %p2, %r10, 0;
    @%p2 bra READ;
    bar.sync 0;
READ:
    add.u32 %r6, %r1, 32;
    and.b32 %r6, %r6, 255;
    shl.b32 %r6, %r6, 2;
    add.u32 %r7, %r4, %r6;
    ld.shared.u32 %r8, [%r7];
    mov.u32 %r9, %ctaid.x;
    mad.lo.u32 %r11, %r9, 256, %r1;
    mul.wide.u32 %rd2, %r11, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r8;
    ret;
}
)";

// Seeded schedules expose a missing barrier between staging and reading, under every seed (one
// turn in four runs a warp until it waits); with the barrier every seed gives the right result.
TEST_F(Driver, SeededSchedulesExposeAMissingBarrier) {
  CUfunction f = function(load(k_staged_ptx), "staged");
  constexpr unsigned k_blocks = 8, k_threads = 256;
  CUdeviceptr out = alloc(k_blocks * k_threads * 4);
  auto run = [&](const char* seed, unsigned sync) {
    std::vector<uint32_t> got(k_blocks * k_threads, 0xffffffffu);
    EXPECT_EQ(CUDA_SUCCESS, cuMemsetD32(out, 0xffffffffu, got.size()));
    set_schedule_seed(seed);
    void* args[] = {&out, &sync};
    EXPECT_EQ(CUDA_SUCCESS, cuLaunchKernel(f, k_blocks, 1, 1, k_threads, 1, 1, 0, nullptr, args,
                                           nullptr));
    EXPECT_EQ(CUDA_SUCCESS, cuCtxSynchronize());
    set_schedule_seed(nullptr);
    EXPECT_EQ(CUDA_SUCCESS, cuMemcpyDtoH(got.data(), out, got.size() * 4));
    size_t wrong = 0;
    for (size_t g = 0; g < got.size(); ++g) wrong += got[g] != ((g % k_threads) + 32) % k_threads;
    return wrong;
  };
  const char* seeds[] = {"1", "2", "3", "4", "0x5eed", "12345"};
  for (const char* seed : seeds) {
    EXPECT_EQ(run(seed, 1), 0u) << "seed " << seed << ", with the barrier";
    EXPECT_GT(run(seed, 0), 0u) << "seed " << seed << ", without the barrier: the race hid";
  }
  EXPECT_EQ(run(nullptr, 1), 0u);
}

TEST_F(Driver, TheScheduleSeedLeavesRaceFreeResultsAndTimesAlone) {
  CUfunction f = function(load(k_vec_add_ptx), "vec_add");
  CUevent a = nullptr, b = nullptr;
  CU_OK(cuEventCreate(&a, 0));
  CU_OK(cuEventCreate(&b, 0));
  std::vector<float> results[3];
  float ms[3] = {};
  const char* seeds[3] = {nullptr, "1", "0x5eed"};
  for (int i = 0; i < 3; ++i) {
    set_schedule_seed(seeds[i]);
    CU_OK(cuEventRecord(a, nullptr));
    results[i] = vec_add(f, 50003); // 391 blocks, on every executor thread
    CU_OK(cuEventRecord(b, nullptr));
    ms[i] = elapsed(a, b);
  }
  set_schedule_seed(nullptr);
  EXPECT_TRUE(vec_add_ok(results[0]));
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
  EXPECT_EQ(ms[0], ms[1]);
  EXPECT_EQ(ms[0], ms[2]);
}

// Reads shared memory (static and dynamic), local memory and registers it never wrote, and copies
// what it read out: thread t of block b writes the 6 words at out[(b * ntid + t) * 6].
constexpr const char* k_unwritten_ptx = R"(
.version 8.0
.target sm_90
.address_size 64

.extern .shared .align 4 .b8 unwritten_dyn[];

.visible .entry read_unwritten(.param .u64 out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<10>;
    .shared .align 4 .b8 tile[1024];
    .local .align 8 .b8 scratch[16];
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.u32 %r4, %r2, %r3, %r1;
    mul.wide.u32 %rd2, %r4, 24;
    add.s64 %rd3, %rd1, %rd2;
    mul.wide.u32 %rd4, %r1, 4;
    mov.u64 %rd5, tile;
    add.s64 %rd6, %rd5, %rd4;
    ld.shared.u32 %r5, [%rd6];
    mov.u64 %rd7, unwritten_dyn;
    add.s64 %rd8, %rd7, %rd4;
    ld.shared.u32 %r6, [%rd8];
    ld.local.u32 %r7, [scratch];
    ld.local.u32 %r8, [scratch+12];
    selp.u32 %r10, 7, 9, %p1;
    st.global.u32 [%rd3], %r5;
    st.global.u32 [%rd3+4], %r6;
    st.global.u32 [%rd3+8], %r7;
    st.global.u32 [%rd3+12], %r8;
    st.global.u32 [%rd3+16], %r9;
    st.global.u32 [%rd3+20], %r10;
    ret;
}
)";

// HONE_EMU_FILL_SEED as the validation worker sets it between runs: nullptr unsets it.
void set_fill_seed(const char* seed) {
  if (seed == nullptr) {
    unsetenv("HONE_EMU_FILL_SEED");
  } else {
    setenv("HONE_EMU_FILL_SEED", seed, 1);
  }
}

// A kernel that reads memory and registers it never wrote gives zeros without a fill seed (and
// with an empty, 0 or non-numeric one), the same bytes for the same seed on every execution path,
// other bytes for another seed, and different bytes in different blocks and threads.
TEST_F(Driver, TheFillSeedFillsWhatAKernelNeverWrote) {
  CUfunction f = function(load(k_unwritten_ptx), "read_unwritten");
  constexpr unsigned k_blocks = 4, k_threads = 64, k_words = 6;
  constexpr size_t k_count = size_t(k_blocks) * k_threads * k_words;
  CUdeviceptr out = alloc(k_count * 4);
  auto run = [&](const char* seed, const char* path) {
    std::vector<uint32_t> got(k_count, 0xdeadbeefu);
    EXPECT_EQ(CUDA_SUCCESS, cuMemsetD32(out, 0xdeadbeefu, k_count));
    set_fill_seed(seed);
    if (path) setenv("HONE_EMU_EXEC", path, 1);
    void* args[] = {&out};
    EXPECT_EQ(CUDA_SUCCESS,
              cuLaunchKernel(f, k_blocks, 1, 1, k_threads, 1, 1, k_threads * 4, nullptr, args, nullptr));
    EXPECT_EQ(CUDA_SUCCESS, cuCtxSynchronize());
    unsetenv("HONE_EMU_EXEC");
    set_fill_seed(nullptr);
    EXPECT_EQ(CUDA_SUCCESS, cuMemcpyDtoH(got.data(), out, k_count * 4));
    return got;
  };
  // word w of thread t in block b
  auto word = [&](const std::vector<uint32_t>& v, unsigned b, unsigned t, unsigned w) {
    return v[(size_t(b) * k_threads + t) * k_words + w];
  };

  // Without a seed: what the device gave before the variable existed, zeros (the predicate: false).
  std::vector<uint32_t> today(k_count, 0);
  for (size_t i = 5; i < k_count; i += k_words) today[i] = 9;
  for (const char* off : {(const char*)nullptr, "", "0", "not-a-number"})
    EXPECT_EQ(run(off, nullptr), today) << "HONE_EMU_FILL_SEED=" << (off ? off : "(unset)");

  const std::vector<uint32_t> one = run("1", nullptr);
  EXPECT_EQ(run("1", nullptr), one);
  EXPECT_EQ(run("0x1", nullptr), one);
  const std::vector<uint32_t> two = run("2", nullptr);
  EXPECT_NE(one, today);
  // Every word the kernel read changes with the seed, in every block (the predicate may agree).
  for (unsigned w = 0; w < 5; ++w) {
    for (unsigned b = 0; b < k_blocks; ++b) {
      unsigned differ = 0;
      for (unsigned t = 0; t < k_threads; ++t) differ += word(one, b, t, w) != word(two, b, t, w);
      EXPECT_GT(differ, k_threads / 2) << "word " << w << ", block " << b;
    }
  }
  // Blocks start differently, and so do threads (their local memory and registers).
  for (unsigned w = 0; w < 5; ++w) {
    EXPECT_NE(word(one, 0, 0, w), word(one, 1, 0, w)) << "word " << w;
    EXPECT_NE(word(one, 0, 0, w), word(one, 0, 1, w)) << "word " << w;
  }
  // The predicate read before written takes both values across threads.
  unsigned taken = 0;
  for (unsigned t = 0; t < k_threads; ++t) taken += word(one, 0, t, 5) == 7;
  EXPECT_GT(taken, 0u);
  EXPECT_LT(taken, k_threads);

  // Every execution path fills the same bytes.
  for (const char* path : {"interpret", "compile"}) {
    EXPECT_EQ(run("1", path), one) << path;
    EXPECT_EQ(run("2", path), two) << path;
    EXPECT_EQ(run(nullptr, path), today) << path;
  }
}

TEST_F(Driver, PerThreadDefaultStreamEntryPoints) {
  void* fn = nullptr;
  CU_OK(cuGetProcAddress("cuEventRecord", &fn, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                         nullptr));
  auto record_ptsz = reinterpret_cast<CUresult (*)(CUevent, CUstream)>(fn);
  CU_OK(cuGetProcAddress("cuMemsetD8Async", &fn, 13000,
                         CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, nullptr));
  auto memset_ptsz =
      reinterpret_cast<CUresult (*)(CUdeviceptr, unsigned char, size_t, CUstream)>(fn);
  CUdeviceptr d = alloc(1 << 20);
  CUevent a = nullptr, b = nullptr, c = nullptr;
  for (CUevent* e : {&a, &b, &c}) CU_OK(cuEventCreate(e, 0));
  CUstream nonblocking = nullptr;
  CU_OK(cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING));
  CU_OK(record_ptsz(a, nullptr)); // 0 means the per-thread stream here
  CU_OK(memset_ptsz(d, 0, 1 << 20, nullptr));
  CU_OK(record_ptsz(b, nullptr));
  EXPECT_FLOAT_EQ(float(copy_ns_device(1 << 20) / 1e6), elapsed(a, b));
  CU_OK(cuEventRecord(c, CU_STREAM_PER_THREAD)); // the same stream, by its handle
  EXPECT_FLOAT_EQ(float(copy_ns_device(1 << 20) / 1e6), elapsed(a, c));
}

// ==================================================================================================
// cuGetProcAddress
// ==================================================================================================

TEST(DriverProcAddress, PicksTheVariantForTheVersionAndStreamMode) {
  ASSERT_EQ(CUDA_SUCCESS, cuInit(0));
  ASSERT_NE(nullptr, libcuda());
  struct Case {
    const char* symbol;
    int version;
    cuuint64_t flags;
    const char* expected;
  };
  const cuuint64_t ptds = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  const cuuint64_t legacy = CU_GET_PROC_ADDRESS_LEGACY_STREAM;
  const Case cases[] = {
      {"cuInit", 13000, 0, "cuInit"},
      {"cuMemAlloc", 13000, 0, "cuMemAlloc_v2"},
      {"cuMemAlloc", 3020, 0, "cuMemAlloc_v2"},
      {"cuMemAlloc", 3010, 0, "cuMemAlloc"},
      {"cuMemAlloc", 13000, ptds, "cuMemAlloc_v2"},
      {"cuCtxCreate", 13000, 0, "cuCtxCreate_v4"},
      {"cuCtxCreate", 12040, 0, "cuCtxCreate_v3"},
      {"cuCtxCreate", 11000, 0, "cuCtxCreate_v2"},
      {"cuCtxDestroy", 13000, 0, "cuCtxDestroy_v2"},
      {"cuStreamDestroy", 13000, 0, "cuStreamDestroy_v2"},
      {"cuEventDestroy", 13000, 0, "cuEventDestroy_v2"},
      {"cuModuleGetGlobal", 13000, 0, "cuModuleGetGlobal_v2"},
      {"cuMemGetInfo", 13000, 0, "cuMemGetInfo_v2"},
      {"cuDevicePrimaryCtxRelease", 13000, 0, "cuDevicePrimaryCtxRelease_v2"},
      {"cuEventElapsedTime", 12080, 0, "cuEventElapsedTime_v2"},
      {"cuEventElapsedTime", 12040, 0, "cuEventElapsedTime"},
      {"cuGetProcAddress", 13000, 0, "cuGetProcAddress_v2"},
      {"cuGetProcAddress", 11030, 0, "cuGetProcAddress"},
      {"cuLaunchKernel", 13000, 0, "cuLaunchKernel"},
      {"cuLaunchKernel", 13000, legacy, "cuLaunchKernel"},
      {"cuLaunchKernel", 13000, ptds, "cuLaunchKernel_ptsz"},
      {"cuLaunchKernelEx", 13000, ptds, "cuLaunchKernelEx_ptsz"},
      {"cuMemcpyHtoD", 13000, 0, "cuMemcpyHtoD_v2"},
      {"cuMemcpyHtoD", 13000, ptds, "cuMemcpyHtoD_v2_ptds"},
      {"cuMemcpyHtoDAsync", 13000, ptds, "cuMemcpyHtoDAsync_v2_ptsz"},
      {"cuMemcpy", 13000, ptds, "cuMemcpy_ptds"},
      {"cuMemsetD32", 13000, ptds, "cuMemsetD32_v2_ptds"},
      {"cuStreamSynchronize", 13000, ptds, "cuStreamSynchronize_ptsz"},
      {"cuStreamGetCaptureInfo", 13000, ptds, "cuStreamGetCaptureInfo_v3_ptsz"},
      {"cuStreamGetCaptureInfo", 11030, ptds, "cuStreamGetCaptureInfo_v2_ptsz"},
      {"cuStreamGetCaptureInfo", 11030, 0, "cuStreamGetCaptureInfo_v2"},
      {"cuProfilerStart", 13000, 0, "cuProfilerStart"},
  };
  for (const Case& c : cases) {
    void* fn = nullptr;
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    ASSERT_CU(CUDA_SUCCESS, cuGetProcAddress(c.symbol, &fn, c.version, c.flags, &status))
        << c.symbol << " " << c.version;
    EXPECT_EQ(CU_GET_PROC_ADDRESS_SUCCESS, status);
    void* want = exported(c.expected);
    ASSERT_NE(nullptr, want) << c.expected;
    EXPECT_EQ(want, fn) << c.symbol << " at " << c.version << " flags " << c.flags << ": expected "
                        << c.expected;
  }
  // The header macros and the lookups agree: what a program calls is what the runtime finds.
  void* fn = nullptr;
  CU_OK(cuGetProcAddress("cuMemAlloc", &fn, CUDA_VERSION, 0, nullptr));
  EXPECT_EQ(reinterpret_cast<void*>(&cuMemAlloc), fn);
  CU_OK(cuGetProcAddress("cuLaunchKernel", &fn, CUDA_VERSION, 0, nullptr));
  EXPECT_EQ(reinterpret_cast<void*>(&cuLaunchKernel), fn);
}

TEST(DriverProcAddress, MissesAndStubs) {
  ASSERT_EQ(CUDA_SUCCESS, cuInit(0));
  void* fn = reinterpret_cast<void*>(1);
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
  EXPECT_CU(CUDA_ERROR_NOT_FOUND, cuGetProcAddress("cuNotADriverFunction", &fn, 13000, 0, &status));
  EXPECT_EQ(CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, status);
  EXPECT_EQ(nullptr, fn);
  EXPECT_CU(CUDA_ERROR_NOT_FOUND, cuGetProcAddress("cuNotADriverFunction", &fn, 13000, 0, nullptr));
  // Lookups take base names: an ABI name is not one.
  EXPECT_CU(CUDA_ERROR_NOT_FOUND, cuGetProcAddress("cuMemAlloc_v2", &fn, 13000, 0, &status));
  EXPECT_EQ(CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, status);
  EXPECT_CU(CUDA_ERROR_NOT_FOUND, cuGetProcAddress("cuCtxCreate", &fn, 1000, 0, &status));
  EXPECT_EQ(CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, status);
  EXPECT_CU(CUDA_ERROR_NOT_FOUND, cuGetProcAddress("cuLaunchKernelEx", &fn, 11000, 0, &status));
  EXPECT_EQ(CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, status);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGetProcAddress(nullptr, &fn, 13000, 0, &status));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGetProcAddress("cuInit", nullptr, 13000, 0, &status));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGetProcAddress("cuInit", &fn, 13000, 0x10, &status));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGetProcAddress("cuInit", &fn, 14000, 0, &status));

  // A function cuda.h declares but the emulated device does not implement: a stub.
  CU_OK(cuGetProcAddress("cuArrayDestroy", &fn, 13000, 0, &status));
  ASSERT_NE(nullptr, fn);
  EXPECT_CU(CUDA_ERROR_NOT_SUPPORTED, reinterpret_cast<CUresult (*)(CUarray)>(fn)(nullptr));
  EXPECT_EQ(exported("cuArrayDestroy"), fn);
  // The legacy 32-bit-pointer variants are stubs too.
  CU_OK(cuGetProcAddress("cuMemAlloc", &fn, 2000, 0, &status));
  unsigned small = 0;
  EXPECT_CU(CUDA_ERROR_NOT_SUPPORTED,
            reinterpret_cast<CUresult (*)(unsigned*, unsigned)>(fn)(&small, 16));

  // The v1 entry point (no symbolStatus) answers the same.
  using V1 = CUresult (*)(const char*, void**, int, cuuint64_t);
  auto v1 = reinterpret_cast<V1>(exported("cuGetProcAddress"));
  ASSERT_NE(nullptr, v1);
  CU_OK(v1("cuMemFree", &fn, 13000, 0));
  EXPECT_EQ(exported("cuMemFree_v2"), fn);
  EXPECT_CU(CUDA_ERROR_NOT_FOUND, v1("cuNope", &fn, 13000, 0));
}

// Every function pointer typedef of cudaTypedefs.h resolves, and every driver function of cuda.h
// is exported.
TEST(DriverProcAddress, EveryTypedefResolvesAndEveryFunctionIsExported) {
  ASSERT_EQ(CUDA_SUCCESS, cuInit(0));
  std::string typedefs = read_file(std::string(HONE_CUDA_INCLUDE) + "/cudaTypedefs.h");
  std::map<std::string, int> newest;
  for (const Word& w : words(typedefs)) {
    // PFN_<base>_v<version>[_ptds|_ptsz], the name of a function pointer type: followed by ')'.
    if (w.text.rfind("PFN_cu", 0) != 0 || next_char(typedefs, w.end) != ')') continue;
    std::string name = w.text.substr(4);
    for (const char* suffix : {"_ptds", "_ptsz"}) {
      if (name.size() > 5 && name.compare(name.size() - 5, 5, suffix) == 0)
        name.resize(name.size() - 5);
    }
    size_t v = name.rfind("_v");
    ASSERT_NE(std::string::npos, v) << w.text;
    int& newest_version = newest[name.substr(0, v)];
    newest_version = std::max(newest_version, std::stoi(name.substr(v + 2)));
  }
  EXPECT_GT(newest.size(), 400u);
  for (const auto& [base, version] : newest) {
    void* fn = nullptr;
    EXPECT_CU(CUDA_SUCCESS, cuGetProcAddress(base.c_str(), &fn, 13000, 0, nullptr)) << base;
    EXPECT_NE(nullptr, fn) << base;
  }
  std::string header = read_file(std::string(HONE_CUDA_INCLUDE) + "/cuda.h");
  size_t n = 0;
  std::vector<Word> w = words(header);
  for (size_t i = 0; i + 2 < w.size(); ++i) {
    if (w[i].text != "CUresult" || w[i + 1].text != "CUDAAPI") continue;
    if (w[i + 2].text.rfind("cu", 0) != 0 || next_char(header, w[i + 2].end) != '(') continue;
    EXPECT_NE(nullptr, exported(w[i + 2].text.c_str())) << w[i + 2].text;
    ++n;
  }
  EXPECT_GT(n, 400u);
}

// ==================================================================================================
// Threads
// ==================================================================================================

TEST_F(Driver, ManyThreadsShareAContext) {
  CUfunction f = function(load(k_vec_add_ptx), "vec_add");
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      if (cuCtxSetCurrent(m_ctx) != CUDA_SUCCESS) ++failures;
      CUstream s = nullptr;
      if (cuStreamCreate(&s, t % 2 ? CU_STREAM_NON_BLOCKING : 0) != CUDA_SUCCESS) ++failures;
      for (int i = 0; i < 10; ++i) {
        if (!vec_add_ok(vec_add(f, 200 + t * 10 + i, s))) ++failures;
        CUevent e = nullptr;
        if (cuEventCreate(&e, 0) != CUDA_SUCCESS || cuEventRecord(e, s) != CUDA_SUCCESS ||
            cuEventSynchronize(e) != CUDA_SUCCESS || cuEventDestroy(e) != CUDA_SUCCESS)
          ++failures;
      }
      if (cuStreamDestroy(s) != CUDA_SUCCESS) ++failures;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(0, failures.load());
}

} // namespace
