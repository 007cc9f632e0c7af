// A blocking client of honed's socket (honectl, tests, benchmarks): connect, hello, then
// request/reply frames, each I/O bounded by a timeout. The shim does not use this (it must never
// block); it has its own non-blocking reporter.
#pragma once

#include "common/protocol.hpp"
#include "common/result.hpp"

#include <chrono>
#include <optional>
#include <string>

namespace hone {

struct Frame {
  proto::FrameHeader header;
  std::string payload;
  int fd = -1; // the descriptor that came with the frame; the caller owns (and closes) it
};

// Write all of `frame` to the connected socket `sock`, blocking, with `fd` (when >= 0) riding on
// its first byte (SCM_RIGHTS). The error names honed: the client and the worker both talk to it.
Result<void> send_frame(int sock, const std::string& frame, int fd = -1);

// The receiving half of a blocking frame connection (the client, the worker's channel): bytes
// and passed descriptors in, whole checked frames out. A frame flagged k_flag_fd takes the last
// descriptor received (one per frame); one no frame took is closed with the reader.
class FrameReader {
public:
  FrameReader() = default;
  FrameReader(FrameReader&& o) noexcept;
  FrameReader& operator=(FrameReader&& o) noexcept;
  FrameReader(const FrameReader&) = delete;
  FrameReader& operator=(const FrameReader&) = delete;
  ~FrameReader() { clear(); }

  // A whole frame from what was read so far; nullopt while more bytes are needed.
  Result<std::optional<Frame>> next();
  // One read from `sock` (blocking); 0 at the end of the stream.
  Result<size_t> read_from(int sock);
  // Nothing buffered: a stream that ends now ends between frames.
  bool empty() const { return m_in.empty(); }
  void clear();

private:
  std::string m_in;
  int m_pending_fd = -1;
};

class Client {
public:
  Client() = default;
  Client(Client&& o) noexcept;
  Client& operator=(Client&& o) noexcept;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client();

  // Connect to `socket` and complete the handshake as `hello` says.
  static Result<Client> connect(const std::string& socket, const proto::Hello& hello,
                                std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // Connect without a handshake (tests that speak raw frames).
  static Result<Client> connect_raw(const std::string& socket);

  Result<void> send(const std::string& frame, int fd = -1);
  Result<Frame> receive(std::chrono::milliseconds timeout);
  // Send a control request (JSON text) and wait for its reply.
  Result<Frame> control(const std::string& json, int fd = -1,
                        std::chrono::milliseconds timeout = std::chrono::seconds(30));

  const proto::HelloAck& ack() const { return m_ack; }
  int fd() const { return m_fd; }
  void close();

private:
  int m_fd = -1;
  uint32_t m_seq = 0;
  FrameReader m_reader;
  proto::HelloAck m_ack;
};

} // namespace hone
