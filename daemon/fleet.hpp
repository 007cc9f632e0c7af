// The remote tier in honed (store/README.md, "Remote tier"; docs/security.md): looks kernels up in
// the fleet's remotes before the strategies run, and publishes what this host verified. Requests
// run on a thread of their own, within the remotes' timeouts, so that a remote that is down or
// hangs never delays a launch, a verdict or a start-up; a remote that fails is left alone for a
// while (1 s, doubling up to a minute), and what could not be published is published when it
// answers again. Everything fetched is a candidate: the optimizer validates it here before it
// serves.
#pragma once

#include "common/identity.hpp"
#include "config/config.hpp"
#include "store/remote.hpp"
#include "store/remote_object.hpp"
#include "store/store.hpp"

#include <boost/asio.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace hone::daemon {

namespace asio = boost::asio;

class Fleet {
public:
  struct Found {
    std::vector<store::VariantRecord> candidates; // state imported; empty: nothing usable
    std::vector<store::VariantRecord> withdrawn;  // disabled for the fleet by an operator
    std::string remote;                           // where they came from (display form)
  };
  using Done = std::function<void(Found)>;

  // Errors name the URL (never its secrets) and what is wrong with it.
  static Result<std::unique_ptr<Fleet>> create(asio::io_context& io,
                                               const config::RemoteConfig& config);
  ~Fleet();
  Fleet(const Fleet&) = delete;
  Fleet& operator=(const Fleet&) = delete;

  bool enabled() const { return !m_remotes.empty(); }

  // Looks `kernel` up for `arch` and `driver_major`: the remotes in order, the first with a sound
  // object wins. `done` runs on the io_context.
  void lookup(const KernelKey& kernel, const std::string& arch, uint32_t driver_major, Done done);
  // Publishes `variants` (this host's verified variants of one kernel, arch and driver major, and
  // those an operator withdrew from the fleet, as `disabled`) to every writable remote; kept and
  // retried while a remote is unreachable.
  void publish(const KernelKey& kernel, const std::string& arch, uint32_t driver_major,
               const std::vector<store::VariantRecord>& variants);

  // The verdict text of a variant an operator disabled for the whole fleet (honectl disable
  // --fleet): published as `disabled`, so that other hosts stop adopting it.
  static constexpr const char* k_withdrawn = "disabled in the fleet by an operator";

  // honectl fleet: each remote's state and counters.
  nlohmann::json status_json() const;
  // Prometheus lines: hone_remote_requests_total{backend,result}, the latency histogram.
  std::string metrics_text() const;

private:
  struct Remote {
    std::unique_ptr<store::remote::Backend> backend; // used on the fleet's thread only
    std::string display;
    bool read_only = false;
    // under m_mutex
    uint32_t failures = 0; // in a row
    std::chrono::steady_clock::time_point open_until{};
    std::map<std::string, uint64_t> results; // hit, miss, published, rejected, error, skipped
    std::string last_error;
    int64_t last_ok = 0;
    std::vector<uint64_t> latency_buckets; // per k_latency_bounds, then +Inf
    double latency_sum = 0;
    uint64_t latency_count = 0;
  };
  struct Pending {
    std::string object;
    std::vector<size_t> remotes; // still to publish to
  };

  Fleet(asio::io_context& io, const config::RemoteConfig& config);
  void run();
  void post(std::function<void()> task);
  // Whether `r` may be asked now (its breaker closed); counts a skip otherwise.
  bool usable(size_t r);
  void record(size_t r, const std::string& result, double seconds, const std::string& error = {});
  void retry_pending();

  asio::io_context& m_io;
  config::RemoteConfig m_config;
  std::optional<store::remote_object::FleetKey> m_key;
  std::vector<Remote> m_remotes;
  mutable std::mutex m_mutex;
  std::condition_variable m_wake;
  std::deque<std::function<void()>> m_tasks;
  std::map<std::string, Pending> m_pending; // by object key; fleet thread only
  bool m_stop = false;
  std::thread m_thread;
};

} // namespace hone::daemon
