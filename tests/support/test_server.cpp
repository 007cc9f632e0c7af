#include "test_server.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <filesystem>
#include <poll.h>
#include <random>
#include <stdexcept>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

namespace hone::test {

namespace {

// The abstract socket name TestServer::sync() binds its probes to.
constexpr const char* k_probe_prefix = "hone-test-probe-";


constexpr size_t k_max_fds_per_message = 8;

std::string errno_text(const char* what) {
  return std::string(what) + ": " + std::strerror(errno);
}

// Writes all of `bytes` to a (possibly non-blocking) socket, waiting up to a second for room.
bool send_all(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += size_t(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, 1000) <= 0) return false;
    } else {
      return false;
    }
  }
  return true;
}

// The whole contents of a file descriptor, from offset 0.
std::string read_fd(int fd) {
  std::string out;
  char buf[65536];
  off_t offset = 0;
  for (;;) {
    ssize_t n = ::pread(fd, buf, sizeof buf, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, size_t(n));
    offset += n;
  }
  return out;
}

} // namespace

const char* to_string(ServerMode mode) {
  switch (mode) {
  case ServerMode::normal: return "normal";
  case ServerMode::garbage: return "garbage";
  case ServerMode::close_after_hello: return "close_after_hello";
  case ServerMode::close_after_report: return "close_after_report";
  case ServerMode::stall: return "stall";
  case ServerMode::stall_after_hello: return "stall_after_hello";
  case ServerMode::bad_version: return "bad_version";
  }
  return "?";
}

// --- Connection / ServerLog -------------------------------------------------------------------

std::map<uint64_t, proto::KernelStats> Connection::latest_stats() const {
  std::map<uint64_t, proto::KernelStats> latest;
  for (const auto& s : stats)
    for (const auto& k : s.kernels) latest[k.id] = k;
  return latest;
}

const proto::KernelInfo* Connection::kernel(uint64_t id) const {
  for (const auto& k : kernels)
    if (k.id == id) return &k;
  return nullptr;
}

std::map<KernelKey, proto::KernelStats> Connection::stats_by_key() const {
  std::map<KernelKey, proto::KernelStats> by_key;
  for (const auto& [id, s] : latest_stats()) {
    const proto::KernelInfo* info = kernel(id);
    KernelKey key = info ? info->key : KernelKey{ImageHash{}, "<unannounced id " + std::to_string(id) + ">"};
    auto& total = by_key[key];
    total.launches += s.launches;
    total.sampled += s.sampled;
    total.sampled_ns += s.sampled_ns;
    total.grid = s.grid;
    total.block = s.block;
  }
  return by_key;
}

bool Connection::counters_monotonic(std::string* why) const {
  std::map<uint64_t, proto::KernelStats> seen;
  for (size_t i = 0; i < stats.size(); ++i) {
    for (const auto& k : stats[i].kernels) {
      auto fail = [&](const char* what) {
        if (why)
          *why = "stats frame " + std::to_string(i) + ", kernel id " + std::to_string(k.id) + ": " + what;
        return false;
      };
      if (k.sampled > k.launches) return fail("more sampled launches than launches");
      auto it = seen.find(k.id);
      if (it != seen.end()) {
        if (k.launches < it->second.launches) return fail("launches decreased");
        if (k.sampled < it->second.sampled) return fail("sampled decreased");
        if (k.sampled_ns < it->second.sampled_ns) return fail("sampled_ns decreased");
      }
      seen[k.id] = k;
    }
  }
  return true;
}

std::vector<const Connection*> ServerLog::from_pid(pid_t pid) const {
  std::vector<const Connection*> out;
  for (const auto& c : connections) {
    if (c.probe) continue;
    pid_t who = c.hello ? pid_t(c.hello->pid) : c.peer_pid;
    if (who == pid) out.push_back(&c);
  }
  return out;
}

size_t ServerLog::clients() const {
  size_t n = 0;
  for (const auto& c : connections) n += c.probe ? 0 : 1;
  return n;
}

// --- TestServer ----------------------------------------------------------------------------------

// The server thread's side of a connection.
struct TestServer::Peer {
  uint64_t id = 0;
  int fd = -1;
  bool stalled = false; // never read from again
  std::string in;       // bytes received, not yet parsed
  std::deque<int> fds;  // descriptors received, not yet claimed by a frame
};

TestServer::TestServer(Options options) : m_options(std::move(options)) {
  m_socket_path = m_options.socket_path;
  if (m_socket_path.empty()) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "hone-test-server-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error(errno_text("mkdtemp"));
    m_directory = tmpl;
    m_socket_path = m_directory + "/hone.sock";
  }
  sockaddr_un addr{};
  if (m_socket_path.size() >= sizeof addr.sun_path)
    throw std::runtime_error("socket path too long: " + m_socket_path);
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, m_socket_path.c_str(), m_socket_path.size() + 1);
  ::unlink(m_socket_path.c_str());
  m_listen_fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (m_listen_fd < 0) throw std::runtime_error(errno_text("socket"));
  if (::bind(m_listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(m_listen_fd, 64) != 0) {
    std::string why = errno_text("bind/listen ") + m_socket_path;
    ::close(m_listen_fd);
    throw std::runtime_error(why);
  }
  m_wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (m_wake_fd < 0) throw std::runtime_error(errno_text("eventfd"));
  m_thread = std::thread([this] { run(); });
}

TestServer::~TestServer() {
  {
    std::lock_guard lock(m_mutex);
    m_stop = true;
  }
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(m_wake_fd, &one, sizeof one);
  if (m_thread.joinable()) m_thread.join();
  for (auto& p : m_peers) {
    if (p->fd >= 0) ::close(p->fd);
    for (int fd : p->fds) ::close(fd);
  }
  ::close(m_listen_fd);
  ::close(m_wake_fd);
  ::unlink(m_socket_path.c_str());
  if (!m_directory.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(m_directory, ec);
  }
}

ServerLog TestServer::snapshot() const {
  std::lock_guard lock(m_mutex);
  return m_log;
}

bool TestServer::wait_until(const std::function<bool(const ServerLog&)>& pred,
                            std::chrono::milliseconds timeout) const {
  std::unique_lock lock(m_mutex);
  return m_changed.wait_for(lock, timeout, [&] { return pred(m_log); });
}

bool TestServer::sync(std::chrono::milliseconds timeout) {
  uint64_t before = snapshot().probes;
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  // A probe says so by its own (abstract) address: an in-process client is not one.
  static std::atomic<uint64_t> probe_count{0};
  sockaddr_un self{};
  self.sun_family = AF_UNIX;
  const std::string name = std::string(k_probe_prefix) + std::to_string(::getpid()) + "-" +
                           std::to_string(probe_count.fetch_add(1));
  std::memcpy(self.sun_path + 1, name.data(), name.size());
  if (::bind(fd, reinterpret_cast<sockaddr*>(&self),
             socklen_t(offsetof(sockaddr_un, sun_path) + 1 + name.size())) != 0) {
    ::close(fd);
    return false;
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, m_socket_path.c_str(), m_socket_path.size() + 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return false;
  }
  bool ok = wait_until([&](const ServerLog& log) { return log.probes > before; }, timeout);
  ::close(fd);
  return ok;
}

bool TestServer::request_image(uint64_t connection_id, const ImageHash& image, uint32_t seq) {
  return send_raw(connection_id,
                  proto::frame_of(proto::MsgType::image_request, seq, proto::ImageRequest{image}));
}

bool TestServer::send_raw(uint64_t connection_id, const std::string& bytes) {
  std::lock_guard lock(m_mutex);
  auto it = m_send_fds.find(connection_id);
  return it != m_send_fds.end() && send_all(it->second, bytes);
}

bool TestServer::send_with_fd(uint64_t connection_id, const std::string& bytes, int fd) {
  std::lock_guard lock(m_mutex);
  auto it = m_send_fds.find(connection_id);
  if (it == m_send_fds.end()) return false;
  iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
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
  ssize_t n = ::sendmsg(it->second, &msg, MSG_NOSIGNAL);
  if (n < 0) return false;
  // the descriptor went with the first byte; the rest goes as plain bytes
  return size_t(n) == bytes.size() || send_all(it->second, bytes.substr(size_t(n)));
}

Connection& TestServer::record(uint64_t id) {
  for (auto& c : m_log.connections)
    if (c.id == id) return c;
  throw std::logic_error("test server: no connection " + std::to_string(id));
}

void TestServer::notify() {
  m_changed.notify_all();
}

void TestServer::run() {
  for (;;) {
    std::vector<pollfd> fds;
    fds.push_back({m_wake_fd, POLLIN, 0});
    fds.push_back({m_listen_fd, POLLIN, 0});
    std::vector<Peer*> polled;
    for (auto& p : m_peers) {
      if (p->fd < 0 || p->stalled) continue;
      fds.push_back({p->fd, POLLIN, 0});
      polled.push_back(p.get());
    }
    int timeout = -1;
    auto now = std::chrono::steady_clock::now();
    for (const auto& p : m_pending) {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(p.due - now).count() + 1;
      ms = std::max<decltype(ms)>(ms, 0);
      if (timeout < 0 || ms < timeout) timeout = int(ms);
    }
    int n = ::poll(fds.data(), fds.size(), timeout);
    if (n < 0 && errno == EINTR) continue;
    {
      std::lock_guard lock(m_mutex);
      if (m_stop) return;
    }
    if (n > 0 && (fds[1].revents & POLLIN)) accept_all();
    for (size_t i = 0; n > 0 && i < polled.size(); ++i)
      if (fds[i + 2].revents & (POLLIN | POLLHUP | POLLERR)) read_from(*polled[i]);
    send_due_replies();
  }
}

void TestServer::send_due_replies() {
  auto now = std::chrono::steady_clock::now();
  std::vector<PendingReply> due;
  for (auto it = m_pending.begin(); it != m_pending.end();) {
    if (it->due <= now) {
      due.push_back(std::move(*it));
      it = m_pending.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& d : due) {
    for (auto& p : m_peers)
      if (p->id == d.peer_id && p->fd >= 0) reply(*p, d.bytes, d.close_after);
  }
}

void TestServer::reply(Peer& peer, const std::string& bytes, bool close_after) {
  if (!bytes.empty() && !send_all(peer.fd, bytes)) {
    drop(peer, errno_text("send"));
    return;
  }
  if (close_after) {
    ::shutdown(peer.fd, SHUT_RDWR);
    drop(peer, "");
  }
}

void TestServer::accept_all() {
  for (;;) {
    int fd = ::accept4(m_listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    ucred cred{};
    socklen_t len = sizeof cred;
    ::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len);
    auto peer = std::make_unique<Peer>();
    peer->fd = fd;
    sockaddr_un peer_addr{};
    socklen_t peer_len = sizeof peer_addr;
    const size_t prefix = std::strlen(k_probe_prefix);
    bool probe = cred.pid == ::getpid() &&
                 ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer_addr), &peer_len) == 0 &&
                 peer_len > offsetof(sockaddr_un, sun_path) + prefix &&
                 peer_addr.sun_path[0] == '\0' &&
                 std::memcmp(peer_addr.sun_path + 1, k_probe_prefix, prefix) == 0;
    {
      std::lock_guard lock(m_mutex);
      if (probe) {
        ++m_log.probes;
      }
      Connection c;
      c.id = m_log.connections.size() + 1;
      c.peer_pid = cred.pid;
      c.peer_uid = cred.uid;
      c.probe = probe;
      peer->id = c.id;
      m_log.connections.push_back(std::move(c));
      m_send_fds[peer->id] = fd;
    }
    peer->stalled = m_options.mode == ServerMode::stall;
    m_peers.push_back(std::move(peer));
    notify();
  }
}

void TestServer::drop(Peer& peer, const std::string& why) {
  {
    std::lock_guard lock(m_mutex);
    Connection& c = record(peer.id);
    if (!why.empty() && c.protocol_error.empty()) c.protocol_error = why;
    c.closed = true;
    m_send_fds.erase(peer.id);
  }
  ::close(peer.fd);
  peer.fd = -1;
  for (int fd : peer.fds) ::close(fd);
  peer.fds.clear();
  notify();
}

void TestServer::read_from(Peer& peer) {
  char buf[65536];
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * k_max_fds_per_message)];
  iovec iov{buf, sizeof buf};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n = ::recvmsg(peer.fd, &msg, MSG_CMSG_CLOEXEC);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      peer.fds.push_back(fd);
    }
  }
  if (n <= 0) {
    drop(peer, n < 0 ? errno_text("recvmsg") : std::string());
    return;
  }
  if (msg.msg_flags & MSG_CTRUNC) {
    drop(peer, "more descriptors in one message than the server accepts");
    return;
  }
  peer.in.append(buf, size_t(n));
  while (peer.fd >= 0 && !peer.stalled && peer.in.size() >= proto::k_header_size) {
    const char* why = nullptr;
    auto header = proto::FrameHeader::decode(peer.in.data(), &why);
    if (!header) {
      drop(peer, std::string("bad frame header: ") + why);
      return;
    }
    if (peer.in.size() < proto::k_header_size + header->length) break;
    std::string payload = peer.in.substr(proto::k_header_size, header->length);
    peer.in.erase(0, proto::k_header_size + header->length);
    handle_frame(peer, *header, payload);
  }
}

void TestServer::handle_frame(Peer& peer, const proto::FrameHeader& header, std::string_view payload) {
  using proto::MsgType;
  int fd = -1;
  if (header.flags & proto::k_flag_fd) {
    if (peer.fds.empty()) {
      drop(peer, std::string(proto::type_name(header.type)) + " frame flagged k_flag_fd without a descriptor");
      return;
    }
    fd = peer.fds.front();
    peer.fds.pop_front();
  }
  wire::Reader r(payload);
  std::string reply_bytes;
  bool close_after = false;
  std::string bad;
  {
    std::lock_guard lock(m_mutex);
    Connection& c = record(peer.id);
    c.frames.push_back(header.type);
    switch (header.type) {
    case MsgType::hello: {
      proto::Hello hello;
      if (!proto::decode(r, hello)) {
        bad = std::string("hello: ") + r.error();
        break;
      }
      ++c.hello_count;
      if (!c.hello) c.hello = hello;
      c.probe = false; // a client of this very process (a test's fake client), not sync()'s probe
      switch (m_options.mode) {
      case ServerMode::normal:
      case ServerMode::close_after_report:
      case ServerMode::stall_after_hello:
      case ServerMode::close_after_hello: {
        proto::HelloAck ack;
        ack.version = std::min(hello.version_max, proto::k_version_max);
        ack.daemon_version = m_options.daemon_version;
        ack.report_interval_ms = m_options.report_interval_ms;
        reply_bytes = proto::frame_of(MsgType::hello_ack, header.seq, ack);
        close_after = m_options.mode == ServerMode::close_after_hello;
        break;
      }
      case ServerMode::garbage: {
        std::mt19937 rng(std::random_device{}());
        reply_bytes.resize(64);
        for (auto& ch : reply_bytes) ch = char(rng());
        reply_bytes[0] = 'X'; // never the frame magic by chance
        break;
      }
      case ServerMode::bad_version: {
        proto::ErrorMsg err{proto::k_err_version, "test server: no common protocol version"};
        reply_bytes = proto::frame_of(MsgType::error, header.seq, err);
        close_after = true;
        break;
      }
      case ServerMode::stall: break;
      }
      break;
    }
    case MsgType::kernels: {
      proto::Kernels m;
      if (!proto::decode(r, m)) {
        bad = std::string("kernels: ") + r.error();
        break;
      }
      c.kernels.insert(c.kernels.end(), m.kernels.begin(), m.kernels.end());
      close_after = m_options.mode == ServerMode::close_after_report;
      break;
    }
    case MsgType::stats: {
      proto::Stats m;
      if (!proto::decode(r, m)) {
        bad = std::string("stats: ") + r.error();
        break;
      }
      c.stats.push_back(std::move(m));
      close_after = m_options.mode == ServerMode::close_after_report;
      break;
    }
    case MsgType::image: {
      ReceivedImage img;
      img.seq = header.seq;
      if (!proto::decode(r, img.message)) {
        bad = std::string("image: ") + r.error();
        break;
      }
      if (fd >= 0) {
        img.had_fd = true;
        img.bytes = read_fd(fd);
        int seals = ::fcntl(fd, F_GET_SEALS);
        img.seals = seals < 0 ? 0 : seals;
      }
      c.images.push_back(std::move(img));
      break;
    }
    case MsgType::variant_status: {
      proto::VariantStatus m;
      if (proto::decode(r, m)) c.variant_statuses.push_back(std::move(m));
      else bad = std::string("variant_status: ") + r.error();
      break;
    }
    case MsgType::goodbye: c.goodbye = true; break;
    case MsgType::error: {
      proto::ErrorMsg m;
      if (proto::decode(r, m)) c.errors.push_back(std::move(m));
      else bad = std::string("error: ") + r.error();
      break;
    }
    default: bad = std::string("unexpected message type ") + std::to_string(unsigned(header.type)); break;
    }
  }
  if (fd >= 0) ::close(fd);
  if (!bad.empty()) {
    drop(peer, bad);
    return;
  }
  notify();
  if (header.type == MsgType::hello && m_options.ack_delay_ms > 0) {
    m_pending.push_back({peer.id,
                         std::chrono::steady_clock::now() + std::chrono::milliseconds(m_options.ack_delay_ms),
                         std::move(reply_bytes), close_after});
    return;
  }
  if (header.type == MsgType::hello && m_options.mode == ServerMode::stall_after_hello)
    peer.stalled = true;
  reply(peer, reply_bytes, close_after);
}

} // namespace hone::test
