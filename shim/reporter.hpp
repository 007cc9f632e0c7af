// The reporter: one background thread that talks to honed for the shim.
//
// It connects to $HONE_SOCKET, says hello, reports kernels and their counters every interval,
// answers the daemon's requests, and reconnects with backoff when the daemon goes away. It never
// makes an application thread wait: the socket is non-blocking, output is bounded, and a daemon
// that stalls or sends garbage is dropped (logged once) while the application runs on.
#pragma once

#include <cstdint>

namespace hone::shim {

class Reporter {
public:
  // Start the thread if it does not run in this process yet.
  void ensure_started();
  // At exit: one last report, best effort, within a short deadline.
  void final_flush();
  // Something for the reporter to do now (a capture finished copying).
  void wake();

  void lock_for_fork();
  void unlock_after_fork();
  void reset_in_child();

  struct Impl;

private:
  Impl* m_impl = nullptr;
  Impl& impl();
};

Reporter& reporter();

} // namespace hone::shim
