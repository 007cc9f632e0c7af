// What the preload shim adds to one cuLaunchKernel call. Targets (issue 16): a hooked call on the
// fast path (a function already seen, not picked for timing) at most 2x an unhooked call into the
// no-op driver, single-threaded; with 8 threads launching the same kernel at once, the cost the
// shim adds per launch at most twice the single-threaded one (no cache line that every launch of
// every thread writes).
//
// One run measures both sides: the program re-executes itself as child processes against a no-op
// driver (build/lib/noop/libcuda.so.1, bench/noop_driver.cpp, so the driver itself costs a
// function return), without and with LD_PRELOAD=libhone.so, alternating, and compares medians.
// Each child launches one kernel in a tight loop, BATCHES batches of CALLS calls, two ways: the
// cuLaunchKernel symbol the program links (-lcuda), and the pointer cuGetProcAddress returns (how
// the CUDA runtime calls the driver). The hooked children report to an in-process test daemon, as
// they would to honed. HONE_SAMPLE_EVERY=0 measures the fast path; HONE_SAMPLE_EVERY=100 (the
// default) the average with sampling on.
//
// With 8 threads, each child also runs THREADS threads that launch the same kernel through the
// linked symbol at once, and reports CPU time per launch (the threads' CPU time added up, over
// their launches): on a machine with fewer cores than threads, wall time per thread would measure
// the scheduler, while CPU time still shows a cache line the threads take from each other.
//
// Usage: hone-bench-shim-launch [--batches N] [--calls N] [--rounds N] [--threads N]
// Prints what it measured; asserts nothing.
#include "test_server.hpp"

#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <map>
#include <spawn.h>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <time.h>
#include <unistd.h>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* k_child_env = "HONE_BENCH_SHIM_CHILD";

// A module with one empty kernel: the shim hashes it at load like any other image.
constexpr const char* k_ptx = ".version 8.0\n.target sm_90\n.address_size 64\n"
                              ".visible .entry bench_kernel(.param .u64 p)\n{\nret;\n}\n";

struct Settings {
  int batches = 10;
  long calls = 1000000;
  int rounds = 2;
  int threads = 8;
};

double thread_cpu_ns() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e9 + double(t.tv_nsec);
}

double minimum(const std::vector<double>& v) {
  return v.empty() ? 0 : *std::min_element(v.begin(), v.end());
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// --- child: the measurement ----------------------------------------------------------------------

using LaunchFn = decltype(&cuLaunchKernel);

// ns per call of `launch`, one value per batch.
std::vector<double> measure(LaunchFn launch, CUfunction f, const Settings& s) {
  CUdeviceptr p = 0;
  void* params[] = {&p};
  for (long i = 0; i < s.calls / 10; ++i) launch(f, 1, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr);
  std::vector<double> ns;
  for (int b = 0; b < s.batches; ++b) {
    auto t0 = Clock::now();
    for (long i = 0; i < s.calls; ++i) launch(f, 1, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr);
    auto t1 = Clock::now();
    ns.push_back(double(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()) / double(s.calls));
  }
  return ns;
}

int child(const Settings& s) {
  if (cuInit(0) != CUDA_SUCCESS) return 2;
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  CUmodule mod = nullptr;
  CUfunction f = nullptr;
  if (cuDeviceGet(&dev, 0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
      cuCtxSetCurrent(ctx) != CUDA_SUCCESS || cuModuleLoadData(&mod, k_ptx) != CUDA_SUCCESS ||
      cuModuleGetFunction(&f, mod, "bench_kernel") != CUDA_SUCCESS) {
    std::printf("error: driver setup failed\n");
    return 2;
  }
  void* pfn = nullptr;
  CUdriverProcAddressQueryResult status;
  if (cuGetProcAddress("cuLaunchKernel", &pfn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS ||
      pfn == nullptr) {
    std::printf("error: cuGetProcAddress(cuLaunchKernel) failed\n");
    return 2;
  }
  // Which object's cuLaunchKernel the program's symbol and the runtime's pointer reach.
  Dl_info linked_info{}, proc_info{};
  dladdr(reinterpret_cast<void*>(&cuLaunchKernel), &linked_info);
  dladdr(pfn, &proc_info);

  // The linked symbol is called directly in the loop (through the PLT, as the program would).
  std::vector<double> linked;
  {
    CUdeviceptr p = 0;
    void* params[] = {&p};
    for (long i = 0; i < s.calls / 10; ++i) cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr);
    for (int b = 0; b < s.batches; ++b) {
      auto t0 = Clock::now();
      for (long i = 0; i < s.calls; ++i) cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr);
      auto t1 = Clock::now();
      linked.push_back(double(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()) /
                       double(s.calls));
    }
  }
  std::vector<double> proc = measure(reinterpret_cast<LaunchFn>(pfn), f, s);

  // s.threads threads at once, the same kernel, the linked symbol: CPU ns per launch per batch.
  std::vector<double> threaded;
  for (int b = 0; b < std::max(1, s.batches / 2); ++b) {
    std::vector<double> cpu(size_t(s.threads), 0);
    std::atomic<int> ready{0};
    std::vector<std::thread> pool;
    const long per_thread = std::max(1L, s.calls / 2);
    for (int t = 0; t < s.threads; ++t) {
      pool.emplace_back([&, t] {
        cuCtxSetCurrent(ctx);
        CUdeviceptr p = 0;
        void* params[] = {&p};
        for (long i = 0; i < per_thread / 10; ++i) cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr);
        ready.fetch_add(1);
        while (ready.load() < s.threads) std::this_thread::yield();
        double c0 = thread_cpu_ns();
        for (long i = 0; i < per_thread; ++i) cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr);
        cpu[size_t(t)] = thread_cpu_ns() - c0;
      });
    }
    for (auto& th : pool) th.join();
    double sum = 0;
    for (double c : cpu) sum += c;
    threaded.push_back(sum / double(per_thread * s.threads));
  }

  using Counter = uint64_t (*)();
  auto launches = reinterpret_cast<Counter>(dlsym(RTLD_DEFAULT, "hone_noop_launches"));
  auto records = reinterpret_cast<Counter>(dlsym(RTLD_DEFAULT, "hone_noop_event_records"));
  std::printf("child linked_via %s procaddr_via %s driver_launches %llu event_records %llu\n",
              linked_info.dli_fname ? linked_info.dli_fname : "?",
              proc_info.dli_fname ? proc_info.dli_fname : "?",
              launches ? static_cast<unsigned long long>(launches()) : 0ull,
              records ? static_cast<unsigned long long>(records()) : 0ull);
  for (double v : linked) std::printf("linked %.4f\n", v);
  for (double v : proc) std::printf("procaddr %.4f\n", v);
  for (double v : threaded) std::printf("threaded %.4f\n", v);
  return 0;
}

// --- parent: the comparison ----------------------------------------------------------------------

struct ChildResult {
  std::vector<double> linked, procaddr, threaded;
  std::string linked_via, procaddr_via;
  unsigned long long launches = 0, event_records = 0;
  bool ok = false;
};

ChildResult run_child(const std::string& self, const Settings& s, const std::vector<std::string>& env,
                      const std::string& out_path) {
  ChildResult r;
  std::vector<std::string> args{self, "--batches", std::to_string(s.batches), "--calls", std::to_string(s.calls),
                                "--threads", std::to_string(s.threads)};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_copy = env;
  std::vector<char*> envp;
  for (auto& e : env_copy) envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, self.c_str(), &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return r;
  int status = 0;
  waitpid(pid, &status, 0);
  FILE* f = std::fopen(out_path.c_str(), "r");
  if (!f) return r;
  char line[4096];
  while (std::fgets(line, sizeof line, f)) {
    char a[2048], b[2048];
    unsigned long long l = 0, e = 0;
    double v = 0;
    if (std::sscanf(line, "child linked_via %2047s procaddr_via %2047s driver_launches %llu event_records %llu", a,
                    b, &l, &e) == 4) {
      r.linked_via = a;
      r.procaddr_via = b;
      r.launches = l;
      r.event_records = e;
    } else if (std::sscanf(line, "linked %lf", &v) == 1) {
      r.linked.push_back(v);
    } else if (std::sscanf(line, "procaddr %lf", &v) == 1) {
      r.procaddr.push_back(v);
    } else if (std::sscanf(line, "threaded %lf", &v) == 1) {
      r.threaded.push_back(v);
    } else {
      std::fprintf(stderr, "child: %s", line);
    }
  }
  std::fclose(f);
  r.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && !r.linked.empty();
  return r;
}

std::string base_name(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

int parent(const std::string& self, const Settings& s) {
  const std::string noop_dir = HONE_NOOP_DRIVER_DIR;
  const std::string shim = HONE_SHIM_LIBRARY;
  if (access((noop_dir + "/libcuda.so.1").c_str(), R_OK) != 0 || access(shim.c_str(), R_OK) != 0) {
    std::fprintf(stderr, "hone-bench-shim-launch: needs %s/libcuda.so.1 and %s (build hone_noop_driver and hone_shim)\n",
                 noop_dir.c_str(), shim.c_str());
    return 1;
  }
  hone::test::TestServer daemon; // the hooked children report here, as to honed
  std::string out = daemon.directory() + "/child.out";

  std::vector<std::string> base_env{"PATH=/usr/bin:/bin", "LD_LIBRARY_PATH=" + noop_dir,
                                    std::string(k_child_env) + "=1"};
  auto hooked_env = [&](const char* sample_every) {
    std::vector<std::string> e = base_env;
    e.push_back("LD_PRELOAD=" + shim);
    e.push_back("HONE_SOCKET=" + daemon.socket_path());
    e.push_back(std::string("HONE_SAMPLE_EVERY=") + sample_every);
    return e;
  };
  struct Config {
    const char* name;
    std::vector<std::string> env;
  };
  std::vector<Config> configs{{"unhooked", base_env},
                              {"hooked, HONE_SAMPLE_EVERY=0", hooked_env("0")},
                              {"hooked, HONE_SAMPLE_EVERY=100", hooked_env("100")}};
  std::map<std::string, ChildResult> results;
  for (int round = 0; round < s.rounds; ++round) {
    for (const auto& c : configs) { // alternating, so drifting machine load hits every config alike
      ChildResult r = run_child(self, s, c.env, out);
      if (!r.ok) {
        std::fprintf(stderr, "hone-bench-shim-launch: the %s child failed\n", c.name);
        return 1;
      }
      ChildResult& all = results[c.name];
      all.linked.insert(all.linked.end(), r.linked.begin(), r.linked.end());
      all.procaddr.insert(all.procaddr.end(), r.procaddr.begin(), r.procaddr.end());
      all.threaded.insert(all.threaded.end(), r.threaded.begin(), r.threaded.end());
      all.linked_via = r.linked_via;
      all.procaddr_via = r.procaddr_via;
      all.launches += r.launches;
      all.event_records += r.event_records;
      all.ok = true;
    }
  }

  std::printf("hone-bench-shim-launch: ns per cuLaunchKernel call on a no-op driver, median of %d "
              "batches x %ld calls (%d rounds, alternating)\n\n",
              s.batches * s.rounds, s.calls, s.rounds);
  std::printf("%-32s %12s %12s %10s %10s   %s\n", "", "linked sym", "procaddr ptr", "(min)", "(min)",
              "cuLaunchKernel resolves to");
  double base_linked = median(results["unhooked"].linked), base_proc = median(results["unhooked"].procaddr);
  for (const auto& c : configs) {
    const ChildResult& r = results[c.name];
    std::printf("%-32s %12.2f %12.2f %10.2f %10.2f   %s / %s\n", c.name, median(r.linked),
                median(r.procaddr), minimum(r.linked), minimum(r.procaddr),
                base_name(r.linked_via).c_str(), base_name(r.procaddr_via).c_str());
  }
  std::printf("\n%-32s %12s %12s\n", "added by the shim (median)", "linked sym", "procaddr ptr");
  double worst_fast = 0;
  for (size_t i = 1; i < configs.size(); ++i) {
    const ChildResult& r = results[configs[i].name];
    double dl = median(r.linked) - base_linked, dp = median(r.procaddr) - base_proc;
    std::printf("%-32s %12.2f %12.2f\n", configs[i].name, dl, dp);
    if (i == 1) worst_fast = std::max(dl, dp);
  }
  const ChildResult& sampled = results[configs[2].name];
  std::printf("\nsampling on: the driver saw %llu event records for %llu launches (%s)\n",
              sampled.event_records, sampled.launches,
              sampled.event_records ? "launches were timed" : "no launch was timed");
  {
    hone::test::ServerLog log = daemon.snapshot();
    unsigned long long reported = 0;
    for (const auto& conn : log.connections)
      for (const auto& [key, st] : conn.stats_by_key()) reported += st.launches;
    std::printf("the test daemon received %zu session(s) reporting %llu launches in all\n", log.clients(),
                reported);
  }
  bool hooked = base_name(results[configs[1].name].linked_via).find("libhone") != std::string::npos;
  const ChildResult& fast = results[configs[1].name];
  const double ratio = median(fast.linked) / base_linked;
  const double base_threaded = median(results["unhooked"].threaded);
  const double added_one = median(fast.linked) - base_linked;
  const double added_many = median(fast.threaded) - base_threaded;
  std::printf("\n%d threads launching the same kernel at once, CPU ns per launch (median of %zu batches):\n",
              s.threads, results["unhooked"].threaded.size());
  for (const auto& c : configs) {
    std::printf("%-32s %12.2f\n", c.name, median(results[c.name].threaded));
  }
  std::printf("added by the shim, fast path: %.2f ns with %d threads, %.2f ns with one (%.2fx)\n",
              added_many, s.threads, added_one, added_one > 0 ? added_many / added_one : 0.0);
  std::printf(
      "\nWhere the fast path's nanoseconds go (x86-64: the entry stub of "
      "shim/launch_stubs_x86_64.cpp, 33 instructions, no call, no stack): the driver's entry "
      "point (a load), the shim's divert word (a load), the handle's slot (a multiply and a load "
      "in a 1.5 MiB table), the kernel's record and its divert word (two loads), this thread's "
      "counters (initial-exec TLS: the offset from the GOT, the capacity, the block), the launch "
      "count against the next timed launch and its store (no locked instruction), then a jump to "
      "the driver, which returns to the application itself. Eleven loads, seven branches, one "
      "store; the count is one chain of a load, an add and a store per launch. The unhooked call "
      "is a call through the PLT into a function that counts the launch per thread and "
      "returns.\n");
  std::printf("\ntarget: hooked fast path <= 2x the unhooked call: %s (%.2fx: %.2f ns against %.2f ns)%s\n",
              hooked && ratio <= 2.0 ? "met" : "not met", ratio, median(fast.linked), base_linked,
              hooked ? "" : " [the hooked children did not reach libhone.so's cuLaunchKernel]");
  std::printf("target: added cost with %d threads <= 2x the single-threaded: %s (%.2fx)\n", s.threads,
              added_one > 0 && added_many <= 2 * added_one ? "met" : "not met",
              added_one > 0 ? added_many / added_one : 0.0);
  std::printf("(earlier target <= 20 ns added on the fast path: %s, %.2f ns)\n",
              worst_fast <= 20.0 ? "met" : "not met", worst_fast);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  Settings s;
  for (int i = 1; i < argc; ++i) {
    auto value = [&](long max) {
      long v = i + 1 < argc ? std::strtol(argv[++i], nullptr, 10) : 0;
      if (v < 1 || v > max) {
        std::fprintf(stderr, "usage: %s [--batches N] [--calls N] [--rounds N] [--threads N]\n", argv[0]);
        std::exit(64);
      }
      return v;
    };
    if (std::strcmp(argv[i], "--batches") == 0) s.batches = int(value(1000));
    else if (std::strcmp(argv[i], "--calls") == 0) s.calls = value(1000000000);
    else if (std::strcmp(argv[i], "--rounds") == 0) s.rounds = int(value(100));
    else if (std::strcmp(argv[i], "--threads") == 0) s.threads = int(value(256));
    else {
      std::fprintf(stderr, "usage: %s [--batches N] [--calls N] [--rounds N] [--threads N]\n", argv[0]);
      return 64;
    }
  }
  if (std::getenv(k_child_env)) return child(s);
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 1;
  self[n] = '\0';
  return parent(self, s);
}
