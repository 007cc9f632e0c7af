// `honectl doctor`: checks what hone needs on this host (the driver, the socket, the daemon, the
// store, the config) and says what to fix.
#pragma once

#include <string>

namespace hone::ctl {

struct DoctorOptions {
  std::string socket;
  std::string driver;        // empty: HONE_WORKER_DRIVER, else the config's worker.driver
  std::string config;        // empty: /etc/hone/hone.toml when it exists
  std::string state_dir;     // read the store directly when honed is down
  bool socket_given = false; // --socket or HONE_SOCKET named it
  bool json = false;
};

// Runs every check, prints the report, returns k_exit_ok or k_exit_doctor (a check failed).
int doctor(const DoctorOptions& options);

} // namespace hone::ctl
