// honectl attach-service / detach-service: a systemd drop-in that preloads libhone.so into a
// service and lets it reach honed's socket (tools/README.md).
#pragma once

#include <string>

namespace hone::ctl {

struct ServiceOptions {
  std::string name;           // "vllm" or "vllm.service"
  std::string root = "/";     // the file system the units live in (tests, images)
  std::string library;        // libhone.so to preload (default: where the build installs it)
  std::string group = "hone"; // the group that may use honed's socket
};

// Both print what they changed and the systemctl command that applies it; the exit status is
// 0 done (or nothing to do), 1 failed, 2 a usage error (a name that is not a service's).
int attach_service(const ServiceOptions& o);
int detach_service(const ServiceOptions& o);

// Where the build installs libhone.so: the default of ServiceOptions::library.
std::string installed_shim_path();

} // namespace hone::ctl
