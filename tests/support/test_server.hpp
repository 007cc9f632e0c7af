// An in-process stand-in for honed, for tests: listens on a Unix socket, speaks the real protocol
// (common/protocol.hpp) to any number of clients, records everything they send, and can misbehave
// the ways a daemon can fail (the fail-open tests of the shim).
//
// One thread owns the socket and every connection; the test thread reads what was received through
// snapshot() and waits for it with wait_until(), which sleeps on a condition variable that every
// received frame, accepted connection and closed connection signals — never a sleep-and-hope.
#pragma once

#include "common/identity.hpp"
#include "common/protocol.hpp"

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace hone::test {

// How the server answers a client's Hello (and what it does after).
enum class ServerMode {
  normal,             // HelloAck, then read and record everything
  garbage,            // 64 random bytes instead of a HelloAck, then keep reading
  close_after_hello,  // HelloAck, then close at once (a daemon killed right after the handshake)
  close_after_report, // HelloAck, record, close when the first Kernels or Stats frame arrives
  stall,              // accept, then never read and never write (socket buffers fill up); this
                      // applies to sync()'s probes too, which only need to be accepted
  stall_after_hello,  // HelloAck, then never read again (the client's reports fill the socket)
  bad_version,        // Error{k_err_version}, then close
};

const char* to_string(ServerMode mode);

// An Image frame as received, with the bytes of the memfd that came with it.
struct ReceivedImage {
  uint32_t seq = 0;
  proto::Image message;
  bool had_fd = false;
  std::string bytes;       // the memfd's contents, read from offset 0 to its end
  int seals = 0;           // F_GET_SEALS of the memfd (0 when it had none or was not a memfd)
};

// One accepted connection and everything received on it, in order.
struct Connection {
  uint64_t id = 0;         // 1, 2, ... in the order the server accepted them
  pid_t peer_pid = 0;      // SO_PEERCRED
  uid_t peer_uid = 0;
  bool probe = false;      // from this process and no Hello (yet): TestServer::sync's probe
  std::optional<proto::Hello> hello;
  uint32_t hello_count = 0;                // a second Hello on one connection is a client bug
  std::vector<proto::MsgType> frames;      // the type of every frame, in order
  std::vector<proto::KernelInfo> kernels;  // every Kernels message, concatenated
  std::vector<proto::Stats> stats;         // every Stats message
  std::vector<ReceivedImage> images;
  std::vector<proto::ErrorMsg> errors;     // Error frames the client sent
  std::vector<proto::VariantStatus> variant_statuses; // answers to install/remove_variant
  bool goodbye = false;
  bool closed = false;        // the client closed it, or the server dropped it
  std::string protocol_error; // the first frame the server could not accept, and why

  // The latest (cumulative) KernelStats of every kernel id reported on this connection.
  std::map<uint64_t, proto::KernelStats> latest_stats() const;
  // The KernelInfo with this id, or nullptr.
  const proto::KernelInfo* kernel(uint64_t id) const;
  // Final launches per KernelKey: each key's ids' latest launches, summed.
  std::map<KernelKey, proto::KernelStats> stats_by_key() const;
  // Cumulative counters never decreased between Stats frames, and no sampled count exceeds its
  // launches; `why` says which did when it returns false.
  bool counters_monotonic(std::string* why = nullptr) const;
};

// Everything the server has seen, as a copy or (inside wait_until predicates) live.
struct ServerLog {
  std::vector<Connection> connections;
  uint64_t probes = 0; // sync() connections accepted

  // Non-probe connections whose Hello (or, before one arrives, peer credentials) name `pid`.
  std::vector<const Connection*> from_pid(pid_t pid) const;
  // Non-probe connections accepted so far.
  size_t clients() const;
};

class TestServer {
public:
  struct Options {
    std::string socket_path;         // empty: hone.sock in a fresh temporary directory
    ServerMode mode = ServerMode::normal;
    uint32_t report_interval_ms = 100;
    std::string daemon_version = "hone-test-server";
    uint32_t ack_delay_ms = 0; // answer each Hello this much later (a daemon under load)
  };

  // Listens at once; throws std::runtime_error when it cannot (a test setup failure).
  explicit TestServer(Options options);
  TestServer() : TestServer(Options{}) {}
  ~TestServer(); // stops, closes every connection, removes the socket (and the directory it made)
  TestServer(const TestServer&) = delete;
  TestServer& operator=(const TestServer&) = delete;

  const std::string& socket_path() const { return m_socket_path; }
  // The temporary directory the socket is in when the server made it, else empty.
  const std::string& directory() const { return m_directory; }

  ServerLog snapshot() const;

  // Waits until `pred(log)` holds (evaluated under the server's lock, after every change) or the
  // timeout passes; returns whether it held.
  bool wait_until(const std::function<bool(const ServerLog&)>& pred,
                  std::chrono::milliseconds timeout) const;

  // Every connection made to the socket before this call has been accepted when it returns true:
  // it connects a probe and waits for the server to accept it (the kernel's accept queue is FIFO).
  bool sync(std::chrono::milliseconds timeout = std::chrono::seconds(5));

  // Sends ImageRequest{image} with `seq` on connection `connection_id`; false when it is closed.
  bool request_image(uint64_t connection_id, const ImageHash& image, uint32_t seq);
  // Sends bytes as they are on a connection (a frame the test made, or garbage).
  bool send_raw(uint64_t connection_id, const std::string& bytes);
  // The same with a descriptor attached (SCM_RIGHTS), as honed sends variants and requests.
  bool send_with_fd(uint64_t connection_id, const std::string& bytes, int fd);

private:
  struct Peer;
  struct PendingReply {
    uint64_t peer_id;
    std::chrono::steady_clock::time_point due;
    std::string bytes;
    bool close_after;
  };

  void run();
  void send_due_replies();
  void reply(Peer& peer, const std::string& bytes, bool close_after);
  void accept_all();
  void read_from(Peer& peer);
  void handle_frame(Peer& peer, const proto::FrameHeader& header, std::string_view payload);
  void drop(Peer& peer, const std::string& why);
  Connection& record(uint64_t id); // requires m_mutex
  void notify();

  Options m_options;
  std::string m_socket_path;
  std::string m_directory;
  int m_listen_fd = -1;
  int m_wake_fd = -1; // eventfd: stop
  bool m_stop = false;

  mutable std::mutex m_mutex;
  mutable std::condition_variable m_changed;
  ServerLog m_log;                                  // guarded by m_mutex
  std::map<uint64_t, int> m_send_fds;               // guarded by m_mutex: open connections' fds
  std::vector<std::unique_ptr<Peer>> m_peers;       // the server thread's own
  std::vector<PendingReply> m_pending;              // the server thread's own (ack_delay_ms)
  std::thread m_thread;
};

} // namespace hone::test
