// hone-testapp-linked: the workload through the cu* symbols of libcuda, linked with -lcuda (the
// toolkit's stub at build time, whatever libcuda.so.1 the loader finds at run time). The last blur
// launch passes its parameters as one buffer (`extra`), the other launches as kernelParams.
//
// Usage: hone-testapp-linked [--pause-before-launch] [--wait-stdin]
//   --pause-before-launch  after the kernel lookups, wait for a line on stdin
//   --wait-stdin  after printing the results, read stdin to EOF before tearing down (so a test
//                 can talk to the process's shim while it is alive)
#include "linked_api.hpp"

#include <cstring>

extern const unsigned char k_workload_ptx[];

int main(int argc, char** argv) {
  testapp::Options opt;
  opt.image = k_workload_ptx;
  opt.extra_for_last_blur = true;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--wait-stdin") == 0) {
      opt.wait_stdin = true;
    } else if (std::strcmp(argv[i], "--pause-before-launch") == 0) {
      opt.pause_before_launch = true;
    } else {
      std::fprintf(stderr, "usage: %s [--pause-before-launch] [--wait-stdin]\n", argv[0]);
      return 64;
    }
  }
  return testapp::run_workload(testapp::LinkedApi{}, opt);
}
