// honed: the socket server, the registry, the store and the control requests, on one Asio
// thread (everything honed does per message is short; nothing blocks it on a peer).
#pragma once

#include "config/config.hpp"
#include "daemon/connection.hpp"
#include "daemon/optimizer.hpp"
#include "daemon/registry.hpp"
#include "store/store.hpp"

#include <boost/asio.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace hone::daemon {

struct Counters {
  uint64_t connections_accepted = 0;
  uint64_t connections_refused_limit = 0;
  uint64_t connections_refused_permission = 0;
  uint64_t connections_refused_version = 0;
  uint64_t protocol_errors = 0;
  uint64_t frames_received = 0;
  uint64_t bytes_received = 0;
  uint64_t control_requests = 0;
  uint64_t reloads = 0;
};

class Daemon final : public ConnectionHandler {
public:
  Daemon(asio::io_context& io, config::Config config, std::unique_ptr<store::Store> store);
  ~Daemon() override;

  // Bind the socket (and the metrics listener when configured) and load the registry.
  Result<void> start();
  // Stop accepting, close every connection, flush the store.
  void stop();
  // SIGHUP: re-read what can change without a restart (log level, limits). `provenance`: where
  // the fresh values came from (config::load), for `honectl config`.
  void reload(const config::Config& fresh, const config::Provenance& provenance = {});
  // Where the values of the configuration honed started with came from.
  void set_provenance(config::Provenance provenance) { m_provenance = std::move(provenance); }

  // ConnectionHandler
  bool on_frame(Connection& c, const proto::FrameHeader& h, std::string_view payload,
                UniqueFd fd) override;
  void on_closed(Connection& c, const std::string& why) override;

  // Status and metrics (also used by tests through the control request).
  nlohmann::json status_json(size_t top_kernels = 100, size_t max_processes = 50) const;
  std::string metrics_text() const;
  std::string status_line() const; // one line for sd_notify STATUS=

  const config::Config& config() const { return m_config; }
  size_t connection_count() const { return m_connections.size(); }

private:
  void accept();
  void on_accept(asio::local::stream_protocol::socket socket);
  bool allowed(const PeerCredentials& peer) const;
  bool on_hello(Connection& c, const proto::FrameHeader& h, std::string_view payload);
  bool on_control(Connection& c, const proto::FrameHeader& h, std::string_view payload,
                  UniqueFd fd);
  nlohmann::json control(const nlohmann::json& request, Connection& c, UniqueFd& fd,
                         UniqueFd* reply_fd);
  void schedule_flush();
  void send_to(uint64_t conn, std::string frame, UniqueFd fd);
  void start_metrics_listener();
  void metrics_accept();

  struct Client {
    std::shared_ptr<Connection> connection;
    bool hello = false;
    proto::ClientKind kind = proto::ClientKind::shim;
  };

  asio::io_context& m_io;
  config::Config m_config;
  config::Provenance m_provenance; // where m_config's values came from
  uint32_t m_socket_gid = uint32_t(-1); // the socket file's group: its members may connect
  std::unique_ptr<store::Store> m_store;
  Registry m_registry;
  std::unique_ptr<Fleet> m_fleet;
  std::unique_ptr<Optimizer> m_optimizer;
  std::unique_ptr<asio::local::stream_protocol::acceptor> m_acceptor;
  std::unique_ptr<asio::ip::tcp::acceptor> m_metrics;
  asio::steady_timer m_flush_timer;
  std::map<uint64_t, Client> m_connections;
  uint64_t m_next_id = 1;
  Counters m_counters;
  std::chrono::steady_clock::time_point m_started = std::chrono::steady_clock::now();
  bool m_stopping = false;
};

} // namespace hone::daemon
