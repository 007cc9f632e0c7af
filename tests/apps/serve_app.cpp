// An application that keeps launching one kernel (serve.cu) and checks every result against the
// host, as an inference loop does: the end-to-end tests optimize and swap its kernel under it.
//   hone-testapp-serve [--seconds S] [--iterations N] [--mixed-shapes] [--n N] [--reps R] [--block B]
//                     [--stop-file PATH] [--alias] [--same-input] [--relay]
// It stops after S seconds (or N launches), or as soon as PATH exists. Blocks have B threads (default 256); --mixed-shapes launches every fourth time with half as many.
// --alias passes one buffer as both out and in: the kernel computes in place (each thread reads
// in[i] before it writes out[i], and no other thread touches element i).
// --same-input gives every launch the same input (as a model's weights are), not a new one.
// --relay launches relay.cu's `relay` instead (n elements read 4 MiB into a table, through indices
// the kernel stores first), checking each launch the same way.
// Prints "progress <launches>" lines and, at the end, "launches <L> mismatches <M> last_mismatch
// <K>" (K: the number of the last launch that was wrong, 0 if none); exits 1 on a mismatch. Nothing of hone: cuda.h and -lcuda only.
#include <cuda.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

extern const unsigned char k_serve_ptx[];
extern const unsigned char k_relay_ptx[];

namespace {

void check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  const char* s = nullptr;
  cuGetErrorString(r, &s);
  std::fprintf(stderr, "serve: %s failed: %s\n", what, s ? s : "?");
  std::exit(2);
}

// Launches until `seconds` pass (or `iterations` launches were made), or `stop_file` exists:
// `launch(it)` makes launch number `it` and checks it, returning what was wrong (" (block 256):
// out[3] = 5, want 6"), or "" when every element is right. Prints "progress <launches>" every 50
// launches and the summary line; returns the exit code.
int serve_loop(double seconds, long iterations, const std::string& stop_file,
               const std::function<std::string(long)>& launch) {
  auto start = std::chrono::steady_clock::now();
  long launches = 0, mismatches = 0, last_mismatch = 0;
  for (long it = 0;; ++it) {
    if (iterations >= 0 ? it >= iterations
                        : std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                                  .count() >= seconds) {
      break;
    }
    if (!stop_file.empty() && ::access(stop_file.c_str(), F_OK) == 0) break;
    const std::string wrong = launch(it);
    ++launches;
    if (!wrong.empty()) {
      if (mismatches < 5) std::fprintf(stderr, "serve: launch %ld%s\n", launches, wrong.c_str());
      ++mismatches;
      last_mismatch = launches;
    }
    if (launches % 50 == 0) {
      std::printf("progress %ld\n", launches);
      std::fflush(stdout);
    }
  }
  std::printf("launches %ld mismatches %ld last_mismatch %ld\n", launches, mismatches,
              last_mismatch);
  return mismatches ? 1 : 0;
}

// The --relay loop: relay(out, idx, idx, data, n, far), every launch checked against the host.
int relay_main(CUmodule mod, int n, double seconds, long iterations, const std::string& stop_file) {
  CUfunction fn;
  check(cuModuleGetFunction(&fn, mod, "relay"), "cuModuleGetFunction(relay)");
  int far = 1 << 20;
  std::vector<float> data(size_t(far) + size_t(n));
  for (size_t i = 0; i < data.size(); ++i) data[i] = float(int(i % 1000) - 500) * 0.25f;
  CUdeviceptr d_out, d_idx, d_data;
  check(cuMemAlloc(&d_out, size_t(n) * 4), "cuMemAlloc");
  check(cuMemAlloc(&d_idx, size_t(n) * 4), "cuMemAlloc");
  check(cuMemAlloc(&d_data, data.size() * 4), "cuMemAlloc");
  check(cuMemcpyHtoD(d_data, data.data(), data.size() * 4), "cuMemcpyHtoD");
  std::vector<float> out(static_cast<size_t>(n));
  return serve_loop(seconds, iterations, stop_file, [&](long) -> std::string {
    check(cuMemsetD8(d_idx, 0, size_t(n) * 4), "cuMemsetD8");
    check(cuMemsetD8(d_out, 0xab, size_t(n) * 4), "cuMemsetD8");
    void* params[] = {&d_out, &d_idx, &d_idx, &d_data, &n, &far};
    check(cuLaunchKernel(fn, unsigned((n + 255) / 256), 1, 1, 256, 1, 1, 0, nullptr, params,
                         nullptr),
          "cuLaunchKernel");
    check(cuCtxSynchronize(), "cuCtxSynchronize");
    check(cuMemcpyDtoH(out.data(), d_out, size_t(n) * 4), "cuMemcpyDtoH");
    for (int i = 0; i < n; ++i) {
      const float want = 2.0f * data[size_t(far) + size_t(i)];
      if (out[size_t(i)] != want) {
        return " (relay): out[" + std::to_string(i) + "] = " + std::to_string(out[size_t(i)]) +
               ", want " + std::to_string(want);
      }
    }
    return {};
  });
}

} // namespace

int main(int argc, char** argv) {
  double seconds = 5;
  long iterations = -1;
  bool mixed = false;
  int n = 4096, reps = 64;
  unsigned block_threads = 256;
  std::string stop_file;
  bool alias = false, same_input = false, relay = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--seconds" && i + 1 < argc) seconds = std::atof(argv[++i]);
    else if (a == "--iterations" && i + 1 < argc) iterations = std::atol(argv[++i]);
    else if (a == "--mixed-shapes") mixed = true;
    else if (a == "--n" && i + 1 < argc) n = std::atoi(argv[++i]);
    else if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (a == "--stop-file" && i + 1 < argc) stop_file = argv[++i];
    else if (a == "--block" && i + 1 < argc) block_threads = unsigned(std::atoi(argv[++i]));
    else if (a == "--alias") alias = true;
    else if (a == "--same-input") same_input = true;
    else if (a == "--relay") relay = true;
    else {
      std::fprintf(stderr, "usage: %s [--seconds S] [--iterations N] [--mixed-shapes] [--n N] [--reps R] [--block B] [--stop-file PATH] [--alias] [--same-input] [--relay]\n", argv[0]);
      return 2;
    }
  }
  if (n <= 0 || reps < 0 || block_threads < 2 || block_threads > 1024) {
    std::fprintf(stderr, "serve: need --n > 0, --reps >= 0 and 2 <= --block <= 1024\n");
    return 2;
  }
  check(cuInit(0), "cuInit");
  CUdevice dev;
  check(cuDeviceGet(&dev, 0), "cuDeviceGet");
  CUcontext ctx;
  check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  CUmodule mod;
  if (relay) {
    check(cuModuleLoadData(&mod, k_relay_ptx), "cuModuleLoadData(relay)");
    return relay_main(mod, n, seconds, iterations, stop_file);
  }
  check(cuModuleLoadData(&mod, k_serve_ptx), "cuModuleLoadData");
  CUfunction fn;
  check(cuModuleGetFunction(&fn, mod, "accumulate"), "cuModuleGetFunction");

  std::vector<int> in(static_cast<size_t>(n)), out(static_cast<size_t>(n));
  CUdeviceptr d_in, d_out;
  check(cuMemAlloc(&d_in, size_t(n) * 4), "cuMemAlloc");
  if (alias) d_out = d_in;
  else check(cuMemAlloc(&d_out, size_t(n) * 4), "cuMemAlloc");
  return serve_loop(seconds, iterations, stop_file, [&](long it) -> std::string {
    const long round = same_input ? 0 : it;
    for (int i = 0; i < n; ++i) in[size_t(i)] = int((round * 7919 + i * 104729) % 100003) - 50000;
    check(cuMemcpyHtoD(d_in, in.data(), size_t(n) * 4), "cuMemcpyHtoD");
    if (!alias) check(cuMemsetD8(d_out, 0xab, size_t(n) * 4), "cuMemsetD8"); // in place: out holds in
    unsigned block = (mixed && it % 4 == 3) ? block_threads / 2 : block_threads;
    unsigned grid = unsigned((n + int(block) - 1) / int(block));
    void* params[] = {&d_out, &d_in, &n, &reps};
    check(cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, nullptr, params, nullptr), "cuLaunchKernel");
    check(cuCtxSynchronize(), "cuCtxSynchronize");
    check(cuMemcpyDtoH(out.data(), d_out, size_t(n) * 4), "cuMemcpyDtoH");
    for (int i = 0; i < n; ++i) {
      int want = int(unsigned(in[size_t(i)]) * unsigned(reps));
      if (out[size_t(i)] != want) {
        return " (block " + std::to_string(block) + "): out[" + std::to_string(i) +
               "] = " + std::to_string(out[size_t(i)]) + ", want " + std::to_string(want);
      }
    }
    return {};
  });
}
