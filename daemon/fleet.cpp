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
  post([this, key, object = std::move(object)]() mutable {
    Pending p;
    p.object = std::move(object);
    for (size_t r = 0; r < m_remotes.size(); ++r) {
      if (!m_remotes[r].read_only) p.remotes.push_back(r);
    }
    m_pending[key] = std::move(p);
  });
}

void Fleet::retry_pending() {
  for (auto it = m_pending.begin(); it != m_pending.end();) {
    Pending& p = it->second;
    std::vector<size_t> left;
    for (size_t r : p.remotes) {
      if (!usable(r)) {
        left.push_back(r);
        continue;
      }
      auto t0 = Clock::now();
      auto put = m_remotes[r].backend->put(it->first, p.object);
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
                   {"last_error", r.last_error},
                   {"last_ok", r.last_ok},
                   {"results", results}});
  }
  return json{{"remotes", out},
              {"signing", m_key.has_value()},
              {"require_signature", m_config.require_signature}};
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
