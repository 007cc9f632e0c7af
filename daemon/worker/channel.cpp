#include "daemon/worker/channel.hpp"

#include <unistd.h>

namespace hone::worker {

Channel::~Channel() {
  if (m_fd >= 0) ::close(m_fd);
}

Result<void> Channel::send(const std::string& frame, int fd) {
  std::lock_guard lock(m_send);
  return send_frame(m_fd, frame, fd);
}

Result<std::optional<Frame>> Channel::receive() {
  while (true) {
    auto f = m_reader.next();
    if (!f || *f) return f;
    auto n = m_reader.read_from(m_fd);
    if (!n) return n.error();
    if (*n == 0) {
      if (m_reader.empty()) return std::optional<Frame>();
      return make_error("honed closed the connection in the middle of a frame");
    }
  }
}

} // namespace hone::worker
