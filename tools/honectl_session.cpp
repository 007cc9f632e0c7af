#include "tools/honectl_session.hpp"

#include "common/version.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

namespace hone::ctl {

using nlohmann::json;

OwnedFd& OwnedFd::operator=(OwnedFd&& o) noexcept {
  if (this != &o) {
    if (m_fd >= 0) ::close(m_fd);
    m_fd = o.release();
  }
  return *this;
}

OwnedFd::~OwnedFd() {
  if (m_fd >= 0) ::close(m_fd);
}

std::string default_socket() {
  const char* env = std::getenv("HONE_SOCKET");
  return env && *env ? env : "/run/hone/hone.sock";
}

namespace {

// What to do when connect(2) failed with `err`.
std::string connect_advice(const std::string& socket, int err) {
  switch (err) {
  case ENOENT:
    return "no socket there: is honed running? (systemctl status hone; honed listens where "
           "server.socket says; point honectl at it with --socket or HONE_SOCKET)";
  case ECONNREFUSED:
    return "the socket exists but nothing listens on it: honed is not running (systemctl start "
           "hone)";
  case EACCES:
  case EPERM: {
    struct stat st {};
    std::string who = "the socket's group";
    if (::stat(socket.c_str(), &st) == 0) {
      if (struct group* g = ::getgrgid(st.st_gid)) who = std::string("group '") + g->gr_name + "'";
    }
    return "permission denied: join " + who +
           " (sudo usermod -aG <group> $USER, then log in again) or run honectl as root";
  }
  case ENOTSOCK:
    return "that path is not a socket; check --socket / HONE_SOCKET";
  default:
    return "check that honed is running and that --socket / HONE_SOCKET names its socket";
  }
}

} // namespace

Result<Session> Session::open(const std::string& socket) {
  auto raw = Client::connect_raw(socket);
  if (!raw) {
    const Error& e = raw.error();
    std::string base = "cannot connect to honed at " + socket;
    if (e.code) base += std::string(": ") + std::strerror(e.code);
    return make_error(base + "\n  " + connect_advice(socket, e.code), k_exit_unreachable);
  }
  Session s;
  s.m_client = std::move(*raw);
  s.m_socket = socket;
  proto::Hello hello;
  hello.kind = proto::ClientKind::ctl;
  hello.pid = uint32_t(::getpid());
  hello.uid = uint32_t(::getuid());
  hello.exe = "honectl";
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) hello.hostname = host;
  hello.client_version = k_version;
  // honed may refuse a peer (permission, connection limit) as soon as it accepts it, and close:
  // the hello then fails with EPIPE, but the error that says why is already waiting to be read.
  auto sent = s.m_client.send(proto::frame_of(proto::MsgType::hello, 0, hello));
  auto f = s.m_client.receive(std::chrono::seconds(sent ? 10 : 1));
  if (!f && !sent) {
    return make_error("cannot talk to honed at " + socket + ": " + sent.error().message,
                      k_exit_unreachable);
  }
  if (!f) {
    return make_error("honed at " + socket +
                          " did not complete the handshake: " + f.error().message,
                      k_exit_unreachable);
  }
  if (f->fd >= 0) ::close(f->fd);
  wire::Reader r(f->payload);
  if (f->header.type == proto::MsgType::error) {
    proto::ErrorMsg e;
    proto::decode(r, e);
    std::string advice;
    if (e.code == proto::k_err_permission) {
      advice = "\n  ask an administrator to allow your uid (server.allowed_uids) or group "
               "(server.allowed_gids) in /etc/hone/hone.toml, or run honectl as root";
    } else if (e.code == proto::k_err_version) {
      advice = "\n  honectl and honed speak different protocol versions: install matching versions";
    } else if (e.code == proto::k_err_limit) {
      advice = "\n  honed is at server.max_connections; try again shortly";
    }
    return make_error("honed at " + socket + " refused the connection: " + e.message + advice,
                      k_exit_unreachable);
  }
  proto::HelloAck ack;
  if (f->header.type != proto::MsgType::hello_ack || !proto::decode(r, ack)) {
    return make_error("the peer at " + socket + " does not speak hone's protocol (answered " +
                          proto::type_name(f->header.type) + ")",
                      k_exit_unreachable);
  }
  s.m_daemon_version = ack.daemon_version;
  s.m_protocol = ack.version;
  return s;
}

Result<json> Session::request(const json& req, int fd, OwnedFd* reply_fd) {
  auto f = m_client.control(req.dump(), fd);
  if (!f) {
    // An error frame from honed (code set) is an answer; anything else lost the connection.
    int code = f.error().code ? k_exit_failed : k_exit_unreachable;
    return make_error(f.error().message, code);
  }
  OwnedFd attached(f->fd);
  json reply = json::parse(f->payload, nullptr, false);
  if (reply.is_discarded() || !reply.is_object() || !reply.contains("ok")) {
    return make_error("honed sent a reply that is not JSON (" + std::to_string(f->payload.size()) +
                          " bytes)",
                      k_exit_failed);
  }
  if (!reply.value("ok", false)) {
    std::string why = reply.contains("error") && reply["error"].is_string()
                          ? reply["error"].get<std::string>()
                          : std::string("unspecified error");
    return make_error(why, k_exit_failed);
  }
  if (reply_fd) *reply_fd = std::move(attached);
  return reply.contains("result") ? reply["result"] : json(nullptr);
}

} // namespace hone::ctl
