// honectl's connection to honed: the handshake as a control client, then JSON requests
// (docs/protocol.md, "control"), each failure sorted into the exit status it deserves.
#pragma once

#include "common/client.hpp"
#include "common/result.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace hone::ctl {

// honectl's exit statuses (documented in --help).
enum ExitCode : int {
  k_exit_ok = 0,
  k_exit_failed = 1,      // the daemon answered with an error, or a local file failed
  k_exit_usage = 2,       // the command line is wrong
  k_exit_unreachable = 3, // no daemon to talk to, or it refused us
  k_exit_doctor = 4,      // doctor found problems
};

// A descriptor that closes itself.
class OwnedFd {
public:
  OwnedFd() = default;
  explicit OwnedFd(int fd) : m_fd(fd) {}
  OwnedFd(OwnedFd&& o) noexcept : m_fd(o.release()) {}
  OwnedFd& operator=(OwnedFd&& o) noexcept;
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;
  ~OwnedFd();
  int get() const { return m_fd; }
  int release() {
    int fd = m_fd;
    m_fd = -1;
    return fd;
  }
  explicit operator bool() const { return m_fd >= 0; }

private:
  int m_fd = -1;
};

// The default socket: $HONE_SOCKET, else /run/hone/hone.sock.
std::string default_socket();

class Session {
public:
  // Connect to `socket` and say hello as honectl. The error's code is an ExitCode
  // (k_exit_unreachable) and its message says what to do.
  static Result<Session> open(const std::string& socket);

  // Send {"cmd": ..., ...} (with `fd` attached when >= 0) and return the reply's `result`. A reply
  // of {"ok": false} is an error with code k_exit_failed; a lost connection, k_exit_unreachable.
  // `reply_fd` receives the descriptor the reply carried, if any.
  Result<nlohmann::json> request(const nlohmann::json& req, int fd = -1,
                                 OwnedFd* reply_fd = nullptr);

  const std::string& daemon_version() const { return m_daemon_version; }
  uint32_t protocol_version() const { return m_protocol; }

private:
  Client m_client;
  std::string m_socket;
  std::string m_daemon_version;
  uint32_t m_protocol = 0;
};

} // namespace hone::ctl
