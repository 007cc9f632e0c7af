// The remote tier in honed (store/README.md, "Remote tier"; docs/security.md): looks kernels up in
// the fleet's remotes before the strategies run, and publishes what this host verified. Requests
// run on a thread of their own, within the remotes' timeouts, so that a remote that is down or
// hangs never delays a launch, a verdict or a start-up; a remote that fails is left alone for a
// while (1 s, doubling up to a minute), and what could not be published is published when it
// answers again. Everything fetched is a candidate: the optimizer validates it here before it
// serves. A variant withdrawn from the fleet (a failed shadow check, honectl disable --fleet) gets
// a tombstone beside its kernel's object: written once, never overwritten by a publish, and looked
// up before a candidate is adopted, before a variant is published, and at an interval for the
// variants this host serves.
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
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace hone::daemon {

namespace asio = boost::asio;

class Fleet {
public:
  // A tombstone found in a remote: the variant it names is withdrawn from the fleet.
  struct Withdrawal {
    store::remote_object::Tombstone tombstone;
    std::string remote;                         // where it was found (display form)
    bool signed_by_fleet = false;
    std::optional<store::VariantRecord> record; // the variant as an object carried it (lookups)
  };
  using Withdrawn = std::function<void(std::vector<Withdrawal>)>;
  // A variant whose tombstone is looked up: one this host serves, adopted or verified.
  struct Watched {
    KernelKey kernel;
    std::string arch;
    uint32_t driver_major = 0;
    VariantId variant;
  };

  struct Found {
    std::vector<store::VariantRecord> candidates; // state imported; empty: nothing usable
    std::vector<store::VariantRecord> withdrawn;  // disabled for the fleet by an operator
    std::vector<Withdrawal> tombstoned;           // candidates a tombstone names: not adopted
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
  // object wins; candidates that a tombstone names are left out (Found::tombstoned). `done` runs
  // on the io_context.
  void lookup(const KernelKey& kernel, const std::string& arch, uint32_t driver_major, Done done);
  // Publishes `variants` (this host's verified variants of one kernel, arch and driver major, and
  // those an operator withdrew from the fleet, as `disabled`) to every writable remote; kept and
  // retried while a remote is unreachable. Before each remote is written, the tombstones of the
  // verified variants are looked up there: a variant one names is left out of the object, and
  // the handler given to on_withdrawn() hears of it.
  void publish(const KernelKey& kernel, const std::string& arch, uint32_t driver_major,
               const std::vector<store::VariantRecord>& variants);

  // Writes the tombstone `t` to every writable remote, create-only (a tombstone already there is
  // kept), retried while a remote is unreachable; it goes out before objects published later.
  void write_tombstone(const store::remote_object::Tombstone& t);
  // Looks the tombstones of `variants` up in the remotes (the first sound one per variant wins; a
  // remote that fails or is backing off is passed over). `done` runs on the io_context with the
  // ones found, always, once.
  void check_tombstones(std::vector<Watched> variants, Withdrawn done);
  // Who hears of the tombstones a publish found (on the io_context).
  void on_withdrawn(Withdrawn handler) {
    std::lock_guard lock(m_mutex);
    m_on_withdrawn = std::move(handler);
  }
  // A variant was withdrawn here because of a tombstone (hone_remote_withdrawals_total).
  void count_withdrawal();

  // The verdict text of a variant an operator disabled for the whole fleet (honectl disable
  // --fleet): published as `disabled`, so that other hosts stop adopting it.
  static constexpr const char* k_withdrawn = "disabled in the fleet by an operator";
  // The verdict of a variant a tombstone withdrew here starts with this, then the tombstone's
  // reason.
  static constexpr const char* k_tombstoned = "withdrawn in the fleet: ";

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
    KernelKey kernel;
    std::string arch;
    uint32_t driver_major = 0;
    std::vector<store::VariantRecord> variants;
    std::vector<size_t> remotes;                  // still to publish to
    std::set<std::pair<VariantId, size_t>> clear; // (variant, remote): no tombstone there
  };
  struct PendingTombstone {
    store::remote_object::Tombstone tombstone;
    std::string bytes;
    std::vector<size_t> remotes; // still to write to
  };

  Fleet(asio::io_context& io, const config::RemoteConfig& config);
  void run();
  void post(std::function<void()> task);
  // Whether `r` may be asked now (its breaker closed); counts a skip otherwise.
  bool usable(size_t r);
  void record(size_t r, const std::string& result, double seconds, const std::string& error = {});
  void retry_pending();
  // Fleet thread: the tombstone of `w` in remote `r`: found (and sound), absent, or an error
  // (recorded). Refused tombstones are logged, counted and treated as absent.
  enum class Probe { found, absent, error };
  Probe probe(size_t r, const Watched& w, std::optional<Withdrawal>* out);
  // Fleet thread: the tombstone of `w` in any remote, or nullopt.
  std::optional<Withdrawal> find_tombstone(const Watched& w);
  // Fleet thread: writes a pending tombstone to remote `r`; false to try again later.
  bool write_tombstone_to(size_t r, const std::string& key, const PendingTombstone& p);

  asio::io_context& m_io;
  config::RemoteConfig m_config;
  std::optional<store::remote_object::FleetKey> m_key;
  std::vector<Remote> m_remotes;
  mutable std::mutex m_mutex;
  std::condition_variable m_wake;
  std::deque<std::function<void()>> m_tasks;
  std::map<std::string, Pending> m_pending; // by object key; fleet thread only
  std::map<std::string, PendingTombstone> m_pending_tombstones; // by key; fleet thread only
  std::map<VariantId, Withdrawal> m_tombstoned; // sound tombstones seen; fleet thread only
  Withdrawn m_on_withdrawn;                     // under m_mutex
  uint64_t m_withdrawals = 0;                  // under m_mutex
  std::map<std::string, std::string> m_refused; // tombstone key -> bytes last refused; m_mutex
  bool m_stop = false;
  std::thread m_thread;
};

} // namespace hone::daemon
