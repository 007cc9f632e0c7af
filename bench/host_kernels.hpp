// The corpus kernels (tests/kernels/*.cu) compiled for the host: for each entry, the same CUDA C++
// kernel body as a plain loop over blocks and threads, so hone-bench-emu can set the emulated
// device's speed against the speed of the same code run natively on one core.
//
// Each host function executes the kernel's statements with the same types and the same operation
// order as the .cu source (an fma wherever the PTX has one), so its outputs pass the checks the
// corpus harness (tests/support/corpus_launch.cpp) applies to the device's.
#pragma once

#include <string_view>

namespace hone::bench {

// One launch as cuLaunchKernel received it.
struct HostLaunch {
  unsigned grid[3];
  unsigned block[3];
  unsigned shared_bytes; // dynamic shared memory per block
  // The launch's kernelParams: params[i] points at argument i, typed as the kernel's parameter i.
  // Pointer arguments are device addresses, which on the emulated device are host addresses.
  void** params;
};

using HostKernel = void (*)(const HostLaunch&);

// The host version of the corpus kernel whose PTX entry is `entry`; nullptr if there is none.
HostKernel find_host_kernel(std::string_view entry);

} // namespace hone::bench
