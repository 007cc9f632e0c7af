#include "daemon/registry.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <ctime>

namespace hone::daemon {

namespace {
int64_t unix_now() { return int64_t(std::time(nullptr)); }

// A kernel name as people write it: the mangled name, or the part of a demangled-looking name
// before its parameter list ("saxpy" matches "saxpy" and "_Z5saxpyifPKfPf").
bool name_matches(const std::string& entry, const std::string& name) {
  if (entry == name) return true;
  // Itanium mangling of a plain function: _Z<len><name>...
  std::string prefix = "_Z" + std::to_string(name.size()) + name;
  return entry.rfind(prefix, 0) == 0;
}
} // namespace

Result<void> Registry::load() {
  if (!m_store) return ok();
  auto kernels = m_store->kernels();
  if (!kernels) return kernels.error();
  for (auto& k : *kernels) {
    KernelInfo info;
    info.record = std::move(k);
    KernelKey key = info.record.key;
    m_kernels.emplace(std::move(key), std::move(info));
  }
  return ok();
}

void Registry::attach(uint64_t connection, const proto::Hello& hello, uint32_t peer_uid,
                      uint32_t peer_pid) {
  ProcessInfo p;
  p.connection = connection;
  p.hello = hello;
  p.since = unix_now();
  p.peer_uid = peer_uid;
  p.peer_pid = peer_pid;
  m_processes[connection] = std::move(p);
}

void Registry::detach(uint64_t connection) {
  auto it = m_processes.find(connection);
  if (it == m_processes.end()) return;
  for (auto& [id, seen] : it->second.kernels) {
    if (auto* k = kernel(seen.key)) {
      k->processes.erase(connection);
      k->graphs -= std::min<uint64_t>(k->graphs, seen.graph.graphs);
      k->graph_nodes -= std::min<uint64_t>(k->graph_nodes, seen.graph.nodes);
      k->graph_nodes_serving -= std::min<uint64_t>(k->graph_nodes_serving, seen.graph.nodes_serving);
    }
  }
  m_processes.erase(it);
}

KernelInfo* Registry::kernel(const KernelKey& key) {
  auto it = m_kernels.find(key);
  return it == m_kernels.end() ? nullptr : &it->second;
}

bool Registry::kernels_seen(uint64_t connection, const proto::Kernels& msg, std::string* why) {
  auto pit = m_processes.find(connection);
  if (pit == m_processes.end()) {
    *why = "kernels before hello";
    return false;
  }
  ProcessInfo& p = pit->second;
  if (!msg.arch.empty() && p.hello.arch.empty()) {
    // The device, named once the process initialized CUDA (its hello came before).
    p.hello.device_name = msg.device_name;
    p.hello.arch = msg.arch;
    if (msg.driver_version) p.hello.driver_version = msg.driver_version;
    spdlog::info("process {} uses {} ({})", p.hello.pid, p.hello.device_name, p.hello.arch);
  }
  int64_t now = unix_now();
  for (const auto& k : msg.kernels) {
    auto [sit, inserted] = p.kernels.try_emplace(k.id);
    if (!inserted && sit->second.key != k.key) {
      *why = "kernel id " + std::to_string(k.id) + " announced twice with different keys";
      return false;
    }
    sit->second.key = k.key;
    auto [kit, fresh] = m_kernels.try_emplace(k.key);
    KernelInfo& info = kit->second;
    if (fresh) {
      info.record.key = k.key;
      info.record.first_seen = now;
      info.dirty = true;
    }
    if (info.record.format != k.format || info.record.image_size != k.image_size ||
        (k.source_known && !info.record.source_known)) {
      info.record.format = k.format;
      info.record.image_size = k.image_size;
      info.record.source_known = info.record.source_known || k.source_known;
      info.dirty = true;
    }
    info.record.last_seen = now;
    info.processes.insert(connection);
  }
  return true;
}

bool Registry::stats(uint64_t connection, const proto::Stats& msg, std::string* why,
                     std::vector<std::pair<KernelKey, uint64_t>>* served) {
  auto pit = m_processes.find(connection);
  if (pit == m_processes.end()) {
    *why = "stats before hello";
    return false;
  }
  ProcessInfo& p = pit->second;
  for (const auto& s : msg.kernels) {
    auto sit = p.kernels.find(s.id);
    if (sit == p.kernels.end()) {
      *why = "stats for kernel id " + std::to_string(s.id) + ", which was never announced";
      return false;
    }
    ProcessInfo::Seen& seen = sit->second;
    if (s.launches < seen.launches || s.sampled < seen.sampled || s.sampled_ns < seen.sampled_ns) {
      *why = "counters went backwards for kernel id " + std::to_string(s.id);
      return false;
    }
    uint64_t d_launches = s.launches - seen.launches;
    uint64_t d_sampled = s.sampled - seen.sampled;
    uint64_t d_ns = s.sampled_ns - seen.sampled_ns;
    uint64_t d_variant = s.variant_launches >= seen.variant_launches
                             ? s.variant_launches - seen.variant_launches
                             : 0;
    uint64_t d_fallbacks = s.fallbacks >= seen.fallbacks ? s.fallbacks - seen.fallbacks : 0;
    seen.variant_launches = s.variant_launches;
    seen.fallbacks = s.fallbacks;
    seen.launches = s.launches;
    seen.sampled = s.sampled;
    seen.sampled_ns = s.sampled_ns;
    KernelInfo* k = kernel(seen.key);
    if (!k) continue;
    k->sampled += d_sampled;
    k->sampled_ns += d_ns;
    k->variant_launches += d_variant;
    k->fallbacks += d_fallbacks;
    if (served && d_variant) served->emplace_back(seen.key, d_variant);
    // This process's own mean where it has samples, else what the kernel has overall.
    double mean = s.sampled ? double(s.sampled_ns) / double(s.sampled) : k->mean_ns();
    k->record.launches += d_launches;
    k->record.est_gpu_ns += uint64_t(double(d_launches) * mean);
    k->grid = s.grid;
    k->block = s.block;
    k->record.last_seen = unix_now();
    if (d_launches) k->dirty = true;
    m_launches_total += d_launches;
  }
  for (const auto& g : msg.graph_kernels) {
    auto sit = p.kernels.find(g.id);
    if (sit == p.kernels.end()) {
      *why = "graph stats for kernel id " + std::to_string(g.id) + ", which was never announced";
      return false;
    }
    ProcessInfo::Seen& seen = sit->second;
    if (g.graph_launches < seen.graph.graph_launches || g.graph_launches > seen.launches) {
      *why = "graph launches of kernel id " + std::to_string(g.id) +
             " went backwards or exceed its launches";
      return false;
    }
    if (KernelInfo* k = kernel(seen.key)) {
      k->graph_launches += g.graph_launches - seen.graph.graph_launches;
      k->graphs = k->graphs - std::min<uint64_t>(k->graphs, seen.graph.graphs) + g.graphs;
      k->graph_nodes = k->graph_nodes - std::min<uint64_t>(k->graph_nodes, seen.graph.nodes) + g.nodes;
      k->graph_nodes_serving =
          k->graph_nodes_serving - std::min<uint64_t>(k->graph_nodes_serving, seen.graph.nodes_serving) +
          g.nodes_serving;
    }
    seen.graph = g;
  }
  for (const auto& [id, misses] : msg.guard_misses) {
    auto sit = p.kernels.find(id);
    if (sit == p.kernels.end()) {
      *why = "guard misses for kernel id " + std::to_string(id) + ", which was never announced";
      return false;
    }
    ProcessInfo::Seen& seen = sit->second;
    if (misses < seen.guard_misses) {
      *why = "the guard miss counter of kernel id " + std::to_string(id) + " went backwards";
      return false;
    }
    if (KernelInfo* k = kernel(seen.key)) k->guard_misses += misses - seen.guard_misses;
    seen.guard_misses = misses;
  }
  if (msg.graph_replays < p.graph_replays) {
    *why = "the graph replay counter went backwards";
    return false;
  }
  m_graph_replays_total += msg.graph_replays - p.graph_replays;
  p.graph_replays = msg.graph_replays;
  p.graph_nodes_patched = msg.graph_nodes_patched;
  return true;
}

uint64_t Registry::graph_nodes_patched() const {
  uint64_t n = 0;
  for (const auto& [c, p] : m_processes) n += p.graph_nodes_patched;
  return n;
}

std::vector<const KernelInfo*> Registry::ranked() const {
  std::vector<const KernelInfo*> out;
  out.reserve(m_kernels.size());
  for (const auto& [key, k] : m_kernels) out.push_back(&k);
  std::sort(out.begin(), out.end(), [](const KernelInfo* a, const KernelInfo* b) {
    if (a->record.est_gpu_ns != b->record.est_gpu_ns) {
      return a->record.est_gpu_ns > b->record.est_gpu_ns;
    }
    if (a->record.launches != b->record.launches) return a->record.launches > b->record.launches;
    return a->record.key < b->record.key;
  });
  return out;
}

const KernelInfo* Registry::find(const std::string& name, std::string* why) const {
  if (auto key = KernelKey::parse(name)) {
    auto it = m_kernels.find(*key);
    if (it != m_kernels.end()) return &it->second;
    *why = "no kernel with key " + name;
    return nullptr;
  }
  const KernelInfo* found = nullptr;
  size_t matches = 0;
  for (const auto& [key, k] : m_kernels) {
    if (name_matches(key.entry, name)) {
      found = &k;
      ++matches;
    }
  }
  if (matches == 1) return found;
  *why = matches == 0 ? "no kernel named " + name
                      : "'" + name + "' names " + std::to_string(matches) +
                            " kernels; use the full key (honectl kernels shows them)";
  return nullptr;
}

Result<void> Registry::flush() {
  if (!m_store) return ok();
  for (auto& [key, k] : m_kernels) {
    if (!k.dirty) continue;
    if (auto r = m_store->put_kernel(k.record); !r) return r;
    k.dirty = false;
  }
  return ok();
}

} // namespace hone::daemon
