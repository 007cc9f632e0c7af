#include "daemon/connection.hpp"

#include <cerrno>
#include <cstring>

#include <sys/socket.h>

namespace hone::daemon {

namespace {
constexpr size_t k_read_chunk = 64u << 10;
constexpr size_t k_max_pending_fds = 8;
constexpr auto k_close_grace = std::chrono::milliseconds(500);
} // namespace

Connection::Connection(asio::local::stream_protocol::socket socket, uint64_t id,
                       PeerCredentials peer, ConnectionHandler& handler, ConnectionLimits limits)
    : m_socket(std::move(socket)), m_id(id), m_peer(peer), m_handler(handler), m_limits(limits),
      m_timer(m_socket.get_executor()) {}

void Connection::start() {
  boost::system::error_code ec;
  m_socket.native_non_blocking(true, ec);
  auto self = shared_from_this();
  m_timer.expires_after(std::chrono::milliseconds(m_limits.handshake_timeout_ms));
  m_timer.async_wait([self](const boost::system::error_code& e) {
    if (!e && self->m_open) self->close("no hello within the handshake timeout");
  });
  wait_readable();
}

void Connection::handshake_done() { m_timer.cancel(); }

void Connection::wait_readable() {
  if (!m_open || m_closing) return;
  auto self = shared_from_this();
  m_socket.async_wait(asio::socket_base::wait_read, [self](const boost::system::error_code& e) {
    if (e || !self->m_open) return;
    self->on_readable();
  });
}

void Connection::on_readable() {
  int fd = m_socket.native_handle();
  // Read what is there, but never more than one frame beyond what is buffered.
  size_t limit = proto::k_header_size + m_limits.max_frame_bytes;
  while (m_open && m_in.size() < limit) {
    char buf[k_read_chunk];
    size_t want = std::min(sizeof buf, limit - m_in.size());
    iovec iov{buf, want};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n = ::recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
      close(std::string("read failed: ") + std::strerror(errno));
      return;
    }
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int received;
        std::memcpy(&received, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        m_fds.emplace_back(received); // owned, so closed whatever happens next
      }
    }
    if (msg.msg_flags & MSG_CTRUNC) {
      close("peer sent more descriptors than a frame may carry");
      return;
    }
    if (n == 0) {
      // Whole frames that came before the end still count: a worker's last verdict, a shim's
      // final report.
      if (!parse_frames()) return;
      close(m_in.empty() ? "peer closed the connection" : "peer vanished mid-frame");
      return;
    }
    m_in.append(buf, size_t(n));
    // A read stops once it brings descriptors, so a burst of frames that carry one each (a
    // shim's captures) arrives one read at a time: the frames already whole take theirs now, and
    // only the descriptors of frames still to come wait.
    if (!m_fds.empty() && (!parse_frames() || m_closing)) return;
    if (m_fds.size() > k_max_pending_fds) {
      close("peer sent descriptors without frames that carry them");
      return;
    }
  }
  if (!parse_frames()) return;
  wait_readable();
}

bool Connection::parse_frames() {
  while (m_open && !m_closing && m_in.size() >= proto::k_header_size) {
    const char* why = "malformed frame";
    auto h = proto::FrameHeader::decode(m_in.data(), &why);
    if (!h || h->length > m_limits.max_frame_bytes) {
      send_error(0, proto::k_err_protocol, h ? "frame over the configured size limit" : why);
      close_after_send(h ? "oversized frame" : why);
      return false;
    }
    if (m_in.size() < proto::k_header_size + h->length) return true;
    UniqueFd fd;
    if (h->flags & proto::k_flag_fd) {
      if (m_fds.empty()) {
        send_error(h->seq, proto::k_err_protocol, "frame says a descriptor comes with it; none did");
        close_after_send("missing descriptor");
        return false;
      }
      fd = std::move(m_fds.front());
      m_fds.pop_front();
    }
    std::string_view payload(m_in.data() + proto::k_header_size, h->length);
    bool keep = m_handler.on_frame(*this, *h, payload, std::move(fd));
    if (!m_open) return false;
    m_in.erase(0, proto::k_header_size + h->length);
    if (!keep) {
      close_after_send("closed by the daemon");
      return false;
    }
  }
  return m_open;
}

void Connection::send(std::string frame, UniqueFd fd) {
  if (!m_open) return;
  m_out_bytes += frame.size();
  m_out.push_back(Out{std::move(frame), 0, std::move(fd)});
  if (m_out_bytes > m_limits.max_queued_bytes) {
    close("peer is not reading (output over the queue limit)");
    return;
  }
  if (!m_writing) {
    if (!write_some()) return;
    if (!m_out.empty()) wait_writable();
  }
}

void Connection::send_error(uint32_t seq, uint32_t code, const std::string& message) {
  proto::ErrorMsg e;
  e.code = code;
  e.message = message;
  send_msg(proto::MsgType::error, seq, e);
}

bool Connection::write_some() {
  int fd = m_socket.native_handle();
  while (!m_out.empty()) {
    Out& o = m_out.front();
    ssize_t n;
    if (o.fd && o.off == 0) {
      iovec iov{o.data.data(), o.data.size()};
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      int raw = o.fd.get();
      std::memcpy(CMSG_DATA(c), &raw, sizeof(int));
      n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    } else {
      n = ::send(fd, o.data.data() + o.off, o.data.size() - o.off, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return true;
      close(std::string("write failed: ") + std::strerror(errno));
      return false;
    }
    o.off += size_t(n);
    m_out_bytes -= size_t(n);
    if (o.off < o.data.size()) return true;
    m_out.pop_front();
  }
  if (m_closing) close(m_close_reason);
  return m_open;
}

void Connection::wait_writable() {
  if (!m_open || m_writing) return;
  m_writing = true;
  auto self = shared_from_this();
  m_socket.async_wait(asio::socket_base::wait_write, [self](const boost::system::error_code& e) {
    self->m_writing = false;
    if (e || !self->m_open) return;
    self->on_writable();
  });
}

void Connection::on_writable() {
  if (!write_some()) return;
  if (!m_out.empty()) wait_writable();
}

void Connection::close_after_send(const std::string& why) {
  if (!m_open) return;
  if (m_out.empty()) {
    close(why);
    return;
  }
  m_closing = true;
  m_close_reason = why;
  auto self = shared_from_this();
  m_timer.expires_after(k_close_grace);
  m_timer.async_wait([self](const boost::system::error_code& e) {
    if (!e && self->m_open) self->close(self->m_close_reason);
  });
  wait_writable();
}

void Connection::close(const std::string& why) {
  if (!m_open) return;
  m_open = false;
  boost::system::error_code ec;
  m_timer.cancel();
  m_socket.close(ec);
  m_out.clear();
  m_out_bytes = 0;
  m_in.clear();
  m_in.shrink_to_fit();
  m_fds.clear();
  m_handler.on_closed(*this, why);
}

} // namespace hone::daemon
