// Launchers and host references for every kernel of the CUDA corpus (tests/kernels).
//
// Written against the public driver API (cuda.h) only, so the same code checks the emulated device
// and a real GPU. Each launcher makes deterministic pseudo-random inputs (fixed seeds, edge values
// where the kernel defines them), runs its kernel at several launch shapes (single block, partial
// last block, many blocks, 2D/3D where the kernel is), and compares every output buffer with a host
// reference: bit for bit where the kernel's arithmetic is exactly specified (the reference follows
// the PTX's operation order, fma where the compiler contracted), within a stated tolerance where
// the kernel calls approximate functions, and order-independently where the kernel is
// NONDETERMINISTIC. `CorpusKernel::comparison` says which, and why.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hone::test {

class Harness;

// Which launch shapes a launcher runs.
enum class ShapeSet : uint8_t {
  check, // every shape it has: edge sizes, partial blocks, several grid and block shapes
  bench, // only its largest shape, with the element count multiplied by `bench_scale`
};

struct CorpusRunOptions {
  ShapeSet shapes = ShapeSet::check;
  unsigned bench_scale = 1;
};

// What the launches of one run did (for the benchmark; the test only reads `failures`).
struct LaunchTotals {
  uint64_t launches = 0;
  uint64_t threads = 0;      // grid x block threads, summed over launches
  uint64_t elements = 0;     // output elements (or input elements for reductions), summed
  double launch_seconds = 0; // wall time of cuLaunchKernel + cuCtxSynchronize, summed
};

struct CorpusRunResult {
  // One line per failed check: shape, buffer, first mismatching indices, expected vs got;
  // or the driver call that failed with its CUresult. Empty when everything matched.
  std::vector<std::string> failures;
  LaunchTotals totals;
  // For kernels compared within a tolerance: the largest |got - want| / tolerance seen (how much
  // of its tolerance the closest call used); 0 for exact comparisons.
  double tolerance_used = 0;
  // What two runs of one kernel compare (emu_exec_equivalence_test): a digest (XXH3-64) of every
  // buffer read back from the device, in order, and each launch's time by events around it (on
  // the emulated device the modeled time, which must match bit for bit).
  std::vector<uint64_t> readback_digests;
  std::vector<float> launch_ms;
  bool passed() const { return failures.empty(); }
};

// One kernel of the corpus with its launcher.
struct CorpusKernel {
  std::string file;       // stem of tests/kernels/<file>.cu
  std::string entry;      // the PTX .entry name (mangled for the one template)
  std::string comparison; // how the outputs are compared, and why that tolerance
  void (*run)(Harness&);
};

// Every kernel of the corpus, in file order, then source order.
const std::vector<CorpusKernel>& corpus_kernels();
// The launcher for `entry`, or nullptr.
const CorpusKernel* find_corpus_kernel(std::string_view entry);

// Run `kernel`'s launcher with `function` (the entry, from a module loaded into the current
// context). Never throws: a failing driver call ends the run and is reported in `failures`.
CorpusRunResult run_corpus_kernel(const CorpusKernel& kernel, CUfunction function,
                                  const CorpusRunOptions& options = {});

// "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)".
std::string cu_error_text(CUresult result);

} // namespace hone::test
