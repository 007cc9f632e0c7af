// What the preload shim adds to one cuGraphLaunch of a graph of 1, 50 and 500 kernel nodes.
// The shim's work per replay must not grow with the nodes: one table lookup and an atomic add,
// the nodes being expanded later by the reporter thread.
//
// One run measures both sides, like hone-bench-shim-launch: the program re-executes itself as
// child processes against the no-op driver (build/lib/noop/libcuda.so.1, whose cuGraphLaunch
// returns at once), without and with LD_PRELOAD=libhone.so, alternating, and compares medians.
// Each child builds the three graphs through the driver API (instantiated through the shim's
// hooks when preloaded, which read every node then), and launches each in a tight loop, BATCHES
// batches of CALLS calls. The hooked children report to an in-process test daemon, as they would
// to honed. HONE_SAMPLE_EVERY=0 measures the fast path; 100 (the default) the average with 1
// replay in 100 timed.
//
// Usage: hone-bench-graph-launch [--batches N] [--calls N] [--rounds N]
// Prints what it measured; asserts nothing.
#include "test_server.hpp"

#include <cuda.h>

#include <algorithm>
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
#include <unistd.h>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* k_child_env = "HONE_BENCH_GRAPH_CHILD";
constexpr const char* k_ptx = ".version 8.0\n.target sm_90\n.address_size 64\n"
                              ".visible .entry bench_kernel(.param .u64 p)\n{\nret;\n}\n";
constexpr int k_sizes[] = {1, 50, 500};

struct Settings {
  int batches = 10;
  long calls = 200000;
  int rounds = 2;
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// --- child: the measurement ----------------------------------------------------------------------

int child(const Settings& s) {
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  CUmodule mod = nullptr;
  CUfunction f = nullptr;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
      cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS ||
      cuModuleLoadData(&mod, k_ptx) != CUDA_SUCCESS ||
      cuModuleGetFunction(&f, mod, "bench_kernel") != CUDA_SUCCESS) {
    std::printf("error: driver setup failed\n");
    return 2;
  }
  for (int nodes : k_sizes) {
    CUgraph g = nullptr;
    CUgraphExec exec = nullptr;
    if (cuGraphCreate(&g, 0) != CUDA_SUCCESS) return 2;
    CUdeviceptr p = 0x1000;
    void* params[] = {&p};
    CUgraphNode prev = nullptr;
    for (int i = 0; i < nodes; ++i) {
      CUDA_KERNEL_NODE_PARAMS kp{};
      kp.func = f;
      kp.gridDimX = kp.gridDimY = kp.gridDimZ = 1;
      kp.blockDimX = 32;
      kp.blockDimY = kp.blockDimZ = 1;
      kp.kernelParams = params;
      CUgraphNode n = nullptr;
      if (cuGraphAddKernelNode(&n, g, prev ? &prev : nullptr, prev ? 1 : 0, &kp) != CUDA_SUCCESS) {
        std::printf("error: cuGraphAddKernelNode failed\n");
        return 2;
      }
      prev = n;
    }
    if (cuGraphInstantiate(&exec, g, 0) != CUDA_SUCCESS) {
      std::printf("error: cuGraphInstantiate failed\n");
      return 2;
    }
    for (long i = 0; i < s.calls / 10; ++i) cuGraphLaunch(exec, nullptr);
    for (int b = 0; b < s.batches; ++b) {
      auto t0 = Clock::now();
      for (long i = 0; i < s.calls; ++i) cuGraphLaunch(exec, nullptr);
      auto t1 = Clock::now();
      std::printf("nodes %d %.4f\n", nodes,
                  double(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()) /
                      double(s.calls));
    }
    cuGraphExecDestroy(exec);
    cuGraphDestroy(g);
  }
  Dl_info info{};
  dladdr(reinterpret_cast<void*>(&cuGraphLaunch), &info);
  std::printf("child graph_launch_via %s\n", info.dli_fname ? info.dli_fname : "?");
  return 0;
}

// --- parent: the comparison ----------------------------------------------------------------------

struct ChildResult {
  std::map<int, std::vector<double>> ns; // by node count
  std::string via;
  bool ok = false;
};

ChildResult run_child(const std::string& self, const Settings& s, std::vector<std::string> env,
                      const std::string& out_path) {
  ChildResult r;
  std::vector<std::string> args{self, "--batches", std::to_string(s.batches), "--calls",
                                std::to_string(s.calls)};
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
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
    char via[2048];
    int nodes = 0;
    double v = 0;
    if (std::sscanf(line, "nodes %d %lf", &nodes, &v) == 2) {
      r.ns[nodes].push_back(v);
    } else if (std::sscanf(line, "child graph_launch_via %2047s", via) == 1) {
      r.via = via;
    } else {
      std::fprintf(stderr, "child: %s", line);
    }
  }
  std::fclose(f);
  r.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && r.ns.size() == std::size(k_sizes);
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
    std::fprintf(stderr, "hone-bench-graph-launch: needs %s/libcuda.so.1 and %s\n",
                 noop_dir.c_str(), shim.c_str());
    return 1;
  }
  hone::test::TestServer daemon;
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
    for (const auto& c : configs) {
      ChildResult r = run_child(self, s, c.env, out);
      if (!r.ok) {
        std::fprintf(stderr, "hone-bench-graph-launch: the %s child failed\n", c.name);
        return 1;
      }
      ChildResult& all = results[c.name];
      for (auto& [nodes, v] : r.ns) all.ns[nodes].insert(all.ns[nodes].end(), v.begin(), v.end());
      all.via = r.via;
    }
  }
  std::printf("hone-bench-graph-launch: ns per cuGraphLaunch on a no-op driver, median of %d "
              "batches x %ld calls (%d rounds, alternating)\n\n",
              s.batches * s.rounds, s.calls, s.rounds);
  std::printf("%-32s", "");
  for (int n : k_sizes) std::printf(" %9d nodes", n);
  std::printf("   cuGraphLaunch resolves to\n");
  for (const auto& c : configs) {
    std::printf("%-32s", c.name);
    for (int n : k_sizes) std::printf(" %15.2f", median(results[c.name].ns[n]));
    std::printf("   %s\n", base_name(results[c.name].via).c_str());
  }
  std::printf("\n%-32s", "added by the shim (ns, ratio)");
  for (int n : k_sizes) std::printf(" %9d nodes", n);
  std::printf("\n");
  for (size_t i = 1; i < configs.size(); ++i) {
    std::printf("%-32s", configs[i].name);
    for (int n : k_sizes) {
      double base = median(results["unhooked"].ns[n]);
      double hooked = median(results[configs[i].name].ns[n]);
      std::printf(" %7.2f (%4.2fx)", hooked - base, base > 0 ? hooked / base : 0.0);
    }
    std::printf("\n");
  }
  ChildResult& fast = results[configs[1].name];
  double added_1 = median(fast.ns[1]) - median(results["unhooked"].ns[1]);
  double added_500 = median(fast.ns[500]) - median(results["unhooked"].ns[500]);
  bool hooked = base_name(fast.via).find("libhone") != std::string::npos;
  std::printf("\n500 nodes vs 1 node, added on the fast path: %+.2f ns%s\n", added_500 - added_1,
              hooked ? "" : " [the hooked children did not reach libhone.so's cuGraphLaunch]");
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  Settings s;
  for (int i = 1; i < argc; ++i) {
    auto value = [&](long max) {
      long v = i + 1 < argc ? std::strtol(argv[++i], nullptr, 10) : 0;
      if (v < 1 || v > max) {
        std::fprintf(stderr, "usage: %s [--batches N] [--calls N] [--rounds N]\n", argv[0]);
        std::exit(64);
      }
      return v;
    };
    if (std::strcmp(argv[i], "--batches") == 0) s.batches = int(value(1000));
    else if (std::strcmp(argv[i], "--calls") == 0) s.calls = value(1000000000);
    else if (std::strcmp(argv[i], "--rounds") == 0) s.rounds = int(value(100));
    else {
      std::fprintf(stderr, "usage: %s [--batches N] [--calls N] [--rounds N]\n", argv[0]);
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
