// A scripted OpenAI-compatible endpoint for tests of the LLM strategy: an HTTP/1.1 server on
// 127.0.0.1 (an ephemeral port) that answers each request with the next response of its script,
// records every request, and can misbehave the ways a real endpoint does (errors, slowness, a
// hang, an oversized body, a dropped connection).
//
// One request per connection (every answer says "Connection: close"); each connection has a
// thread of its own, so requests in flight at once are served at once. The destructor stops the
// server, also while a response hangs.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace hone::test {

struct LlmResponse {
  int status = 200;
  std::string body;
  uint32_t delay_ms = 0;            // wait this long before answering
  bool hang = false;                // read the request, then never answer (until the server stops)
  uint64_t oversize_bytes = 0;      // answer with this many bytes instead of `body`, without a
                                    // Content-Length (the body ends when the connection closes)
  bool close_without_reply = false; // read the request, then close the connection
  bool echo_authorization = false;  // append the request's Authorization header to the body
  std::string headers;              // more response header lines, each ending in \r\n

  // A chat-completions reply whose message content is `content`, reporting `total_tokens`.
  static LlmResponse chat(const std::string& content, uint64_t total_tokens = 100);
  // A reply that calls tools, as OpenAI, vLLM, SGLang and llama-server send one: content null,
  // each call {id, type "function", function {name, arguments as JSON text}}, finish_reason
  // "tool_calls". `calls`: (id, name, arguments JSON text).
  static LlmResponse tool_calls(
      const std::vector<std::tuple<std::string, std::string, std::string>>& calls,
      uint64_t total_tokens = 200);
};

struct LlmRequest {
  std::string method;
  std::string path;
  std::map<std::string, std::string> headers; // names in lower case
  std::string body;
};

class LlmServer {
public:
  LlmServer();
  ~LlmServer();
  LlmServer(const LlmServer&) = delete;
  LlmServer& operator=(const LlmServer&) = delete;

  uint16_t port() const { return m_port; }
  // "http://127.0.0.1:PORT/v1"
  std::string base_url() const;

  // Queue the answer to the next request. With the script empty, requests get a 503.
  void push(LlmResponse response);

  // Every request received so far, in order of arrival.
  std::vector<LlmRequest> requests() const;
  // Wait until `count` requests have arrived; false at the deadline.
  bool wait_for_requests(size_t count, std::chrono::milliseconds timeout) const;
  // The most requests that were being answered at the same time.
  uint32_t peak_concurrency() const;

private:
  void accept_loop();
  void serve(int fd);
  // Wait `ms` milliseconds, or until the server stops (forever when `ms` is negative); false
  // when it stopped.
  bool pause(int64_t ms);

  int m_listen = -1;
  int m_wake[2] = {-1, -1}; // a pipe: written to stop the accept loop
  uint16_t m_port = 0;

  mutable std::mutex m_mutex;
  mutable std::condition_variable m_changed;
  bool m_stopping = false;
  std::vector<LlmResponse> m_script;
  size_t m_next = 0;
  std::vector<LlmRequest> m_requests;
  std::vector<int> m_open;            // connections being served
  std::vector<std::thread> m_threads; // one per connection
  uint32_t m_active = 0;
  uint32_t m_peak = 0;

  std::thread m_acceptor;
};

} // namespace hone::test
