#include "daemon_process.hpp"

#include "common/client.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fcntl.h>
#include <grp.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace hone::test {

std::string emu_agent_config(const std::string& emu_dir, const std::string& extra) {
  std::ostringstream s;
  s << "[server]\nreport_interval_ms = 200\n"
    << "[worker]\ndriver = \"" << emu_dir << "/libcuda.so.1\"\n"
    << "[optimizer]\nenabled = true\nhot_min_launches = 20\ngpu_share = 1.0\n"
    << "[capture]\ncaptures_per_kernel = 2\ntimeout_s = 60\n"
    << "[validation]\nwarmup = 0\nruns = 7\nmin_runs = 3\njob_timeout_s = 120\n"
    << extra;
  return s.str();
}

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string honed_path() {
  return std::string(HONE_BINARY_DIR) + "/bin/honed";
}
std::string honectl_path() {
  return std::string(HONE_BINARY_DIR) + "/bin/honectl";
}

TempDir::TempDir(const std::string& prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string templ = std::string(base && *base ? base : "/tmp") + "/" + prefix + "-XXXXXX";
  if (!::mkdtemp(templ.data())) {
    throw std::runtime_error("mkdtemp " + templ + ": " + std::strerror(errno));
  }
  m_path = templ;
}

TempDir::~TempDir() {
  // HONE_TEST_KEEP=1 keeps every test's directories (daemon logs, state) for a look afterwards.
  const char* keep = std::getenv("HONE_TEST_KEEP");
  if (keep && std::string(keep) == "1") return;
  std::error_code ec;
  fs::remove_all(m_path, ec);
}

namespace {

// The environment of this process with `extra` applied ("" removes a variable).
std::vector<std::string> environment_with(const std::map<std::string, std::string>& extra) {
  std::vector<std::string> out;
  for (char** e = environ; *e; ++e) {
    std::string entry = *e;
    std::string name = entry.substr(0, entry.find('='));
    if (!extra.count(name)) out.push_back(entry);
  }
  for (const auto& [name, value] : extra) {
    if (!value.empty()) out.push_back(name + "=" + value);
  }
  return out;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

int decode_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// Wait for `pid` until `deadline`; the wait status, or nullopt on timeout.
std::optional<int> wait_until(pid_t pid, std::chrono::steady_clock::time_point deadline) {
  while (true) {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0 && errno != EINTR) return -1;
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(2ms);
  }
}

std::string read_all_fd(int fd) {
  std::string out;
  char buf[65536];
  off_t off = 0;
  while (true) {
    ssize_t n = ::pread(fd, buf, sizeof buf, off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, size_t(n));
    off += n;
  }
  return out;
}

} // namespace

Result<std::unique_ptr<DaemonProcess>> DaemonProcess::start(DaemonOptions options) {
  std::unique_ptr<DaemonProcess> d(new DaemonProcess);
  if (options.dir.empty()) {
    d->m_owned = std::make_unique<TempDir>("honed");
    d->m_dir = d->m_owned->path();
  } else {
    d->m_dir = options.dir;
    fs::create_directories(d->m_dir);
  }
  std::vector<std::string> args = {honed_path(), "--socket", d->socket(), "--state-dir",
                                   d->state_dir().string()};
  if (options.config) {
    d->write_config(*options.config);
    args.insert(args.end(), {"--config", d->config_path().string()});
  }
  if (!options.log_level.empty()) args.insert(args.end(), {"--log-level", options.log_level});
  args.insert(args.end(), options.extra_args.begin(), options.extra_args.end());
  std::vector<std::string> env = environment_with(options.env);
  auto argv = pointers(args);
  auto envp = pointers(env);
  std::string log = d->log_path().string();

  pid_t pid = ::fork();
  if (pid < 0) return make_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) ::_exit(126);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  d->m_pid = pid;

  auto deadline = std::chrono::steady_clock::now() + options.ready_timeout;
  while (true) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      d->m_status = decode_status(status);
      return make_error("honed exited with status " + std::to_string(*d->m_status) +
                            " before it listened; its log:\n" + d->log(),
                        *d->m_status);
    }
    if (auto c = Client::connect_raw(d->socket())) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      std::string text = d->log();
      (void)d->stop(1s);
      return make_error("honed did not listen on " + d->socket() +
                        " within the timeout; its log:\n" + text);
    }
    std::this_thread::sleep_for(5ms);
  }
  return d;
}

DaemonProcess::~DaemonProcess() {
  if (m_pid > 0 && !m_status) {
    ::kill(m_pid, SIGKILL);
    int status = 0;
    while (::waitpid(m_pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

std::string DaemonProcess::log() const {
  std::ifstream in(log_path(), std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool DaemonProcess::wait_for_log(const std::string& text, std::chrono::milliseconds timeout,
                                 size_t from) const {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    std::string l = log();
    if (l.size() > from && l.find(text, from) != std::string::npos) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
}

void DaemonProcess::write_config(const std::string& toml) const {
  std::ofstream out(config_path(), std::ios::binary | std::ios::trunc);
  out << toml;
}

void DaemonProcess::signal(int sig) const {
  if (m_pid > 0 && !m_status) ::kill(m_pid, sig);
}

bool DaemonProcess::running() {
  if (m_status) return false;
  int status = 0;
  if (::waitpid(m_pid, &status, WNOHANG) == m_pid) {
    m_status = decode_status(status);
    return false;
  }
  return true;
}

Result<int> DaemonProcess::stop(std::chrono::milliseconds timeout) {
  if (m_status) return *m_status;
  ::kill(m_pid, SIGTERM);
  auto status = wait_until(m_pid, std::chrono::steady_clock::now() + timeout);
  if (!status) {
    ::kill(m_pid, SIGKILL);
    status = wait_until(m_pid, std::chrono::steady_clock::now() + 10s);
    m_status = status ? decode_status(*status) : -1;
    return make_error("honed did not exit within " + std::to_string(timeout.count()) +
                      " ms of SIGTERM (killed)");
  }
  m_status = decode_status(*status);
  return *m_status;
}

std::optional<uint64_t> DaemonProcess::rss_kib() const {
  std::ifstream in("/proc/" + std::to_string(m_pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10);
  }
  return std::nullopt;
}

RunResult run_program(const std::vector<std::string>& argv_in, const RunOptions& options) {
  RunResult result;
  std::vector<std::string> args = argv_in;
  std::vector<std::string> env = environment_with(options.env);
  auto argv = pointers(args);
  auto envp = pointers(env);
  int out = ::memfd_create("stdout", MFD_CLOEXEC);
  int err = ::memfd_create("stderr", MFD_CLOEXEC);
  if (out < 0 || err < 0) {
    result.err = std::string("memfd_create: ") + std::strerror(errno);
    return result;
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    result.err = std::string("fork: ") + std::strerror(errno);
    ::close(out);
    ::close(err);
    return result;
  }
  if (pid == 0) {
    ::dup2(out, 1);
    ::dup2(err, 2);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    if (options.uid) {
      gid_t gid = gid_t(*options.uid);
      if (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(*options.uid) != 0) {
        ::_exit(125);
      }
    }
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  auto status = wait_until(pid, std::chrono::steady_clock::now() + options.timeout);
  if (!status) {
    result.timed_out = true;
    ::kill(pid, SIGKILL);
    status = wait_until(pid, std::chrono::steady_clock::now() + 10s);
  }
  result.exit_code = status ? decode_status(*status) : -1;
  result.out = read_all_fd(out);
  result.err = read_all_fd(err);
  ::close(out);
  ::close(err);
  return result;
}

RunResult run_honectl(const std::vector<std::string>& args, const RunOptions& options) {
  std::vector<std::string> argv = {honectl_path()};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_program(argv, options);
}

proto::Hello test_hello(proto::ClientKind kind) {
  proto::Hello h;
  h.kind = kind;
  h.pid = uint32_t(::getpid());
  h.uid = uint32_t(::getuid());
  h.exe = "/proc/self/exe";
  h.hostname = "test";
  h.device_name = kind == proto::ClientKind::shim ? "hone emulated device" : "";
  h.arch = kind == proto::ClientKind::shim ? "sm_90" : "";
  h.driver_version = kind == proto::ClientKind::shim ? 13000 : 0;
  h.client_version = "test";
  return h;
}

Result<Client> connect_as(const std::string& socket, proto::ClientKind kind) {
  return Client::connect(socket, test_hello(kind), 10s);
}

Result<nlohmann::json> control(Client& c, const nlohmann::json& request) {
  auto f = c.control(request.dump());
  if (!f) return f.error();
  if (f->fd >= 0) ::close(f->fd);
  auto j = nlohmann::json::parse(f->payload, nullptr, false);
  if (j.is_discarded()) return make_error("reply is not JSON: " + f->payload);
  return j;
}

bool wait_for(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
}

uint64_t raise_fd_limit(uint64_t n) {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return 0;
  if (rl.rlim_cur < n) {
    rl.rlim_cur = std::min<rlim_t>(rlim_t(n), rl.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &rl);
    ::getrlimit(RLIMIT_NOFILE, &rl);
  }
  return rl.rlim_cur;
}

} // namespace hone::test

namespace hone::test {

Ctl::Ctl(const std::string& socket) {
  auto c = connect_as(socket, proto::ClientKind::ctl);
  if (!c) throw std::runtime_error(c.error().message);
  m_client = std::make_unique<Client>(std::move(*c));
}

nlohmann::json Ctl::request(const nlohmann::json& req, int fd) {
  auto f = m_client->control(req.dump(), fd);
  if (!f) return nlohmann::json{{"ok", false}, {"error", f.error().message}};
  if (f->fd >= 0) ::close(f->fd);
  auto j = nlohmann::json::parse(f->payload, nullptr, false);
  return j.is_discarded() ? nlohmann::json{{"ok", false}, {"error", "not JSON"}} : j;
}

nlohmann::json Ctl::submit(nlohmann::json request, const std::string& code) {
  int fd = ::memfd_create("candidate", MFD_CLOEXEC);
  if (fd < 0 || ::write(fd, code.data(), code.size()) != ssize_t(code.size())) {
    if (fd >= 0) ::close(fd);
    return nlohmann::json{{"ok", false}, {"error", "cannot write the candidate into a memfd"}};
  }
  request["cmd"] = "submit";
  nlohmann::json r = this->request(request, fd);
  ::close(fd);
  return r;
}

nlohmann::json Ctl::kernel(const std::string& name) {
  nlohmann::json r = request({{"cmd", "kernels"}});
  if (!r.value("ok", false)) return nullptr;
  for (const auto& k : r["result"]["kernels"]) {
    if (k.value("name", "") == name) return k;
  }
  return nullptr;
}

nlohmann::json Ctl::verified_variant(const std::string& kernel, const std::string& strategy) {
  nlohmann::json r = request({{"cmd", "variants"}, {"target", kernel}});
  if (!r.value("ok", false)) return nullptr;
  for (const auto& v : r["result"]["variants"]) {
    if (v.value("strategy", "") == strategy && v.value("state", "") == "verified") return v;
  }
  return nullptr;
}

nlohmann::json Ctl::wait_job(uint64_t id, std::chrono::milliseconds timeout) {
  nlohmann::json job;
  bool done = wait_for(
      [&] {
        nlohmann::json r = request({{"cmd", "job"}, {"id", id}});
        if (!r.value("ok", false)) return false;
        job = r["result"];
        if (job.value("state", "") == "done") return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        return false;
      },
      timeout);
  return done ? job : nlohmann::json();
}

BackgroundApp::BackgroundApp(AppOptions o) : m_stop((m_dir.path() / "stop").string()) {
  std::vector<std::string> argv{o.program};
  argv.insert(argv.end(), o.args.begin(), o.args.end());
  argv.insert(argv.end(), {"--stop-file", m_stop});
  RunOptions run;
  run.timeout = o.timeout;
  run.env = o.env;
  if (!o.shim.empty()) run.env["LD_PRELOAD"] = o.shim;
  if (!o.driver_dir.empty()) run.env["LD_LIBRARY_PATH"] = o.driver_dir;
  if (!o.socket.empty()) run.env["HONE_SOCKET"] = o.socket;
  m_result = std::async(std::launch::async, [argv, run] { return run_program(argv, run); });
}

BackgroundApp::~BackgroundApp() {
  if (m_result.valid()) finish();
}

RunResult BackgroundApp::finish() {
  std::ofstream(m_stop) << "stop\n";
  return m_result.get();
}

} // namespace hone::test
