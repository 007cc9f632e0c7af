// What honed knows about attached processes and their kernels (DESIGN.md, "Hot kernels").
//
// Launch counters arrive cumulative per process; the registry turns them into deltas, sums them
// over processes and over time, and estimates each kernel's device time from the sampled launches.
// Kernels outlive processes and restarts (the store keeps them); processes live as long as their
// connection.
#pragma once

#include "common/capture.hpp"

#include "common/protocol.hpp"
#include "store/store.hpp"

#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace hone::daemon {

struct ProcessInfo {
  uint64_t connection = 0;
  proto::Hello hello;
  int64_t since = 0; // unix seconds
  uint32_t peer_uid = 0;
  uint32_t peer_pid = 0;
  struct Seen {
    KernelKey key;
    uint64_t launches = 0;   // last cumulative values the process reported
    uint64_t sampled = 0;
    uint64_t sampled_ns = 0;
    uint64_t variant_launches = 0;
    uint64_t fallbacks = 0;
    uint64_t guard_misses = 0;
    proto::GraphKernelStats graph; // its part in the process's CUDA graphs, as last reported
  };
  std::unordered_map<uint64_t, Seen> kernels; // by the shim's kernel id
  uint64_t graph_replays = 0;       // cumulative, as last reported
  uint64_t graph_nodes_patched = 0; // now
};

struct KernelInfo {
  store::KernelRecord record;          // what persists
  uint64_t sampled = 0;                // this daemon run
  uint64_t sampled_ns = 0;
  std::array<uint32_t, 3> grid{};
  std::array<uint32_t, 3> block{};
  uint64_t variant_launches = 0;       // launches served by a variant (this daemon run)
  uint64_t fallbacks = 0;              // variant launches that fell back to the original
  uint64_t guard_misses = 0;           // launches a variant's guard refused (the original ran)
  std::set<uint64_t> processes;        // connections running it now
  // CUDA graphs: launches of it that were replays (this daemon run), and over the processes
  // attached now, the executable graphs holding it, their kernel nodes running it, and of those
  // the nodes pointed at a variant.
  uint64_t graph_launches = 0;
  uint64_t graphs = 0;
  uint64_t graph_nodes = 0;
  uint64_t graph_nodes_serving = 0;
  // What the strategies have to work on, once the image is in: "PTX (compute_90 entry of the
  // fatbin)", or "none: <why>" (SASS only); and why each strategy that tried did not apply.
  std::string ptx;
  std::map<std::string, std::string> skipped;
  // What hone has to work from (agent::CodeKind, as a string; empty until the image is in) and
  // whether the strategies can work on it.
  std::string code;
  bool workable = false;
  // Why the last capture of its shadow inputs was refused by the process (a graph the shim
  // observes only, buffers over the cap, ...); empty once one succeeds.
  std::string capture_refused;
  // The buffers of the last capture the process sent: each by its bounded range or whole
  // (shim/README.md, "Bounded captures"), and why whole when a bounds probe could not run.
  std::vector<CaptureBuffer> captured_buffers;
  std::string captured_whole_why;
  // The variant honed last pushed to the processes running it (hex id); empty when none serves.
  std::string serving;
  bool dirty = false;                  // to be written to the store

  // Mean device time of one launch, from samples; 0 when none.
  double mean_ns() const { return sampled ? double(sampled_ns) / double(sampled) : 0.0; }
};

class Registry {
public:
  explicit Registry(store::Store* store) : m_store(store) {}

  // Kernels the store remembers from earlier runs.
  Result<void> load();

  void attach(uint64_t connection, const proto::Hello& hello, uint32_t peer_uid, uint32_t peer_pid);
  void detach(uint64_t connection);
  // False with `why` when the message contradicts what the process said before.
  bool kernels_seen(uint64_t connection, const proto::Kernels& msg, std::string* why);
  // `served` (optional) gets, per kernel, the launches variants served since the last report.
  bool stats(uint64_t connection, const proto::Stats& msg, std::string* why,
             std::vector<std::pair<KernelKey, uint64_t>>* served = nullptr);

  const std::map<uint64_t, ProcessInfo>& processes() const { return m_processes; }
  const std::unordered_map<KernelKey, KernelInfo>& kernels() const { return m_kernels; }
  KernelInfo* kernel(const KernelKey& key);
  // Kernels ranked by estimated device time, most first.
  std::vector<const KernelInfo*> ranked() const;
  // Resolve a user's name for a kernel: a full key, or an entry name (mangled or not) that is
  // unambiguous. Sets `why` when nothing or more than one matches.
  const KernelInfo* find(const std::string& name, std::string* why) const;

  // Write changed kernels to the store (one batch of puts).
  Result<void> flush();

  uint64_t launches_total() const { return m_launches_total; }
  // Graph replays seen (this daemon run), and kernel nodes serving variants now.
  uint64_t graph_replays_total() const { return m_graph_replays_total; }
  uint64_t graph_nodes_patched() const;

private:
  store::Store* m_store;
  std::map<uint64_t, ProcessInfo> m_processes;
  std::unordered_map<KernelKey, KernelInfo> m_kernels;
  uint64_t m_launches_total = 0;
  uint64_t m_graph_replays_total = 0;
};

} // namespace hone::daemon
