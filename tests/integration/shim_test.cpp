// The preload shim (libhone.so) in real processes: the test applications of tests/apps run on the
// emulated device with and without LD_PRELOAD=libhone.so, against an in-process test daemon
// (tests/support/test_server.*) on a real Unix socket.
//
// What is asserted is what the shim promises (DESIGN.md, "Interception (shim)", docs/protocol.md):
// the application's output is bit-identical with and without it; it reports each kernel under its
// KernelKey (the ImageHash of the image exactly as loaded, computed here independently, and the
// mangled entry name) with exact launch counts; it answers ImageRequest with the image bytes in a
// memfd; HONE_DISABLE=1 makes it invisible; and every way a daemon can fail leaves the application
// running exactly as without it, logged once.
//
// Nothing here sleeps and hopes: every wait is on a condition (a frame arriving, a process ending)
// with a deadline. The only fixed pauses are the ones a scenario is about (an application kept
// alive for a while against a broken daemon, to see that it neither hangs nor reconnects in a
// tight loop).
#include "test_server.hpp"
#include "workload.hpp"
#include "nvrtc_options.hpp"

#include "common/identity.hpp"
#include "common/protocol.hpp"
#include "cuda/fatbin.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <spawn.h>
#include <sstream>
#include <string>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using hone::ImageHash;
using hone::KernelKey;
using hone::test::Connection;
using hone::test::ServerLog;
using hone::test::ServerMode;
using hone::test::TestServer;
namespace proto = hone::proto;

const std::string k_apps_dir = HONE_TESTAPP_DIR;
const std::string k_shim = HONE_SHIM_LIBRARY;
const std::string k_emu_dir = HONE_EMU_LIBRARY_DIR;

std::string app_path(const std::string& name) {
  return k_apps_dir + "/" + name;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// --- processes -----------------------------------------------------------------------------------

// A directory for one test's files, removed with everything in it.
class TempDir {
public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "hone-shim-test-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    m_path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(m_path, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(m_path, ec);
  }
  const std::string& path() const { return m_path; }
  std::string file(const std::string& name) const { return m_path + "/" + name; }

private:
  std::string m_path;
};

// The environment a test application runs in: nothing inherited but PATH, so no HONE_* or
// LD_PRELOAD of the test's own environment leaks in.
struct Env {
  std::map<std::string, std::string> vars;

  Env& set(const std::string& k, const std::string& v) {
    vars[k] = v;
    return *this;
  }
  Env& unset(const std::string& k) {
    vars.erase(k);
    return *this;
  }
  std::vector<std::string> list() const {
    std::vector<std::string> out;
    for (const auto& [k, v] : vars) out.push_back(k + "=" + v);
    return out;
  }
};

// HONE_SHIM_TEST_PRELOAD replaces what LD_PRELOAD gets (the built libhone.so), e.g. to run these
// tests on a sanitizer build of the shim: "$(gcc -print-file-name=libasan.so) <asan build>/lib/libhone.so".
std::string preload() {
  const char* p = std::getenv("HONE_SHIM_TEST_PRELOAD");
  return p && *p ? p : k_shim;
}

// Without the shim: the emulated device only (and the sanitizers' settings, when the test has them).
Env plain_env() {
  Env e;
  e.set("PATH", "/usr/local/bin:/usr/bin:/bin");
  e.set("LD_LIBRARY_PATH", k_emu_dir);
  for (const char* v : {"ASAN_OPTIONS", "UBSAN_OPTIONS", "TSAN_OPTIONS", "LSAN_OPTIONS"})
    if (const char* value = std::getenv(v)) e.set(v, value);
  return e;
}

// With the shim, reporting to `socket` every 100 ms and timing 1 launch in 2.
Env shim_env(const std::string& socket) {
  Env e = plain_env();
  e.set("LD_PRELOAD", preload());
  e.set("HONE_SOCKET", socket);
  e.set("HONE_REPORT_MS", "100");
  e.set("HONE_SAMPLE_EVERY", "2");
  return e;
}

struct Outcome {
  pid_t pid = -1;
  int status = -1;       // exit code; 128 + signal when killed by one
  bool timed_out = false;
  std::string out, err;
  std::chrono::milliseconds elapsed{0};
};

// A child process with stdout and stderr in files, and optionally a pipe on its stdin.
class Process {
public:
  Process(const std::vector<std::string>& argv, const Env& env, const TempDir& dir, bool stdin_pipe = false) {
    static int counter = 0;
    int n = ++counter;
    std::signal(SIGPIPE, SIG_IGN); // a child that exits early must not take the test with it
    m_out = dir.file("out" + std::to_string(n));
    m_err = dir.file("err" + std::to_string(n));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    int pipe_fds[2] = {-1, -1};
    if (stdin_pipe) {
      if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
      posix_spawn_file_actions_adddup2(&fa, pipe_fds[0], 0);
      m_stdin = pipe_fds[1];
    } else {
      posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    }
    posix_spawn_file_actions_addopen(&fa, 1, m_out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&fa, 2, m_err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    std::vector<std::string> env_list = env.list();
    std::vector<char*> envp;
    for (auto& e : env_list) envp.push_back(e.data());
    envp.push_back(nullptr);
    m_start = std::chrono::steady_clock::now();
    int rc = posix_spawn(&m_pid, argv[0].c_str(), &fa, nullptr, args.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    if (pipe_fds[0] >= 0) ::close(pipe_fds[0]);
    if (rc != 0) throw std::runtime_error("posix_spawn " + argv[0] + ": " + std::strerror(rc));
  }
  ~Process() {
    close_stdin();
    if (!m_reaped) {
      ::kill(m_pid, SIGKILL);
      ::waitpid(m_pid, nullptr, 0);
    }
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return m_pid; }
  // Lets an app waiting on stdin (--pause-before-launch) go on.
  void write_stdin(const std::string& s) {
    if (m_stdin >= 0) [[maybe_unused]] ssize_t n = ::write(m_stdin, s.data(), s.size());
  }
  // EOF on the app's stdin (--wait-stdin: it tears down and exits).
  void close_stdin() {
    if (m_stdin >= 0) ::close(m_stdin);
    m_stdin = -1;
  }

  // Waits for the exit; a process still running at the deadline is killed and reported so.
  Outcome wait(std::chrono::milliseconds timeout = 30s) {
    Outcome o;
    o.pid = m_pid;
    auto deadline = m_start + timeout;
    int status = 0;
    for (;;) {
      pid_t r = ::waitpid(m_pid, &status, WNOHANG);
      if (r == m_pid) break;
      if (std::chrono::steady_clock::now() >= deadline) {
        o.timed_out = true;
        ::kill(m_pid, SIGKILL);
        ::waitpid(m_pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(2ms); // polling a condition (the exit), not a guess
    }
    m_reaped = true;
    o.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - m_start);
    o.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    o.out = read_file(m_out);
    o.err = read_file(m_err);
    return o;
  }

private:
  pid_t m_pid = -1;
  int m_stdin = -1;
  bool m_reaped = false;
  std::string m_out, m_err;
  std::chrono::steady_clock::time_point m_start;
};

Outcome run(const std::vector<std::string>& argv, const Env& env, const TempDir& dir,
            std::chrono::milliseconds timeout = 30s) {
  Process p(argv, env, dir);
  return p.wait(timeout);
}

std::string describe(const Outcome& o) {
  std::ostringstream s;
  s << "pid " << o.pid << ", status " << o.status << (o.timed_out ? " (timed out, killed)" : "")
    << ", " << o.elapsed.count() << " ms\n--- stdout\n" << o.out << "--- stderr\n" << o.err;
  return s.str();
}

// The shim's own stderr lines ("hone: <level>: ...").
std::vector<std::string> shim_lines(const std::string& err) {
  std::vector<std::string> lines;
  std::istringstream in(err);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("hone: ", 0) == 0) lines.push_back(line);
  return lines;
}

// stderr without the shim's lines.
std::string without_shim_lines(const std::string& err) {
  std::string out;
  std::istringstream in(err);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("hone: ", 0) != 0) out += line + "\n";
  return out;
}

// --- what the applications load ------------------------------------------------------------------

struct ExpectedImage {
  std::string bytes; // exactly what the app hands the driver (PTX: with its NUL)
  ImageHash hash;
  proto::ImageFormat format = proto::ImageFormat::unknown;
  bool source_known = false;
};

ExpectedImage ptx_image_of(std::string text) {
  ExpectedImage e;
  e.bytes = std::move(text);
  e.bytes.push_back('\0'); // cuModuleLoadData takes PTX as a C string: strlen + 1 bytes
  e.hash = ImageHash::of(e.bytes.data(), e.bytes.size());
  e.format = proto::ImageFormat::ptx;
  return e;
}

const ExpectedImage& workload_ptx() {
  static const ExpectedImage e = ptx_image_of(read_file(HONE_TESTAPP_PTX));
  return e;
}

const ExpectedImage& workload_fatbin() {
  static const ExpectedImage e = [] {
    ExpectedImage img;
    std::string file = read_file(HONE_TESTAPP_FATBIN);
    auto size = hone::cuda::image_size(file.data(), file.size());
    if (!size) throw std::runtime_error("workload.fatbin: " + size.error().message);
    img.bytes = file.substr(0, *size); // one container: header + fat size
    img.hash = ImageHash::of(img.bytes.data(), img.bytes.size());
    img.format = proto::ImageFormat::fatbin;
    return img;
  }();
  return e;
}

std::set<KernelKey> workload_keys(const ImageHash& image) {
  std::set<KernelKey> keys;
  for (const auto& k : testapp::k_kernels) keys.insert(KernelKey{image, k.entry});
  return keys;
}

// --- waiting on the server -----------------------------------------------------------------------

// The connections of `pid` are over: a goodbye arrived, or the connection closed.
bool finished(const ServerLog& log, pid_t pid) {
  auto conns = log.from_pid(pid);
  if (conns.empty()) return false;
  for (const Connection* c : conns)
    if (!c->goodbye && !c->closed) return false;
  return true;
}

// Every kernel of the workload announced by `pid`.
bool announced(const ServerLog& log, pid_t pid, size_t count = testapp::k_kernel_count) {
  for (const Connection* c : log.from_pid(pid))
    if (c->kernels.size() >= count) return true;
  return false;
}

std::string describe(const Connection& c) {
  std::ostringstream s;
  s << "connection " << c.id << " (peer pid " << c.peer_pid << "): hello "
    << (c.hello ? "pid " + std::to_string(c.hello->pid) : std::string("none")) << ", frames";
  for (auto t : c.frames) s << " " << proto::type_name(t);
  s << ", goodbye " << c.goodbye << ", closed " << c.closed;
  if (!c.protocol_error.empty()) s << ", protocol error: " << c.protocol_error;
  for (const auto& k : c.kernels) s << "\n  kernel " << k.id << " " << k.key.str();
  for (const auto& [key, st] : c.stats_by_key())
    s << "\n  stats " << key.entry << ": launches " << st.launches << ", sampled " << st.sampled
      << ", sampled_ns " << st.sampled_ns;
  return s.str();
}

std::string describe(const ServerLog& log) {
  std::string s = std::to_string(log.connections.size()) + " connection(s)";
  for (const auto& c : log.connections) s += "\n" + describe(c);
  return s;
}

// What a complete report of the workload looks like on `c`: one hello from `pid` naming `exe`,
// the three KernelKeys of `image` announced once each, the exact launch counts and last shapes.
// `sampling`: sampled launches > 0 with device time; else no sampling is checked.
void expect_workload_report(const Connection& c, pid_t pid, const std::string& exe,
                            const ExpectedImage& image, bool sampling) {
  SCOPED_TRACE(describe(c));
  ASSERT_TRUE(c.hello.has_value());
  EXPECT_EQ(c.hello_count, 1u);
  EXPECT_EQ(c.hello->pid, uint32_t(pid));
  EXPECT_EQ(c.peer_pid, pid);
  EXPECT_EQ(c.hello->kind, proto::ClientKind::shim);
  EXPECT_EQ(c.hello->uid, uint32_t(::getuid()));
  EXPECT_EQ(fs::weakly_canonical(c.hello->exe), fs::weakly_canonical(exe));
  EXPECT_TRUE(c.protocol_error.empty()) << c.protocol_error;
  EXPECT_TRUE(c.goodbye) << "no goodbye at exit";

  std::set<uint64_t> ids;
  std::set<KernelKey> keys;
  for (const auto& k : c.kernels) {
    EXPECT_TRUE(ids.insert(k.id).second) << "kernel id " << k.id << " announced twice";
    keys.insert(k.key);
    EXPECT_EQ(k.format, image.format) << k.key.str();
    EXPECT_EQ(k.image_size, image.bytes.size()) << k.key.str();
    EXPECT_EQ(k.source_known, image.source_known) << k.key.str();
  }
  EXPECT_EQ(keys, workload_keys(image.hash)) << "expected image " << image.hash.hex();

  std::string why;
  EXPECT_TRUE(c.counters_monotonic(&why)) << why;
  auto by_key = c.stats_by_key();
  for (const auto& spec : testapp::k_kernels) {
    SCOPED_TRACE(spec.entry);
    auto it = by_key.find(KernelKey{image.hash, spec.entry});
    ASSERT_NE(it, by_key.end()) << "no stats for " << spec.entry;
    const proto::KernelStats& s = it->second;
    EXPECT_EQ(s.launches, uint64_t(spec.launches));
    EXPECT_EQ(s.grid, (std::array<uint32_t, 3>{spec.grid[0], spec.grid[1], spec.grid[2]}));
    EXPECT_EQ(s.block, (std::array<uint32_t, 3>{spec.block[0], spec.block[1], spec.block[2]}));
    EXPECT_LE(s.sampled, s.launches);
    if (sampling) {
      EXPECT_GT(s.sampled, 0u) << "HONE_SAMPLE_EVERY=2 but no launch was timed";
      EXPECT_GT(s.sampled_ns, 0u);
    }
  }
  for (const auto& [key, s] : by_key)
    EXPECT_TRUE(workload_keys(image.hash).count(key)) << "stats for an unexpected kernel " << key.str();
}

TestServer::Options server_options(ServerMode mode, std::string socket_path = {},
                                   uint32_t report_interval_ms = 100) {
  TestServer::Options o;
  o.mode = mode;
  o.socket_path = std::move(socket_path);
  o.report_interval_ms = report_interval_ms;
  return o;
}

bool shim_built() {
  return std::getenv("HONE_SHIM_TEST_PRELOAD") != nullptr || fs::exists(k_shim);
}

#define REQUIRE_SHIM()                                                                             \
  do {                                                                                             \
    if (!shim_built()) FAIL() << k_shim << " is not built (cmake --build <build> --target hone_shim)"; \
  } while (0)

// --- the test server itself ----------------------------------------------------------------------

// A hand-written client: the test server must be right before it judges the shim.
class FakeClient {
public:
  explicit FakeClient(const std::string& path) {
    m_fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    if (::connect(m_fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
      throw std::runtime_error("connect " + path + ": " + std::strerror(errno));
    timeval tv{5, 0};
    ::setsockopt(m_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~FakeClient() { ::close(m_fd); }

  void send(const std::string& frame, int fd = -1) {
    iovec iov{const_cast<char*>(frame.data()), frame.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    if (fd >= 0) {
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
    }
    ASSERT_EQ(::sendmsg(m_fd, &msg, MSG_NOSIGNAL), ssize_t(frame.size()));
  }

  // The next frame; nullopt on EOF, timeout or a bad header.
  std::optional<std::pair<proto::FrameHeader, std::string>> receive() {
    while (true) {
      if (m_in.size() >= proto::k_header_size) {
        auto h = proto::FrameHeader::decode(m_in.data(), nullptr);
        if (!h) return std::nullopt;
        if (m_in.size() >= proto::k_header_size + h->length) {
          std::string payload = m_in.substr(proto::k_header_size, h->length);
          m_in.erase(0, proto::k_header_size + h->length);
          return std::make_pair(*h, payload);
        }
      }
      char buf[4096];
      ssize_t n = ::recv(m_fd, buf, sizeof buf, 0);
      if (n <= 0) return std::nullopt;
      m_in.append(buf, size_t(n));
    }
  }
  // Raw bytes until EOF or timeout.
  std::string receive_raw(size_t at_least) {
    std::string out = m_in;
    while (out.size() < at_least) {
      char buf[4096];
      ssize_t n = ::recv(m_fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      out.append(buf, size_t(n));
    }
    return out;
  }
  bool at_eof() {
    char c;
    return ::recv(m_fd, &c, 1, 0) == 0;
  }

private:
  int m_fd = -1;
  std::string m_in;
};

proto::Hello fake_hello() {
  proto::Hello h;
  h.pid = 4242;
  h.uid = uint32_t(::getuid());
  h.exe = "/fake/exe";
  return h;
}

TEST(TestServerSelf, RecordsAFakeClientsSession) {
  TestServer server;
  FakeClient client(server.socket_path());
  client.send(proto::frame_of(proto::MsgType::hello, 1, fake_hello()));
  auto ack = client.receive();
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->first.type, proto::MsgType::hello_ack);
  EXPECT_EQ(ack->first.seq, 1u);
  proto::HelloAck a;
  hone::wire::Reader r(ack->second);
  ASSERT_TRUE(proto::decode(r, a));
  EXPECT_EQ(a.report_interval_ms, 100u);

  ImageHash h = ImageHash::of("abc", 4);
  proto::Kernels ks;
  ks.kernels.push_back({7, KernelKey{h, "k"}, proto::ImageFormat::ptx, 4, false});
  client.send(proto::frame_of(proto::MsgType::kernels, 2, ks));
  proto::Stats st;
  st.kernels.push_back({7, 3, 0, 0, 1, 500, {1, 2, 3}, {4, 5, 6}});
  client.send(proto::frame_of(proto::MsgType::stats, 3, st));
  st.kernels[0].launches = 5;
  client.send(proto::frame_of(proto::MsgType::stats, 4, st));

  // An Image reply with a memfd.
  int memfd = ::memfd_create("fake-image", MFD_CLOEXEC);
  ASSERT_EQ(::write(memfd, "abc", 4), 4);
  proto::Image img;
  img.image = h;
  img.available = true;
  img.format = proto::ImageFormat::ptx;
  img.size = 4;
  client.send(proto::frame_of(proto::MsgType::image, 9, img, proto::k_flag_fd), memfd);
  ::close(memfd);
  client.send(proto::frame(proto::MsgType::goodbye, 5, hone::wire::Writer{}));

  ASSERT_TRUE(server.wait_until([](const ServerLog& l) { return finished(l, 4242); }, 5s))
      << describe(server.snapshot());
  ServerLog log = server.snapshot();
  auto conns = log.from_pid(4242);
  ASSERT_EQ(conns.size(), 1u);
  const Connection& c = *conns[0];
  EXPECT_EQ(c.peer_pid, ::getpid());
  EXPECT_FALSE(c.probe); // a hello makes it a client, whoever the peer is
  ASSERT_EQ(c.kernels.size(), 1u);
  EXPECT_EQ(c.kernels[0].key, (KernelKey{h, "k"}));
  EXPECT_EQ(c.latest_stats().at(7).launches, 5u);
  EXPECT_TRUE(c.counters_monotonic());
  ASSERT_EQ(c.images.size(), 1u);
  EXPECT_TRUE(c.images[0].had_fd);
  EXPECT_EQ(c.images[0].seq, 9u);
  EXPECT_EQ(c.images[0].bytes, std::string("abc", 4));
  EXPECT_TRUE(c.goodbye);
}

TEST(TestServerSelf, FailureModesAnswerAsDocumented) {
  {
    TestServer server(server_options(ServerMode::bad_version));
    FakeClient client(server.socket_path());
    client.send(proto::frame_of(proto::MsgType::hello, 1, fake_hello()));
    auto reply = client.receive();
    ASSERT_TRUE(reply.has_value());
    EXPECT_EQ(reply->first.type, proto::MsgType::error);
    proto::ErrorMsg e;
    hone::wire::Reader r(reply->second);
    ASSERT_TRUE(proto::decode(r, e));
    EXPECT_EQ(e.code, proto::k_err_version);
    EXPECT_TRUE(client.at_eof());
  }
  {
    TestServer server(server_options(ServerMode::garbage));
    FakeClient client(server.socket_path());
    client.send(proto::frame_of(proto::MsgType::hello, 1, fake_hello()));
    std::string bytes = client.receive_raw(64);
    ASSERT_GE(bytes.size(), proto::k_header_size);
    EXPECT_FALSE(proto::FrameHeader::decode(bytes.data(), nullptr).has_value());
  }
  {
    TestServer server(server_options(ServerMode::close_after_hello));
    FakeClient client(server.socket_path());
    client.send(proto::frame_of(proto::MsgType::hello, 1, fake_hello()));
    auto ack = client.receive();
    ASSERT_TRUE(ack.has_value());
    EXPECT_EQ(ack->first.type, proto::MsgType::hello_ack);
    EXPECT_TRUE(client.at_eof());
  }
  {
    TestServer server(server_options(ServerMode::stall));
    FakeClient client(server.socket_path());
    client.send(proto::frame_of(proto::MsgType::hello, 1, fake_hello()));
    ASSERT_TRUE(server.sync());
    ASSERT_TRUE(server.sync()); // the server went round its loop at least twice since the hello
    ServerLog log = server.snapshot();
    EXPECT_EQ(log.connections.size(), 3u);
    for (const auto& c : log.connections) EXPECT_TRUE(c.frames.empty()); // never read
  }
  {
    // sync() makes "no client connected" a fact, not a guess.
    TestServer server;
    ASSERT_TRUE(server.sync());
    EXPECT_EQ(server.snapshot().clients(), 0u);
    EXPECT_EQ(server.snapshot().probes, 1u);
  }
}

// --- the shim with each way of reaching the driver ------------------------------------------------

struct AppCase {
  const char* name;                // for the test name
  const char* binary;
  std::vector<std::string> args;
  enum Image { ptx, fatbin, nvrtc } image = ptx;
};

void PrintTo(const AppCase& c, std::ostream* os) { *os << c.name; }

const AppCase k_app_cases[] = {
    {"linked", "hone-testapp-linked", {}},
    {"dlopen", "hone-testapp-dlopen", {}},
    {"dlopen_fatbin", "hone-testapp-dlopen", {"--fatbin"}, AppCase::fatbin},
    {"procaddr", "hone-testapp-procaddr", {}},
    {"procaddr_library", "hone-testapp-procaddr", {"--library"}},
    {"nvrtc", "hone-testapp-nvrtc", {}, AppCase::nvrtc},
};

class ShimApp : public ::testing::TestWithParam<AppCase> {
protected:
  // argv for a run; nvrtc dumps its PTX into `dump`.
  std::vector<std::string> argv(const std::string& dump, std::vector<std::string> extra = {}) const {
    const AppCase& c = GetParam();
    std::vector<std::string> a{app_path(c.binary)};
    a.insert(a.end(), c.args.begin(), c.args.end());
    if (c.image == AppCase::nvrtc) {
      a.push_back("--dump-ptx");
      a.push_back(dump);
    }
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  ExpectedImage image(const std::string& dump) const {
    switch (GetParam().image) {
    case AppCase::ptx: return workload_ptx();
    case AppCase::fatbin: return workload_fatbin();
    case AppCase::nvrtc: {
      ExpectedImage e = ptx_image_of(read_file(dump));
      e.source_known = true;
      return e;
    }
    }
    return {};
  }

  TempDir m_dir;
};

// The application as it is, with the shim and a daemon: identical output, and a report naming each
// kernel with its exact launch count, sent before the process ended.
TEST_P(ShimApp, ReportsExactCountsWithoutChangingOutput) {
  REQUIRE_SHIM();
  Outcome base = run(argv(m_dir.file("base.ptx")), plain_env(), m_dir);
  ASSERT_EQ(base.status, 0) << describe(base);
  ASSERT_NE(base.out.find("workload: check ok"), std::string::npos) << describe(base);

  TestServer server;
  Outcome with = run(argv(m_dir.file("shim.ptx")), shim_env(server.socket_path()), m_dir);
  EXPECT_EQ(with.status, 0) << describe(with);
  EXPECT_EQ(with.out, base.out);
  EXPECT_EQ(with.err, base.err) << "the shim wrote to stderr with HONE_LOG unset";
  if (GetParam().image == AppCase::nvrtc) {
    EXPECT_EQ(read_file(m_dir.file("shim.ptx")), read_file(m_dir.file("base.ptx")));
  }

  ASSERT_TRUE(server.wait_until([&](const ServerLog& l) { return finished(l, with.pid); }, 5s))
      << "no finished session from pid " << with.pid << "; " << describe(server.snapshot());
  ServerLog log = server.snapshot();
  auto conns = log.from_pid(with.pid);
  ASSERT_EQ(conns.size(), 1u) << describe(log);
  expect_workload_report(*conns[0], with.pid, app_path(GetParam().binary), image(m_dir.file("shim.ptx")),
                         /*sampling=*/true);
}

// Once the shim has had its first exchange with the daemon (the kernels were announced), every
// launch is counted and, with HONE_SAMPLE_EVERY=1, every launch is timed; the report while the
// process still runs already has the final counts (HONE_REPORT_MS=100 reports periodically).
TEST_P(ShimApp, TimesEveryLaunchWithSampleEveryOne) {
  REQUIRE_SHIM();
  TestServer server;
  Env env = shim_env(server.socket_path());
  env.set("HONE_SAMPLE_EVERY", "1");
  Process p(argv(m_dir.file("shim.ptx"), {"--pause-before-launch", "--wait-stdin"}), env, m_dir, true);
  ASSERT_TRUE(server.wait_until([&](const ServerLog& l) { return announced(l, p.pid()); }, 10s))
      << describe(server.snapshot());
  p.write_stdin("\n");
  auto all_counted = [&](const ServerLog& l) {
    for (const Connection* c : l.from_pid(p.pid())) {
      auto by_key = c->stats_by_key();
      uint64_t launches = 0, sampled = 0;
      for (const auto& [k, s] : by_key) {
        launches += s.launches;
        sampled += s.sampled;
      }
      if (launches == 15 && sampled == 15) return true;
    }
    return false;
  };
  bool counted = server.wait_until(all_counted, 5s);
  EXPECT_TRUE(counted) << "the periodic report never had 15 launches, 15 timed; " << describe(server.snapshot());
  p.close_stdin();
  Outcome o = p.wait();
  EXPECT_EQ(o.status, 0) << describe(o);
  EXPECT_NE(o.out.find("workload: check ok"), std::string::npos) << describe(o);
  ASSERT_TRUE(server.wait_until([&](const ServerLog& l) { return finished(l, o.pid); }, 5s));
  ServerLog log = server.snapshot();
  auto conns = log.from_pid(o.pid);
  ASSERT_EQ(conns.size(), 1u);
  for (const auto& [key, s] : conns[0]->stats_by_key()) {
    EXPECT_EQ(s.sampled, s.launches) << key.str();
    EXPECT_GT(s.sampled_ns, 0u) << key.str();
  }
}

// ImageRequest: the shim answers with the image's bytes, exactly as loaded, in a sealed memfd;
// and with available=false (no descriptor) for an image it never saw.
TEST_P(ShimApp, AnswersImageRequestsWithTheLoadedBytes) {
  REQUIRE_SHIM();
  TestServer server;
  Process p(argv(m_dir.file("shim.ptx"), {"--wait-stdin"}), shim_env(server.socket_path()), m_dir, true);
  ASSERT_TRUE(server.wait_until([&](const ServerLog& l) { return announced(l, p.pid()); }, 10s))
      << describe(server.snapshot());
  ServerLog log = server.snapshot();
  const Connection& c = *log.from_pid(p.pid()).at(0);
  ExpectedImage img = image(m_dir.file("shim.ptx"));
  ASSERT_EQ(c.kernels.at(0).key.image, img.hash) << describe(c);
  ImageHash unknown = ImageHash::of("no such image", 13);
  ASSERT_TRUE(server.request_image(c.id, img.hash, 501));
  ASSERT_TRUE(server.request_image(c.id, unknown, 502));
  bool answered = server.wait_until(
      [&](const ServerLog& l) {
        for (const Connection* conn : l.from_pid(p.pid()))
          if (conn->images.size() >= 2) return true;
        return false;
      },
      10s);
  p.close_stdin();
  Outcome o = p.wait();
  EXPECT_EQ(o.status, 0) << describe(o);
  ASSERT_TRUE(answered) << describe(server.snapshot());
  log = server.snapshot();
  const Connection& after = *log.from_pid(o.pid).at(0);
  ASSERT_EQ(after.images.size(), 2u);
  for (const auto& got : after.images) {
    SCOPED_TRACE("seq " + std::to_string(got.seq));
    if (got.seq == 501) {
      EXPECT_EQ(got.message.image, img.hash);
      EXPECT_TRUE(got.message.available);
      EXPECT_TRUE(got.had_fd);
      EXPECT_EQ(got.message.format, img.format);
      EXPECT_EQ(got.message.size, img.bytes.size());
      EXPECT_EQ(got.bytes.size(), img.bytes.size());
      EXPECT_TRUE(got.bytes == img.bytes) << "the memfd does not hold the image as loaded";
      EXPECT_EQ(ImageHash::of(got.bytes.data(), got.bytes.size()), img.hash);
      EXPECT_TRUE(got.seals & F_SEAL_WRITE) << "memfd not sealed against writes";
      if (GetParam().image == AppCase::nvrtc) {
        ASSERT_TRUE(got.message.source.has_value()) << "NVRTC module without its source";
        const proto::SourceInfo& s = *got.message.source;
        EXPECT_EQ(s.name, testapp::k_nvrtc_program_name);
        EXPECT_EQ(s.source, read_file(std::string(HONE_TESTAPP_SOURCE_DIR) + "/workload.cu"));
        ASSERT_EQ(s.headers.size(), 1u);
        EXPECT_EQ(s.headers[0].first, testapp::k_nvrtc_header_name);
        EXPECT_EQ(s.headers[0].second, read_file(std::string(HONE_TESTAPP_SOURCE_DIR) + "/workload_params.h"));
        EXPECT_EQ(s.options, std::vector<std::string>(testapp::k_nvrtc_options,
                                                      testapp::k_nvrtc_options + testapp::k_nvrtc_option_count));
      } else {
        EXPECT_FALSE(got.message.source.has_value());
      }
    } else {
      EXPECT_EQ(got.seq, 502u);
      EXPECT_EQ(got.message.image, unknown);
      EXPECT_FALSE(got.message.available);
      EXPECT_FALSE(got.had_fd);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Apps, ShimApp, ::testing::ValuesIn(k_app_cases),
                         [](const auto& info) { return std::string(info.param.name); });

// --- settings ------------------------------------------------------------------------------------

class ShimSettings : public ::testing::Test {
protected:
  std::vector<std::string> linked(std::vector<std::string> extra = {}) const {
    std::vector<std::string> a{app_path("hone-testapp-linked")};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  TempDir m_dir;
};

// HONE_DISABLE=1: pure pass-through; nothing connects, nothing is written.
TEST_F(ShimSettings, DisabledIsInvisible) {
  REQUIRE_SHIM();
  for (const char* app : {"hone-testapp-linked", "hone-testapp-procaddr", "hone-testapp-dlopen"}) {
    SCOPED_TRACE(app);
    TestServer server;
    Env env = shim_env(server.socket_path());
    env.set("HONE_DISABLE", "1");
    env.set("HONE_LOG", "info");
    Outcome plain = run({app_path(app)}, plain_env(), m_dir);
    ASSERT_EQ(plain.status, 0) << describe(plain);
    Outcome off = run({app_path(app)}, env, m_dir);
    EXPECT_EQ(off.status, 0) << describe(off);
    EXPECT_EQ(off.out, plain.out);
    EXPECT_EQ(off.err, plain.err);
    ASSERT_TRUE(server.sync());
    EXPECT_EQ(server.snapshot().clients(), 0u) << describe(server.snapshot());
  }
}

// HONE_SAMPLE_EVERY=0: launches are counted, none is timed.
TEST_F(ShimSettings, SampleEveryZeroTimesNothing) {
  REQUIRE_SHIM();
  TestServer server;
  Env env = shim_env(server.socket_path());
  env.set("HONE_SAMPLE_EVERY", "0");
  Process p(linked({"--pause-before-launch"}), env, m_dir, true);
  ASSERT_TRUE(server.wait_until([&](const ServerLog& l) { return announced(l, p.pid()); }, 10s))
      << describe(server.snapshot());
  p.write_stdin("\n");
  p.close_stdin();
  Outcome o = p.wait();
  ASSERT_EQ(o.status, 0) << describe(o);
  ASSERT_TRUE(server.wait_until([&](const ServerLog& l) { return finished(l, o.pid); }, 5s));
  ServerLog log = server.snapshot();
  auto conns = log.from_pid(o.pid);
  ASSERT_EQ(conns.size(), 1u);
  auto by_key = conns[0]->stats_by_key();
  EXPECT_EQ(by_key.size(), 3u) << describe(*conns[0]);
  for (const auto& [key, s] : by_key) {
    EXPECT_GT(s.launches, 0u) << key.str();
    EXPECT_EQ(s.sampled, 0u) << key.str();
    EXPECT_EQ(s.sampled_ns, 0u) << key.str();
  }
}

// HONE_REPORT_MS overrides the daemon's interval: a daemon asking for one report a minute still
// gets launches made after the first report within a fraction of a second. Without the override
// the daemon's interval holds (nothing more for as long as the check waits).
TEST_F(ShimSettings, ReportIntervalFromEnvironmentOverridesTheDaemons) {
  REQUIRE_SHIM();
  for (bool override_interval : {true, false}) {
    SCOPED_TRACE(override_interval ? "HONE_REPORT_MS=100, daemon 60 s" : "daemon 60 s");
    TestServer server(server_options(ServerMode::normal, {}, 60000));
    Env env = shim_env(server.socket_path());
    if (!override_interval) env.unset("HONE_REPORT_MS");
    Process p(linked({"--pause-before-launch", "--wait-stdin"}), env, m_dir, true);
    ASSERT_TRUE(server.wait_until([&](const ServerLog& l) { return announced(l, p.pid()); }, 10s))
        << describe(server.snapshot());
    p.write_stdin("\n");
    auto counted = [&](const ServerLog& l) {
      for (const Connection* c : l.from_pid(p.pid()))
        if (!c->stats.empty()) return true;
      return false;
    };
    bool reported = server.wait_until(counted, override_interval ? 5000ms : 1500ms);
    EXPECT_EQ(reported, override_interval) << describe(server.snapshot());
    p.close_stdin();
    Outcome o = p.wait();
    EXPECT_EQ(o.status, 0) << describe(o);
  }
}

// The runtime API on the emulated device stops at its first call (the runtime needs the driver's
// private export tables); with the shim it must stop in exactly the same way, and the shim must
// have been reached through the runtime's dlsym/cuGetProcAddress (its debug line says it started
// observing: only a hooked name looked up through dlsym or a hooked call does that here).
TEST_F(ShimSettings, RuntimeApiProgramBehavesTheSame) {
  REQUIRE_SHIM();
  Outcome base = run({HONE_TESTAPP_RUNTIME}, plain_env(), m_dir);
  TestServer server;
  Env env = shim_env(server.socket_path());
  env.set("HONE_LOG", "debug");
  Outcome with = run({HONE_TESTAPP_RUNTIME}, env, m_dir);
  EXPECT_EQ(with.status, base.status) << describe(with);
  EXPECT_EQ(with.out, base.out);
  EXPECT_EQ(without_shim_lines(with.err), base.err);
  auto lines = shim_lines(with.err);
  bool observing = std::any_of(lines.begin(), lines.end(), [](const std::string& l) {
    return l.find("observing this process") != std::string::npos;
  });
  EXPECT_TRUE(observing) << "the shim never saw the runtime's driver lookups\n" << with.err;
  RecordProperty("runtime_app_output", base.out);
}

// The shim's dlsym override must keep RTLD_NEXT relative to its real caller: a library that wraps
// another through dlsym(RTLD_NEXT) still finds the wrapped definition, not itself.
TEST_F(ShimSettings, DlsymKeepsRtldNextMeaning) {
  REQUIRE_SHIM();
  Outcome base = run({app_path("hone-testapp-rtld-next")}, plain_env(), m_dir);
  ASSERT_EQ(base.out, "value 43\n") << describe(base);
  TestServer server;
  Outcome with = run({app_path("hone-testapp-rtld-next")}, shim_env(server.socket_path()), m_dir);
  EXPECT_EQ(with.status, 0) << describe(with);
  EXPECT_EQ(with.out, base.out);
}

// A daemon that refuses the hello sends an error and closes (docs/protocol.md, "Session"). The
// shim must read the error before it treats the close: it logs the daemon's reason, and after a
// version refusal it waits 60 s before trying again (one connection while the app runs 2.5 s).
TEST_F(ShimSettings, VersionRefusalIsReadBeforeTheClose) {
  REQUIRE_SHIM();
  TestServer server(server_options(ServerMode::bad_version));
  Env env = shim_env(server.socket_path());
  env.set("HONE_LOG", "info");
  Process p(linked({"--wait-stdin"}), env, m_dir, true);
  std::this_thread::sleep_for(2500ms); // the scenario: an app that runs past the 1 s first retry
  p.close_stdin();
  Outcome o = p.wait();
  EXPECT_EQ(o.status, 0) << describe(o);
  ASSERT_TRUE(server.sync());
  ServerLog log = server.snapshot();
  EXPECT_EQ(log.clients(), 1u) << "retried within 2.5 s of a version refusal; " << describe(log);
  EXPECT_NE(o.err.find("no common protocol version"), std::string::npos)
      << "the daemon's reason was not logged:\n" << o.err;
}

// The daemon restarts: the first one dies when the first report arrives, a new one listens at the
// same path. The shim reconnects (after its 1 s backoff), announces its kernels again on the new
// session, and its cumulative counters reach the new daemon intact.
TEST_F(ShimSettings, ReconnectsAndReannouncesAfterADaemonRestart) {
  REQUIRE_SHIM();
  std::string socket = m_dir.file("hone.sock");
  auto first = std::make_unique<TestServer>(server_options(ServerMode::close_after_report, socket));
  Process p(linked({"--wait-stdin"}), shim_env(socket), m_dir, true);
  bool dropped = first->wait_until(
      [&](const ServerLog& l) {
        for (const Connection* c : l.from_pid(p.pid()))
          if (c->closed && !c->kernels.empty()) return true;
        return false;
      },
      10s);
  ASSERT_TRUE(dropped) << describe(first->snapshot());
  first.reset();
  TestServer second(server_options(ServerMode::normal, socket));
  bool reported = second.wait_until(
      [&](const ServerLog& l) {
        for (const Connection* c : l.from_pid(p.pid()))
          if (c->kernels.size() >= 3 && !c->stats.empty()) return true;
        return false;
      },
      10s);
  p.close_stdin();
  Outcome o = p.wait();
  EXPECT_EQ(o.status, 0) << describe(o);
  ASSERT_TRUE(reported) << "no session with the kernels re-announced; " << describe(second.snapshot());
  ASSERT_TRUE(second.wait_until([&](const ServerLog& l) { return finished(l, o.pid); }, 5s));
  ServerLog log = second.snapshot();
  auto conns = log.from_pid(o.pid);
  ASSERT_EQ(conns.size(), 1u) << describe(log);
  expect_workload_report(*conns[0], o.pid, app_path("hone-testapp-linked"), workload_ptx(),
                         /*sampling=*/false);
}

// A daemon under load answers the hello late; an application that is done before the answer
// still gets its final report out within the shim's exit budget (docs: best effort, ~200 ms).
TEST_F(ShimSettings, FinalReportWaitsForAHandshakeInProgress) {
  REQUIRE_SHIM();
  TestServer::Options opts = server_options(ServerMode::normal);
  opts.ack_delay_ms = 100;
  TestServer server(opts);
  Outcome base = run(linked(), plain_env(), m_dir);
  Outcome o = run(linked(), shim_env(server.socket_path()), m_dir);
  EXPECT_EQ(o.status, 0) << describe(o);
  EXPECT_EQ(o.out, base.out);
  EXPECT_LT(o.elapsed, base.elapsed + 1s) << describe(o);
  bool done = server.wait_until([&](const ServerLog& l) { return finished(l, o.pid); }, 5s);
  ServerLog log = server.snapshot();
  ASSERT_TRUE(done) << describe(log);
  auto conns = log.from_pid(o.pid);
  ASSERT_EQ(conns.size(), 1u) << describe(log);
  EXPECT_TRUE(conns[0]->goodbye) << "the process exited while the hello was unanswered and "
                                    "reported nothing: "
                                 << describe(*conns[0]);
  EXPECT_EQ(conns[0]->kernels.size(), 3u) << describe(*conns[0]);
}

// --- many kernels, large reports -----------------------------------------------------------------

std::vector<std::string> many_argv(int kernels = 2000, int rounds = 10) {
  return {app_path("hone-testapp-many"), "--kernels", std::to_string(kernels), "--rounds",
          std::to_string(rounds), "--pause-ms", "100"};
}

// 2000 kernels in one module, 10 launches each over a second: every kernel is announced once with
// its exact count (the reports are ~100 KB each, more than a socket buffer holds at once).
// --- HONE_TRACE ------------------------------------------------------------------------------------

// The trace lines of a run ("hone: trace: ..."), and whether each appears once.
std::vector<std::string> trace_lines(const std::string& err) {
  std::vector<std::string> lines;
  for (const auto& l : shim_lines(err))
    if (l.rfind("hone: trace: ", 0) == 0) lines.push_back(l.substr(13));
  return lines;
}

bool has_line(const std::vector<std::string>& lines, const std::string& line) {
  return std::find(lines.begin(), lines.end(), line) != lines.end();
}

// HONE_TRACE=1 names every driver entry point the application calls, once, with how it found it
// and the version it asked for; the application's results are what they are without it.
TEST(ShimTrace, NamesEachEntryPointOnceWithTheVersionAskedFor) {
  REQUIRE_SHIM();
  TempDir dir;
  struct Case {
    std::vector<std::string> argv;
    std::vector<std::string> expected; // lines that must be there
  };
  const std::string rt = HONE_TESTAPP_RUNTIME_SHARED;
  const Case cases[] = {
      {{app_path("hone-testapp-procaddr")},
       {"cuGetProcAddress_v2 (dlsym)",
        "cuInit (cuGetProcAddress_v2 \"cuInit\" version 12000, default stream)",
        "cuLaunchKernel_ptsz (cuGetProcAddress_v2 \"cuLaunchKernel\" version 12000, per-thread "
        "default stream)",
        "cuMemAlloc_v2 (cuGetProcAddress_v2 \"cuMemAlloc\" version 12000, default stream)"}},
      {{app_path("hone-testapp-procaddr"), "--library"},
       {"cuLibraryLoadData (cuGetProcAddress_v2 \"cuLibraryLoadData\" version 12000, default "
        "stream)"}},
      {{app_path("hone-testapp-dlopen")}, {"cuLaunchKernel (dlsym)", "cuMemAlloc_v2 (dlsym)"}},
      {{app_path("hone-testapp-linked")}, {"cuLaunchKernel (linked)", "cuModuleGetFunction (linked)"}},
      // hone's runtime for the emulated device: every entry point through cuGetProcAddress_v2 at
      // the version of its typedef.
      {{rt},
       {"cuGetProcAddress_v2 (dlsym)",
        "cuLibraryLoadData (cuGetProcAddress_v2 \"cuLibraryLoadData\" version 12000, default "
        "stream)",
        "cuLaunchKernel (cuGetProcAddress_v2 \"cuLaunchKernel\" version 4000, default stream)",
        "cuMemAlloc_v2 (cuGetProcAddress_v2 \"cuMemAlloc\" version 3020, default stream)"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.argv.back());
    Outcome base = run(c.argv, plain_env(), dir);
    Env env = shim_env(dir.path() + "/no-daemon.sock");
    Outcome quiet = run(c.argv, env, dir);
    EXPECT_TRUE(trace_lines(quiet.err).empty()) << quiet.err; // off unless asked for
    env.set("HONE_TRACE", "1");
    Outcome traced = run(c.argv, env, dir);
    ASSERT_EQ(traced.status, base.status) << describe(traced);
    EXPECT_EQ(traced.out, base.out);
    auto lines = trace_lines(traced.err);
    EXPECT_FALSE(lines.empty());
    std::set<std::string> unique(lines.begin(), lines.end());
    EXPECT_EQ(unique.size(), lines.size()) << traced.err;
    for (const auto& want : c.expected) EXPECT_TRUE(has_line(lines, want)) << want << "\n" << traced.err;
  }
}

// The thunks hand every argument through untouched: integer and vector registers, the stack, and
// a variadic call's vector-register count.
TEST(ShimTrace, ThunksPassEveryArgumentThrough) {
  REQUIRE_SHIM();
  TempDir dir;
  Env env = shim_env(dir.path() + "/no-daemon.sock");
  env.set("HONE_TRACE", "1");
  Outcome o = run({app_path("hone-testapp-traceargs")}, env, dir);
  EXPECT_EQ(o.status, 0) << describe(o);
  EXPECT_EQ(o.out, "args ok\n") << describe(o);
  auto lines = trace_lines(o.err);
  EXPECT_TRUE(has_line(lines, "cuTestManyArgs (dlsym)")) << o.err;
  EXPECT_TRUE(has_line(lines, "cuTestVariadic (dlsym)")) << o.err;
}

TEST(ShimLarge, ThousandsOfKernelsAreCountedExactly) {
  REQUIRE_SHIM();
  TempDir dir;
  Outcome base = run(many_argv(), plain_env(), dir, 120s);
  ASSERT_EQ(base.status, 0) << describe(base);
  TestServer server;
  Outcome o = run(many_argv(), shim_env(server.socket_path()), dir);
  EXPECT_EQ(o.status, 0) << describe(o);
  EXPECT_EQ(o.out, base.out);
  ASSERT_TRUE(server.wait_until([&](const ServerLog& l) { return finished(l, o.pid); }, 10s));
  ServerLog log = server.snapshot();
  auto conns = log.from_pid(o.pid);
  ASSERT_EQ(conns.size(), 1u);
  const Connection& c = *conns[0];
  EXPECT_TRUE(c.goodbye);
  EXPECT_TRUE(c.protocol_error.empty()) << c.protocol_error;
  ASSERT_EQ(c.kernels.size(), 2000u);
  std::string why;
  EXPECT_TRUE(c.counters_monotonic(&why)) << why;
  auto by_key = c.stats_by_key();
  ASSERT_EQ(by_key.size(), 2000u);
  size_t with_samples = 0;
  uint64_t sampled = 0;
  for (const auto& [key, st] : by_key) {
    EXPECT_EQ(st.launches, 10u) << key.str();
    EXPECT_TRUE(key.entry.rfind("hone_many_", 0) == 0) << key.str();
    with_samples += st.sampled > 0;
    sampled += st.sampled;
  }
  // HONE_SAMPLE_EVERY=2: 5 of each kernel's 10 launches are due for timing. Reported, not
  // asserted: how many the shim times depends on its event pool (see the report).
  std::printf("note: %zu of 2000 kernels have timed launches, %llu timed of 20000 launches "
              "(HONE_SAMPLE_EVERY=2), %zu stats frames\n",
              with_samples, static_cast<unsigned long long>(sampled), c.stats.size());
  RecordProperty("kernels_with_samples", int(with_samples));
}

// A daemon that answers the hello and then never reads again: the shim's reports pile up
// (~220 KB every 100 ms), the socket fills, the shim's 1 MiB of pending output is reached, and the
// application still runs at its own pace, to the same output, with one log line about it at most.
TEST(ShimLarge, DaemonThatStopsReadingNeverSlowsTheApplication) {
  REQUIRE_SHIM();
  TempDir dir;
  const std::vector<std::string> argv = many_argv(4000, 12);
  // The reference run may compile the 4000-entry module with ptxas for the cost model (~13 s on
  // an idle machine, once per machine: the emulated device caches the report).
  Outcome base = run(argv, plain_env(), dir, 120s);
  ASSERT_EQ(base.status, 0) << describe(base);
  TestServer server(server_options(ServerMode::stall_after_hello, dir.file("hone.sock")));
  Env env = shim_env(server.socket_path());
  env.set("HONE_LOG", "info");
  Outcome o = run(argv, env, dir, 60s);
  ASSERT_FALSE(o.timed_out) << describe(o);
  EXPECT_EQ(o.status, 0) << describe(o);
  EXPECT_EQ(o.out, base.out);
  EXPECT_LT(o.elapsed, base.elapsed + 2s) << "base " << base.elapsed.count() << " ms\n" << describe(o);
  auto lines = shim_lines(o.err);
  EXPECT_LE(lines.size(), 2u) << o.err;
  ASSERT_TRUE(server.sync());
  EXPECT_EQ(server.snapshot().clients(), 1u) << describe(server.snapshot());
  RecordProperty("shim_log", o.err);
  std::printf("note: base %lld ms, with a stalled daemon %lld ms; shim log:\n%s",
              static_cast<long long>(base.elapsed.count()), static_cast<long long>(o.elapsed.count()),
              o.err.c_str());
}

// --- fail-open -----------------------------------------------------------------------------------

enum class Failure {
  absent,             // no socket file
  not_a_socket,       // a regular file at the socket path
  unreachable,        // permission denied (root: a path whose parent is a regular file)
  close_after_hello,  // the daemon dies right after the handshake
  close_after_report, // the daemon dies when the first report arrives
  garbage,            // the daemon answers hello with random bytes
  bad_version,        // the daemon refuses the protocol version
  stall,              // the daemon accepts and never reads nor answers
};

const char* name_of(Failure f) {
  switch (f) {
  case Failure::absent: return "absent";
  case Failure::not_a_socket: return "not_a_socket";
  case Failure::unreachable: return "unreachable";
  case Failure::close_after_hello: return "close_after_hello";
  case Failure::close_after_report: return "close_after_report";
  case Failure::garbage: return "garbage";
  case Failure::bad_version: return "bad_version";
  case Failure::stall: return "stall";
  }
  return "?";
}

class ShimFailOpen : public ::testing::TestWithParam<Failure> {
protected:
  TempDir m_dir;
};

// The application runs to the same output and exit status, well within the deadline, whatever the
// daemon does; the shim logs each kind of failure at most once (HONE_LOG=info) and reconnects with
// backoff (at least 1 s between attempts: at most 3 connections while the app runs 1.5 s).
TEST_P(ShimFailOpen, ApplicationRunsExactlyAsWithout) {
  REQUIRE_SHIM();
  Failure failure = GetParam();
  std::vector<std::string> argv{app_path("hone-testapp-linked"), "--wait-stdin"};
  Process base_p(argv, plain_env(), m_dir, true);
  base_p.close_stdin();
  Outcome base = base_p.wait();
  ASSERT_EQ(base.status, 0) << describe(base);

  std::unique_ptr<TestServer> server;
  std::string socket = m_dir.file("hone.sock");
  std::string note;
  switch (failure) {
  case Failure::absent: break;
  case Failure::not_a_socket: std::ofstream(socket) << "not a socket"; break;
  case Failure::unreachable:
    if (::geteuid() == 0) {
      // root ignores permission bits: ENOTDIR instead of EACCES
      std::ofstream(m_dir.file("file")) << "a regular file";
      socket = m_dir.file("file") + "/hone.sock";
      note = "running as root: permission bits do not apply, the socket's parent is a regular file";
    } else {
      fs::create_directory(m_dir.file("locked"));
      server = std::make_unique<TestServer>(server_options(ServerMode::normal, m_dir.file("locked/hone.sock")));
      ::chmod(m_dir.file("locked/hone.sock").c_str(), 0);
      ::chmod(m_dir.file("locked").c_str(), 0);
      socket = server->socket_path();
      note = "a listening socket in a directory with mode 000 (EACCES)";
    }
    break;
  case Failure::close_after_hello:
    server = std::make_unique<TestServer>(server_options(ServerMode::close_after_hello, socket));
    break;
  case Failure::close_after_report:
    server = std::make_unique<TestServer>(server_options(ServerMode::close_after_report, socket));
    break;
  case Failure::garbage:
    server = std::make_unique<TestServer>(server_options(ServerMode::garbage, socket));
    break;
  case Failure::bad_version:
    server = std::make_unique<TestServer>(server_options(ServerMode::bad_version, socket));
    break;
  case Failure::stall:
    server = std::make_unique<TestServer>(server_options(ServerMode::stall, socket));
    break;
  }
  if (!note.empty()) {
    RecordProperty("note", note);
    std::printf("note: %s\n", note.c_str());
  }

  Env env = shim_env(socket);
  env.set("HONE_LOG", "info");
  Process p(argv, env, m_dir, true);
  // Keep the process alive across several report intervals and at least one retry.
  std::this_thread::sleep_for(1500ms);
  p.close_stdin();
  Outcome o = p.wait(30s);
  if (failure == Failure::unreachable && ::geteuid() != 0) { // let sync() and the cleanup in again
    ::chmod(m_dir.file("locked").c_str(), 0700);
    ::chmod(m_dir.file("locked/hone.sock").c_str(), 0600);
  }
  ASSERT_FALSE(o.timed_out) << describe(o);
  EXPECT_EQ(o.status, 0) << describe(o);
  EXPECT_EQ(o.out, base.out);
  EXPECT_EQ(without_shim_lines(o.err), base.err);
  // The app took 1.5 s on purpose; the shim may add its bounded exit flush, not more.
  EXPECT_LT(o.elapsed, 1500ms + 2s) << describe(o);

  // Each failure kind at most once: no line of the shim's repeats (digits aside).
  auto lines = shim_lines(o.err);
  std::map<std::string, int> seen;
  for (const auto& l : lines) ++seen[std::regex_replace(l, std::regex("[0-9]+"), "#")];
  for (const auto& [l, n] : seen) EXPECT_EQ(n, 1) << "logged " << n << " times: " << l;
  if (failure != Failure::stall) {
    EXPECT_GE(lines.size(), 1u) << "the failure was not logged with HONE_LOG=info\n" << o.err;
  }
  RecordProperty("shim_log", o.err);
  std::printf("note: %s: %zu line(s) of the shim, %lld ms\n", name_of(failure), lines.size(),
              static_cast<long long>(o.elapsed.count()));
  for (const auto& l : lines) std::printf("note:   %s\n", l.c_str());

  if (server) {
    ASSERT_TRUE(server->sync());
    ServerLog log = server->snapshot();
    EXPECT_LE(log.clients(), 3u) << "reconnecting without backoff? " << describe(log);
    for (const auto& c : log.connections) {
      EXPECT_LE(c.hello_count, 1u);
      EXPECT_TRUE(c.protocol_error.empty() || failure == Failure::garbage) << describe(c);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Daemon, ShimFailOpen,
                         ::testing::Values(Failure::absent, Failure::not_a_socket, Failure::unreachable,
                                           Failure::close_after_hello, Failure::close_after_report,
                                           Failure::garbage, Failure::bad_version, Failure::stall),
                         [](const auto& info) { return std::string(name_of(info.param)); });

// --- threads and fork ----------------------------------------------------------------------------

// Eight threads launching at once, and a fork while they do: the parent's counts add up exactly,
// the child reports under its own pid on its own connection with only its own launches, and
// nothing deadlocks.
TEST(ShimThreads, CountsAddUpAcrossThreadsAndFork) {
  REQUIRE_SHIM();
  TempDir dir;
  std::vector<std::string> argv{app_path("hone-testapp-threads"), "--threads", "8", "--iters", "40",
                                "--child-launches", "4"};
  Outcome base = run(argv, plain_env(), dir);
  ASSERT_EQ(base.status, 0) << describe(base);

  TestServer server;
  Outcome o = run(argv, shim_env(server.socket_path()), dir, 30s);
  ASSERT_FALSE(o.timed_out) << "deadlock? " << describe(o);
  EXPECT_EQ(o.status, 0) << describe(o);
  EXPECT_EQ(o.out, base.out);

  std::smatch m;
  ASSERT_TRUE(std::regex_search(o.err, m, std::regex("child pid ([0-9]+)"))) << o.err;
  pid_t child = pid_t(std::stoi(m[1]));
  ASSERT_TRUE(std::regex_search(o.out, m, std::regex("workload: launches saxpy=([0-9]+) "
                                                     "_Z8mix_bitsPjji=([0-9]+) "
                                                     "_ZN9hone_test4blurEPKiPii=([0-9]+)")));
  uint64_t parent_counts[3] = {std::stoull(m[1]), std::stoull(m[2]), std::stoull(m[3])};
  EXPECT_EQ(parent_counts[0] + parent_counts[1] + parent_counts[2], 8u * 40u);

  bool done = server.wait_until(
      [&](const ServerLog& l) { return finished(l, o.pid) && finished(l, child); }, 5s);
  ServerLog log = server.snapshot();
  ASSERT_TRUE(done) << "parent " << o.pid << ", child " << child << ": " << describe(log);

  auto parent = log.from_pid(o.pid);
  ASSERT_EQ(parent.size(), 1u) << describe(log);
  {
    SCOPED_TRACE("parent");
    const Connection& c = *parent[0];
    EXPECT_EQ(c.hello_count, 1u) << describe(c);
    EXPECT_TRUE(c.goodbye) << describe(c);
    std::string why;
    EXPECT_TRUE(c.counters_monotonic(&why)) << why;
    auto by_key = c.stats_by_key();
    for (int k = 0; k < testapp::k_kernel_count; ++k) {
      KernelKey key{workload_ptx().hash, testapp::k_kernels[k].entry};
      ASSERT_TRUE(by_key.count(key)) << key.str() << "\n" << describe(c);
      EXPECT_EQ(by_key[key].launches, parent_counts[k]) << key.str();
    }
    EXPECT_EQ(by_key.size(), 3u) << describe(c);
  }
  auto children = log.from_pid(child);
  ASSERT_EQ(children.size(), 1u) << describe(log);
  {
    SCOPED_TRACE("child");
    const Connection& c = *children[0];
    ASSERT_TRUE(c.hello.has_value());
    EXPECT_EQ(c.hello->pid, uint32_t(child));
    EXPECT_EQ(c.peer_pid, child);
    EXPECT_EQ(c.hello_count, 1u);
    EXPECT_TRUE(c.goodbye) << describe(c);
    auto by_key = c.stats_by_key();
    KernelKey saxpy{workload_ptx().hash, "saxpy"};
    EXPECT_EQ(by_key[saxpy].launches, 4u) << describe(c);
    uint64_t total = 0;
    for (const auto& [key, s] : by_key) total += s.launches;
    EXPECT_EQ(total, 4u) << "the child reported launches it did not make\n" << describe(c);
  }
}

// --- hot swap ------------------------------------------------------------------------------------

// A memfd holding `bytes`.
int memfd_of(const std::string& bytes) {
  int fd = ::memfd_create("variant", MFD_CLOEXEC);
  if (fd < 0 || ::write(fd, bytes.data(), bytes.size()) != ssize_t(bytes.size())) return -1;
  return fd;
}

// A daemon's install_variant may be wrong in every way: the shim refuses what it cannot serve
// safely (and says why), serves what it can, and the application never notices either.
TEST(ShimSwap, BadVariantsAreRefusedAndAGoodOneServes) {
  REQUIRE_SHIM();
  TempDir dir;
  TestServer server;
  std::string stop = dir.file("stop");
  Process app({app_path("hone-testapp-serve"), "--seconds", "60", "--n", "512", "--reps", "8",
               "--stop-file", stop},
              shim_env(server.socket_path()), dir);
  const Connection* conn = nullptr;
  proto::KernelInfo kernel;
  ASSERT_TRUE(server.wait_until(
      [&](const ServerLog& l) {
        for (const Connection* c : l.from_pid(app.pid())) {
          for (const auto& k : c->kernels) {
            if (k.key.entry == "accumulate") {
              conn = c;
              kernel = k;
              return true;
            }
          }
        }
        return false;
      },
      20s))
      << describe(server.snapshot());
  uint64_t conn_id = conn->id;
  // The original PTX serves as a variant of itself: a valid image with the right parameters.
  std::string image = read_file(k_apps_dir + "/serve.ptx");
  image.push_back('\0');

  struct Case {
    const char* what;
    proto::InstallVariant msg;
    size_t bytes; // how many bytes of the image go into the memfd
    bool installed;
    const char* message;
  };
  auto base = [&](uint8_t n) {
    proto::InstallVariant m;
    m.kernel = kernel.key;
    m.variant = hone::VariantId{ImageHash::of(&n, 1)};
    m.format = proto::ImageFormat::ptx;
    m.size = image.size();
    m.entry = "accumulate";
    return m;
  };
  std::vector<Case> cases;
  cases.push_back({"size that does not match the descriptor", base(1), image.size() - 7, false,
                   "does not match the size"});
  cases.push_back({"guard outside the parameters", base(3), image.size(), false,
                   "outside parameter 99"});
  cases.back().msg.guard.scalars = {hone::ScalarGuard{99, 400, std::string(4, '\0')}};
  cases.push_back({"guard bytes wider than the parameter", base(4), image.size(), false,
                   "outside parameter 3"});
  cases.back().msg.guard.scalars = {hone::ScalarGuard{3, 20, std::string(16, '\0')}};
  cases.push_back({"unknown JIT option", base(5), image.size(), false, "unknown JIT option"});
  cases.back().msg.jit_options = {"NO_SUCH_OPTION=1"};
  cases.push_back({"entry that is not in the image", base(6), image.size(), false, "loading"});
  cases.back().msg.entry = "no_such_kernel";
  // reps (parameter 3, at byte 20) must be 8: it is, on every launch
  int reps = 8;
  cases.push_back({"a good variant with a scalar guard", base(7), image.size(), true, ""});
  cases.back().msg.guard.block = {256, 1, 1};
  cases.back().msg.guard.scalars = {
      hone::ScalarGuard{3, 20, std::string(reinterpret_cast<const char*>(&reps), 4)}};

  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].what);
    int fd = memfd_of(image.substr(0, cases[i].bytes));
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(server.send_with_fd(
        conn_id, proto::frame_of(proto::MsgType::install_variant, 0, cases[i].msg, proto::k_flag_fd),
        fd));
    ::close(fd);
    proto::VariantStatus st;
    ASSERT_TRUE(server.wait_until(
        [&](const ServerLog& l) {
          for (const Connection* c : l.from_pid(app.pid())) {
            if (c->id == conn_id && c->variant_statuses.size() > i) {
              st = c->variant_statuses[i];
              return true;
            }
          }
          return false;
        },
        10s))
        << describe(server.snapshot());
    EXPECT_EQ(st.variant, cases[i].msg.variant);
    EXPECT_EQ(st.installed, cases[i].installed) << st.message;
    EXPECT_NE(st.message.find(cases[i].message), std::string::npos) << st.message;
  }
  // The good one serves launches (its guard holds on every one).
  EXPECT_TRUE(server.wait_until(
      [&](const ServerLog& l) {
        for (const Connection* c : l.from_pid(app.pid())) {
          for (const auto& [id, stats] : c->latest_stats()) {
            if (id == kernel.id && stats.variant_launches > 5) return true;
          }
        }
        return false;
      },
      20s))
      << describe(server.snapshot());
  std::ofstream(stop) << "stop\n";
  Outcome o = app.wait(60s);
  EXPECT_EQ(o.status, 0) << describe(o);
  EXPECT_NE(o.out.find("mismatches 0"), std::string::npos) << o.out;
}

// --- the no_alias guard --------------------------------------------------------------------------

const std::string k_serve_entry = "accumulate";
const std::string k_blur_entry = "_ZN9hone_test4blurEPKiPii";

// Waits for `pid` to report `entry`: its connection and the kernel as announced.
bool wait_for_kernel(const TestServer& server, pid_t pid, const std::string& entry,
                     uint64_t* conn_id, proto::KernelInfo* kernel) {
  return server.wait_until(
      [&](const ServerLog& l) {
        for (const Connection* c : l.from_pid(pid)) {
          for (const auto& k : c->kernels) {
            if (k.key.entry == entry) {
              *conn_id = c->id;
              *kernel = k;
              return true;
            }
          }
        }
        return false;
      },
      20s);
}

// Sends install_variant `msg` with `image` in its memfd on connection `conn_id` and returns the
// answer (the connection's `index`-th variant_status), or nullopt when none came.
std::optional<proto::VariantStatus> install(TestServer& server, pid_t pid, uint64_t conn_id,
                                            proto::InstallVariant msg, const std::string& image,
                                            size_t index) {
  msg.size = image.size();
  int fd = memfd_of(image);
  if (fd < 0) return std::nullopt;
  bool sent = server.send_with_fd(
      conn_id, proto::frame_of(proto::MsgType::install_variant, 0, msg, proto::k_flag_fd), fd);
  ::close(fd);
  if (!sent) return std::nullopt;
  std::optional<proto::VariantStatus> st;
  server.wait_until(
      [&](const ServerLog& l) {
        for (const Connection* c : l.from_pid(pid)) {
          if (c->id == conn_id && c->variant_statuses.size() > index) {
            st = c->variant_statuses[index];
            return true;
          }
        }
        return false;
      },
      10s);
  return st;
}

// The latest cumulative stats of kernel `id` on connection `conn_id` (zero before any report).
proto::KernelStats latest_stats(const ServerLog& l, uint64_t conn_id, uint64_t id) {
  for (const auto& c : l.connections) {
    if (c.id != conn_id) continue;
    auto all = c.latest_stats();
    if (auto it = all.find(id); it != all.end()) return it->second;
  }
  return {};
}

proto::InstallVariant no_alias_variant(const KernelKey& key, uint8_t n) {
  proto::InstallVariant m;
  m.kernel = key;
  m.variant = hone::VariantId{ImageHash::of(&n, 1)};
  m.format = proto::ImageFormat::ptx;
  m.entry = key.entry;
  m.guard.no_alias = true;
  return m;
}

// serve.cu's PTX with its load through `in` made ld.global.nc, as the readonly strategy does: a
// variant that is only right while `out` is not in `in`'s allocation.
std::string serve_nc_image() {
  std::string image = read_file(k_apps_dir + "/serve.ptx");
  const std::string load = "ld.global.u32";
  size_t at = image.find(load);
  if (at == std::string::npos || image.find(load, at + 1) != std::string::npos) {
    throw std::runtime_error("serve.ptx no longer has exactly one " + load);
  }
  image.replace(at, load.size(), "ld.global.nc.u32");
  image.push_back('\0');
  return image;
}

// The same no_alias variant goes to two serve applications: one with distinct out and in, one
// computing in place (--alias). Both accept it; the first runs it, the second never does (its two
// pointers share an allocation) and runs the original, and both compute every result right.
TEST(ShimSwap, NoAliasVariantServesOnlyLaunchesWithDistinctPointers) {
  REQUIRE_SHIM();
  TempDir dir;
  TestServer server;
  std::string stop = dir.file("stop");
  std::vector<std::string> args{app_path("hone-testapp-serve"), "--seconds", "60", "--n", "512",
                                "--reps", "8", "--stop-file", stop};
  Process distinct(args, shim_env(server.socket_path()), dir);
  args.push_back("--alias");
  Process aliased(args, shim_env(server.socket_path()), dir);
  const std::string image = serve_nc_image();

  struct App {
    const char* what;
    Process& process;
    uint64_t conn_id = 0;
    proto::KernelInfo kernel;
  };
  App apps[] = {{"distinct pointers", distinct, 0, {}},
                {"out and in in one allocation", aliased, 0, {}}};
  uint64_t aliased_launches_at_install = 0;
  for (auto& app : apps) {
    SCOPED_TRACE(app.what);
    ASSERT_TRUE(
        wait_for_kernel(server, app.process.pid(), k_serve_entry, &app.conn_id, &app.kernel))
        << describe(server.snapshot());
    auto st = install(server, app.process.pid(), app.conn_id,
                      no_alias_variant(app.kernel.key, 1), image, 0);
    ASSERT_TRUE(st) << describe(server.snapshot());
    EXPECT_TRUE(st->installed) << st->message;
    EXPECT_EQ(st->message,
              "serving 1 handle(s); launches whose 2 pointer field(s) share an allocation run the "
              "original");
    if (&app.process == &aliased) {
      aliased_launches_at_install =
          latest_stats(server.snapshot(), app.conn_id, app.kernel.id).launches;
    }
  }
  // distinct pointers: served
  EXPECT_TRUE(server.wait_until(
      [&](const ServerLog& l) {
        return latest_stats(l, apps[0].conn_id, apps[0].kernel.id).variant_launches > 5;
      },
      20s))
      << describe(server.snapshot());
  // one allocation: 20 launches reported after the install, none served, none failed over
  ASSERT_TRUE(server.wait_until(
      [&](const ServerLog& l) {
        return latest_stats(l, apps[1].conn_id, apps[1].kernel.id).launches >=
               aliased_launches_at_install + 20;
      },
      20s))
      << describe(server.snapshot());
  proto::KernelStats aliased_stats =
      latest_stats(server.snapshot(), apps[1].conn_id, apps[1].kernel.id);
  EXPECT_EQ(aliased_stats.variant_launches, 0u);
  EXPECT_EQ(aliased_stats.fallbacks, 0u);

  std::ofstream(stop) << "stop\n";
  for (auto& app : apps) {
    SCOPED_TRACE(app.what);
    Outcome o = app.process.wait(60s);
    EXPECT_EQ(o.status, 0) << describe(o);
    EXPECT_NE(o.out.find(" mismatches 0"), std::string::npos) << o.out;
  }
}

// The guard reads pointers from `extra` parameter buffers as well as from kernelParams: the
// workload's blur (in, out distinct) is served on all three launches, the last of which passes
// its parameters in CU_LAUNCH_PARAM_BUFFER_POINTER.
TEST(ShimSwap, NoAliasGuardReadsParameterBuffers) {
  REQUIRE_SHIM();
  TempDir dir;
  TestServer server;
  Process p({app_path("hone-testapp-linked"), "--pause-before-launch"},
            shim_env(server.socket_path()), dir, true);
  uint64_t conn_id = 0;
  proto::KernelInfo blur;
  ASSERT_TRUE(wait_for_kernel(server, p.pid(), k_blur_entry, &conn_id, &blur))
      << describe(server.snapshot());
  // the original PTX serves as a variant of itself
  auto st = install(server, p.pid(), conn_id, no_alias_variant(blur.key, 1),
                    workload_ptx().bytes, 0);
  ASSERT_TRUE(st) << describe(server.snapshot());
  ASSERT_TRUE(st->installed) << st->message;
  p.write_stdin("\n");
  p.close_stdin();
  Outcome o = p.wait();
  ASSERT_EQ(o.status, 0) << describe(o);
  EXPECT_NE(o.out.find("workload: check ok"), std::string::npos) << o.out;
  ASSERT_TRUE(server.wait_until([&](const ServerLog& l) { return finished(l, o.pid); }, 5s));
  proto::KernelStats s = latest_stats(server.snapshot(), conn_id, blur.id);
  EXPECT_EQ(s.launches, 3u);
  EXPECT_EQ(s.variant_launches, 3u);
}

// Without the kernel's PTX (HONE_IMAGE_CACHE_MB=0 keeps no image) the shim cannot tell which
// parameters are pointers: a no_alias variant is refused, saying so, while the same variant
// without the guard installs.
TEST(ShimSwap, NoAliasVariantIsRefusedWithoutPointerInformation) {
  REQUIRE_SHIM();
  TempDir dir;
  TestServer server;
  std::string stop = dir.file("stop");
  Env env = shim_env(server.socket_path());
  env.set("HONE_IMAGE_CACHE_MB", "0");
  Process app({app_path("hone-testapp-serve"), "--seconds", "60", "--n", "512", "--reps", "8",
               "--stop-file", stop},
              env, dir);
  uint64_t conn_id = 0;
  proto::KernelInfo kernel;
  ASSERT_TRUE(wait_for_kernel(server, app.pid(), k_serve_entry, &conn_id, &kernel))
      << describe(server.snapshot());
  const std::string image = serve_nc_image();
  auto refused = install(server, app.pid(), conn_id, no_alias_variant(kernel.key, 1), image, 0);
  ASSERT_TRUE(refused) << describe(server.snapshot());
  EXPECT_FALSE(refused->installed);
  EXPECT_NE(refused->message.find("pointer parameters in distinct allocations"), std::string::npos)
      << refused->message;
  EXPECT_NE(refused->message.find("no PTX of the kernel"), std::string::npos) << refused->message;

  proto::InstallVariant unguarded = no_alias_variant(kernel.key, 2);
  unguarded.guard.no_alias = false;
  auto accepted = install(server, app.pid(), conn_id, unguarded, image, 1);
  ASSERT_TRUE(accepted) << describe(server.snapshot());
  EXPECT_TRUE(accepted->installed) << accepted->message;
  EXPECT_EQ(accepted->message, "serving 1 handle(s)");

  std::ofstream(stop) << "stop\n";
  Outcome o = app.wait(60s);
  EXPECT_EQ(o.status, 0) << describe(o);
  EXPECT_NE(o.out.find(" mismatches 0"), std::string::npos) << o.out;
}

} // namespace

// --- CUDA graphs through the driver's linked symbols -----------------------------------------

// A program that builds a graph of N kernel nodes by hand (cuGraphAddKernelNode, linked -lcuda),
// destroys the template once instantiated, replays it R times, changes one node's arguments on
// the executable graph and updates it from a second graph: its results are those it has alone,
// each replay counts one launch of each node (N x (R + 2) in all, every one a graph replay), and
// the graph part of the report says one graph with N nodes, none serving a variant.
TEST(ShimGraphs, LinkedGraphCallsAreObservedAndEachReplayCountsEveryNode) {
  REQUIRE_SHIM();
  TempDir dir;
  const int nodes = 5, replays = 30;
  std::vector<std::string> argv{app_path("hone-testapp-graph-driver"), std::to_string(nodes),
                                std::to_string(replays)};
  Outcome base = run(argv, plain_env(), dir);
  ASSERT_EQ(base.status, 0) << describe(base);
  ASSERT_NE(base.out.find("mismatches 0"), std::string::npos) << base.out;
  TestServer server;
  Env env = shim_env(server.socket_path());
  env.set("HONE_TRACE", "1");
  Outcome with = run(argv, env, dir);
  ASSERT_EQ(with.status, 0) << describe(with);
  EXPECT_EQ(with.out, base.out);
  // Reached through the shim's exports, not around them.
  for (const char* hook : {"cuGraphInstantiateWithFlags (linked)", "cuGraphLaunch (linked)",
                           "cuGraphExecKernelNodeSetParams_v2 (linked)",
                           "cuGraphExecUpdate_v2 (linked)", "cuGraphDestroy (linked)"}) {
    EXPECT_NE(with.err.find(hook), std::string::npos) << hook << "\n" << with.err;
  }
  ASSERT_TRUE(server.wait_until([&](const ServerLog& l) { return finished(l, with.pid); }, 5s))
      << describe(server.snapshot());
  ServerLog log = server.snapshot();
  auto conns = log.from_pid(with.pid);
  ASSERT_EQ(conns.size(), 1u) << describe(log);
  const Connection& c = *conns[0];
  EXPECT_TRUE(c.protocol_error.empty()) << c.protocol_error;
  std::string why;
  EXPECT_TRUE(c.counters_monotonic(&why)) << why;
  auto by_key = c.stats_by_key();
  ASSERT_EQ(by_key.size(), 1u) << describe(c);
  const auto& [key, st] = *by_key.begin();
  EXPECT_EQ(key.entry, "add_one");
  EXPECT_EQ(st.launches, uint64_t(nodes * (replays + 2))) << describe(c);
  // The graph part: the latest report that carries this kernel's.
  std::optional<proto::GraphKernelStats> graph;
  uint64_t graph_replays = 0;
  for (const auto& s : c.stats) {
    for (const auto& g : s.graph_kernels) graph = g;
    graph_replays = std::max(graph_replays, s.graph_replays);
  }
  ASSERT_TRUE(graph.has_value()) << "no graph part in any report";
  EXPECT_EQ(graph->graph_launches, st.launches);
  EXPECT_EQ(graph_replays, uint64_t(replays + 2));
  EXPECT_LE(graph->graphs, 1u); // 0 once the executable graph was destroyed before the last report
  EXPECT_EQ(graph->nodes_serving, 0u);
}
