// Control requests (honectl) and the status and metrics views.
//
// A control frame carries one JSON object {"cmd": "...", ...}; the reply is a control frame with
// the same seq and {"ok": true, "result": ...} or {"ok": false, "error": "..."}. Files travel as
// descriptors (export replies with one, import sends one), so honectl reads and writes them with
// its own permissions.
#include "daemon/daemon.hpp"
#include "daemon/metrics.hpp"

#include "common/version.hpp"
#include "store/records.hpp"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstdio>
#include <map>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace hone::daemon {

using nlohmann::json;

namespace {

constexpr const char* k_status_schema = "hone.status/1";

const char* format_name(proto::ImageFormat f) {
  switch (f) {
  case proto::ImageFormat::ptx:
    return "ptx";
  case proto::ImageFormat::cubin:
    return "cubin";
  case proto::ImageFormat::fatbin:
    return "fatbin";
  default:
    return "unknown";
  }
}

// Per buffer of the last capture: which parameter, how many bytes were captured, and whether by
// a bounded range (with its offset in the allocation) or the whole allocation.
json captured_buffers_json(const KernelInfo& k) {
  json out = json::array();
  for (const auto& b : k.captured_buffers) {
    out.push_back({{"param", b.param},
                   {"field", b.field},
                   {"bounded", b.bounded},
                   {"bytes", b.size},
                   {"allocation_bytes", b.allocation_size()},
                   {"range_offset", b.range_offset()}});
  }
  return out;
}

json kernel_json(const KernelInfo& k) {
  const auto& r = k.record;
  return json{{"key", r.key.str()},
              {"name", r.key.entry},
              {"image", r.key.image.hex()},
              {"format", format_name(r.format)},
              {"image_size", r.image_size},
              {"source_known", r.source_known},
              {"state", r.disabled ? "disabled" : store::to_string(r.state)},
              {"disabled", r.disabled},
              {"launches", r.launches},
              {"est_gpu_ns", r.est_gpu_ns},
              {"mean_ns", k.mean_ns()},
              {"sampled", k.sampled},
              {"processes", k.processes.size()},
              {"variant_launches", k.variant_launches},
              {"serving", k.serving},
              {"runs_as", k.graph_launches == 0          ? "launch"
                          : k.graph_launches >= r.launches ? "graph"
                                                           : "launch+graph"},
              {"graph_launches", k.graph_launches},
              {"graphs", k.graphs},
              {"graph_nodes", k.graph_nodes},
              {"graph_nodes_serving", k.graph_nodes_serving},
              {"fallbacks", k.fallbacks},
              {"guard_misses", k.guard_misses},
              {"grid", k.grid},
              {"block", k.block},
              {"first_seen", r.first_seen},
              {"last_seen", r.last_seen},
              {"tried", r.tried},
              {"ptx", k.ptx},
              {"code", k.code.empty() ? "unknown" : k.code},
              {"workable", k.workable},
              {"capture_refused", k.capture_refused},
              {"captured_buffers", captured_buffers_json(k)},
              {"captured_whole_why", k.captured_whole_why},
              {"skipped", k.skipped}};
}

json variant_json(const store::VariantRecord& v, bool with_evidence) {
  json j{{"id", v.id.hex()},
         {"kernel", v.kernel.str()},
         {"arch", v.arch},
         {"driver_major", v.driver_major},
         {"strategy", v.strategy},
         {"entry", v.entry},
         {"state", store::to_string(v.state)},
         {"speedup", v.speedup},
         {"noise", v.noise},
         {"verdict", v.verdict},
         {"created", v.created},
         {"image_size", v.image.size()}};
  if (with_evidence) {
    json evidence = json::parse(v.evidence_json, nullptr, false);
    j["evidence"] = evidence.is_discarded() ? json(v.evidence_json) : evidence;
    j["jit_options"] = v.jit_options;
    // The specialized values, as the bytes the parameter must hold (little-endian hex).
    json values = json::array();
    for (const auto& sc : v.guard.scalars) {
      values.push_back(
          {{"param", sc.param}, {"offset", sc.offset}, {"bytes", store::records::hex(sc.bytes)}});
    }
    j["guard"] = {{"block", v.guard.block},
                  {"scalars", v.guard.scalars.size()},
                  {"scalar_values", std::move(values)},
                  {"no_alias", v.guard.no_alias},
                  {"reshape_block", v.guard.reshape_block}};
  }
  return j;
}

// What bounds a kernel, from the newest verdict whose worker measured a profile of the original
// (job_run.cpp, record_profile): the cost model's bound on the emulated device, or the driver's
// account elsewhere. Null when no verdict carries one.
json bound_of(const std::vector<store::VariantRecord>& variants) {
  const store::VariantRecord* newest = nullptr;
  json out;
  for (const auto& v : variants) {
    if (newest && v.created < newest->created) continue;
    json e = json::parse(v.evidence_json, nullptr, false);
    if (!e.is_object() || !e.contains("worker") || !e["worker"].is_object()) continue;
    const json& w = e["worker"];
    if (!w.contains("profile") || !w["profile"].is_object()) continue;
    const json& p = w["profile"];
    if (!p.contains("original") || !p["original"].is_object()) continue;
    const json& o = p["original"];
    json b{{"source", p.value("source", "driver")}, {"variant", v.id.hex()}};
    if (o.contains("bound") && o["bound"].is_string()) b["bound"] = o["bound"];
    for (const char* k : {"terms_ns", "modeled_ns", "occupancy_limit", "warps_per_sm",
                          "max_warps_per_sm", "registers", "waves", "dram_bytes", "ns"}) {
      if (o.contains(k)) b[k] = o[k];
    }
    newest = &v;
    out = std::move(b);
  }
  return out;
}

// One line per strategy that worked on the kernel: its best outcome (a verified variant, the
// fastest; else the newest verdict) with the speedup and the reason, from the store's records
// (every run) and this run's jobs (those that left no record: no capture to run on); a strategy
// that declined says why (not applicable).
json strategies_of(const KernelInfo& k, const std::vector<store::VariantRecord>& variants,
                   const json& jobs) {
  std::map<std::string, json> best;
  auto rank = [](const json& j) {
    return j.value("verdict", "") == "verified" ? 2 : j.value("pending", false) ? 0 : 1;
  };
  auto offer = [&](const std::string& strategy, json j, int64_t when) {
    j["when"] = when;
    auto it = best.find(strategy);
    if (it == best.end()) {
      best.emplace(strategy, std::move(j));
      return;
    }
    json& cur = it->second;
    const int a = rank(j), b = rank(cur);
    const bool better = a != b ? a > b
                        : a == 2 ? j.value("speedup", 0.0) > cur.value("speedup", 0.0)
                                 : when >= cur.value("when", int64_t(0));
    if (better) cur = std::move(j);
  };
  for (const auto& v : variants) {
    std::string kind = v.verdict, reason;
    if (auto colon = v.verdict.find(": "); colon != std::string::npos) {
      kind = v.verdict.substr(0, colon);
      reason = v.verdict.substr(colon + 2);
    }
    json j{{"strategy", v.strategy}, {"verdict", kind}, {"speedup", v.speedup},
           {"reason", reason}, {"variant", v.id.hex()}, {"state", store::to_string(v.state)}};
    if (v.state == store::VariantState::verified) j["verdict"] = "verified";
    offer(v.strategy, std::move(j), v.created);
  }
  for (const auto& job : jobs) {
    if (job.value("kernel", "") != k.record.key.str() || job.contains("check")) continue;
    if (job.contains("variant")) continue; // its record is above
    const std::string strategy = job.value("strategy", "");
    if (strategy.empty() || strategy == "shadow") continue;
    json j{{"strategy", strategy}, {"job", job.value("id", uint64_t(0))}};
    if (job.contains("verdict")) {
      j["verdict"] = job["verdict"];
      j["speedup"] = job.value("speedup", 0.0);
      j["reason"] = job.value("message", "");
    } else {
      j["verdict"] = "pending";
      j["pending"] = true;
      j["reason"] = "job " + std::to_string(job.value("id", uint64_t(0))) + " " +
                    job.value("state", "");
    }
    offer(strategy, std::move(j), job.value("finished", job.value("created", int64_t(0))));
  }
  for (const auto& [strategy, why] : k.skipped) {
    if (best.count(strategy)) continue;
    const bool declined = why.rfind("not applicable: ", 0) == 0;
    best[strategy] = json{{"strategy", strategy},
                          {"verdict", declined ? "not applicable" : "skipped"},
                          {"speedup", 0.0},
                          {"reason", declined ? why.substr(16) : why}};
  }
  json out = json::array();
  for (auto& [strategy, j] : best) {
    j.erase("when");
    j.erase("pending");
    out.push_back(std::move(j));
  }
  return out;
}

json fail(const std::string& why) {
  return json{{"ok", false}, {"error", why}};
}
json done(json result) {
  return json{{"ok", true}, {"result", std::move(result)}};
}

} // namespace

bool Daemon::on_control(Connection& c, const proto::FrameHeader& h, std::string_view payload,
                        UniqueFd fd) {
  ++m_counters.control_requests;
  json request = json::parse(payload, nullptr, false);
  json reply;
  UniqueFd reply_fd;
  if (request.is_discarded() || !request.is_object() || !request.contains("cmd") ||
      !request["cmd"].is_string()) {
    reply = fail("a control request is a JSON object with a \"cmd\" string");
  } else {
    try {
      reply = control(request, c, fd, &reply_fd);
    } catch (const json::exception& e) {
      reply = fail(std::string("bad request: ") + e.what());
    }
  }
  wire::Writer w;
  // Strings from candidates and logs may hold bytes that are not UTF-8: replaced, never thrown.
  std::string text = reply.dump(-1, ' ', false, json::error_handler_t::replace);
  w.raw(text.data(), text.size());
  // The flag is read before the descriptor is moved into send(): the order in which arguments
  // are evaluated is unspecified (GCC moved it first, and the frame went out without its flag).
  uint16_t flags = reply_fd ? proto::k_flag_fd : 0;
  c.send(proto::frame(proto::MsgType::control, h.seq, w, flags), std::move(reply_fd));
  return true;
}

json Daemon::control(const json& req, Connection& c, UniqueFd& fd, UniqueFd* reply_fd) {
  (void)c;
  const std::string cmd = req["cmd"].get<std::string>();
  auto target = [&]() -> std::string {
    if (!req.contains("target") || !req["target"].is_string()) return {};
    return req["target"].get<std::string>();
  };
  if (cmd == "status") {
    // A status reply lists at most `processes` attached processes (the count of all of them is
    // processes_total): on a host with a thousand, building the whole list on every query is
    // what makes it slow.
    size_t top = 100, max_processes = 50;
    if (req.contains("top") && req["top"].is_number_unsigned()) top = req["top"].get<size_t>();
    if (req.contains("processes") && req["processes"].is_number_unsigned()) {
      max_processes = req["processes"].get<size_t>();
    }
    return done(status_json(top, max_processes));
  }
  if (cmd == "kernels") {
    json list = json::array();
    for (const KernelInfo* k : m_registry.ranked()) list.push_back(kernel_json(*k));
    return done(json{{"schema", "hone.kernels/1"},
                     {"kernels", std::move(list)},
                     {"coverage", m_optimizer ? m_optimizer->coverage_json() : json::object()}});
  }
  if (cmd == "metrics") return done(json{{"text", metrics_text()}});
  if (cmd == "config") {
    json list = json::array();
    for (const auto& s : config::settings(m_config, m_provenance)) {
      list.push_back({{"section", s.section},
                      {"key", s.name},
                      {"value", s.value},
                      {"origin", s.origin},
                      {"secret", s.secret}});
    }
    return done(json{{"schema", "hone.config/1"},
                     {"file", m_config.source.string()},
                     {"settings", std::move(list)}});
  }
  if (cmd == "fleet") {
    if (!m_fleet || !m_fleet->enabled()) {
      return done(json{{"remotes", json::array()}, {"signing", false}, {"require_signature", false}});
    }
    return done(m_fleet->status_json());
  }
  if (cmd == "jobs")
    return done(json{{"schema", "hone.jobs/1"}, {"jobs", m_optimizer->jobs_json()}});
  if (cmd == "job") {
    auto j = m_optimizer->job_json(req.value("id", uint64_t(0)));
    if (!j) return fail("no job " + std::to_string(req.value("id", uint64_t(0))));
    return done(*j);
  }
  if (!m_store) return fail("honed runs without a store");
  if (cmd == "variants") {
    auto all = m_store->variants();
    if (!all) return fail(all.error().message);
    json list = json::array();
    std::string only = target();
    for (const auto& v : *all) {
      if (!only.empty() && v.kernel.str() != only && v.kernel.entry != only) continue;
      list.push_back(variant_json(v, false));
    }
    return done(json{{"schema", "hone.variants/1"}, {"variants", std::move(list)}});
  }
  if (cmd == "show" || cmd == "disable" || cmd == "enable" || cmd == "evict") {
    std::string t = target();
    if (t.empty()) return fail(cmd + " needs a kernel (name or key) or a variant id");
    // A variant id is 32 hex digits; anything else names a kernel.
    if (auto vid = VariantId::from_hex(t)) {
      auto v = m_store->get_variant(*vid);
      if (!v) return fail(v.error().message);
      if (!*v) return fail("no variant " + t);
      store::VariantRecord rec = **v;
      if (cmd == "show") return done(variant_json(rec, true));
      if (cmd == "evict") {
        if (auto r = m_store->delete_variant(rec.id); !r) return fail(r.error().message);
        spdlog::info("variant {} evicted", t);
        m_optimizer->kernel_switched(rec.kernel);
        return done(json{{"evicted", 1}});
      }
      const bool fleet = cmd == "disable" && req.value("fleet", false);
      if (fleet && (!m_fleet || !m_fleet->enabled())) {
        return fail("--fleet: this honed has no remote tier ([store.remote] urls is empty)");
      }
      if (fleet && (rec.state == store::VariantState::verified ||
                    rec.state == store::VariantState::disabled)) {
        // Withdrawn from the whole fleet: disabled here; a tombstone in the remote tier makes
        // every host withdraw it (those serving it too) and none publish it again; and the
        // kernel's object carries it as disabled, for hosts that do not read tombstones.
        rec.state = store::VariantState::disabled;
        rec.verdict = Fleet::k_withdrawn;
        if (auto r = m_store->put_variant(rec); !r) return fail(r.error().message);
        spdlog::info("variant {} disabled, here and in the fleet", t);
        m_optimizer->kernel_switched(rec.kernel);
        m_optimizer->withdraw_from_fleet(rec, "disabled by an operator", "honectl disable --fleet");
        m_optimizer->publish_to_fleet(rec.kernel, rec.arch, rec.driver_major);
        json j = variant_json(rec, false);
        j["fleet"] = "withdrawn";
        return done(j);
      }
      if (cmd == "disable") {
        // Only a verified variant serves; only it can be switched off (and back on as verified).
        if (rec.state == store::VariantState::disabled) return done(variant_json(rec, false));
        if (rec.state != store::VariantState::verified) {
          return fail("variant " + t + " is " + store::to_string(rec.state) +
                      ": it does not serve, so there is nothing to disable (evict removes it)");
        }
        rec.state = store::VariantState::disabled;
      } else if (rec.state == store::VariantState::disabled) {
        rec.state = store::VariantState::verified;
      } else {
        return done(variant_json(rec, false)); // already enabled
      }
      if (auto r = m_store->put_variant(rec); !r) return fail(r.error().message);
      spdlog::info("variant {} {}d", t, cmd);
      m_optimizer->kernel_switched(rec.kernel);
      return done(variant_json(rec, false));
    }
    std::string why;
    const KernelInfo* k = m_registry.find(t, &why);
    if (!k) return fail(why);
    KernelInfo* mk = m_registry.kernel(k->record.key);
    if (cmd == "show") {
      json j = kernel_json(*mk);
      json vs = json::array();
      std::vector<store::VariantRecord> records;
      if (auto list = m_store->variants_of(mk->record.key)) records = std::move(*list);
      for (const auto& v : records) vs.push_back(variant_json(v, false));
      j["variants"] = std::move(vs);
      j["bound"] = bound_of(records);
      j["strategies"] =
          strategies_of(*mk, records, m_optimizer ? m_optimizer->jobs_json() : json::array());
      return done(j);
    }
    if (cmd == "evict") {
      auto list = m_store->variants_of(mk->record.key);
      if (!list) return fail(list.error().message);
      for (const auto& v : *list) {
        if (auto r = m_store->delete_variant(v.id); !r) return fail(r.error().message);
      }
      spdlog::info("kernel {}: {} variants evicted", mk->record.key.str(), list->size());
      m_optimizer->kernel_switched(mk->record.key);
      return done(json{{"evicted", list->size()}});
    }
    if (cmd == "disable" && req.value("fleet", false)) {
      return fail("--fleet withdraws a variant from the fleet: give the variant's id (honectl "
                  "variants " + mk->record.key.entry + " lists them)");
    }
    mk->record.disabled = cmd == "disable";
    mk->dirty = true;
    if (auto r = m_registry.flush(); !r) return fail(r.error().message);
    spdlog::info("kernel {} {}d", mk->record.key.str(), cmd);
    m_optimizer->kernel_switched(mk->record.key);
    return done(kernel_json(*mk));
  }
  if (cmd == "retry") {
    // The agent does not redo what it tried for a kernel (the record's `tried`); an operator who
    // changed something (enabled the LLM, a new model, a new driver) asks it to try again.
    std::string why;
    const KernelInfo* k = m_registry.find(target(), &why);
    if (!k) return fail(why);
    KernelInfo* mk = m_registry.kernel(k->record.key);
    if (req.contains("strategy") && !req["strategy"].is_string()) {
      return fail("retry: strategy must be a string (a strategy id)");
    }
    std::string strategy = req.value("strategy", "");
    auto& tried = mk->record.tried;
    if (!strategy.empty() && std::find(tried.begin(), tried.end(), strategy) == tried.end()) {
      return fail("strategy " + strategy + " has not tried " + mk->record.key.entry +
                  " (tried: " + (tried.empty() ? std::string("none") : json(tried).dump()) + ")");
    }
    std::erase_if(tried, [&](const std::string& t) { return strategy.empty() || t == strategy; });
    mk->dirty = true;
    if (auto r = m_registry.flush(); !r) return fail(r.error().message);
    spdlog::info("kernel {}: the agent will try {} again", mk->record.key.str(),
                 strategy.empty() ? std::string("every strategy") : strategy);
    return done(kernel_json(*mk));
  }
  if (cmd == "submit") {
    std::string why;
    const KernelInfo* k = m_registry.find(target(), &why);
    if (!k) return fail(why);
    if (!fd) return fail("submit needs the candidate file passed as a descriptor");
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 || st.st_size <= 0 || st.st_size > (64 << 20)) {
      return fail("the candidate file is empty or over 64 MiB");
    }
    std::string code(size_t(st.st_size), '\0');
    for (size_t got = 0; got < code.size();) {
      ssize_t n = ::pread(fd.get(), code.data() + got, code.size() - got, off_t(got));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return fail("cannot read the candidate file");
      got += size_t(n);
    }
    agent::Candidate c;
    c.strategy = "submit";
    std::string kind = req.value("kind", std::string("ptx"));
    if (kind == "ptx")
      c.kind = CandidateKind::ptx;
    else if (kind == "cuda")
      c.kind = CandidateKind::cuda;
    else
      return fail("kind must be ptx or cuda, got " + kind);
    c.code = std::move(code);
    c.entry = req.value("entry", k->record.key.entry);
    c.description = req.value("description", std::string("submitted by a kernel engineer"));
    std::string comparison = req.value("comparison", std::string("tolerance"));
    if (comparison == "bitwise")
      c.comparison = Comparison::bitwise;
    else if (comparison == "tolerance")
      c.comparison = Comparison::tolerance;
    else
      return fail("comparison must be bitwise or tolerance, got " + comparison);
    c.jit_options = req.value("jit_options", std::vector<std::string>{});
    c.nvrtc_options = req.value("nvrtc_options", std::vector<std::string>{});
    if (req.contains("block")) {
      auto b = req["block"].get<std::vector<uint32_t>>();
      for (size_t i = 0; i < 3 && i < b.size(); ++i) c.guard.block[i] = b[i];
    }
    auto job = m_optimizer->submit(k->record.key, std::move(c));
    if (!job) return fail(job.error().message);
    return done(json{{"job", *job}, {"kernel", k->record.key.str()}});
  }
  if (cmd == "export") {
    std::string arch = req.value("arch", std::string());
    auto tmp = m_config.store.state_dir / ("export-" + std::to_string(::getpid()) + "-" +
                                           std::to_string(m_next_id++) + ".tmp");
    auto n = m_store->export_variants(tmp, arch);
    if (!n) return fail(n.error().message);
    UniqueFd file(::open(tmp.c_str(), O_RDONLY | O_CLOEXEC));
    ::unlink(tmp.c_str());
    if (!file) return fail("cannot reopen the export file");
    *reply_fd = std::move(file);
    return done(json{{"variants", *n}});
  }
  if (cmd == "import") {
    if (!fd) return fail("import needs the file passed as a descriptor");
    // Only a regular file: reopening a FIFO through /proc/self/fd blocks until a writer comes,
    // and this thread serves every client.
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
      return fail("import needs a regular file (an export written by honectl export)");
    }
    std::string path = "/proc/self/fd/" + std::to_string(fd.get());
    auto report = m_store->import_variants(path);
    if (!report) return fail(report.error().message);
    spdlog::info("imported {} variants ({} already present, {} rejected)", report->imported,
                 report->already_present, report->rejected);
    return done(json{{"imported", report->imported},
                     {"already_present", report->already_present},
                     {"rejected", report->rejected},
                     {"problems", report->problems}});
  }
  return fail("unknown command '" + cmd + "'");
}

json Daemon::status_json(size_t top, size_t max_processes) const {
  auto uptime = std::chrono::duration<double>(std::chrono::steady_clock::now() - m_started).count();
  json procs = json::array();
  for (const auto& [id, p] : m_registry.processes()) {
    if (procs.size() >= max_processes) break;
    procs.push_back({{"pid", p.hello.pid},
                     {"uid", p.peer_uid},
                     {"exe", p.hello.exe},
                     {"device", p.hello.device_name},
                     {"arch", p.hello.arch},
                     {"driver_version", p.hello.driver_version},
                     {"shim_version", p.hello.client_version},
                     {"since", p.since},
                     {"kernels", p.kernels.size()}});
  }
  json kernels = json::array();
  auto ranked = m_registry.ranked();
  for (size_t i = 0; i < ranked.size() && i < top; ++i) kernels.push_back(kernel_json(*ranked[i]));
  json variants = json::array();
  json store = nullptr;
  if (m_store) {
    if (auto all = m_store->variants()) {
      for (const auto& v : *all) variants.push_back(variant_json(v, false));
    }
    json quarantine = json::array();
    if (auto q = m_store->quarantined()) {
      for (const auto& r : *q) {
        quarantine.push_back({{"column_family", r.column_family},
                              {"key", r.key_hex},
                              {"reason", r.reason},
                              {"when", r.when}});
      }
    }
    store = {{"path", m_config.store.state_dir.string()},
             {"schema", m_store->schema_version()},
             {"size_bytes", m_store->size_bytes()},
             {"quarantined", std::move(quarantine)}};
  }
  return json{{"schema", k_status_schema},
              {"version", k_version},
              {"pid", ::getpid()},
              {"uptime_s", uptime},
              {"socket", m_config.server.socket},
              {"connections", m_connections.size()},
              {"processes", std::move(procs)},
              {"processes_total", m_registry.processes().size()},
              {"kernels_total", m_registry.kernels().size()},
              {"graphs",
               {{"replays", m_registry.graph_replays_total()},
                {"nodes_serving_variants", m_registry.graph_nodes_patched()}}},
              {"kernels", std::move(kernels)},
              {"jobs", m_optimizer ? m_optimizer->jobs_json() : json::array()},
              {"workers", m_optimizer ? m_optimizer->workers_json() : json::object()},
              {"variants", std::move(variants)},
              {"agent", m_optimizer ? m_optimizer->agent_json() : json::object()},
              {"coverage", m_optimizer ? m_optimizer->coverage_json() : json::object()},
              {"store", std::move(store)}};
}

std::string Daemon::metrics_text() const {
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help, double value,
                    const std::string& labels = {}) {
    append_metric(out, name, type, help, value, labels);
  };
  auto uptime = std::chrono::duration<double>(std::chrono::steady_clock::now() - m_started).count();
  metric("hone_build_info", "gauge", "hone version, as a label.", 1,
         std::string("version=\"") + k_version + "\"");
  metric("hone_uptime_seconds", "gauge", "Seconds since honed started.", uptime);
  metric("hone_connections", "gauge", "Open client connections.", double(m_connections.size()));
  metric("hone_processes_attached", "gauge", "Processes with the shim attached.",
         double(m_registry.processes().size()));
  metric("hone_kernels_known", "gauge", "Kernels honed knows (all time).",
         double(m_registry.kernels().size()));
  metric("hone_kernel_launches_total", "counter",
         "Kernel launches reported by attached processes since honed started.",
         double(m_registry.launches_total()));
  metric("hone_graph_replays_total", "counter",
         "CUDA graph launches (cuGraphLaunch) of observed graphs since honed started.",
         double(m_registry.graph_replays_total()));
  metric("hone_graph_nodes_patched", "gauge",
         "Kernel nodes of executable graphs pointed at a verified variant now.",
         double(m_registry.graph_nodes_patched()));
  metric("hone_connections_accepted_total", "counter", "Connections accepted.",
         double(m_counters.connections_accepted));
  out += "# HELP hone_connections_refused_total Connections refused, by reason.\n"
         "# TYPE hone_connections_refused_total counter\n";
  out += "hone_connections_refused_total{reason=\"limit\"} " +
         std::to_string(m_counters.connections_refused_limit) + "\n";
  out += "hone_connections_refused_total{reason=\"permission\"} " +
         std::to_string(m_counters.connections_refused_permission) + "\n";
  out += "hone_connections_refused_total{reason=\"version\"} " +
         std::to_string(m_counters.connections_refused_version) + "\n";
  metric("hone_protocol_errors_total", "counter", "Malformed or out-of-order messages received.",
         double(m_counters.protocol_errors));
  metric("hone_frames_received_total", "counter", "Protocol frames received.",
         double(m_counters.frames_received));
  metric("hone_received_bytes_total", "counter", "Protocol bytes received.",
         double(m_counters.bytes_received));
  metric("hone_control_requests_total", "counter", "honectl requests served.",
         double(m_counters.control_requests));
  metric("hone_config_reloads_total", "counter", "Configuration reloads (SIGHUP).",
         double(m_counters.reloads));
  {
    uint64_t served = 0, fallbacks = 0;
    std::string misses;
    for (const auto& [key, k] : m_registry.kernels()) {
      served += k.variant_launches;
      fallbacks += k.fallbacks;
      if (k.guard_misses) {
        misses += "hone_guard_misses_total{kernel=\"" + escape_label(key.entry) + "\"} " +
                  std::to_string(k.guard_misses) + "\n";
      }
    }
    metric("hone_variant_launches_total", "counter",
           "Launches a verified variant served since honed started.", double(served));
    metric("hone_variant_fallbacks_total", "counter",
           "Variant launches that failed and ran the original instead, since honed started.",
           double(fallbacks));
    out += "# HELP hone_guard_misses_total Launches of a kernel that has a variant installed "
           "but did not pass its guard (the original ran), by kernel, since honed started.\n"
           "# TYPE hone_guard_misses_total counter\n" +
           misses;
  }
  if (m_optimizer) {
    out += m_optimizer->metrics_text();
    json w = m_optimizer->workers_json();
    metric("hone_worker_busy_seconds_total", "counter",
           "Seconds the validation worker spent on jobs (its share of the GPU).",
           w.value("busy_seconds", 0.0));
    metric("hone_worker_paused", "gauge",
           "1 while validation waits because the applications keep the GPU busy.",
           w.value("paused", false) ? 1 : 0);
  }
  if (m_store) {
    metric("hone_store_size_bytes", "gauge", "Size of the RocksDB store.",
           double(m_store->size_bytes()));
    if (auto all = m_store->variants()) {
      std::map<std::string, size_t> by_state;
      for (const auto& v : *all) ++by_state[store::to_string(v.state)];
      out += "# HELP hone_variants Variants in the store, by state.\n# TYPE hone_variants gauge\n";
      for (const char* s : {"verified", "rejected", "disabled", "imported"}) {
        out +=
            std::string("hone_variants{state=\"") + s + "\"} " + std::to_string(by_state[s]) + "\n";
      }
    }
  }
  if (m_fleet) out += m_fleet->metrics_text();
  return out;
}

} // namespace hone::daemon
