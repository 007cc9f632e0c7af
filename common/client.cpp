#include "common/client.hpp"

#include <cerrno>
#include <cstring>

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace hone {

FrameReader::FrameReader(FrameReader&& o) noexcept
    : m_in(std::move(o.m_in)), m_pending_fd(o.m_pending_fd) {
  o.m_pending_fd = -1;
}

FrameReader& FrameReader::operator=(FrameReader&& o) noexcept {
  if (this != &o) {
    clear();
    m_in = std::move(o.m_in);
    m_pending_fd = o.m_pending_fd;
    o.m_pending_fd = -1;
  }
  return *this;
}

void FrameReader::clear() {
  m_in.clear();
  if (m_pending_fd >= 0) ::close(m_pending_fd);
  m_pending_fd = -1;
}

Result<std::optional<Frame>> FrameReader::next() {
  if (m_in.size() < proto::k_header_size) return std::optional<Frame>();
  const char* why = "malformed frame";
  auto h = proto::FrameHeader::decode(m_in.data(), &why);
  if (!h) return make_error(std::string("bad frame from honed: ") + why);
  if (m_in.size() < proto::k_header_size + h->length) return std::optional<Frame>();
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

Result<size_t> FrameReader::read_from(int sock) {
  char buf[65536];
  iovec iov{buf, sizeof buf};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do {
    n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return make_error(std::string("receive from honed failed: ") + std::strerror(errno));
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
  m_in.append(buf, size_t(n));
  return size_t(n);
}

Client::Client(Client&& o) noexcept
    : m_fd(o.m_fd), m_seq(o.m_seq), m_reader(std::move(o.m_reader)), m_ack(std::move(o.m_ack)) {
  o.m_fd = -1;
}

Client& Client::operator=(Client&& o) noexcept {
  if (this != &o) {
    close();
    m_fd = o.m_fd;
    m_seq = o.m_seq;
    m_reader = std::move(o.m_reader);
    m_ack = std::move(o.m_ack);
    o.m_fd = -1;
  }
  return *this;
}

Client::~Client() {
  close();
}

void Client::close() {
  if (m_fd >= 0) ::close(m_fd);
  m_fd = -1;
  m_reader.clear();
}

Result<Client> Client::connect_raw(const std::string& socket) {
  if (socket.size() >= sizeof(sockaddr_un::sun_path)) {
    return make_error("socket path too long (over 107 bytes): " + socket);
  }
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return make_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket.data(), socket.size());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int err = errno;
    ::close(fd);
    std::string hint = err == ENOENT   ? " (is honed running? systemctl status hone)"
                       : err == EACCES ? " (permission denied: are you in the socket's group?)"
                       : err == ECONNREFUSED ? " (nothing listens there: honed is not running)"
                                             : "";
    return make_error("cannot connect to " + socket + ": " + std::strerror(err) + hint, err);
  }
  Client c;
  c.m_fd = fd;
  return c;
}

Result<Client> Client::connect(const std::string& socket, const proto::Hello& hello,
                               std::chrono::milliseconds timeout) {
  auto c = connect_raw(socket);
  if (!c) return c.error();
  if (auto r = c->send(proto::frame_of(proto::MsgType::hello, ++c->m_seq, hello)); !r) {
    return r.error();
  }
  auto f = c->receive(timeout);
  if (!f) return f.error();
  wire::Reader r(f->payload);
  if (f->header.type == proto::MsgType::error) {
    proto::ErrorMsg e;
    proto::decode(r, e);
    return make_error("honed refused the connection: " + e.message, int(e.code));
  }
  if (f->header.type != proto::MsgType::hello_ack || !proto::decode(r, c->m_ack)) {
    return make_error("honed answered the hello with something else (protocol mismatch?)");
  }
  return c;
}

Result<void> send_frame(int sock, const std::string& frame, int fd) {
  size_t off = 0;
  while (off < frame.size()) {
    ssize_t n;
    if (fd >= 0 && off == 0) {
      iovec iov{const_cast<char*>(frame.data()), frame.size()};
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
      std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
      n = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
    } else {
      n = ::send(sock, frame.data() + off, frame.size() - off, MSG_NOSIGNAL);
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      return make_error(std::string("send to honed failed: ") + std::strerror(errno));
    }
    off += size_t(n);
  }
  return ok();
}

Result<void> Client::send(const std::string& frame, int fd) {
  return send_frame(m_fd, frame, fd);
}

Result<Frame> Client::receive(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    auto f = m_reader.next();
    if (!f) return f.error();
    if (*f) return std::move(**f);
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return make_error("no reply from honed within the timeout");
    pollfd p{m_fd, POLLIN, 0};
    int r = ::poll(&p, 1, int(left.count()));
    if (r <= 0) continue; // interrupted, or the deadline: checked above
    auto n = m_reader.read_from(m_fd);
    if (!n) return n.error();
    if (*n == 0) return make_error("honed closed the connection");
  }
}

Result<Frame> Client::control(const std::string& json, int fd, std::chrono::milliseconds timeout) {
  wire::Writer w;
  w.raw(json.data(), json.size());
  uint32_t seq = ++m_seq;
  if (auto r =
          send(proto::frame(proto::MsgType::control, seq, w, fd >= 0 ? proto::k_flag_fd : 0), fd);
      !r) {
    return r.error();
  }
  while (true) {
    auto f = receive(timeout);
    if (!f) return f.error();
    if (f->header.type == proto::MsgType::error) {
      wire::Reader r(f->payload);
      proto::ErrorMsg e;
      proto::decode(r, e);
      if (f->fd >= 0) ::close(f->fd);
      return make_error("honed: " + e.message, int(e.code));
    }
    if (f->header.type == proto::MsgType::control && f->header.seq == seq) return f;
    if (f->fd >= 0) ::close(f->fd);
  }
}

} // namespace hone
