// hone-testapp-spec: an application whose kernel gains from runtime specialization. It compiles
// mix_rounds with NVRTC at start (the source, one header given by name, options), then launches it
// over and over with the same n and rounds, checking every launch against the host — until it is
// told to change rounds, which a variant specialized for the old value must not serve.
//
// Usage: hone-testapp-spec [--n N] [--rounds R] [--change-after K] [--change-file PATH]
//                          [--new-rounds V] [--block B] [--seconds S] [--iterations I]
//                          [--stop-file PATH] [--graph]
//   --n N             elements per launch (default 4096)
//   --rounds R        hash rounds per element (default 64)
//   --change-after K  after K launches, use --new-rounds instead (default: never)
//   --change-file PATH  ... or once PATH exists
//   --new-rounds V    the rounds used after the change (default 48)
//   --block B         threads per block (default 256); grid = ceil(N / B)
//   --seconds S       stop after S seconds (default 5) ...
//   --iterations I    ... or after I launches, when given
//   --stop-file PATH  ... or as soon as PATH exists
//   --graph           launch through a CUDA graph: the launch captured from a stream once (and
//                     again when rounds change), instantiated, and replayed with cuGraphLaunch;
//                     each replay timed with events, the shortest and the last printed at the end
//                     ("replay_us min <A> last <B>")
// Prints "progress <launches>" about once a second, "change rounds <R> -> <V> after <K> launches"
// when it switches, and at the end "launches <L> mismatches <M>" and one
// "rounds <R> launches <L>" line per rounds value used. Exits 0 only when every launch matched
// (1 on a mismatch, 2 when a driver or NVRTC call fails, 64 on bad usage). Nothing of hone:
// cuda.h, nvrtc.h, -lcuda and -lnvrtc only.
#include <cuda.h>
#include <nvrtc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace {

// One round of the hash, in a header the program gives NVRTC by name. The divisions by `rounds`
// are what a specialization pays off on: by a run-time value they are division instructions, by
// a constant (a power of two by default) a shift or a multiply.
const char* const k_header_name = "spec_mix.h";
const char* const k_header = R"(#pragma once
__device__ __forceinline__ unsigned mix_step(unsigned h, unsigned r, unsigned rounds)
{
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    h *= 0x846ca68bu;
    h ^= h >> 16;
    return h + h % rounds + (h ^ r) / rounds;
}
)";

const char* const k_program_name = "spec_app.cu";
const char* const k_source = R"(#include "spec_mix.h"

// out[i] = `rounds` rounds of mix_step over in[i]; integer arithmetic only.
extern "C" __global__ void mix_rounds(unsigned* out, const unsigned* in, int n, int rounds)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned h = in[i] ^ MIX_SEED;
    for (int r = 0; r < rounds; ++r) h = mix_step(h, unsigned(r), unsigned(rounds));
    out[i] = h;
}
)";
const char* const k_options[] = {"--gpu-architecture=compute_75", "-DMIX_SEED=0x9e3779b9u"};

// The host's mix_rounds, as the kernel computes it (unsigned arithmetic wraps alike).
unsigned reference(unsigned in, int rounds) {
  unsigned h = in ^ 0x9e3779b9u;
  for (int r = 0; r < rounds; ++r) {
    unsigned rs = unsigned(rounds);
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    h *= 0x846ca68bu;
    h ^= h >> 16;
    h = h + h % rs + (h ^ unsigned(r)) / rs;
  }
  return h;
}

void check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  const char* s = nullptr;
  cuGetErrorString(r, &s);
  std::printf("error: %s: %s\n", what, s ? s : "?");
  std::exit(2);
}

void check_nvrtc(nvrtcResult r, const char* what) {
  if (r == NVRTC_SUCCESS) return;
  std::printf("error: %s: %s\n", what, nvrtcGetErrorString(r));
  std::exit(2);
}

// The PTX of the program, compiled as an application would at start.
std::string compile() {
  nvrtcProgram prog = nullptr;
  const char* headers[] = {k_header};
  const char* names[] = {k_header_name};
  check_nvrtc(nvrtcCreateProgram(&prog, k_source, k_program_name, 1, headers, names),
              "nvrtcCreateProgram");
  nvrtcResult compiled = nvrtcCompileProgram(prog, 2, k_options);
  if (compiled != NVRTC_SUCCESS) {
    size_t size = 0;
    nvrtcGetProgramLogSize(prog, &size);
    std::string log(size, '\0');
    nvrtcGetProgramLog(prog, log.data());
    std::printf("error: nvrtcCompileProgram: %s\n%s\n", nvrtcGetErrorString(compiled), log.c_str());
    std::exit(2);
  }
  size_t size = 0;
  check_nvrtc(nvrtcGetPTXSize(prog, &size), "nvrtcGetPTXSize");
  std::string ptx(size, '\0'); // size counts the NUL
  check_nvrtc(nvrtcGetPTX(prog, ptx.data()), "nvrtcGetPTX");
  nvrtcDestroyProgram(&prog);
  return ptx;
}

int usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--n N] [--rounds R] [--change-after K] [--change-file PATH] "
               "[--new-rounds V] [--block B] [--seconds S] [--iterations I] [--stop-file PATH] "
               "[--graph]\n",
               argv0);
  return 64;
}

} // namespace

int main(int argc, char** argv) {
  int n = 4096, rounds = 64, new_rounds = 48;
  long change_after = -1, iterations = -1;
  unsigned block_threads = 256;
  double seconds = 5;
  std::string stop_file, change_file;
  bool graph = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    bool value = i + 1 < argc;
    if (a == "--n" && value)
      n = std::atoi(argv[++i]);
    else if (a == "--rounds" && value)
      rounds = std::atoi(argv[++i]);
    else if (a == "--change-after" && value)
      change_after = std::atol(argv[++i]);
    else if (a == "--change-file" && value)
      change_file = argv[++i];
    else if (a == "--new-rounds" && value)
      new_rounds = std::atoi(argv[++i]);
    else if (a == "--block" && value)
      block_threads = unsigned(std::atoi(argv[++i]));
    else if (a == "--seconds" && value)
      seconds = std::atof(argv[++i]);
    else if (a == "--iterations" && value)
      iterations = std::atol(argv[++i]);
    else if (a == "--stop-file" && value)
      stop_file = argv[++i];
    else if (a == "--graph")
      graph = true;
    else
      return usage(argv[0]);
  }
  if (n <= 0 || rounds < 0 || new_rounds < 0 || block_threads < 1 || block_threads > 1024) {
    std::fprintf(stderr,
                 "spec: need --n > 0, --rounds and --new-rounds >= 0, 1 <= --block <= 1024\n");
    return 64;
  }

  std::string ptx = compile();
  check(cuInit(0), "cuInit");
  CUdevice dev;
  check(cuDeviceGet(&dev, 0), "cuDeviceGet");
  CUcontext ctx;
  check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  CUmodule mod;
  check(cuModuleLoadData(&mod, ptx.c_str()), "cuModuleLoadData");
  CUfunction fn;
  check(cuModuleGetFunction(&fn, mod, "mix_rounds"), "cuModuleGetFunction");

  const size_t bytes = size_t(n) * sizeof(unsigned);
  std::vector<unsigned> in(static_cast<size_t>(n)), out(static_cast<size_t>(n));
  CUdeviceptr d_in, d_out;
  check(cuMemAlloc(&d_in, bytes), "cuMemAlloc");
  check(cuMemAlloc(&d_out, bytes), "cuMemAlloc");

  CUstream stream = nullptr;
  CUgraphExec exec = nullptr;
  int exec_rounds = -1; // the rounds value `exec` was captured with
  CUevent before = nullptr, after = nullptr;
  float replay_min_ms = 0, replay_last_ms = 0;
  long replays = 0;
  if (graph) {
    check(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    check(cuEventCreate(&before, CU_EVENT_DEFAULT), "cuEventCreate");
    check(cuEventCreate(&after, CU_EVENT_DEFAULT), "cuEventCreate");
  }

  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  auto last_progress = start;
  long launches = 0, mismatches = 0;
  std::vector<std::pair<int, long>> per_rounds; // rounds value, launches, in order of first use
  int current = rounds;
  while (true) {
    auto now = clock::now();
    if (iterations >= 0 ? launches >= iterations
                        : std::chrono::duration<double>(now - start).count() >= seconds) {
      break;
    }
    if (!stop_file.empty() && ::access(stop_file.c_str(), F_OK) == 0) break;
    bool change = (change_after >= 0 && launches >= change_after) ||
                  (!change_file.empty() && ::access(change_file.c_str(), F_OK) == 0);
    if (change && current != new_rounds) {
      std::printf("change rounds %d -> %d after %ld launches\n", current, new_rounds, launches);
      std::fflush(stdout);
      current = new_rounds;
    }
    if (per_rounds.empty() || per_rounds.back().first != current)
      per_rounds.emplace_back(current, 0);

    // Fresh inputs every launch, and an output that holds none of the expected values.
    for (int i = 0; i < n; ++i)
      in[size_t(i)] = unsigned(launches) * 2654435761u + unsigned(i) * 40503u;
    check(cuMemcpyHtoD(d_in, in.data(), bytes), "cuMemcpyHtoD");
    check(cuMemsetD8(d_out, 0xab, bytes), "cuMemsetD8");
    unsigned grid = unsigned((n + int(block_threads) - 1) / int(block_threads));
    void* params[] = {&d_out, &d_in, &n, &current};
    if (graph) {
      if (exec_rounds != current) {
        if (exec) check(cuGraphExecDestroy(exec), "cuGraphExecDestroy");
        CUgraph g = nullptr;
        check(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
        check(cuLaunchKernel(fn, grid, 1, 1, block_threads, 1, 1, 0, stream, params, nullptr),
              "cuLaunchKernel (captured)");
        check(cuStreamEndCapture(stream, &g), "cuStreamEndCapture");
        check(cuGraphInstantiate(&exec, g, 0), "cuGraphInstantiate");
        check(cuGraphDestroy(g), "cuGraphDestroy");
        exec_rounds = current;
      }
      check(cuEventRecord(before, stream), "cuEventRecord");
      check(cuGraphLaunch(exec, stream), "cuGraphLaunch");
      check(cuEventRecord(after, stream), "cuEventRecord");
      check(cuStreamSynchronize(stream), "cuStreamSynchronize");
      float ms = 0;
      check(cuEventElapsedTime(&ms, before, after), "cuEventElapsedTime");
      replay_min_ms = replays ? std::min(replay_min_ms, ms) : ms;
      replay_last_ms = ms;
      ++replays;
    } else {
      check(cuLaunchKernel(fn, grid, 1, 1, block_threads, 1, 1, 0, nullptr, params, nullptr),
            "cuLaunchKernel");
      check(cuCtxSynchronize(), "cuCtxSynchronize");
    }
    check(cuMemcpyDtoH(out.data(), d_out, bytes), "cuMemcpyDtoH");
    ++launches;
    ++per_rounds.back().second;
    for (int i = 0; i < n; ++i) {
      unsigned want = reference(in[size_t(i)], current);
      if (out[size_t(i)] != want) {
        if (mismatches < 5) {
          std::fprintf(stderr, "spec: launch %ld (rounds %d): out[%d] = %u, want %u\n", launches,
                       current, i, out[size_t(i)], want);
        }
        ++mismatches;
        break;
      }
    }
    if (now - last_progress >= std::chrono::seconds(1)) {
      last_progress = now;
      std::printf("progress %ld\n", launches);
      std::fflush(stdout);
    }
  }
  std::printf("launches %ld mismatches %ld\n", launches, mismatches);
  if (replays) {
    std::printf("replay_us min %.3f last %.3f\n", replay_min_ms * 1e3, replay_last_ms * 1e3);
  }
  for (const auto& [r, l] : per_rounds) std::printf("rounds %d launches %ld\n", r, l);
  if (exec) cuGraphExecDestroy(exec);
  if (before) cuEventDestroy(before);
  if (after) cuEventDestroy(after);
  if (stream) cuStreamDestroy(stream);
  cuMemFree(d_in);
  cuMemFree(d_out);
  cuModuleUnload(mod);
  cuDevicePrimaryCtxRelease(dev);
  return mismatches ? 1 : 0;
}
