#include "llm_server.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace hone::test {

namespace {

// Requests larger than these are not from the client under test.
constexpr size_t k_max_head_bytes = 64 << 10;
constexpr size_t k_max_body_bytes = 64 << 20;

bool send_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= size_t(n);
  }
  return true;
}

std::string lower(std::string s) {
  for (char& c : s) c = char(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s;
}

const char* reason(int status) {
  switch (status) {
  case 200:
    return "OK";
  case 400:
    return "Bad Request";
  case 401:
    return "Unauthorized";
  case 404:
    return "Not Found";
  case 429:
    return "Too Many Requests";
  case 500:
    return "Internal Server Error";
  case 503:
    return "Service Unavailable";
  default:
    return "Status";
  }
}

// Read one request from `fd`; false when the connection ends first or the request is malformed.
bool read_request(int fd, LlmRequest& out) {
  std::string data;
  size_t head_end = std::string::npos;
  char buf[16384];
  auto more = [&] {
    ssize_t n;
    do {
      n = ::recv(fd, buf, sizeof buf, 0);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) return false;
    data.append(buf, size_t(n));
    return true;
  };
  while ((head_end = data.find("\r\n\r\n")) == std::string::npos) {
    if (data.size() > k_max_head_bytes || !more()) return false;
  }
  std::string head = data.substr(0, head_end);
  size_t line_end = head.find("\r\n");
  std::string request_line = head.substr(0, line_end);
  size_t sp1 = request_line.find(' ');
  size_t sp2 = request_line.find(' ', sp1 + 1);
  if (sp1 == std::string::npos || sp2 == std::string::npos) return false;
  out.method = request_line.substr(0, sp1);
  out.path = request_line.substr(sp1 + 1, sp2 - sp1 - 1);
  size_t at = line_end == std::string::npos ? head.size() : line_end + 2;
  while (at < head.size()) {
    size_t end = head.find("\r\n", at);
    if (end == std::string::npos) end = head.size();
    std::string line = head.substr(at, end - at);
    at = end + 2;
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    size_t value = line.find_first_not_of(' ', colon + 1);
    out.headers[lower(line.substr(0, colon))] =
        value == std::string::npos ? std::string() : line.substr(value);
  }
  size_t length = 0;
  if (auto it = out.headers.find("content-length"); it != out.headers.end()) {
    length = std::stoul(it->second);
  }
  if (length > k_max_body_bytes) return false;
  size_t body_start = head_end + 4;
  while (data.size() - body_start < length) {
    if (!more()) return false;
  }
  out.body = data.substr(body_start, length);
  return true;
}

} // namespace

LlmResponse LlmResponse::tool_calls(
    const std::vector<std::tuple<std::string, std::string, std::string>>& calls,
    uint64_t total_tokens) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& [id, name, arguments] : calls) {
    list.push_back({{"id", id},
                    {"type", "function"},
                    {"function", {{"name", name}, {"arguments", arguments}}}});
  }
  nlohmann::json reply = {
      {"object", "chat.completion"},
      {"choices",
       {{{"index", 0},
         {"message", {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", list}}},
         {"finish_reason", "tool_calls"}}}},
      {"usage", {{"total_tokens", total_tokens}}}};
  LlmResponse r;
  r.body = reply.dump();
  return r;
}

LlmResponse LlmResponse::chat(const std::string& content, uint64_t total_tokens) {
  nlohmann::json reply = {{"id", "chatcmpl-test"},
                          {"object", "chat.completion"},
                          {"model", "test-model"},
                          {"choices",
                           {{{"index", 0},
                             {"message", {{"role", "assistant"}, {"content", content}}},
                             {"finish_reason", "stop"}}}},
                          {"usage",
                           {{"prompt_tokens", total_tokens / 2},
                            {"completion_tokens", total_tokens - total_tokens / 2},
                            {"total_tokens", total_tokens}}}};
  LlmResponse r;
  r.body = reply.dump();
  return r;
}

LlmServer::LlmServer() {
  m_listen = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (m_listen < 0) throw std::runtime_error("socket: " + std::string(std::strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(m_listen, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(m_listen, 64) != 0 ||
      ::getsockname(m_listen, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
      ::pipe2(m_wake, O_CLOEXEC) != 0) {
    throw std::runtime_error("cannot listen on 127.0.0.1: " + std::string(std::strerror(errno)));
  }
  m_port = ntohs(addr.sin_port);
  m_acceptor = std::thread([this] { accept_loop(); });
}

LlmServer::~LlmServer() {
  {
    std::lock_guard lock(m_mutex);
    m_stopping = true;
    // Unblocks the threads reading a request; the ones pausing wake on the condition variable.
    for (int fd : m_open) ::shutdown(fd, SHUT_RDWR);
  }
  m_changed.notify_all();
  char byte = 0;
  (void)!::write(m_wake[1], &byte, 1);
  m_acceptor.join();
  for (auto& t : m_threads) t.join(); // no more are added once the acceptor has returned
  ::close(m_listen);
  ::close(m_wake[0]);
  ::close(m_wake[1]);
}

std::string LlmServer::base_url() const {
  return "http://127.0.0.1:" + std::to_string(m_port) + "/v1";
}

void LlmServer::push(LlmResponse response) {
  std::lock_guard lock(m_mutex);
  m_script.push_back(std::move(response));
}

std::vector<LlmRequest> LlmServer::requests() const {
  std::lock_guard lock(m_mutex);
  return m_requests;
}

bool LlmServer::wait_for_requests(size_t count, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(m_mutex);
  return m_changed.wait_for(lock, timeout, [&] { return m_requests.size() >= count; });
}

uint32_t LlmServer::peak_concurrency() const {
  std::lock_guard lock(m_mutex);
  return m_peak;
}

void LlmServer::accept_loop() {
  for (;;) {
    pollfd fds[2] = {{m_listen, POLLIN, 0}, {m_wake[0], POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents) return;
    int fd = ::accept4(m_listen, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::lock_guard lock(m_mutex);
    if (m_stopping) {
      ::close(fd);
      return;
    }
    m_open.push_back(fd);
    m_threads.emplace_back([this, fd] { serve(fd); });
  }
}

bool LlmServer::pause(int64_t ms) {
  std::unique_lock lock(m_mutex);
  if (ms < 0) {
    m_changed.wait(lock, [&] { return m_stopping; });
    return false;
  }
  return !m_changed.wait_for(lock, std::chrono::milliseconds(ms), [&] { return m_stopping; });
}

void LlmServer::serve(int fd) {
  LlmRequest request;
  bool complete = read_request(fd, request);
  LlmResponse response;
  if (complete) {
    std::lock_guard lock(m_mutex);
    if (m_next < m_script.size()) {
      response = m_script[m_next++];
    } else {
      response.status = 503;
      response.body = R"({"error":{"message":"the test server's script is empty"}})";
    }
    if (response.echo_authorization) {
      auto it = request.headers.find("authorization");
      response.body += it == request.headers.end() ? "" : " (you sent: " + it->second + ")";
    }
    m_requests.push_back(std::move(request));
    m_peak = std::max(m_peak, ++m_active);
  }
  m_changed.notify_all();

  if (complete && !response.close_without_reply && pause(response.hang ? -1 : response.delay_ms)) {
    std::string head = "HTTP/1.1 " + std::to_string(response.status) + " " +
                       reason(response.status) + "\r\nContent-Type: application/json\r\n" +
                       response.headers;
    if (response.oversize_bytes > 0) {
      head += "Connection: close\r\n\r\n";
      bool ok = send_all(fd, head.data(), head.size());
      std::string chunk(64 << 10, 'x');
      for (uint64_t sent = 0; ok && sent < response.oversize_bytes; sent += chunk.size()) {
        ok = send_all(fd, chunk.data(),
                      size_t(std::min<uint64_t>(chunk.size(), response.oversize_bytes - sent)));
      }
    } else {
      head += "Content-Length: " + std::to_string(response.body.size()) +
              "\r\nConnection: close\r\n\r\n";
      // HONE_FUZZ_SEED_DUMP=DIR keeps every 200 body sent, as llm_answer_fuzz's seeds were made
      // (tests/fuzz/README.md).
      if (const char* dump = std::getenv("HONE_FUZZ_SEED_DUMP"); dump && response.status == 200) {
        static std::atomic<int> n{0};
        std::ofstream(std::string(dump) + "/reply-" + std::to_string(::getpid()) + "-" +
                      std::to_string(n++) + ".json", std::ios::binary) << response.body;
      }
      if (send_all(fd, head.data(), head.size())) {
        send_all(fd, response.body.data(), response.body.size());
      }
    }
  }

  std::lock_guard lock(m_mutex);
  if (complete) --m_active;
  std::erase(m_open, fd);
  ::shutdown(fd, SHUT_WR);
  ::close(fd);
}

} // namespace hone::test
