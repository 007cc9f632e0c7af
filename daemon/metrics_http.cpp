// /metrics over plain HTTP on a loopback address (metrics.listen), for Prometheus. One request
// per connection, bounded and timed out; nothing else is served.
#include "daemon/daemon.hpp"

#include <spdlog/spdlog.h>

namespace hone::daemon {

namespace {

constexpr size_t k_max_request = 8192;
constexpr auto k_request_timeout = std::chrono::seconds(5);

struct HttpSession : std::enable_shared_from_this<HttpSession> {
  HttpSession(asio::ip::tcp::socket s, const Daemon& d)
      : socket(std::move(s)), timer(socket.get_executor()), daemon(d) {}

  void start() {
    auto self = shared_from_this();
    timer.expires_after(k_request_timeout);
    timer.async_wait([self](const boost::system::error_code& e) {
      if (!e) {
        boost::system::error_code ec;
        self->socket.close(ec);
      }
    });
    read();
  }

  void read() {
    auto self = shared_from_this();
    socket.async_read_some(asio::buffer(buf), [self](const boost::system::error_code& e, size_t n) {
      if (e) return;
      self->request.append(self->buf.data(), n);
      if (self->request.find("\r\n\r\n") != std::string::npos) return self->respond();
      if (self->request.size() > k_max_request) return self->reply(413, "Payload Too Large", "");
      self->read();
    });
  }

  void respond() {
    if (request.rfind("GET /metrics ", 0) == 0 || request.rfind("GET /metrics?", 0) == 0) {
      reply(200, "OK", daemon.metrics_text());
    } else if (request.rfind("GET ", 0) == 0) {
      reply(404, "Not Found", "only /metrics is served here\n");
    } else {
      reply(405, "Method Not Allowed", "");
    }
  }

  void reply(int code, const char* reason, const std::string& body) {
    response = "HTTP/1.1 " + std::to_string(code) + " " + reason +
               "\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: " +
               std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
    auto self = shared_from_this();
    asio::async_write(socket, asio::buffer(response), [self](const boost::system::error_code&, size_t) {
      boost::system::error_code ec;
      self->socket.shutdown(asio::ip::tcp::socket::shutdown_both, ec);
      self->socket.close(ec);
      self->timer.cancel();
    });
  }

  asio::ip::tcp::socket socket;
  asio::steady_timer timer;
  const Daemon& daemon;
  std::array<char, 2048> buf{};
  std::string request;
  std::string response;
};

} // namespace

void Daemon::start_metrics_listener() {
  const std::string& listen = m_config.metrics.listen;
  if (listen.empty()) return;
  auto colon = listen.rfind(':');
  std::string host = listen.substr(0, colon);
  if (host.size() > 1 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  try {
    auto addr = asio::ip::make_address(host);
    auto port = static_cast<unsigned short>(std::stoul(listen.substr(colon + 1)));
    asio::ip::tcp::endpoint ep(addr, port);
    m_metrics = std::make_unique<asio::ip::tcp::acceptor>(m_io);
    m_metrics->open(ep.protocol());
    m_metrics->set_option(asio::socket_base::reuse_address(true));
    m_metrics->bind(ep);
    m_metrics->listen();
    spdlog::info("serving metrics on http://{}/metrics", listen);
    metrics_accept();
  } catch (const std::exception& e) {
    spdlog::error("metrics.listen {}: {}; metrics stay available through honectl", listen, e.what());
    m_metrics.reset();
  }
}

void Daemon::metrics_accept() {
  m_metrics->async_accept([this](const boost::system::error_code& e, asio::ip::tcp::socket s) {
    if (e == asio::error::operation_aborted || m_stopping) return;
    if (!e) std::make_shared<HttpSession>(std::move(s), *this)->start();
    metrics_accept();
  });
}

} // namespace hone::daemon
