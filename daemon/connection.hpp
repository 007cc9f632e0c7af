// One client connection of honed: frames in and out over a Unix stream socket, descriptors
// received with the frames that carry them.
//
// Every byte from the peer is untrusted. A frame over the size limit, a bad header, a message
// that does not decode: the peer gets an error frame and the connection closes. A peer that stops
// reading gets at most max_queued_bytes queued before it is dropped. Input buffered per connection
// never exceeds one frame.
#pragma once

#include "common/protocol.hpp"
#include "daemon/unique_fd.hpp"

#include <boost/asio.hpp>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include <string_view>

namespace hone::daemon {

namespace asio = boost::asio;

struct PeerCredentials {
  uint32_t pid = 0;
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::vector<uint32_t> groups; // supplementary groups, as at connect (SO_PEERGROUPS)
};

class Connection;

// What a connection reports to its owner.
class ConnectionHandler {
public:
  virtual ~ConnectionHandler() = default;
  // A complete frame; `fd` is the descriptor that came with it, if the frame says one did.
  // Return false to close the connection (after whatever the handler queued is sent).
  virtual bool on_frame(Connection& c, const proto::FrameHeader& h, std::string_view payload,
                        UniqueFd fd) = 0;
  virtual void on_closed(Connection& c, const std::string& why) = 0;
};

struct ConnectionLimits {
  uint32_t max_frame_bytes = proto::k_max_payload;
  uint32_t max_queued_bytes = 8u << 20;
  uint32_t handshake_timeout_ms = 5000;
};

class Connection : public std::enable_shared_from_this<Connection> {
public:
  Connection(asio::local::stream_protocol::socket socket, uint64_t id, PeerCredentials peer,
             ConnectionHandler& handler, ConnectionLimits limits);

  void start();
  // Queue a frame (with an optional descriptor, sent with its first byte; the connection owns it).
  void send(std::string frame, UniqueFd fd = {});
  template <class M> void send_msg(proto::MsgType type, uint32_t seq, const M& msg) {
    send(proto::frame_of(type, seq, msg));
  }
  void send_error(uint32_t seq, uint32_t code, const std::string& message);
  // Close after the queued frames are sent (at most a short grace period).
  void close_after_send(const std::string& why);
  void close(const std::string& why);

  uint64_t id() const { return m_id; }
  const PeerCredentials& peer() const { return m_peer; }
  bool open() const { return m_open; }
  // Called once the peer's hello was accepted: no more handshake deadline.
  void handshake_done();
  size_t queued_bytes() const { return m_out_bytes; }

private:
  struct Out {
    std::string data;
    size_t off = 0;
    UniqueFd fd;
  };

  void wait_readable();
  void on_readable();
  bool parse_frames();
  void wait_writable();
  void on_writable();
  bool write_some(); // false: the connection failed

  asio::local::stream_protocol::socket m_socket;
  uint64_t m_id;
  PeerCredentials m_peer;
  ConnectionHandler& m_handler;
  ConnectionLimits m_limits;
  asio::steady_timer m_timer;
  std::string m_in;
  std::deque<UniqueFd> m_fds;
  std::deque<Out> m_out;
  size_t m_out_bytes = 0;
  bool m_open = true;
  bool m_writing = false;
  bool m_closing = false;
  std::string m_close_reason;
};

} // namespace hone::daemon
