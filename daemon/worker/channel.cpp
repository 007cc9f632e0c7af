#include "daemon/worker/channel.hpp"

#include <cerrno>
#include <cstring>

#include <sys/socket.h>
#include <unistd.h>

namespace hone::worker {

Channel::~Channel() {
  if (m_pending_fd >= 0) ::close(m_pending_fd);
  if (m_fd >= 0) ::close(m_fd);
}

Result<void> Channel::send(const std::string& frame, int fd) {
  std::lock_guard lock(m_send);
  return send_frame(m_fd, frame, fd);
}

Result<std::optional<Frame>> Channel::receive() {
  while (true) {
    if (m_in.size() >= proto::k_header_size) {
      const char* why = "malformed frame";
      auto h = proto::FrameHeader::decode(m_in.data(), &why);
      if (!h) return make_error(std::string("bad frame from honed: ") + why);
      if (m_in.size() >= proto::k_header_size + h->length) {
        Frame f;
        f.header = *h;
        f.payload = m_in.substr(proto::k_header_size, h->length);
        m_in.erase(0, proto::k_header_size + h->length);
        if (h->flags & proto::k_flag_fd) {
          f.fd = m_pending_fd;
          m_pending_fd = -1;
        }
        return std::optional<Frame>(std::move(f));
      }
    }
    char buf[65536];
    iovec iov{buf, sizeof buf};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n = ::recvmsg(m_fd, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0) {
      if (errno == EINTR) continue;
      return make_error(std::string("receive from honed failed: ") + std::strerror(errno));
    }
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int got;
        std::memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        if (m_pending_fd >= 0) ::close(m_pending_fd); // one descriptor per frame: keep the last
        m_pending_fd = got;
      }
    }
    if (n == 0) {
      if (m_in.empty()) return std::optional<Frame>();
      return make_error("honed closed the connection in the middle of a frame");
    }
    m_in.append(buf, size_t(n));
  }
}

} // namespace hone::worker
