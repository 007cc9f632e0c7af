#include "daemon/worker_pool.hpp"

#include "common/version.hpp"
#include "daemon/worker/worker.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include <cerrno>
#include <csignal>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace hone::daemon {

namespace {

constexpr int k_worker_fd = 3;
constexpr auto k_respawn_delay = std::chrono::milliseconds(200);
constexpr auto k_respawn_backoff = std::chrono::seconds(5);

UniqueFd memfd_with(const std::string& bytes) {
  UniqueFd fd(::memfd_create("hone-job", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd) return fd;
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n <= 0) return UniqueFd();
    done += size_t(n);
  }
  ::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
  return fd;
}

Verdict failed(uint64_t job, VerdictKind kind, std::string message) {
  Verdict v;
  v.job = job;
  v.kind = kind;
  v.message = std::move(message);
  return v;
}

} // namespace

WorkerPool::WorkerPool(asio::io_context& io, WorkerSettings settings, OnVerdict on_verdict)
    : m_io(io), m_settings(std::move(settings)), m_on_verdict(std::move(on_verdict)),
      m_deadline(io), m_respawn(io), m_gate(io) {}

WorkerPool::~WorkerPool() {
  stop();
}

void WorkerPool::stop() {
  if (m_stopping) return;
  m_stopping = true;
  m_deadline.cancel();
  m_respawn.cancel();
  m_gate.cancel();
  if (m_conn) m_conn->close("honed is shutting down");
  if (m_pid > 0) {
    ::kill(m_pid, SIGKILL);
    ::waitpid(m_pid, nullptr, 0);
    m_pid = -1;
  }
  // Every queued job still gets its verdict: honed is stopping, nothing ran.
  auto queue = std::move(m_queue);
  m_queue.clear();
  if (m_current) {
    uint64_t j = m_current;
    m_current = 0;
    m_on_verdict(j, failed(j, VerdictKind::internal, "honed stopped before the job finished"));
  }
  for (auto& [job, bundle, priority] : queue) {
    m_on_verdict(job, failed(job, VerdictKind::internal, "honed stopped before the job ran"));
  }
}

void WorkerPool::submit(uint64_t job, std::string bundle, double priority) {
  if (m_stopping) {
    m_on_verdict(job, failed(job, VerdictKind::internal, "honed is stopping"));
    return;
  }
  auto at = std::find_if(m_queue.begin(), m_queue.end(),
                         [&](const Queued& q) { return q.priority < priority; });
  m_queue.insert(at, Queued{job, std::move(bundle), priority});
  if (!m_conn) spawn();
  dispatch();
}

bool WorkerPool::spawn() {
  if (m_stopping || m_conn) return true;
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    spdlog::error("cannot start a worker: socketpair: {}", std::strerror(errno));
    return false;
  }
  std::string exe = m_settings.executable.empty() ? "/proc/self/exe" : m_settings.executable;
  std::string fd_arg = std::to_string(k_worker_fd);
  pid_t pid = ::fork();
  if (pid < 0) {
    spdlog::error("cannot start a worker: fork: {}", std::strerror(errno));
    ::close(pair[0]);
    ::close(pair[1]);
    return false;
  }
  if (pid == 0) {
    // The child: the worker end of the pair on fd 3, then honed's own binary as a worker.
    if (::dup2(pair[1], k_worker_fd) < 0) ::_exit(120);
    ::setpgid(0, 0);
    const char* argv[] = {
        "honed", "worker", "--fd", fd_arg.c_str(), "--driver", m_settings.driver.c_str(), nullptr};
    ::execv(exe.c_str(), const_cast<char* const*>(argv));
    ::_exit(127);
  }
  ::close(pair[1]);
  m_pid = pid;
  m_ready = false;
  m_killed_for_timeout = false;
  ++m_started;
  m_spawned_at = std::chrono::steady_clock::now();
  asio::local::stream_protocol::socket sock(m_io);
  boost::system::error_code ec;
  sock.assign(asio::local::stream_protocol(), pair[0], ec);
  if (ec) {
    ::close(pair[0]);
    return false;
  }
  ConnectionLimits limits;
  limits.handshake_timeout_ms = uint32_t(m_settings.start_timeout.count() * 1000);
  m_conn = std::make_shared<Connection>(std::move(sock), m_next_conn_id++,
                                        PeerCredentials{uint32_t(pid), 0, 0, {}}, *this, limits);
  m_conn->start();
  spdlog::info("worker {} started (driver {})", pid, m_settings.driver);
  return true;
}

void WorkerPool::set_paused(bool paused) {
  if (paused == m_paused) return;
  m_paused = paused;
  if (!paused) dispatch();
}

double WorkerPool::job_seconds(uint64_t job) {
  auto it = m_job_seconds.find(job);
  if (it == m_job_seconds.end()) return 0;
  double s = it->second;
  m_job_seconds.erase(it);
  return s;
}

double WorkerPool::active_seconds() const {
  if (m_first_start == std::chrono::steady_clock::time_point{}) return 0;
  auto end = m_current ? std::chrono::steady_clock::now() : m_last_end;
  return std::chrono::duration<double>(end - m_first_start).count();
}

void WorkerPool::job_ended(uint64_t job) {
  auto now = std::chrono::steady_clock::now();
  double seconds = std::chrono::duration<double>(now - m_busy_since).count();
  m_job_seconds[job] = seconds;
  m_busy_total += seconds;
  m_last_end = now;
  while (m_job_seconds.size() > 1024) m_job_seconds.erase(m_job_seconds.begin());
  double share = std::clamp(m_settings.gpu_share, 0.01, 1.0);
  m_not_before = now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                           std::chrono::duration<double>(seconds * (1 - share) / share));
}

void WorkerPool::dispatch() {
  if (m_stopping || m_paused || m_current || m_queue.empty()) return;
  if (auto now = std::chrono::steady_clock::now(); now < m_not_before) {
    // within the GPU share: the next job waits its turn
    m_gate.expires_at(m_not_before);
    m_gate.async_wait([this](const boost::system::error_code& e) {
      if (!e) dispatch();
    });
    return;
  }
  if (!m_conn || !m_ready) return;
  auto [job, bundle, priority] = std::move(m_queue.front());
  m_queue.pop_front();
  UniqueFd fd = memfd_with(bundle);
  if (!fd) {
    m_on_verdict(job, failed(job, VerdictKind::internal, "cannot write the job to a memfd"));
    dispatch();
    return;
  }
  m_current = job;
  m_busy_since = std::chrono::steady_clock::now();
  if (m_first_start == std::chrono::steady_clock::time_point{}) m_first_start = m_busy_since;
  wire::Writer w;
  w.u64(job);
  m_conn->send(proto::frame(proto::MsgType::job, uint32_t(job), w, proto::k_flag_fd),
               std::move(fd));
  m_deadline.expires_after(m_settings.job_timeout);
  m_deadline.async_wait([this](const boost::system::error_code& e) {
    if (e || !m_current || m_pid <= 0) return;
    spdlog::warn("job {} ran past {} s: killing worker {}", m_current,
                 m_settings.job_timeout.count(), m_pid);
    m_killed_for_timeout = true;
    ::kill(m_pid, SIGKILL);
  });
}

bool WorkerPool::on_frame(Connection& c, const proto::FrameHeader& h, std::string_view payload,
                          UniqueFd) {
  wire::Reader r(payload);
  if (!m_ready) {
    proto::Hello hello;
    if (h.type != proto::MsgType::hello || !proto::decode(r, hello) ||
        hello.kind != proto::ClientKind::worker) {
      spdlog::error("worker {} did not say hello as a worker", m_pid);
      return false;
    }
    m_ready = true;
    m_quick_failures = 0;
    c.handshake_done(); // a worker may live for hours: no handshake deadline from here on
    proto::HelloAck ack;
    ack.daemon_version = k_version;
    c.send_msg(proto::MsgType::hello_ack, h.seq, ack);
    spdlog::debug("worker {} ready: {} {}", m_pid, hello.device_name, hello.arch);
    dispatch();
    return true;
  }
  if (h.type != proto::MsgType::verdict) {
    spdlog::error("worker {} sent a {} frame", m_pid, proto::type_name(h.type));
    return false;
  }
  Verdict v;
  if (!decode(r, v) || v.job != m_current) {
    spdlog::error("worker {} sent a verdict that does not decode or is for another job", m_pid);
    return false;
  }
  // A worker that leaves after this verdict gets no further job: the next one waits for a fresh
  // worker instead of failing with this one's exit.
  if (v.worker_exits) m_ready = false;
  finish(v);
  return true;
}

void WorkerPool::finish(const Verdict& v) {
  m_deadline.cancel();
  job_ended(v.job);
  m_current = 0;
  m_on_verdict(v.job, v);
  dispatch();
}

void WorkerPool::on_closed(Connection&, const std::string& why) {
  m_conn.reset();
  worker_gone(why);
}

void WorkerPool::worker_gone(const std::string& why) {
  int status = 0;
  bool announced = false; // it exited because a candidate left its context unusable
  std::string how = why;
  // A worker without its connection is of no use: make sure it is gone before reaping it.
  if (m_pid > 0) ::kill(m_pid, SIGKILL);
  if (m_pid > 0 && ::waitpid(m_pid, &status, 0) == m_pid) {
    // The connection's end says why; the status says how the process went.
    if (WIFEXITED(status)) {
      how = "exited with status " + std::to_string(WEXITSTATUS(status));
      announced = WEXITSTATUS(status) == worker::k_exit_context_lost;
    }
    else if (WIFSIGNALED(status))
      how = "killed by signal " + std::to_string(WTERMSIG(status));
    if (!why.empty()) how += " (" + why + ")";
  }
  if (m_pid > 0) {
    ++m_lost;
    if (!m_killed_for_timeout && !m_stopping && !announced) ++m_crashed;
    spdlog::info("worker {} {}", m_pid, how);
  }
  m_pid = -1;
  m_ready = false;
  if (m_current) {
    uint64_t job = m_current;
    job_ended(job);
    m_current = 0;
    m_deadline.cancel();
    if (m_killed_for_timeout) {
      m_on_verdict(job, failed(job, VerdictKind::timeout,
                               "the candidate ran past the job deadline of " +
                                   std::to_string(m_settings.job_timeout.count()) +
                                   " s (validation.job_timeout_s); its worker was killed"));
    } else {
      m_on_verdict(
          job, failed(job, VerdictKind::internal, "the worker died during the job (" + how + ")"));
    }
  }
  m_killed_for_timeout = false;
  if (m_stopping) return;
  // Replace the worker when there is work; back off when workers keep dying at start.
  if (std::chrono::steady_clock::now() - m_spawned_at < std::chrono::seconds(2)) ++m_quick_failures;
  if (m_quick_failures >= 3) {
    // The driver or the binary is broken: fail queued work rather than spin.
    spdlog::error("workers keep failing at start ({}); jobs fail until one starts", how);
    auto queue = std::move(m_queue);
    m_queue.clear();
    for (auto& [job, bundle, priority] : queue) {
      m_on_verdict(job, failed(job, VerdictKind::internal,
                               "no worker could start (" + how + "); check worker.driver"));
    }
    m_quick_failures = 0;
    return;
  }
  if (m_queue.empty()) return;
  m_respawn.expires_after(m_quick_failures ? k_respawn_backoff : k_respawn_delay);
  m_respawn.async_wait([this](const boost::system::error_code& e) {
    if (e || m_stopping) return;
    spawn();
    dispatch();
  });
}

} // namespace hone::daemon
