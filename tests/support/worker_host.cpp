// A process that is only the worker: `hone_worker_host --fd N --driver PATH` runs
// hone::worker::main as `honed worker` does, for tests that must not depend on the daemon.
#include "daemon/worker/worker.hpp"

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
  int fd = -1;
  std::string driver = "libcuda.so.1";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--fd") == 0) {
      fd = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--driver") == 0) {
      driver = argv[i + 1];
    } else {
      std::cerr << "usage: hone_worker_host --fd N [--driver PATH]\n";
      return 2;
    }
  }
  if (fd < 0) {
    std::cerr << "usage: hone_worker_host --fd N [--driver PATH]\n";
    return 2;
  }
  return hone::worker::main(fd, driver);
}
