// hone-example-hashing: a recommender's feature-hashing step, the runtime-API application of
// `make demo`.
//
// An ordinary CUDA runtime-API program (cuda_runtime.h, <<<>>>, nothing of hone), built by nvcc
// with -cudart shared: on the emulated device it runs on hone's own libcudart, on a GPU on
// NVIDIA's. Its kernels come only as a fatbin (no source at run time). Each iteration takes a
// fresh batch of categorical ids and hashes each one with 16 hash functions into a table of
// `rows` slots (FNV-1a over the id's bytes, reduced modulo the table at every step; rows is a
// power of two): the rows of a count-min sketch of depth 16 that estimates how often each id is
// seen (feature admission in online recommenders), the first two of which are also the id's rows
// in the embedding table (the hashing trick of DLRM-style models). Then it sums the embedding rows
// of each bag of ids:
//
//   ids [bags x bag_size] -> hash_ids (16 hashes per id) -> rows -> embedding_bag -> [bags x dim]
//
// The table size, the bag size and the width are run-time arguments that every launch passes with
// the same values. Every --check-every iterations (and at the end) it checks the step against the
// host's own computation, and runs one extra step on a fixed batch whose outputs must hash
// (FNV-1a 64) to the fingerprint of the first check, bit for bit, for the whole run. It times each
// step with events (the emulated device's modeled time on hone's emulated device).
//
//   hone-example-hashing [--seconds S] [--iterations N] [--check-every K] [--stop-file PATH]
//
// Output: a line saying what it runs; a line per check,
//   check C iteration I max_error E fingerprint F step_us T ok|MISMATCH
// and at the end
//   iterations I checks C max_error E fingerprint_changes F result ok|MISMATCH
// Exit status: 0 when every check matched, 1 on a mismatch, 2 on a usage or CUDA error.
#include <cuda_runtime.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr unsigned k_hashes = 16; // the sketch's depth
constexpr unsigned k_lookups = 2; // hashes that give an id's embedding rows
constexpr unsigned k_rows = 1u << 16; // slots of the sketch and rows of the table: a power of two
constexpr unsigned k_dim = 32;
constexpr unsigned k_bags = 32768;
constexpr unsigned k_bag_size = 4;
constexpr unsigned k_ids = k_bags * k_bag_size;
constexpr unsigned k_hash_threads = 512;
constexpr unsigned k_threads = 128;

// Hash k of an id: FNV-1a over its four bytes, kept within the table at every step.
__host__ __device__ inline unsigned fnv_row(unsigned id, unsigned k, unsigned rows) {
  unsigned h = 2166136261u ^ (k * 0x9e3779b9u);
  for (unsigned b = 0; b < 4; ++b) h = ((h ^ ((id >> (8 * b)) & 0xffu)) * 16777619u) % rows;
  return h;
}

} // namespace

namespace dlrm {

// rows[k * n + i] = hash k of ids[i], for each of the Hashes hash functions.
template <unsigned Hashes>
__global__ void hash_ids(unsigned* rows, const unsigned* ids, unsigned n, unsigned table_rows) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const unsigned id = ids[i];
#pragma unroll
  for (unsigned k = 0; k < Hashes; ++k) rows[k * n + i] = fnv_row(id, k, table_rows);
}

// out[b, d] = the sum, over the ids of bag b and their first `lookups` hashes, of table[row, d].
__global__ void embedding_bag(float* out, const float* table, const unsigned* rows, unsigned n,
                              unsigned bags, unsigned bag_size, unsigned lookups, unsigned dim) {
  unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= bags * dim) return;
  unsigned b = t / dim, d = t % dim;
  float acc = 0.0f;
  for (unsigned j = 0; j < bag_size; ++j) {
    for (unsigned k = 0; k < lookups; ++k) {
      acc += table[size_t(rows[k * n + b * bag_size + j]) * dim + d];
    }
  }
  out[t] = acc;
}

} // namespace dlrm

namespace {

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::printf("hashing: %s: %s (%s)\n", what, cudaGetErrorName(e), cudaGetErrorString(e));
  std::printf("iterations 0 checks 0 max_error 0 fingerprint_changes 0 result error\n");
  std::exit(2);
}

uint64_t fnv(const void* data, size_t n, uint64_t h = 1469598103934665603ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

struct Device {
  unsigned* ids = nullptr;
  unsigned* rows = nullptr;
  float* table = nullptr;
  float* out = nullptr;
};

// One step on the device: ids (already there) -> out. Returns its device time (events).
float step(const Device& d, cudaStream_t s, cudaEvent_t a, cudaEvent_t b) {
  check(cudaEventRecord(a, s), "cudaEventRecord");
  dlrm::hash_ids<k_hashes><<<(k_ids + k_hash_threads - 1) / k_hash_threads, k_hash_threads, 0, s>>>(
      d.rows, d.ids, k_ids, k_rows);
  check(cudaGetLastError(), "hash_ids<<<>>>");
  dlrm::embedding_bag<<<(k_bags * k_dim + k_threads - 1) / k_threads, k_threads, 0, s>>>(
      d.out, d.table, d.rows, k_ids, k_bags, k_bag_size, k_lookups, k_dim);
  check(cudaGetLastError(), "embedding_bag<<<>>>");
  check(cudaEventRecord(b, s), "cudaEventRecord");
  check(cudaEventSynchronize(b), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
  return ms;
}

// The host's step, in the device's order of summation.
void reference(const std::vector<unsigned>& ids, const std::vector<float>& table,
               std::vector<unsigned>& rows, std::vector<float>& out) {
  rows.resize(size_t(k_ids) * k_hashes);
  for (unsigned k = 0; k < k_hashes; ++k)
    for (unsigned i = 0; i < k_ids; ++i) rows[k * k_ids + i] = fnv_row(ids[i], k, k_rows);
  out.assign(size_t(k_bags) * k_dim, 0.0f);
  for (unsigned b = 0; b < k_bags; ++b)
    for (unsigned d = 0; d < k_dim; ++d) {
      float acc = 0.0f;
      for (unsigned j = 0; j < k_bag_size; ++j)
        for (unsigned k = 0; k < k_lookups; ++k)
          acc += table[size_t(rows[k * k_ids + b * k_bag_size + j]) * k_dim + d];
      out[b * k_dim + d] = acc;
    }
}

} // namespace

int main(int argc, char** argv) {
  double seconds = 5;
  long iterations = -1, check_every = 20;
  std::string stop_file;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--seconds" && i + 1 < argc) seconds = std::atof(argv[++i]);
    else if (a == "--iterations" && i + 1 < argc) iterations = std::atol(argv[++i]);
    else if (a == "--check-every" && i + 1 < argc) check_every = std::atol(argv[++i]);
    else if (a == "--stop-file" && i + 1 < argc) stop_file = argv[++i];
    else {
      std::fprintf(stderr,
                   "usage: %s [--seconds S] [--iterations N] [--check-every K] [--stop-file PATH]\n",
                   argv[0]);
      return 2;
    }
  }
  if (check_every <= 0) check_every = 1;

  cudaDeviceProp prop;
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("hashing: %s: hash_ids (%u hashes of %u ids into %u rows) -> "
              "embedding_bag (%u bags of %u, width %u), CUDA runtime API\n",
              prop.name, k_hashes, k_ids, k_rows, k_bags, k_bag_size, k_dim);
  std::fflush(stdout);

  std::vector<float> table(size_t(k_rows) * k_dim);
  for (size_t i = 0; i < table.size(); ++i) table[i] = float(int((i * 2654435761u) >> 20) % 97) / 8;
  Device d;
  check(cudaMalloc(&d.ids, k_ids * sizeof(unsigned)), "cudaMalloc");
  check(cudaMalloc(&d.rows, size_t(k_ids) * k_hashes * sizeof(unsigned)), "cudaMalloc");
  check(cudaMalloc(&d.table, table.size() * sizeof(float)), "cudaMalloc");
  check(cudaMalloc(&d.out, size_t(k_bags) * k_dim * sizeof(float)), "cudaMalloc");
  check(cudaMemcpy(d.table, table.data(), table.size() * sizeof(float), cudaMemcpyHostToDevice),
        "cudaMemcpy");
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  cudaEvent_t ea, eb;
  check(cudaEventCreate(&ea), "cudaEventCreate");
  check(cudaEventCreate(&eb), "cudaEventCreate");
  unsigned* h_ids = nullptr;
  check(cudaMallocHost(&h_ids, k_ids * sizeof(unsigned)), "cudaMallocHost");
  std::vector<float> got(size_t(k_bags) * k_dim), want;
  std::vector<unsigned> got_rows(size_t(k_ids) * k_hashes), want_rows;

  auto start = std::chrono::steady_clock::now();
  long it = 0, checks = 0, fingerprint_changes = 0;
  double max_error = 0, step_ms = 0;
  long steps_timed = 0;
  bool mismatch = false;
  uint64_t fingerprint = 0;
  unsigned seed = 12345;
  for (;;) {
    for (unsigned i = 0; i < k_ids; ++i) h_ids[i] = (seed = seed * 1664525u + 1013904223u);
    check(cudaMemcpyAsync(d.ids, h_ids, k_ids * sizeof(unsigned), cudaMemcpyHostToDevice, s),
          "cudaMemcpyAsync");
    step_ms += step(d, s, ea, eb);
    ++steps_timed;
    ++it;
    bool last = (iterations >= 0 && it >= iterations) ||
                (iterations < 0 &&
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >=
                     seconds) ||
                (!stop_file.empty() && access(stop_file.c_str(), F_OK) == 0);
    if (it % check_every == 0 || last) {
      ++checks;
      // This iteration against the host.
      std::vector<unsigned> ids(h_ids, h_ids + k_ids);
      check(cudaMemcpy(got.data(), d.out, got.size() * sizeof(float), cudaMemcpyDeviceToHost),
            "cudaMemcpy");
      check(cudaMemcpy(got_rows.data(), d.rows, got_rows.size() * sizeof(unsigned),
                       cudaMemcpyDeviceToHost),
            "cudaMemcpy");
      reference(ids, table, want_rows, want);
      double error = 0;
      for (size_t i = 0; i < got.size(); ++i)
        error = std::fmax(error, std::fabs(double(got[i]) - want[i]) / (1 + std::fabs(want[i])));
      bool ok = got_rows == want_rows && error <= 1e-5;
      max_error = std::fmax(max_error, error);
      // The fixed batch, bit for bit.
      for (unsigned i = 0; i < k_ids; ++i) h_ids[i] = i * 7919u;
      check(cudaMemcpyAsync(d.ids, h_ids, k_ids * sizeof(unsigned), cudaMemcpyHostToDevice, s),
            "cudaMemcpyAsync");
      step(d, s, ea, eb);
      check(cudaMemcpy(got.data(), d.out, got.size() * sizeof(float), cudaMemcpyDeviceToHost),
            "cudaMemcpy");
      uint64_t f = fnv(got.data(), got.size() * sizeof(float));
      if (checks == 1) fingerprint = f;
      if (f != fingerprint) {
        ++fingerprint_changes;
        ok = false;
        std::printf("mismatch: the fixed batch's results changed (fingerprint %016" PRIx64
                    ", first %016" PRIx64 ")\n",
                    f, fingerprint);
      }
      if (got_rows != want_rows) std::printf("mismatch: hash_ids differs from the host\n");
      mismatch |= !ok;
      std::printf("check %ld iteration %ld max_error %.2e fingerprint %016" PRIx64
                  " step_us %.2f %s\n",
                  checks, it, error, f, 1000 * step_ms / double(steps_timed),
                  ok ? "ok" : "MISMATCH");
      std::fflush(stdout);
      step_ms = 0;
      steps_timed = 0;
    }
    if (last) break;
  }
  std::printf("iterations %ld checks %ld max_error %.2e fingerprint_changes %ld result %s\n", it,
              checks, max_error, fingerprint_changes, mismatch ? "MISMATCH" : "ok");
  cudaFreeHost(h_ids);
  return mismatch ? 1 : 0;
}
