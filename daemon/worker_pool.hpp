// The worker processes (DESIGN.md, "Processes and trust boundaries"): honed runs no GPU code
// itself. A worker (`honed worker`) is spawned per GPU and given one job at a time over a
// socketpair; a job that outlives its deadline gets its worker killed (a timeout verdict), a
// worker that dies is replaced, and the daemon never waits on either.
#pragma once

#include "common/job.hpp"
#include "daemon/connection.hpp"

#include <boost/asio.hpp>

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>

namespace hone::daemon {

struct WorkerSettings {
  std::string driver = "libcuda.so.1";
  std::chrono::seconds job_timeout{120};
  std::chrono::seconds start_timeout{30}; // to say hello: a worker loads the driver first
  double gpu_share = 1.0; // after a job of T seconds the next waits T * (1 - share) / share
  std::string executable; // honed itself; empty: /proc/self/exe
};

class WorkerPool final : public ConnectionHandler {
public:
  using OnVerdict = std::function<void(uint64_t job, const Verdict& verdict)>;

  WorkerPool(asio::io_context& io, WorkerSettings settings, OnVerdict on_verdict);
  ~WorkerPool() override;

  // Queue a job; its verdict arrives through on_verdict (always exactly once). The queue runs
  // in order of priority, highest first, and in order of submission among equals.
  void submit(uint64_t job, std::string bundle, double priority = 0);
  void stop();

  size_t queued() const { return m_queue.size(); }
  bool busy() const { return m_current != 0; }
  uint64_t current() const { return m_current; } // the job in the worker, 0 when idle
  uint64_t workers_started() const { return m_started; }
  uint64_t workers_lost() const { return m_lost; }
  // Of those, the ones that died on their own: not killed for a job past its deadline, not
  // stopped with honed, not exiting as they say they must after a candidate broke their context
  // (worker::k_exit_context_lost). What a crash loop shows as.
  uint64_t workers_crashed() const { return m_crashed; }
  void set_settings(WorkerSettings s) { m_settings = std::move(s); }
  // While paused (the applications keep the GPU busy) no job starts; the queue waits.
  void set_paused(bool paused);
  bool paused() const { return m_paused; }
  // Seconds the worker spent on finished jobs, and from the start of the first job to the end of
  // the last (now, while one runs): their ratio is the share of the GPU validation took.
  double busy_seconds() const { return m_busy_total; }
  double active_seconds() const;
  // Seconds the worker spent on `job` (0 when unknown); forgotten once asked.
  double job_seconds(uint64_t job);

  // ConnectionHandler (the worker's end of the socketpair)
  bool on_frame(Connection& c, const proto::FrameHeader& h, std::string_view payload,
                UniqueFd fd) override;
  void on_closed(Connection& c, const std::string& why) override;

private:
  bool spawn();
  void dispatch();
  void finish(const Verdict& v);
  void job_ended(uint64_t job); // timing and the GPU-share gate
  void worker_gone(const std::string& why);

  asio::io_context& m_io;
  WorkerSettings m_settings;
  OnVerdict m_on_verdict;
  std::shared_ptr<Connection> m_conn;
  int m_pid = -1;
  bool m_ready = false;       // hello received
  bool m_stopping = false;
  bool m_killed_for_timeout = false;
  struct Queued {
    uint64_t job;
    std::string bundle;
    double priority;
  };
  std::deque<Queued> m_queue;
  uint64_t m_current = 0;     // job in the worker, 0 when idle
  asio::steady_timer m_deadline;
  asio::steady_timer m_respawn;
  asio::steady_timer m_gate;  // the next job may start at m_not_before
  std::chrono::steady_clock::time_point m_not_before;
  std::chrono::steady_clock::time_point m_busy_since;
  std::map<uint64_t, double> m_job_seconds;
  double m_busy_total = 0;
  std::chrono::steady_clock::time_point m_first_start; // of the first job ever dispatched
  std::chrono::steady_clock::time_point m_last_end;    // of the last job that ended
  bool m_paused = false;
  uint64_t m_started = 0;
  uint64_t m_lost = 0;
  uint64_t m_crashed = 0;
  uint32_t m_quick_failures = 0;
  std::chrono::steady_clock::time_point m_spawned_at;
  uint64_t m_next_conn_id = 1ull << 40;
};

} // namespace hone::daemon
