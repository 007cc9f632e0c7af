// hone-testapp-threads: many host threads launching the workload's kernels at once, and a fork()
// while they do. Linked with -lcuda.
//
// Every thread makes the primary context current, looks its kernels up (odd threads in a module of
// their own, loaded from the same PTX, even threads in the shared one), and launches kernel
// (t + i) % 3 on a stream of its own for i in [0, iters), each on its own deterministic buffers.
// When half of all launches are done, the main thread forks: the child creates a context of its
// own, loads the module, launches saxpy --child-launches times and exits normally, while the
// parent's threads go on. The parent prints only after the child has exited, so the output is the
// same on every run.
//
// Threads free their buffers only after the fork: a cuMemFree waits for other threads' launches to
// finish, and the emulated device's wait (a condition variable) is not fork-safe: a fork while a
// thread waits there leaves the child's first copy hanging in pthread_cond_broadcast.
// --free-during-fork lets threads free whenever they are done, which reproduces that.
//
// stdout: "child: ..." (from the child), "workload: launches ..." (the parent's totals per kernel),
// "threads: checksum ... check ok|MISMATCH", "fork: child exit N". stderr: "testapp-threads: child
// pid N". Exit status 0 when every buffer matches and the child succeeded.
//
// Usage: hone-testapp-threads [--threads N] [--iters N] [--child-launches N] [--no-fork]
//                             [--free-during-fork]
#include "workload.hpp"

#include <cuda.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

extern const unsigned char k_workload_ptx[];

namespace {

using namespace testapp;

[[noreturn]] void fail(const char* call, CUresult r) {
  const char* name = "?";
  cuGetErrorName(r, &name);
  std::printf("error: %s: %s (%d)\n", call, name, int(r));
  std::fflush(stdout);
  std::_Exit(2);
}
#define CK(call)                                                                                   \
  do {                                                                                             \
    CUresult r_ = (call);                                                                          \
    if (r_ != CUDA_SUCCESS) fail(#call, r_);                                                       \
  } while (0)

struct Config {
  int threads = 6;
  int iters = 12;
  int child_launches = 4;
  bool fork = true;
  bool free_during_fork = false;
};

// Device copies of one Inputs set.
struct Buffers {
  CUdeviceptr x = 0, y = 0, bits = 0, blur[2] = {0, 0};

  explicit Buffers(const Inputs& in) {
    CK(cuMemAlloc(&x, in.x.size() * sizeof(float)));
    CK(cuMemAlloc(&y, in.y.size() * sizeof(float)));
    CK(cuMemAlloc(&bits, in.bits.size() * sizeof(uint32_t)));
    for (auto& b : blur) CK(cuMemAlloc(&b, in.blur.size() * sizeof(int32_t)));
    CK(cuMemcpyHtoD(x, in.x.data(), in.x.size() * sizeof(float)));
    CK(cuMemcpyHtoD(y, in.y.data(), in.y.size() * sizeof(float)));
    CK(cuMemcpyHtoD(bits, in.bits.data(), in.bits.size() * sizeof(uint32_t)));
    for (auto b : blur) CK(cuMemcpyHtoD(b, in.blur.data(), in.blur.size() * sizeof(int32_t)));
  }
  ~Buffers() {
    for (CUdeviceptr p : {x, y, bits, blur[0], blur[1]}) cuMemFree(p);
  }
  Buffers(const Buffers&) = delete;
  Buffers& operator=(const Buffers&) = delete;

  // The `count`-th launch of kernel k on these buffers.
  void launch(CUfunction f, int k, int count, CUstream stream) {
    const KernelSpec& s = k_kernels[k];
    float a = k_saxpy_a;
    unsigned salt = mix_salt(count);
    int n = k == k_saxpy ? k_saxpy_n : k == k_mix_bits ? k_mix_n : k_blur_n;
    CUdeviceptr src = blur[count % 2], dst = blur[1 - count % 2];
    void* saxpy_params[] = {&a, &x, &y, &n};
    void* mix_params[] = {&bits, &salt, &n};
    void* blur_params[] = {&src, &dst, &n};
    void** params = k == k_saxpy ? saxpy_params : k == k_mix_bits ? mix_params : blur_params;
    CK(cuLaunchKernel(f, s.grid[0], s.grid[1], s.grid[2], s.block[0], s.block[1], s.block[2], 0,
                      stream, params, nullptr));
  }

  // Reads everything back, compares with the host's reference; returns the checksum of it all.
  uint64_t check(const Inputs& in, const int counts[k_kernel_count], bool& ok) {
    std::vector<float> y_out(in.y.size());
    std::vector<uint32_t> bits_out(in.bits.size());
    std::vector<int32_t> blur_out[2] = {std::vector<int32_t>(in.blur.size()),
                                        std::vector<int32_t>(in.blur.size())};
    CK(cuMemcpyDtoH(y_out.data(), y, y_out.size() * sizeof(float)));
    CK(cuMemcpyDtoH(bits_out.data(), bits, bits_out.size() * sizeof(uint32_t)));
    for (int b = 0; b < 2; ++b)
      CK(cuMemcpyDtoH(blur_out[b].data(), blur[b], blur_out[b].size() * sizeof(int32_t)));
    std::vector<float> y_ref = in.y;
    reference_saxpy(in.x, y_ref, counts[k_saxpy]);
    std::vector<uint32_t> bits_ref = in.bits;
    reference_mix_bits(bits_ref, counts[k_mix_bits]);
    std::vector<int32_t> blur_ref[2] = {in.blur, in.blur};
    reference_blur(blur_ref[0], blur_ref[1], counts[k_blur]);
    ok = std::memcmp(y_out.data(), y_ref.data(), y_ref.size() * sizeof(float)) == 0 &&
         bits_out == bits_ref && blur_out[0] == blur_ref[0] && blur_out[1] == blur_ref[1];
    return checksum(blur_out[1], checksum(blur_out[0], checksum(bits_out, checksum(y_out))));
  }
};

// Never destroyed: the forked child exits with exit() (the shim's exit report runs from atexit),
// and destroying a condition variable that the parent's threads were waiting on at fork time
// blocks forever in the child.
std::mutex& g_progress_mutex = *new std::mutex;
std::condition_variable& g_progress_cv = *new std::condition_variable;
int g_progress = 0;      // launches made, all threads
bool g_forked = false;   // the fork is behind us: threads may free

struct ThreadResult {
  int counts[k_kernel_count] = {};
  uint64_t checksum = 0;
  bool ok = false;
};

void thread_main(int t, CUcontext ctx, CUmodule shared, const Config& config, ThreadResult& out) {
  CK(cuCtxSetCurrent(ctx));
  CUmodule mod = shared;
  if (t % 2 == 1) CK(cuModuleLoadData(&mod, k_workload_ptx));
  CUfunction fn[k_kernel_count];
  for (int k = 0; k < k_kernel_count; ++k) CK(cuModuleGetFunction(&fn[k], mod, k_kernels[k].entry));
  CUstream stream = nullptr;
  CK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  Inputs in(t + 2);
  {
    Buffers buffers(in);
    for (int i = 0; i < config.iters; ++i) {
      int k = (t + i) % k_kernel_count;
      buffers.launch(fn[k], k, out.counts[k]++, stream);
      {
        std::lock_guard lock(g_progress_mutex);
        ++g_progress;
      }
      g_progress_cv.notify_all();
    }
    CK(cuStreamSynchronize(stream));
    out.checksum = buffers.check(in, out.counts, out.ok);
    if (!config.free_during_fork) {
      std::unique_lock lock(g_progress_mutex);
      g_progress_cv.wait(lock, [] { return g_forked; });
    }
  }
  CK(cuStreamDestroy(stream));
  if (mod != shared) CK(cuModuleUnload(mod));
}

// The forked child: CUDA state of its own, saxpy `launches` times, a normal exit.
int child_main(int launches) {
  CK(cuInit(0));
  CUdevice dev = 0;
  CK(cuDeviceGet(&dev, 0));
  CUcontext ctx = nullptr;
  CK(cuCtxCreate(&ctx, nullptr, 0, dev));
  CUmodule mod = nullptr;
  CK(cuModuleLoadData(&mod, k_workload_ptx));
  CUfunction saxpy = nullptr;
  CK(cuModuleGetFunction(&saxpy, mod, k_kernels[k_saxpy].entry));
  Inputs in(99);
  int counts[k_kernel_count] = {launches, 0, 0};
  bool ok = false;
  uint64_t sum = 0;
  {
    Buffers buffers(in);
    for (int i = 0; i < launches; ++i) buffers.launch(saxpy, k_saxpy, i, nullptr);
    CK(cuCtxSynchronize());
    sum = buffers.check(in, counts, ok);
  }
  CK(cuModuleUnload(mod));
  CK(cuCtxDestroy(ctx));
  std::printf("child: launches saxpy=%d checksum=%s check %s\n", launches, hex64(sum).c_str(),
              ok ? "ok" : "MISMATCH");
  std::fflush(stdout);
  return ok ? 0 : 1;
}

int parse_int(const char* s) {
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < 1 || v > 1000) {
    std::fprintf(stderr, "not a count in [1, 1000]: %s\n", s);
    std::exit(64);
  }
  return int(v);
}

} // namespace

int main(int argc, char** argv) {
  Config config;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      config.threads = parse_int(argv[++i]);
    } else if (std::strcmp(argv[i], "--iters") == 0 && i + 1 < argc) {
      config.iters = parse_int(argv[++i]);
    } else if (std::strcmp(argv[i], "--child-launches") == 0 && i + 1 < argc) {
      config.child_launches = parse_int(argv[++i]);
    } else if (std::strcmp(argv[i], "--no-fork") == 0) {
      config.fork = false;
    } else if (std::strcmp(argv[i], "--free-during-fork") == 0) {
      config.free_during_fork = true;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--threads N] [--iters N] [--child-launches N] [--no-fork] "
                   "[--free-during-fork]\n",
                   argv[0]);
      return 64;
    }
  }

  CK(cuInit(0));
  CUdevice dev = 0;
  CK(cuDeviceGet(&dev, 0));
  CUcontext ctx = nullptr;
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  CUmodule shared = nullptr;
  CK(cuModuleLoadData(&shared, k_workload_ptx));

  std::vector<ThreadResult> results(size_t(config.threads));
  std::vector<std::thread> threads;
  for (int t = 0; t < config.threads; ++t)
    threads.emplace_back(thread_main, t, ctx, shared, std::cref(config), std::ref(results[size_t(t)]));

  pid_t child = -1;
  if (config.fork) {
    {
      std::unique_lock lock(g_progress_mutex);
      g_progress_cv.wait(lock, [&] { return g_progress >= config.threads * config.iters / 2; });
    }
    std::fflush(stdout);
    child = fork();
    if (child == 0) std::exit(child_main(config.child_launches));
    if (child < 0) {
      std::perror("fork");
      return 2;
    }
    std::fprintf(stderr, "testapp-threads: child pid %d\n", int(child));
  }
  {
    std::lock_guard lock(g_progress_mutex);
    g_forked = true;
  }
  g_progress_cv.notify_all();
  for (auto& t : threads) t.join();
  int child_status = 0;
  if (child > 0) {
    int status = 0;
    if (waitpid(child, &status, 0) != child) {
      std::perror("waitpid");
      return 2;
    }
    child_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  int totals[k_kernel_count] = {};
  uint64_t sum = 0xcbf29ce484222325ull;
  bool ok = true;
  for (const auto& r : results) {
    for (int k = 0; k < k_kernel_count; ++k) totals[k] += r.counts[k];
    sum = (sum ^ r.checksum) * 0x100000001b3ull;
    ok = ok && r.ok;
  }
  CK(cuModuleUnload(shared));
  CK(cuDevicePrimaryCtxRelease(dev));
  std::printf("%s\n", launches_line(totals).c_str());
  std::printf("threads: checksum %s check %s\n", hex64(sum).c_str(), ok ? "ok" : "MISMATCH");
  if (config.fork) std::printf("fork: child exit %d\n", child_status);
  return ok && child_status == 0 ? 0 : 1;
}
