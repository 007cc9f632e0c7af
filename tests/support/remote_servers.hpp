// Real servers a test starts on loopback and stops (tests/README.md): Debian's redis-server and
// nginx with its WebDAV module, on free ports, each in a directory of the test's own; and a
// listener that accepts connections and never answers (a hung remote). Header-only.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace hone::test {


namespace remote_servers_detail {
inline std::string find_program(const std::vector<std::string>& candidates) {
  for (const auto& c : candidates) {
    if (::access(c.c_str(), X_OK) == 0) return c;
  }
  return {};
}
} // namespace remote_servers_detail

// A port nothing listens on now (bound, then released).
inline uint16_t free_port() {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t n = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &n);
  ::close(s);
  return ntohs(a.sin_port);
}

inline bool accepts(uint16_t port) {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  bool ok = ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(s);
  return ok;
}

// A server process of the test's own: started with `argv`, ready once `port` accepts, killed at
// the end.
class Server {
public:
  Server(std::vector<std::string> argv, uint16_t port) : m_port(port) {
    m_pid = ::fork();
    if (m_pid == 0) {
      int null = ::open("/dev/null", O_RDWR);
      ::dup2(null, 1);
      ::dup2(null, 2);
      std::vector<char*> a;
      for (auto& s : argv) a.push_back(s.data());
      a.push_back(nullptr);
      ::execv(a[0], a.data());
      ::_exit(127);
    }
    for (int i = 0; i < 200 && !accepts(port); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ~Server() { stop(); }
  bool up() const { return accepts(m_port); }
  void stop() {
    if (m_pid <= 0) return;
    ::kill(m_pid, SIGTERM);
    int status = 0;
    for (int i = 0; i < 200; ++i) {
      if (::waitpid(m_pid, &status, WNOHANG) == m_pid) {
        m_pid = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    ::kill(m_pid, SIGKILL);
    ::waitpid(m_pid, &status, 0);
    m_pid = -1;
  }
  uint16_t port() const { return m_port; }

private:
  pid_t m_pid = -1;
  uint16_t m_port;
};

class Dir {
public:
  Dir() {
    std::string t = (std::filesystem::temp_directory_path() / "hone-remote-XXXXXX").string();
    if (!::mkdtemp(t.data())) throw std::runtime_error("mkdtemp");
    m_path = t;
    // nginx's workers run as another user when the test runs as root
    ::chmod(t.c_str(), 0755);
  }
  ~Dir() {
    std::error_code ec;
    std::filesystem::remove_all(m_path, ec);
  }
  const std::filesystem::path& path() const { return m_path; }

private:
  std::filesystem::path m_path;
};

inline std::unique_ptr<Server> start_redis(const Dir& dir, const std::string& password = {},
                                           uint16_t port = 0) {
  std::string bin = remote_servers_detail::find_program({"/usr/bin/redis-server", "/usr/local/bin/redis-server"});
  if (bin.empty()) return nullptr;
  if (port == 0) port = free_port();
  std::vector<std::string> argv{bin,       "--port", std::to_string(port), "--bind", "127.0.0.1",
                                "--save",  "",       "--appendonly",       "no",     "--dir",
                                dir.path().string(), "--daemonize", "no"};
  if (!password.empty()) argv.insert(argv.end(), {"--requirepass", password});
  auto s = std::make_unique<Server>(argv, port);
  return s->up() ? std::move(s) : nullptr;
}

// nginx serving dir/www, with WebDAV PUT and DELETE under /hone/.
inline std::unique_ptr<Server> start_nginx(const Dir& dir, uint16_t port = 0) {
  std::string bin = remote_servers_detail::find_program({"/usr/sbin/nginx", "/usr/bin/nginx"});
  if (bin.empty()) return nullptr;
  if (port == 0) port = free_port();
  std::filesystem::path www = dir.path() / "www", body = dir.path() / "body";
  std::filesystem::create_directories(www / "hone");
  std::filesystem::create_directories(body);
  for (const auto& p : {www, www / "hone", body}) ::chmod(p.c_str(), 0777);
  std::ofstream(www / "page.html") << "<html>not an object</html>";
  std::filesystem::path conf = dir.path() / "nginx.conf";
  std::string d = dir.path().string();
  std::ofstream(conf) << "daemon off;\nworker_processes 1;\npid " << d << "/nginx.pid;\n"
                      << "error_log " << d << "/error.log;\n"
                      << "events { worker_connections 64; }\n"
                      << "http {\n  access_log off;\n  default_type application/octet-stream;\n"
                      << "  client_max_body_size 100m;\n"
                      << "  client_body_temp_path " << body.string() << ";\n"
                      << "  proxy_temp_path " << d << "/proxy;\n  fastcgi_temp_path " << d
                      << "/fastcgi;\n  uwsgi_temp_path " << d << "/uwsgi;\n  scgi_temp_path " << d
                      << "/scgi;\n"
                      << "  types { text/html html; }\n"
                      << "  server {\n    listen 127.0.0.1:" << port << ";\n    root " << www.string()
                      << ";\n    location /hone/ {\n      dav_methods PUT DELETE;\n"
                      << "      create_full_put_path on;\n      dav_access user:rw group:r all:r;\n"
                      << "    }\n  }\n}\n";
  auto s = std::make_unique<Server>(
      std::vector<std::string>{bin, "-c", conf.string(), "-p", d, "-e", d + "/error.log"}, port);
  return s->up() ? std::move(s) : nullptr;
}

// Accepts connections (the kernel's backlog) and never answers: a hung remote.
class Silent {
public:
  Silent() {
    m_fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(m_fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(m_fd, 16);
    socklen_t n = sizeof a;
    ::getsockname(m_fd, reinterpret_cast<sockaddr*>(&a), &n);
    m_port = ntohs(a.sin_port);
  }
  ~Silent() { ::close(m_fd); }
  uint16_t port() const { return m_port; }

private:
  int m_fd = -1;
  uint16_t m_port = 0;
};


} // namespace hone::test
