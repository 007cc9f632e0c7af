#include "daemon/daemon.hpp"

#include "common/version.hpp"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

namespace hone::daemon {

namespace fs = std::filesystem;

namespace {

constexpr auto k_flush_interval = std::chrono::seconds(5);

// Is something listening on `path`? (A live socket means another honed; a dead one is stale.)
bool socket_is_live(const std::string& path) {
  int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), std::min(path.size(), sizeof addr.sun_path - 1));
  bool live = ::connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(s);
  return live;
}

} // namespace

Daemon::Daemon(asio::io_context& io, config::Config config, std::unique_ptr<store::Store> store)
    : m_io(io), m_config(std::move(config)), m_store(std::move(store)),
      m_registry(m_store.get()), m_flush_timer(io) {}

Daemon::~Daemon() = default;

Result<void> Daemon::start() {
  if (auto r = m_registry.load(); !r) return r;
  auto fleet = Fleet::create(m_io, m_config.store.remote);
  if (!fleet) return fleet.error();
  m_fleet = std::move(*fleet);
  m_optimizer = std::make_unique<Optimizer>(
      m_io, m_config, m_store.get(), m_registry,
      [this](uint64_t conn, std::string frame, UniqueFd fd) {
        send_to(conn, std::move(frame), std::move(fd));
      },
      m_fleet.get());
  const std::string& path = m_config.server.socket;
  fs::path parent = fs::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty() && !fs::is_directory(parent, ec)) {
    return make_error("cannot create the socket " + path + ": directory " + parent.string() +
                      " does not exist (under systemd, RuntimeDirectory=hone creates /run/hone)");
  }
  struct stat st{};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return make_error(path + " exists and is not a socket; remove it or set server.socket");
    }
    if (socket_is_live(path)) {
      return make_error("another honed is already listening on " + path);
    }
    ::unlink(path.c_str()); // stale, from a daemon that died
  }
  try {
    m_acceptor = std::make_unique<asio::local::stream_protocol::acceptor>(m_io);
    asio::local::stream_protocol::endpoint ep(path);
    m_acceptor->open(ep.protocol());
    m_acceptor->bind(ep);
    m_acceptor->listen(asio::socket_base::max_listen_connections);
  } catch (const boost::system::system_error& e) {
    return make_error("cannot listen on " + path + ": " + e.code().message());
  }
  if (::chmod(path.c_str(), m_config.server.socket_mode) != 0) {
    return make_error("cannot set the mode of " + path + ": " + std::strerror(errno));
  }
  if (!m_config.server.socket_group.empty()) {
    group* g = ::getgrnam(m_config.server.socket_group.c_str());
    if (!g) return make_error("server.socket_group: no group named " + m_config.server.socket_group);
    if (::chown(path.c_str(), uid_t(-1), g->gr_gid) != 0) {
      return make_error("cannot give " + path + " to group " + m_config.server.socket_group + ": " +
                        std::strerror(errno));
    }
  }
  struct stat made {};
  m_socket_gid = ::stat(path.c_str(), &made) == 0 ? uint32_t(made.st_gid) : uint32_t(::getgid());
  spdlog::info("listening on {} (mode {:04o})", path, m_config.server.socket_mode);
  m_optimizer->start();
  accept();
  start_metrics_listener();
  schedule_flush();
  return ok();
}

void Daemon::stop() {
  if (m_stopping) return;
  m_stopping = true;
  boost::system::error_code ec;
  if (m_acceptor) {
    m_acceptor->close(ec);
    ::unlink(m_config.server.socket.c_str());
  }
  if (m_metrics) m_metrics->close(ec);
  m_flush_timer.cancel();
  if (m_optimizer) m_optimizer->stop(); // in-flight jobs end with a verdict saying so
  // Copies: closing a connection removes it from the map.
  std::vector<std::shared_ptr<Connection>> open;
  for (auto& [id, c] : m_connections) open.push_back(c.connection);
  for (auto& c : open) c->close("honed is shutting down");
  if (auto r = m_registry.flush(); !r) spdlog::error("store: {}", r.error().message);
  if (m_store) {
    if (auto r = m_store->flush(); !r) spdlog::error("store: {}", r.error().message);
  }
}

void Daemon::reload(const config::Config& fresh, const config::Provenance& provenance) {
  ++m_counters.reloads;
  if (fresh.server.socket != m_config.server.socket ||
      fresh.store.state_dir != m_config.store.state_dir) {
    spdlog::warn("reload: the socket path and the state directory change only on restart");
  }
  if (fresh.store.remote != m_config.store.remote) {
    spdlog::warn("reload: [store.remote] changes only on restart");
  }
  // What stays as honed started, and where those values came from.
  auto restart_only = [](const std::string& key) {
    return key == "server.socket" || key == "store.state_dir" || key.rfind("store.remote.", 0) == 0;
  };
  config::Provenance kept;
  for (const auto& [key, where] : m_provenance) {
    if (restart_only(key)) kept[key] = where;
  }
  std::string socket = m_config.server.socket;
  fs::path state = m_config.store.state_dir;
  config::RemoteConfig remote = m_config.store.remote;
  m_config = fresh;
  m_config.server.socket = socket;
  m_config.store.state_dir = state;
  m_config.store.remote = remote;
  m_provenance = provenance;
  std::erase_if(m_provenance, [&](const auto& e) { return restart_only(e.first); });
  m_provenance.insert(kept.begin(), kept.end());
  spdlog::set_level(spdlog::level::from_str(m_config.log.level));
  if (m_optimizer) m_optimizer->set_config(m_config);
  spdlog::info("configuration reloaded");
}

void Daemon::schedule_flush() {
  m_flush_timer.expires_after(k_flush_interval);
  m_flush_timer.async_wait([this](const boost::system::error_code& e) {
    if (e || m_stopping) return;
    if (auto r = m_registry.flush(); !r) spdlog::error("store: {}", r.error().message);
    schedule_flush();
  });
}

void Daemon::send_to(uint64_t conn, std::string frame, UniqueFd fd) {
  auto it = m_connections.find(conn);
  if (it == m_connections.end()) return;
  auto c = it->second.connection; // a send may close it, which erases the entry
  c->send(std::move(frame), std::move(fd));
}

void Daemon::accept() {
  m_acceptor->async_accept(
      [this](const boost::system::error_code& e, asio::local::stream_protocol::socket socket) {
        if (m_stopping) return;
        if (!e) {
          on_accept(std::move(socket));
        } else if (e == asio::error::operation_aborted) {
          return;
        } else {
          // Out of descriptors and the like: keep serving the connections there are.
          spdlog::warn("accept failed: {}", e.message());
        }
        accept();
      });
}

// Root, honed's own user, allowed_uids; and a peer with the socket's group or one of
// allowed_gids, as its primary or a supplementary group: the socket's group is whom the operator
// let open the socket (hone under systemd; `honectl attach-service` adds it to a service).
bool Daemon::allowed(const PeerCredentials& peer) const {
  if (peer.uid == 0 || peer.uid == ::getuid()) return true;
  const auto& s = m_config.server;
  if (std::find(s.allowed_uids.begin(), s.allowed_uids.end(), peer.uid) != s.allowed_uids.end())
    return true;
  auto granted = [&](uint32_t gid) {
    return gid == m_socket_gid ||
           std::find(s.allowed_gids.begin(), s.allowed_gids.end(), gid) != s.allowed_gids.end();
  };
  return granted(peer.gid) || std::any_of(peer.groups.begin(), peer.groups.end(), granted);
}

void Daemon::on_accept(asio::local::stream_protocol::socket socket) {
  ucred cred{};
  socklen_t len = sizeof cred;
  PeerCredentials peer;
  if (::getsockopt(socket.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
    peer = {uint32_t(cred.pid), uint32_t(cred.uid), uint32_t(cred.gid), {}};
    // its supplementary groups when it connected (no race with a pid reused later)
    std::vector<gid_t> groups(64);
    socklen_t glen = socklen_t(groups.size() * sizeof(gid_t));
    int r = ::getsockopt(socket.native_handle(), SOL_SOCKET, SO_PEERGROUPS, groups.data(), &glen);
    if (r != 0 && errno == ERANGE && glen <= 65536 * sizeof(gid_t)) {
      groups.resize(glen / sizeof(gid_t));
      r = ::getsockopt(socket.native_handle(), SOL_SOCKET, SO_PEERGROUPS, groups.data(), &glen);
    }
    if (r == 0) peer.groups.assign(groups.begin(), groups.begin() + glen / sizeof(gid_t));
  } else {
    peer.uid = uint32_t(-1); // unknown: treated as not allowed
  }
  ConnectionLimits limits{m_config.server.max_frame_bytes, m_config.server.max_queued_bytes,
                          m_config.server.handshake_timeout_ms};
  uint64_t id = m_next_id++;
  auto c = std::make_shared<Connection>(std::move(socket), id, peer, *this, limits);
  ++m_counters.connections_accepted;
  if (m_connections.size() >= m_config.server.max_connections) {
    ++m_counters.connections_refused_limit;
    m_connections[id] = Client{c};
    c->send_error(0, proto::k_err_limit,
                  "honed serves at most " + std::to_string(m_config.server.max_connections) +
                      " connections (server.max_connections)");
    c->close_after_send("over the connection limit");
    return;
  }
  m_connections[id] = Client{c};
  if (!allowed(peer)) {
    ++m_counters.connections_refused_permission;
    spdlog::warn("refused pid {} uid {}: not allowed (not in the socket's group; "
                 "server.allowed_uids / allowed_gids)",
                 peer.pid, peer.uid);
    c->send_error(0, proto::k_err_permission,
                  "uid " + std::to_string(peer.uid) +
                      " may not use honed: add it to the socket's group, or see "
                      "server.allowed_uids and server.allowed_gids");
    c->close_after_send("peer not allowed");
    return;
  }
  c->start();
}

void Daemon::on_closed(Connection& c, const std::string& why) {
  auto it = m_connections.find(c.id());
  if (it == m_connections.end()) return;
  if (it->second.hello && it->second.kind == proto::ClientKind::shim) {
    const auto& procs = m_registry.processes();
    auto p = procs.find(c.id());
    if (p != procs.end()) {
      spdlog::info("process {} ({}) detached: {}", p->second.hello.pid, p->second.hello.exe, why);
    }
    m_registry.detach(c.id());
    if (m_optimizer) m_optimizer->on_detach(c.id());
  } else {
    spdlog::debug("connection {} closed: {}", c.id(), why);
  }
  m_connections.erase(it);
}

bool Daemon::on_frame(Connection& c, const proto::FrameHeader& h, std::string_view payload,
                      UniqueFd fd) {
  ++m_counters.frames_received;
  m_counters.bytes_received += proto::k_header_size + payload.size();
  Client& client = m_connections.at(c.id());
  if (!client.hello) {
    if (h.type != proto::MsgType::hello) {
      ++m_counters.protocol_errors;
      c.send_error(h.seq, proto::k_err_protocol, "the first frame must be hello");
      return false;
    }
    return on_hello(c, h, payload);
  }
  auto bad = [&](const std::string& why) {
    ++m_counters.protocol_errors;
    spdlog::warn("connection {} (pid {}): {}", c.id(), c.peer().pid, why);
    c.send_error(h.seq, proto::k_err_protocol, why);
    return false;
  };
  wire::Reader r(payload);
  std::string why;
  switch (h.type) {
  case proto::MsgType::kernels: {
    if (client.kind != proto::ClientKind::shim) return bad("kernels from a client that is not a shim");
    proto::Kernels m;
    if (!proto::decode(r, m)) return bad(std::string("malformed kernels message: ") + r.error());
    if (!m_registry.kernels_seen(c.id(), m, &why)) return bad(why);
    m_optimizer->on_kernels(c.id(), m);
    return true;
  }
  case proto::MsgType::stats: {
    if (client.kind != proto::ClientKind::shim) return bad("stats from a client that is not a shim");
    proto::Stats m;
    if (!proto::decode(r, m)) return bad(std::string("malformed stats message: ") + r.error());
    std::vector<std::pair<KernelKey, uint64_t>> served;
    if (!m_registry.stats(c.id(), m, &why, &served)) return bad(why);
    if (m_optimizer && !served.empty()) m_optimizer->on_served(c.id(), served);
    return true;
  }
  case proto::MsgType::image: {
    if (client.kind != proto::ClientKind::shim) return bad("image from a client that is not a shim");
    proto::Image m;
    if (!proto::decode(r, m)) return bad(std::string("malformed image message: ") + r.error());
    if (m.available != bool(fd)) return bad("image message and its descriptor disagree");
    m_optimizer->on_image(c.id(), m, std::move(fd));
    return true;
  }
  case proto::MsgType::capture: {
    if (client.kind != proto::ClientKind::shim) return bad("capture from a client that is not a shim");
    Capture m;
    if (!decode(r, m)) return bad(std::string("malformed capture message: ") + r.error());
    if ((m.status == CaptureStatus::ok) != bool(fd)) {
      return bad("capture message and its descriptor disagree");
    }
    m_optimizer->on_capture(c.id(), m, std::move(fd));
    return true;
  }
  case proto::MsgType::variant_status: {
    if (client.kind != proto::ClientKind::shim) return bad("variant status from a client that is not a shim");
    proto::VariantStatus m;
    if (!proto::decode(r, m)) return bad(std::string("malformed variant status: ") + r.error());
    m_optimizer->on_variant_status(c.id(), m);
    return true;
  }
  case proto::MsgType::goodbye:
    return false;
  case proto::MsgType::control:
    if (client.kind != proto::ClientKind::ctl) return bad("control request from a shim");
    return on_control(c, h, payload, std::move(fd));
  case proto::MsgType::hello:
    return bad("hello sent twice");
  default:
    ++m_counters.protocol_errors;
    c.send_error(h.seq, proto::k_err_unknown,
                 "unknown message type " + std::to_string(unsigned(h.type)));
    return true;
  }
}

bool Daemon::on_hello(Connection& c, const proto::FrameHeader& h, std::string_view payload) {
  wire::Reader r(payload);
  proto::Hello hello;
  if (!proto::decode(r, hello)) {
    ++m_counters.protocol_errors;
    c.send_error(h.seq, proto::k_err_protocol, std::string("malformed hello: ") + r.error());
    return false;
  }
  if (hello.version_max < proto::k_version_min || hello.version_min > proto::k_version_max) {
    ++m_counters.connections_refused_version;
    c.send_error(h.seq, proto::k_err_version,
                 "no common protocol version: the client speaks " +
                     std::to_string(hello.version_min) + "-" + std::to_string(hello.version_max) +
                     ", honed " + std::to_string(proto::k_version_min) + "-" +
                     std::to_string(proto::k_version_max));
    return false;
  }
  Client& client = m_connections.at(c.id());
  client.hello = true;
  client.kind = hello.kind;
  c.handshake_done();
  proto::HelloAck ack;
  ack.version = std::min(hello.version_max, proto::k_version_max);
  ack.daemon_version = k_version;
  ack.report_interval_ms = m_config.server.report_interval_ms;
  c.send_msg(proto::MsgType::hello_ack, h.seq, ack);
  if (hello.kind == proto::ClientKind::shim) {
    m_registry.attach(c.id(), hello, c.peer().uid, c.peer().pid);
    spdlog::info("process {} ({}) attached: {} {}", hello.pid, hello.exe,
                 hello.device_name.empty() ? "no device yet" : hello.device_name, hello.arch);
  }
  return true;
}

std::string Daemon::status_line() const {
  return std::to_string(m_registry.processes().size()) + " processes, " +
         std::to_string(m_registry.kernels().size()) + " kernels, " +
         std::to_string(m_connections.size()) + " connections";
}

} // namespace hone::daemon
