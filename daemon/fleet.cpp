#include "daemon/fleet.hpp"
#include "daemon/metrics.hpp"

#include "store/records.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <ctime>

namespace hone::daemon {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// Upper bounds of the latency histogram's buckets, in seconds.
constexpr double k_latency_bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
constexpr size_t k_buckets = std::size(k_latency_bounds) + 1;
constexpr auto k_retry_every = std::chrono::seconds(2);

std::chrono::milliseconds backoff(uint32_t failures) {
  uint32_t shift = std::min<uint32_t>(failures > 0 ? failures - 1 : 0, 6);
  return std::chrono::milliseconds(std::min<int64_t>(int64_t(1000) << shift, 60000));
}

} // namespace

Result<std::unique_ptr<Fleet>> Fleet::create(asio::io_context& io,
                                             const config::RemoteConfig& config) {
  std::unique_ptr<Fleet> f(new Fleet(io, config));
  if (!config.key_file.empty()) {
    auto k = store::remote_object::read_key(config.key_file.string());
    if (!k) return make_error("store.remote.key_file: " + k.error().message);
    f->m_key = std::move(*k);
  }
  store::remote::Limits limits;
  limits.connect_timeout = std::chrono::milliseconds(config.connect_timeout_ms);
  limits.timeout = std::chrono::milliseconds(config.timeout_ms);
  limits.max_object_bytes = uint64_t(config.max_object_mb) << 20;
  for (size_t i = 0; i < config.urls.size(); ++i) {
    auto e = store::remote::parse_url(config.urls[i]);
    if (!e) return make_error("store.remote.urls[" + std::to_string(i) + "]: " + e.error().message);
    auto b = store::remote::connect(*e, limits);
    if (!b) return make_error("store.remote.urls[" + std::to_string(i) + "]: " + b.error().message);
    spdlog::info("fleet: remote {}", e->display);
    Remote r;
    r.display = e->display;
    r.read_only = e->read_only;
    r.backend = std::move(*b);
    r.latency_buckets.assign(k_buckets, 0);
    f->m_remotes.push_back(std::move(r));
  }
  if (!f->m_remotes.empty()) f->m_thread = std::thread([p = f.get()] { p->run(); });
  return f;
}

Fleet::Fleet(asio::io_context& io, const config::RemoteConfig& config)
    : m_io(io), m_config(config) {}

Fleet::~Fleet() {
  {
    std::lock_guard lock(m_mutex);
    m_stop = true;
  }
  m_wake.notify_all();
  if (m_thread.joinable()) m_thread.join();
}

void Fleet::post(std::function<void()> task) {
  if (m_remotes.empty()) return;
  {
    std::lock_guard lock(m_mutex);
    m_tasks.push_back(std::move(task));
  }
  m_wake.notify_one();
}

void Fleet::run() {
  while (true) {
    std::function<void()> task;
    {
      std::unique_lock lock(m_mutex);
      m_wake.wait_for(lock, k_retry_every, [&] { return m_stop || !m_tasks.empty(); });
      if (m_stop) return;
      if (!m_tasks.empty()) {
        task = std::move(m_tasks.front());
        m_tasks.pop_front();
      }
    }
    if (task) task();
    retry_pending();
  }
}

bool Fleet::usable(size_t r) {
  std::lock_guard lock(m_mutex);
  Remote& rem = m_remotes[r];
  if (rem.failures > 0 && Clock::now() < rem.open_until) {
    ++rem.results["skipped"];
    return false;
  }
  return true;
}

void Fleet::record(size_t r, const std::string& result, double seconds, const std::string& error) {
  std::lock_guard lock(m_mutex);
  Remote& rem = m_remotes[r];
  ++rem.results[result];
  size_t b = 0;
  while (b < std::size(k_latency_bounds) && seconds > k_latency_bounds[b]) ++b;
  ++rem.latency_buckets[b];
  rem.latency_sum += seconds;
  ++rem.latency_count;
  if (result == "error") {
    ++rem.failures;
    rem.open_until = Clock::now() + backoff(rem.failures);
    rem.last_error = error;
  } else {
    rem.failures = 0;
    rem.last_ok = std::time(nullptr);
  }
}

void Fleet::lookup(const KernelKey& kernel, const std::string& arch, uint32_t driver_major,
                   Done done) {
  if (m_remotes.empty()) {
    asio::post(m_io, [done = std::move(done)] { done({}); });
    return;
  }
  post([this, kernel, arch, driver_major, done = std::move(done)]() mutable {
    const std::string key = store::remote_object::key(kernel, arch, driver_major);
    Found found;
    for (size_t r = 0; r < m_remotes.size() && found.candidates.empty(); ++r) {
      if (!usable(r)) continue;
      auto t0 = Clock::now();
      auto got = m_remotes[r].backend->get(key);
      double s = std::chrono::duration<double>(Clock::now() - t0).count();
      if (!got) {
        record(r, "error", s, got.error().message);
        spdlog::warn("fleet: {}", got.error().message); // the message names the remote
        continue;
      }
      if (!*got) {
        record(r, "miss", s);
        continue;
      }
      auto decoded = store::remote_object::decode(**got, m_key ? &*m_key : nullptr,
                                                  m_config.require_signature,
                                                  uint64_t(m_config.max_object_mb) << 20);
      std::string why;
      std::vector<store::VariantRecord> withdrawn;
      if (decoded) {
        for (const auto& bytes : decoded->records) {
          auto v = store::records::decode_variant(bytes);
          if (!v) {
            why = "a record does not decode: " + v.error().message;
            break;
          }
          // Only what this lookup asked for, and only what is what its id says.
          if (v->kernel != kernel || v->arch != arch || v->driver_major != driver_major ||
              (v->state != store::VariantState::verified &&
               v->state != store::VariantState::disabled) ||
              v->id != store::variant_id_of(*v)) {
            why = "a record for another kernel or target, or whose id does not match its content";
            break;
          }
          if (v->state == store::VariantState::disabled) {
            withdrawn.push_back(std::move(*v)); // an operator took it out of the fleet
            continue;
          }
          v->state = store::VariantState::imported;
          found.candidates.push_back(std::move(*v));
        }
        std::erase_if(found.candidates, [&](const store::VariantRecord& c) {
          return std::any_of(withdrawn.begin(), withdrawn.end(),
                             [&](const store::VariantRecord& w) { return w.id == c.id; });
        });
        if (!withdrawn.empty()) {
          spdlog::info("fleet: {}: {} variant(s) of {} withdrawn from the fleet by an operator: "
                       "not adopted",
                       m_remotes[r].display, withdrawn.size(), kernel.entry);
        }
      } else {
        why = decoded.error().message;
      }
      if (!why.empty()) {
        found.candidates.clear();
        withdrawn.clear();
        record(r, "rejected", s);
        std::lock_guard lock(m_mutex);
        m_remotes[r].last_error = "object " + key + " rejected: " + why;
        spdlog::warn("fleet: {}: object {} for {} rejected: {}", m_remotes[r].display, key,
                     kernel.entry, why);
        continue;
      }
      // A tombstone wins over the object, whoever wrote the object last: a candidate one names is
      // not adopted (the optimizer records it as withdrawn).
      for (auto it = found.candidates.begin(); it != found.candidates.end();) {
        auto t = find_tombstone(Watched{kernel, arch, driver_major, it->id});
        if (!t) {
          ++it;
          continue;
        }
        spdlog::info("fleet: {}: variant {} of {} has a tombstone ({}): not adopted",
                     m_remotes[r].display, it->id.hex(), kernel.entry, t->tombstone.reason);
        t->record = std::move(*it);
        found.tombstoned.push_back(std::move(*t));
        it = found.candidates.erase(it);
      }
      record(r, found.candidates.empty() ? "miss" : "hit", s);
      found.remote = m_remotes[r].display;
      for (auto& w : withdrawn) found.withdrawn.push_back(std::move(w));
    }
    asio::post(m_io, [done = std::move(done), found = std::move(found)]() mutable {
      done(std::move(found));
    });
  });
}

void Fleet::publish(const KernelKey& kernel, const std::string& arch, uint32_t driver_major,
                    const std::vector<store::VariantRecord>& variants) {
  if (m_remotes.empty() || variants.empty()) return;
  std::vector<std::string> records;
  for (const auto& v : variants) {
    auto e = store::records::encode(v);
    if (!e) {
      spdlog::error("fleet: cannot encode variant {}: {}", v.id.hex(), e.error().message);
      return;
    }
    records.push_back(std::move(*e));
  }
  std::string object = store::remote_object::encode(records, m_key ? &*m_key : nullptr);
  if (object.size() > (uint64_t(m_config.max_object_mb) << 20)) {
    spdlog::warn("fleet: the variants of {} make an object of {} bytes, over max_object_mb: not "
                 "published",
                 kernel.entry, object.size());
    return;
  }
  std::string key = store::remote_object::key(kernel, arch, driver_major);
  Pending p;
  p.kernel = kernel;
  p.arch = arch;
  p.driver_major = driver_major;
  p.variants = variants;
  post([this, key, p = std::move(p)]() mutable {
    for (size_t r = 0; r < m_remotes.size(); ++r) {
      if (!m_remotes[r].read_only) p.remotes.push_back(r);
    }
    m_pending[key] = std::move(p);
  });
}

void Fleet::write_tombstone(const store::remote_object::Tombstone& t) {
  if (m_remotes.empty()) return;
  std::string bytes = store::remote_object::encode_tombstone(t, m_key ? &*m_key : nullptr);
  std::string key = store::remote_object::tombstone_key(t.kernel, t.arch, t.driver_major, t.variant);
  post([this, key, t, bytes = std::move(bytes)]() mutable {
    // From now on this host's publishes leave the variant out, whatever its store says.
    m_tombstoned[t.variant] = Withdrawal{t, "this host", m_key.has_value(), std::nullopt};
    PendingTombstone p;
    p.tombstone = t;
    p.bytes = std::move(bytes);
    for (size_t r = 0; r < m_remotes.size(); ++r) {
      if (!m_remotes[r].read_only) p.remotes.push_back(r);
    }
    m_pending_tombstones[key] = std::move(p);
  });
}

void Fleet::check_tombstones(std::vector<Watched> variants, Withdrawn done) {
  if (m_remotes.empty()) {
    asio::post(m_io, [done = std::move(done)] { done({}); });
    return;
  }
  post([this, variants = std::move(variants), done = std::move(done)]() mutable {
    std::vector<Withdrawal> found;
    for (const auto& w : variants) {
      if (auto t = find_tombstone(w)) found.push_back(std::move(*t));
    }
    asio::post(m_io, [done = std::move(done), found = std::move(found)]() mutable {
      done(std::move(found));
    });
  });
}

void Fleet::count_withdrawal() {
  std::lock_guard lock(m_mutex);
  ++m_withdrawals;
}

Fleet::Probe Fleet::probe(size_t r, const Watched& w, std::optional<Withdrawal>* out) {
  if (auto c = m_tombstoned.find(w.variant); c != m_tombstoned.end()) {
    *out = c->second;
    return Probe::found;
  }
  if (!usable(r)) return Probe::error;
  const std::string key =
      store::remote_object::tombstone_key(w.kernel, w.arch, w.driver_major, w.variant);
  auto t0 = Clock::now();
  auto got = m_remotes[r].backend->get(key);
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!got) {
    record(r, "error", s, got.error().message);
    spdlog::warn("fleet: {}", got.error().message);
    return Probe::error;
  }
  if (!*got) {
    record(r, "tombstone_absent", s);
    return Probe::absent;
  }
  store::remote_object::Tombstone expected;
  expected.variant = w.variant;
  expected.kernel = w.kernel;
  expected.arch = w.arch;
  expected.driver_major = w.driver_major;
  auto d = store::remote_object::decode_tombstone(**got, m_key ? &*m_key : nullptr,
                                                  m_config.require_signature, expected);
  if (!d) {
    // Refused, and it changes nothing: the variant stays as it is. Logged once per content.
    record(r, "tombstone_rejected", s);
    std::string why = "tombstone " + key + " refused: " + d.error().message;
    bool again;
    {
      std::lock_guard lock(m_mutex);
      m_remotes[r].last_error = why;
      auto& seen = m_refused[key];
      again = seen == **got;
      seen = **got;
    }
    if (!again) spdlog::warn("fleet: {}: {}", m_remotes[r].display, why);
    return Probe::absent;
  }
  record(r, "tombstone_found", s);
  Withdrawal found{std::move(d->tombstone), m_remotes[r].display, d->signed_by_fleet, std::nullopt};
  m_tombstoned[w.variant] = found;
  *out = std::move(found);
  return Probe::found;
}

std::optional<Fleet::Withdrawal> Fleet::find_tombstone(const Watched& w) {
  for (size_t r = 0; r < m_remotes.size(); ++r) {
    std::optional<Withdrawal> t;
    if (probe(r, w, &t) == Probe::found) return t;
  }
  return std::nullopt;
}

bool Fleet::write_tombstone_to(size_t r, const std::string& key, const PendingTombstone& p) {
  auto& backend = *m_remotes[r].backend;
  auto t0 = Clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  auto made = backend.create(key, p.bytes);
  if (!made) {
    record(r, "error", seconds(), made.error().message);
    spdlog::warn("fleet: writing tombstone {}: {} (retried later)", key, made.error().message);
    return false;
  }
  if (*made) {
    record(r, "tombstone_written", seconds());
    spdlog::info("fleet: wrote tombstone {} to {}", key, m_remotes[r].display);
    return true;
  }
  // Something is there. A sound tombstone of another host that withdrew the variant first stays,
  // with its reason; anything else (garbage, unsigned where signatures are required, signed with
  // another key) would block the withdrawal, and is replaced.
  auto there = backend.get(key);
  if (!there) {
    record(r, "error", seconds(), there.error().message);
    spdlog::warn("fleet: writing tombstone {}: {} (retried later)", key, there.error().message);
    return false;
  }
  std::string why = "it went away";
  if (*there) {
    auto d = store::remote_object::decode_tombstone(**there, m_key ? &*m_key : nullptr,
                                                    m_config.require_signature, p.tombstone);
    if (d) {
      record(r, "tombstone_found", seconds());
      spdlog::debug("fleet: tombstone {} is already in {} ({})", key, m_remotes[r].display,
                    d->tombstone.reason);
      return true;
    }
    why = d.error().message;
  }
  auto put = backend.put(key, p.bytes);
  if (!put) {
    record(r, "error", seconds(), put.error().message);
    spdlog::warn("fleet: writing tombstone {}: {} (retried later)", key, put.error().message);
    return false;
  }
  record(r, "tombstone_written", seconds());
  spdlog::warn("fleet: wrote tombstone {} to {} over what was there, which failed its checks: {}",
               key, m_remotes[r].display, why);
  return true;
}

void Fleet::retry_pending() {
  // Tombstones first: an object published after a withdrawal finds its tombstone already there.
  for (auto it = m_pending_tombstones.begin(); it != m_pending_tombstones.end();) {
    PendingTombstone& p = it->second;
    std::vector<size_t> left;
    for (size_t r : p.remotes) {
      if (!usable(r) || !write_tombstone_to(r, it->first, p)) left.push_back(r);
    }
    p.remotes = std::move(left);
    it = p.remotes.empty() ? m_pending_tombstones.erase(it) : std::next(it);
  }
  std::vector<Withdrawal> withdrawn;
  for (auto it = m_pending.begin(); it != m_pending.end();) {
    Pending& p = it->second;
    std::vector<size_t> left;
    for (size_t r : p.remotes) {
      if (!usable(r)) {
        left.push_back(r);
        continue;
      }
      // The publisher looks the tombstones up first, in the remote it writes: a variant withdrawn
      // from the fleet is never published again, whatever this host's store says.
      bool failed = false;
      for (const auto& v : p.variants) {
        if (v.state != store::VariantState::verified || p.clear.count({v.id, r})) continue;
        std::optional<Withdrawal> t;
        Probe pr = probe(r, Watched{p.kernel, p.arch, p.driver_major, v.id}, &t);
        if (pr == Probe::error) {
          failed = true;
          break;
        }
        if (pr == Probe::found) {
          if (std::none_of(withdrawn.begin(), withdrawn.end(), [&](const Withdrawal& w) {
                return w.tombstone.variant == v.id;
              })) {
            withdrawn.push_back(std::move(*t));
          }
        } else {
          p.clear.insert({v.id, r});
        }
      }
      if (failed) {
        left.push_back(r);
        continue;
      }
      std::vector<std::string> records;
      for (const auto& v : p.variants) {
        if (v.state == store::VariantState::verified && m_tombstoned.count(v.id)) continue;
        if (auto e = store::records::encode(v)) records.push_back(std::move(*e));
      }
      if (records.empty()) {
        spdlog::info("fleet: nothing left to publish as {} to {}: every variant has a tombstone",
                     it->first, m_remotes[r].display);
        continue;
      }
      std::string object = store::remote_object::encode(records, m_key ? &*m_key : nullptr);
      auto t0 = Clock::now();
      auto put = m_remotes[r].backend->put(it->first, object);
      double s = std::chrono::duration<double>(Clock::now() - t0).count();
      if (put) {
        record(r, "published", s);
        spdlog::info("fleet: published {} to {}", it->first, m_remotes[r].display);
      } else {
        record(r, "error", s, put.error().message);
        spdlog::warn("fleet: publishing {}: {} (retried later)", it->first, put.error().message);
        left.push_back(r);
      }
    }
    p.remotes = std::move(left);
    it = p.remotes.empty() ? m_pending.erase(it) : std::next(it);
  }
  Withdrawn to;
  {
    std::lock_guard lock(m_mutex);
    to = m_on_withdrawn;
  }
  if (!withdrawn.empty() && to) {
    asio::post(m_io, [to = std::move(to), found = std::move(withdrawn)]() mutable {
      to(std::move(found));
    });
  }
}

json Fleet::status_json() const {
  std::lock_guard lock(m_mutex);
  json out = json::array();
  auto now = Clock::now();
  for (const auto& r : m_remotes) {
    json results = json::object();
    for (const auto& [k, v] : r.results) results[k] = v;
    bool open = r.failures > 0 && now < r.open_until;
    out.push_back({{"remote", r.display},
                   {"read_only", r.read_only},
                   {"reachable", r.failures == 0 && r.latency_count > 0},
                   {"backing_off", open},
                   {"failures_in_a_row", r.failures},
                   {"hits", r.results.count("hit") ? r.results.at("hit") : 0},
                   {"misses", r.results.count("miss") ? r.results.at("miss") : 0},
                   {"published", r.results.count("published") ? r.results.at("published") : 0},
                   {"rejected", r.results.count("rejected") ? r.results.at("rejected") : 0},
                   {"errors", r.results.count("error") ? r.results.at("error") : 0},
                   {"tombstones_found",
                    r.results.count("tombstone_found") ? r.results.at("tombstone_found") : 0},
                   {"tombstones_written",
                    r.results.count("tombstone_written") ? r.results.at("tombstone_written") : 0},
                   {"tombstones_rejected",
                    r.results.count("tombstone_rejected") ? r.results.at("tombstone_rejected") : 0},
                   {"last_error", r.last_error},
                   {"last_ok", r.last_ok},
                   {"results", results}});
  }
  return json{{"remotes", out},
              {"signing", m_key.has_value()},
              {"require_signature", m_config.require_signature},
              {"tombstone_interval_s", m_config.tombstone_interval_s},
              {"withdrawals", m_withdrawals}};
}

std::string Fleet::metrics_text() const {
  std::lock_guard lock(m_mutex);
  if (m_remotes.empty()) return {};
  std::string out =
      "# HELP hone_remote_requests_total Requests to the remote tier, by remote and result.\n"
      "# TYPE hone_remote_requests_total counter\n";
  for (const auto& r : m_remotes) {
    for (const auto& [result, n] : r.results) {
      out += "hone_remote_requests_total{backend=\"" + escape_label(r.display) + "\",result=\"" +
             result + "\"} " + std::to_string(n) + "\n";
    }
  }
  out += "# HELP hone_remote_withdrawals_total Variants this host withdrew because a tombstone in "
         "the remote tier named them.\n"
         "# TYPE hone_remote_withdrawals_total counter\n"
         "hone_remote_withdrawals_total " + std::to_string(m_withdrawals) + "\n";
  out += "# HELP hone_remote_request_seconds Time of requests to the remote tier.\n"
         "# TYPE hone_remote_request_seconds histogram\n";
  for (const auto& r : m_remotes) {
    std::string label = "backend=\"" + escape_label(r.display) + "\"";
    uint64_t cumulative = 0;
    for (size_t b = 0; b < k_buckets; ++b) {
      cumulative += r.latency_buckets[b];
      std::string le = b < std::size(k_latency_bounds) ? std::to_string(k_latency_bounds[b]) : "+Inf";
      if (le != "+Inf") {
        while (le.back() == '0') le.pop_back();
        if (le.back() == '.') le.pop_back();
      }
      out += "hone_remote_request_seconds_bucket{" + label + ",le=\"" + le + "\"} " +
             std::to_string(cumulative) + "\n";
    }
    out += "hone_remote_request_seconds_sum{" + label + "} " + std::to_string(r.latency_sum) + "\n";
    out += "hone_remote_request_seconds_count{" + label + "} " + std::to_string(r.latency_count) +
           "\n";
  }
  return out;
}

} // namespace hone::daemon
