// hone-testapp-serve-rt: a CUDA runtime-API application (nvcc, -cudart shared, <<<>>>) that keeps
// launching one kernel and checks every result against the host, as an inference loop does: the
// end-to-end tests optimize and swap its kernel under it. Built twice: as it is, and with
// `--default-stream per-thread` (hone-testapp-serve-rt-pt).
//
// The kernel buckets keys as a hash table probes them: `rounds` mixing steps, each reducing the
// hash modulo `buckets` (a power of two in the tests, so a specialized kernel masks instead of
// dividing). It is a template in a namespace, so its name is mangled.
//
//   hone-testapp-serve-rt [--seconds S] [--iterations N] [--stop-file PATH] [--n N] [--block B]
//                         [--buckets K] [--rounds R] [--stream default|legacy|per-thread|created]
//                         [--launch chevron|api]
// Prints "progress <launches>" about once a second and, at the end, "launches <L> mismatches <M>";
// exits 1 on a mismatch, 2 when a CUDA call fails. Nothing of hone: cuda_runtime.h only.
#include <cuda_runtime.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bucket.cuh"

namespace {

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::printf("error: %s: %s\n", what, cudaGetErrorName(e));
  std::fflush(stdout);
  std::exit(2);
}

} // namespace

int main(int argc, char** argv) {
  double seconds = 5;
  long iterations = -1;
  std::string stop_file, stream_kind = "default", launch_kind = "chevron";
  unsigned n = 4096, block = 128, buckets = 1024, rounds = 64;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? argv[++i] : (char*)""; };
    if (a == "--seconds")
      seconds = std::atof(next());
    else if (a == "--iterations")
      iterations = std::atol(next());
    else if (a == "--stop-file")
      stop_file = next();
    else if (a == "--n")
      n = unsigned(std::atol(next()));
    else if (a == "--block")
      block = unsigned(std::atol(next()));
    else if (a == "--buckets")
      buckets = unsigned(std::atol(next()));
    else if (a == "--rounds")
      rounds = unsigned(std::atol(next()));
    else if (a == "--stream")
      stream_kind = next();
    else if (a == "--launch")
      launch_kind = next();
    else {
      std::fprintf(stderr,
                   "usage: %s [--seconds S] [--iterations N] [--stop-file PATH] [--n N] "
                   "[--block B] [--buckets K] [--rounds R] "
                   "[--stream default|legacy|per-thread|created] [--launch chevron|api]\n",
                   argv[0]);
      return 2;
    }
  }
  if (n == 0 || buckets == 0 || block == 0 || block > 1024 ||
      (launch_kind != "chevron" && launch_kind != "api")) {
    std::fprintf(stderr, "serve-rt: bad arguments\n");
    return 2;
  }
  cudaStream_t stream = nullptr;
  if (stream_kind == "legacy")
    stream = cudaStreamLegacy;
  else if (stream_kind == "per-thread")
    stream = cudaStreamPerThread;
  else if (stream_kind == "created")
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  else if (stream_kind != "default") {
    std::fprintf(stderr, "serve-rt: unknown --stream %s\n", stream_kind.c_str());
    return 2;
  }

  std::vector<unsigned> keys(n), expect(n), out(n);
  for (unsigned i = 0; i < n; ++i) {
    keys[i] = i * 2246822519u ^ (i >> 3);
    expect[i] = hone_rt::host_bucket(keys[i], buckets, rounds);
  }
  unsigned *d_keys = nullptr, *d_out = nullptr, *h_out = nullptr;
  check(cudaMalloc(&d_keys, n * sizeof(unsigned)), "cudaMalloc");
  check(cudaMalloc(&d_out, n * sizeof(unsigned)), "cudaMalloc");
  check(cudaMallocHost(&h_out, n * sizeof(unsigned)), "cudaMallocHost");
  check(cudaMemcpy(d_keys, keys.data(), n * sizeof(unsigned), cudaMemcpyHostToDevice),
        "cudaMemcpy");

  const unsigned grid = (n + block - 1) / block;
  auto start = std::chrono::steady_clock::now();
  auto last_progress = start;
  long launches = 0, mismatches = 0;
  for (;;) {
    check(cudaMemsetAsync(d_out, 0xff, n * sizeof(unsigned), stream), "cudaMemsetAsync");
    if (launch_kind == "chevron") {
      hone_rt::bucket<unsigned><<<grid, block, 0, stream>>>(d_out, d_keys, n, buckets, rounds);
    } else {
      void* args[] = {&d_out, &d_keys, &n, &buckets, &rounds};
      check(cudaLaunchKernel(reinterpret_cast<const void*>(&hone_rt::bucket<unsigned>), dim3(grid),
                             dim3(block), args, 0, stream),
            "cudaLaunchKernel");
    }
    check(cudaGetLastError(), "bucket<<<>>>");
    check(cudaMemcpyAsync(h_out, d_out, n * sizeof(unsigned), cudaMemcpyDeviceToHost, stream),
          "cudaMemcpyAsync");
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    ++launches;
    if (std::memcmp(h_out, expect.data(), n * sizeof(unsigned)) != 0) {
      if (mismatches++ == 0) {
        for (unsigned i = 0; i < n; ++i) {
          if (h_out[i] != expect[i]) {
            std::printf("mismatch at launch %ld: out[%u] = %u, want %u\n", launches, i, h_out[i],
                        expect[i]);
            break;
          }
        }
      }
    }
    auto now = std::chrono::steady_clock::now();
    if (now - last_progress >= std::chrono::seconds(1)) {
      std::printf("progress %ld\n", launches);
      std::fflush(stdout);
      last_progress = now;
    }
    if (iterations >= 0 && launches >= iterations) break;
    if (iterations < 0 && std::chrono::duration<double>(now - start).count() >= seconds) break;
    if (!stop_file.empty() && access(stop_file.c_str(), F_OK) == 0) break;
  }
  std::printf("launches %ld mismatches %ld\n", launches, mismatches);
  check(cudaFreeHost(h_out), "cudaFreeHost");
  check(cudaFree(d_out), "cudaFree");
  check(cudaFree(d_keys), "cudaFree");
  if (stream_kind == "created") check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  return mismatches ? 1 : 0;
}
