// The worker's end of its socket to honed: whole frames, blocking, with at most one descriptor
// riding along with a frame (SCM_RIGHTS). honed is on the other end; every frame is still checked
// (header, length bound) before it is used.
#pragma once

#include "common/client.hpp"
#include "common/result.hpp"

#include <mutex>
#include <optional>
#include <string>

namespace hone::worker {

class Channel {
public:
  // Adopts `fd`, a connected Unix stream socket; closes it when destroyed.
  explicit Channel(int fd) : m_fd(fd) {}
  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  // Send one whole frame (and `fd` with it when >= 0). Safe from any thread.
  Result<void> send(const std::string& frame, int fd = -1);
  // The next frame; nullopt when the peer closed the connection between frames. The frame's
  // descriptor, if any, belongs to the caller.
  Result<std::optional<Frame>> receive();

  int fd() const { return m_fd; }

private:
  int m_fd = -1;
  FrameReader m_reader;
  std::mutex m_send;
};

} // namespace hone::worker
