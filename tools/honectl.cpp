// honectl: the operator's view of honed — what it sees, what it optimized, and the switches to
// turn any of it off. Talks to honed over its socket (docs/protocol.md, "control").
#include "common/cheats.hpp"
#include "common/version.hpp"
#include "config/config.hpp"
#include "tools/honectl_doctor.hpp"
#include "tools/honectl_service.hpp"
#include "tools/honectl_session.hpp"
#include "tools/honectl_table.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace {

using namespace hone;
using namespace hone::ctl;
using nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* k_exit_help =
    "Exit status: 0 ok; 1 the request failed (honed answered with an error, e.g. an unknown "
    "kernel, or a file could not be read or written); 2 usage error; 3 cannot reach honed (no "
    "socket, nothing listening, permission denied, refused); 4 doctor found problems.";

struct Options {
  std::string socket;
  bool json = false;
  bool fleet = false; // disable --fleet
  size_t top = 10;
  size_t processes = 50;
  std::string target; // a kernel (name or key) or a variant id
  std::string file;
  std::string arch;
  bool force = false;
  std::string driver, config, state_dir;
  // submit
  std::string entry, kind;
  bool bitwise = false, no_wait = false;
  std::vector<uint32_t> block;
  double wait_s = 600;
  // retry
  std::string strategy;
  // attach-service, detach-service
  ServiceOptions service;
  // config
  bool local = false;
};

// A failure: the message goes to stderr, the code becomes the exit status.
int fail(const Error& e) {
  std::cerr << "honectl: " << e.message << "\n";
  return e.code ? e.code : k_exit_failed;
}

int fail(const std::string& message, int code) {
  return fail(make_error(message, code));
}

std::string str(const json& j, const char* key, const std::string& fallback = "-") {
  if (!j.is_object() || !j.contains(key)) return fallback;
  const json& v = j[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return fallback;
  return v.dump();
}

template <class T> T num(const json& j, const char* key, T fallback = T{}) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return fallback;
  return j[key].get<T>();
}

std::string or_dash(const std::string& s) {
  return s.empty() ? "-" : s;
}

std::string when(int64_t unix_seconds) {
  if (unix_seconds <= 0) return "-";
  std::time_t t = std::time_t(unix_seconds);
  std::tm tm{};
  ::localtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string dims(const json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_array() || j[key].size() != 3) return "-";
  const json& d = j[key];
  return std::to_string(d[0].get<uint64_t>()) + "x" + std::to_string(d[1].get<uint64_t>()) + "x" +
         std::to_string(d[2].get<uint64_t>());
}

// The entry name of a kernel key "<image hex>:<entry>", demangled.
std::string kernel_display(const std::string& key_or_name) {
  auto colon = key_or_name.find(':');
  std::string entry = colon == 32 ? key_or_name.substr(33) : key_or_name;
  return demangle(entry);
}

bool is_hex(const std::string& s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isxdigit(c); });
}

Result<Session> connect(const Options& o) {
  return Session::open(o.socket);
}

void print_json(const json& j) {
  std::cout << j.dump(2) << "\n";
}

// A variant named by a prefix of its id (tables show 12 digits) becomes its full id; anything
// else is passed on as it is (a kernel name or key).
Result<std::string> resolve_target(Session& s, const std::string& target) {
  if (!is_hex(target) || target.size() < 6 || target.size() >= 32) return target;
  auto list = s.request(json{{"cmd", "variants"}});
  if (!list) return list.error();
  std::string prefix = target;
  std::transform(prefix.begin(), prefix.end(), prefix.begin(), ::tolower);
  std::vector<std::string> matches;
  for (const auto& v : list->value("variants", json::array())) {
    std::string id = v.value("id", std::string());
    if (id.rfind(prefix, 0) == 0) matches.push_back(id);
  }
  if (matches.size() == 1) return matches[0];
  if (matches.size() > 1) {
    return make_error("'" + target + "' is the start of " + std::to_string(matches.size()) +
                          " variant ids; give more digits",
                      k_exit_failed);
  }
  return target;
}

// --- listings -----------------------------------------------------------------------------------

// How a kernel's launches reach the device: "launch", "graph" (replays of CUDA graphs), or both;
// with the graphs and kernel nodes holding it now, and how many of those nodes serve a variant.
std::string runs_as(const json& k) {
  std::string how = k.contains("runs_as") && k["runs_as"].is_string()
                        ? k["runs_as"].get<std::string>()
                        : "launch";
  uint64_t graphs = num<uint64_t>(k, "graphs");
  if (graphs == 0) return how;
  return how + " (" + std::to_string(graphs) + "g/" + std::to_string(num<uint64_t>(k, "graph_nodes")) +
         "n, " + std::to_string(num<uint64_t>(k, "graph_nodes_serving")) + " served)";
}

// What hone has to work from for a kernel (the CODE column): its kind, and "refused" for PTX
// of a newer GPU that could not be retargeted.
std::string code_text(const json& k) {
  std::string kind = str(k, "code", "unknown");
  if (kind == "ptx_newer" && !k.value("workable", false)) kind += " (refused)";
  return kind;
}

// "62% of the estimated GPU time is in kernels hone can work on (ptx 50%, source 12%; not: sass
// 30%, collective 8%)".
std::string coverage_text(const json& c) {
  if (!c.is_object() || num<uint64_t>(c, "est_gpu_ns") == 0) return "no GPU time estimated yet";
  auto pct = [](double share) { return std::to_string(int(std::lround(share * 100))) + "%"; };
  std::vector<std::pair<double, std::string>> can, cannot;
  for (const auto& k : c.value("kinds", json::array())) {
    const double share = num<double>(k, "share"), workable = num<double>(k, "workable_share");
    if (workable > 0) can.emplace_back(workable, str(k, "kind") + " " + pct(workable));
    if (share - workable > 1e-9) cannot.emplace_back(share - workable, str(k, "kind") + " " + pct(share - workable));
  }
  auto join = [](std::vector<std::pair<double, std::string>> v) {
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    std::string out;
    for (const auto& [share, text] : v) out += (out.empty() ? "" : ", ") + text;
    return out;
  };
  std::string text = pct(num<double>(c, "workable_share")) +
                     " of the estimated GPU time is in kernels hone can work on";
  std::string detail = join(can);
  if (!cannot.empty()) detail += (detail.empty() ? "not: " : "; not: ") + join(cannot);
  return text + (detail.empty() ? "" : " (" + detail + ")");
}

void kernels_table(const json& kernels, std::ostream& out, size_t indent, bool rank) {
  std::vector<Column> cols;
  if (rank) cols.push_back({"#", Align::right});
  cols.insert(cols.end(), {{"KERNEL", Align::left},
                           {"IMAGE", Align::left},
                           {"LAUNCHES", Align::right},
                           {"EST. GPU TIME", Align::right},
                           {"MEAN", Align::right},
                           {"STATE", Align::left},
                           {"SERVED", Align::right},
                           {"RUNS AS", Align::left},
                           {"CODE", Align::left},
                           {"PROCS", Align::right}});
  Table t(cols);
  size_t i = 0;
  for (const auto& k : kernels) {
    std::vector<std::string> row;
    if (rank) row.push_back(std::to_string(++i));
    double mean = num<double>(k, "mean_ns");
    row.insert(row.end(), {ellipsize(demangle(str(k, "name")), 48), short_id(str(k, "image")),
                           human_count(num<uint64_t>(k, "launches")),
                           num<uint64_t>(k, "est_gpu_ns")
                               ? human_duration_ns(double(num<uint64_t>(k, "est_gpu_ns")))
                               : "-",
                           mean > 0 ? human_duration_ns(mean) : "-", str(k, "state"),
                           num<uint64_t>(k, "variant_launches")
                               ? human_count(num<uint64_t>(k, "variant_launches"))
                               : "-",
                           runs_as(k), code_text(k),
                           std::to_string(num<uint64_t>(k, "processes"))});
    t.row(std::move(row));
  }
  out << t.render(indent);
}

void variants_table(const json& variants, std::ostream& out, size_t indent) {
  Table t({{"ID", Align::left},
           {"KERNEL", Align::left},
           {"ARCH", Align::left},
           {"STRATEGY", Align::left},
           {"STATE", Align::left},
           {"SPEEDUP", Align::right}});
  for (const auto& v : variants) {
    t.row({short_id(str(v, "id")), ellipsize(kernel_display(str(v, "kernel")), 40), str(v, "arch"),
           str(v, "strategy"), str(v, "state"), human_speedup(num<double>(v, "speedup"))});
  }
  out << t.render(indent);
}

// The agent: its strategies in the order it ranks them, what each achieved, the sessions at
// work, the LLM strategy's state and the worker (paused while the applications keep the GPU busy).
void agent_section(const json& st, std::ostream& out) {
  const json agent = st.value("agent", json::object());
  const json strategies = agent.value("strategies", json::array());
  if (strategies.empty()) return;
  out << "\nAgent\n";
  std::vector<json> ranked(strategies.begin(), strategies.end());
  std::stable_sort(ranked.begin(), ranked.end(), [](const json& a, const json& b) {
    return num<double>(a, "expected_gain_per_gpu_second") >
           num<double>(b, "expected_gain_per_gpu_second");
  });
  Table t({{"STRATEGY", Align::left},
           {"GAIN/GPU-S", Align::right},
           {"CANDIDATES", Align::right},
           {"VERIFIED", Align::right},
           {"GPU TIME", Align::right}});
  for (const auto& s : ranked) {
    char gain[32];
    std::snprintf(gain, sizeof gain, "%.3f", num<double>(s, "expected_gain_per_gpu_second"));
    char gpu[32];
    std::snprintf(gpu, sizeof gpu, "%.1f s", num<double>(s, "gpu_seconds"));
    const bool on = s.value("enabled", true);
    t.row({on ? str(s, "id") : str(s, "id") + " (off: agent.strategies)", gain,
           std::to_string(num<uint64_t>(s, "candidates")),
           std::to_string(num<uint64_t>(s, "verified")), gpu});
  }
  out << t.render(2);
  const json sessions = agent.value("sessions", json::array());
  for (const auto& s : sessions) {
    out << "  session " << num<uint64_t>(s, "id") << ": " << str(s, "strategy") << " on "
        << str(s, "kernel") << ": " << str(s, "state") << "\n";
  }
  if (agent.contains("llm")) out << "  llm: " << str(agent, "llm") << "\n";
  const json w = st.value("workers", json::object());
  if (!w.empty()) {
    char load[32];
    std::snprintf(load, sizeof load, "%.0f%%", 100 * num<double>(w, "gpu_load"));
    std::string state = w.value("paused", false)
                            ? "paused (applications' GPU load " + std::string(load) + ")"
                            : (w.value("busy", false) ? "busy" : "idle");
    out << "  worker: " << state << ", " << num<uint64_t>(w, "queued") << " job(s) queued\n";
  }
}

int cmd_status(const Options& o) {
  auto s = connect(o);
  if (!s) return fail(s.error());
  json req{{"cmd", "status"}};
  if (!o.json || o.top != 10) req["top"] = o.top;
  req["processes"] = o.processes;
  auto r = s->request(req);
  if (!r) return fail(r.error());
  if (o.json) {
    print_json(*r);
    return k_exit_ok;
  }
  const json& st = *r;
  std::ostream& out = std::cout;
  out << "honed " << str(st, "version") << " (pid " << num<int64_t>(st, "pid") << "), up "
      << human_uptime(num<double>(st, "uptime_s")) << "\n";
  Table head({{"", Align::left}, {"", Align::left}});
  head.row({"socket", str(st, "socket") + " (" + std::to_string(num<uint64_t>(st, "connections")) +
                          " connections)"});
  const json procs = st.value("processes", json::array());
  const json kernels = st.value("kernels", json::array());
  const json variants = st.value("variants", json::array());
  const uint64_t procs_total =
      st.contains("processes_total") ? num<uint64_t>(st, "processes_total") : procs.size();
  head.row({"processes", std::to_string(procs_total) + " attached"});
  head.row({"kernels", std::to_string(num<uint64_t>(st, "kernels_total")) + " known"});
  if (st.contains("graphs") && st["graphs"].is_object()) {
    const json& g = st["graphs"];
    if (num<uint64_t>(g, "replays") || num<uint64_t>(g, "nodes_serving_variants")) {
      head.row({"CUDA graphs", human_count(num<uint64_t>(g, "replays")) + " replays, " +
                                   std::to_string(num<uint64_t>(g, "nodes_serving_variants")) +
                                   " kernel node(s) serving variants"});
    }
  }
  std::map<std::string, size_t> by_state;
  for (const auto& v : variants) ++by_state[str(v, "state")];
  std::string vs = std::to_string(variants.size());
  if (!by_state.empty()) {
    vs += " (";
    bool first = true;
    for (const auto& [state, n] : by_state) {
      vs += (first ? "" : ", ") + std::to_string(n) + " " + state;
      first = false;
    }
    vs += ")";
  }
  head.row({"variants", vs});
  if (st.contains("coverage")) head.row({"coverage", coverage_text(st["coverage"])});
  const json store = st.contains("store") ? st["store"] : json(nullptr);
  if (store.is_object()) {
    head.row({"store", human_bytes(num<uint64_t>(store, "size_bytes")) + " in " +
                           str(store, "path") + " (schema " +
                           std::to_string(num<uint64_t>(store, "schema")) + ")"});
  } else {
    head.row({"store", "none"});
  }
  // The header line of this two-column table is empty: drop it.
  std::string text = head.render();
  out << text.substr(text.find('\n') + 1);

  if (!procs.empty()) {
    out << "\nProcesses\n";
    Table t({{"PID", Align::right},
             {"UID", Align::right},
             {"KERNELS", Align::right},
             {"DEVICE", Align::left},
             {"ARCH", Align::left},
             {"SINCE", Align::left},
             {"EXE", Align::left}});
    for (const auto& p : procs) {
      t.row({std::to_string(num<uint64_t>(p, "pid")), std::to_string(num<uint64_t>(p, "uid")),
             std::to_string(num<uint64_t>(p, "kernels")), or_dash(str(p, "device")),
             or_dash(str(p, "arch")), when(num<int64_t>(p, "since")),
             ellipsize(str(p, "exe"), 60)});
    }
    out << t.render(2);
    if (procs_total > procs.size()) {
      out << "  … and " << procs_total - procs.size() << " more (honectl status --processes N)\n";
    }
  }
  out << "\nTop kernels (by estimated GPU time)\n";
  if (kernels.empty()) {
    out << "  none reported yet: run a CUDA application with LD_PRELOAD=/usr/lib/hone/libhone.so\n";
  } else {
    kernels_table(kernels, out, 2, true);
    uint64_t total = num<uint64_t>(st, "kernels_total");
    if (total > kernels.size()) {
      out << "  … and " << total - kernels.size() << " more (honectl kernels)\n";
    }
  }
  if (!variants.empty()) {
    out << "\nVariants\n";
    variants_table(variants, out, 2);
  }
  agent_section(st, out);
  if (store.is_object() && store.contains("quarantined") && !store["quarantined"].empty()) {
    out << "\nWARNING: " << store["quarantined"].size()
        << " store records are quarantined (failed their checksum; never served): honectl doctor\n";
  }
  return k_exit_ok;
}

int cmd_kernels(const Options& o) {
  auto s = connect(o);
  if (!s) return fail(s.error());
  auto r = s->request(json{{"cmd", "kernels"}});
  if (!r) return fail(r.error());
  if (o.json) {
    print_json(*r);
    return k_exit_ok;
  }
  const json kernels = r->value("kernels", json::array());
  if (kernels.empty()) {
    std::cout << "no kernels reported yet: run a CUDA application with "
                 "LD_PRELOAD=/usr/lib/hone/libhone.so\n";
    return k_exit_ok;
  }
  kernels_table(kernels, std::cout, 0, true);
  if (r->contains("coverage")) std::cout << "\ncoverage: " << coverage_text((*r)["coverage"]) << "\n";
  return k_exit_ok;
}

int cmd_variants(const Options& o) {
  auto s = connect(o);
  if (!s) return fail(s.error());
  json req{{"cmd", "variants"}};
  if (!o.target.empty()) req["target"] = o.target;
  auto r = s->request(req);
  if (!r) return fail(r.error());
  if (o.json) {
    print_json(*r);
    return k_exit_ok;
  }
  const json variants = r->value("variants", json::array());
  if (variants.empty()) {
    std::cout << (o.target.empty() ? std::string("no variants yet") : "no variants of " + o.target)
              << "\n";
    return k_exit_ok;
  }
  variants_table(variants, std::cout, 0);
  return k_exit_ok;
}

// "DRAM-bound (DRAM 1.2 us, L2 0.4 us, ...; the emulated device's cost model)": what limits the
// original kernel on the benchmark's capture, from the newest verdict that measured it.
std::string bound_text(const json& b) {
  std::string out = b.contains("bound") ? str(b, "bound") + "-bound" : std::string("not modeled");
  if (b.contains("terms_ns") && b["terms_ns"].is_object()) {
    std::vector<std::pair<double, std::string>> terms;
    for (const auto& [name, v] : b["terms_ns"].items()) {
      if (v.is_number()) terms.emplace_back(v.get<double>(), name);
    }
    std::sort(terms.begin(), terms.end(), [](const auto& x, const auto& y) {
      return x.first != y.first ? x.first > y.first : x.second < y.second;
    });
    std::string parts;
    for (const auto& [ns, name] : terms) {
      parts += (parts.empty() ? "" : ", ") + name + " " + human_duration_ns(ns);
    }
    if (!parts.empty()) out += " (" + parts + ")";
  }
  if (b.contains("occupancy_limit") && b["occupancy_limit"].is_string()) {
    out += "; occupancy limited by " + str(b, "occupancy_limit");
  }
  out += "; from " + str(b, "source", "the driver");
  return out;
}

void show_kernel(const json& k) {
  Table t({{"", Align::left}, {"", Align::left}});
  t.row({"kernel", demangle(str(k, "name"))});
  t.row({"key", str(k, "key")});
  std::string image = str(k, "format") + ", " + human_bytes(num<uint64_t>(k, "image_size"));
  if (k.value("source_known", false)) image += ", NVRTC source known";
  t.row({"image", image});
  t.row({"state", str(k, "state")});
  t.row({"launches", human_count(num<uint64_t>(k, "launches"))});
  std::string served = human_count(num<uint64_t>(k, "variant_launches"));
  if (num<uint64_t>(k, "guard_misses")) {
    served += " (" + human_count(num<uint64_t>(k, "guard_misses")) +
              " outside the variant's guard ran the original)";
  }
  if (num<uint64_t>(k, "fallbacks")) {
    served += " (" + human_count(num<uint64_t>(k, "fallbacks")) + " failed over to the original)";
  }
  t.row({"served by a variant", served});
  if (!str(k, "capture_refused").empty()) {
    t.row({"shadow inputs", "not captured: " + str(k, "capture_refused")});
  }
  // Per buffer of the last capture: the range a bounds probe saw the launch touch, or whole.
  if (k.contains("captured_buffers") && k["captured_buffers"].is_array()) {
    for (const auto& b : k["captured_buffers"]) {
      std::string what = "parameter " + std::to_string(num<uint64_t>(b, "param"));
      if (num<uint64_t>(b, "field")) what += " (+" + std::to_string(num<uint64_t>(b, "field")) + ")";
      std::string how;
      if (b.value("bounded", false)) {
        how = "bounded range: " + human_bytes(num<uint64_t>(b, "bytes")) + " at offset " +
              std::to_string(num<uint64_t>(b, "range_offset")) + " of a " +
              human_bytes(num<uint64_t>(b, "allocation_bytes")) + " allocation";
      } else {
        how = "whole allocation: " + human_bytes(num<uint64_t>(b, "bytes"));
        if (!str(k, "captured_whole_why").empty()) how += " (no bound: " + str(k, "captured_whole_why") + ")";
      }
      t.row({"captured " + what, how});
    }
  }
  if (num<uint64_t>(k, "graph_launches") || num<uint64_t>(k, "graphs")) {
    t.row({"runs as", runs_as(k) + "; " + human_count(num<uint64_t>(k, "graph_launches")) +
                          " launches were graph replays"});
  }
  double mean = num<double>(k, "mean_ns");
  std::string est = human_duration_ns(double(num<uint64_t>(k, "est_gpu_ns")));
  if (mean > 0) {
    est += " (mean " + human_duration_ns(mean) + " over " +
           human_count(num<uint64_t>(k, "sampled")) + " timed launches)";
  }
  t.row({"est. GPU time", est});
  t.row({"processes", std::to_string(num<uint64_t>(k, "processes"))});
  t.row({"last launch", "grid " + dims(k, "grid") + ", block " + dims(k, "block")});
  t.row({"first seen", when(num<int64_t>(k, "first_seen"))});
  t.row({"last seen", when(num<int64_t>(k, "last_seen"))});
  std::string tried;
  for (const auto& s : k.value("tried", json::array())) {
    tried += (tried.empty() ? "" : ", ") + s.get<std::string>();
  }
  t.row({"tried", tried.empty() ? "-" : tried});
  if (!str(k, "ptx").empty()) t.row({"PTX", str(k, "ptx")});
  if (k.contains("bound") && k["bound"].is_object()) t.row({"bound", bound_text(k["bound"])});
  if (k.contains("strategies") && k["strategies"].is_array()) {
    // One line per strategy: what came of it, and why.
    for (const auto& s : k["strategies"]) {
      const std::string verdict = str(s, "verdict"), reason = str(s, "reason");
      if (verdict == "skipped") {
        t.row({"skipped by " + str(s, "strategy"), reason});
        continue;
      }
      std::string line = verdict;
      const double speedup = num<double>(s, "speedup");
      if (speedup > 0) line += ", " + human_speedup(speedup);
      if (!reason.empty()) line += ": " + reason;
      t.row({"strategy " + str(s, "strategy"), line});
    }
  } else {
    // An older honed: only the strategies that did not run.
    const json skipped = k.value("skipped", json::object());
    for (const auto& [strategy, why] : skipped.items()) {
      t.row({"skipped by " + strategy, why.is_string() ? why.get<std::string>() : why.dump()});
    }
  }
  std::string text = t.render();
  std::cout << text.substr(text.find('\n') + 1);
  const json variants = k.value("variants", json::array());
  if (!variants.empty()) {
    std::cout << "\nVariants\n";
    variants_table(variants, std::cout, 2);
  }
}

void show_variant(const json& v) {
  Table t({{"", Align::left}, {"", Align::left}});
  t.row({"variant", str(v, "id")});
  t.row({"kernel", str(v, "kernel")});
  t.row({"entry", str(v, "entry")});
  t.row({"target",
         str(v, "arch") + ", driver " + std::to_string(num<uint64_t>(v, "driver_major")) + ".x"});
  t.row({"strategy", str(v, "strategy")});
  t.row({"state", str(v, "state")});
  std::string speed = human_speedup(num<double>(v, "speedup"));
  if (num<double>(v, "noise") > 0) {
    char buf[32];
    std::snprintf(buf, sizeof buf, " (noise ±%.1f%%)", num<double>(v, "noise") * 100);
    speed += buf;
  }
  t.row({"speedup", speed});
  t.row({"verdict", str(v, "verdict")});
  // A refused candidate: the cheat its verdict matched (common/cheats.hpp, docs/security.md), in
  // the worker's evidence or, for a variant a shadow check withdrew, beside it.
  std::string id;
  if (const json e = v.value("evidence", json()); e.is_object()) {
    if (e.contains("pattern") && e["pattern"].is_string()) {
      id = e["pattern"].get<std::string>();
    } else if (e.contains("worker") && e["worker"].is_object() &&
               e["worker"].value("pattern", json()).is_string()) {
      id = e["worker"]["pattern"].get<std::string>();
    }
  }
  if (!id.empty()) {
    if (const CheatPattern* p = cheat_pattern(id)) {
      t.row({"pattern", id + ": " + std::string(p->title)});
      t.row({"caught by", std::string(p->defence)});
    } else {
      t.row({"pattern", id});
    }
  }
  t.row({"created", when(num<int64_t>(v, "created"))});
  t.row({"image", human_bytes(num<uint64_t>(v, "image_size"))});
  std::string opts;
  for (const auto& s : v.value("jit_options", json::array())) {
    opts += (opts.empty() ? "" : " ") + s.get<std::string>();
  }
  t.row({"jit options", opts.empty() ? "-" : opts});
  if (v.contains("guard")) {
    const json& g = v["guard"];
    std::string guard = "block " +
                        (dims(g, "block") == "0x0x0" ? std::string("any") : dims(g, "block")) +
                        ", " + std::to_string(num<uint64_t>(g, "scalars")) + " scalar(s)";
    if (g.value("no_alias", false)) guard += ", pointers must not alias";
    if (uint32_t b = g.value("reshape_block", 0u); b) {
      guard += ", launched as blocks of " + std::to_string(b) + " threads (same thread count)";
    }
    t.row({"guard", guard});
    // Each specialized parameter: its bytes, and as an unsigned integer when it is one.
    for (const auto& sc : g.value("scalar_values", json::array())) {
      std::string hex = str(sc, "bytes");
      std::string value = "0x" + hex;
      if (hex.size() <= 16 && !hex.empty()) {
        uint64_t n = 0;
        for (size_t i = hex.size(); i >= 2; i -= 2)
          n = n << 8 | std::stoull(hex.substr(i - 2, 2), nullptr, 16);
        value = std::to_string(n) + " (bytes " + hex + ")";
      }
      t.row({"  param " + std::to_string(num<uint64_t>(sc, "param")), "must be " + value});
    }
  }
  std::string text = t.render();
  std::cout << text.substr(text.find('\n') + 1);
  if (v.contains("evidence") && !v["evidence"].is_null()) {
    std::string evidence =
        v["evidence"].is_string() ? v["evidence"].get<std::string>() : v["evidence"].dump(2);
    if (!evidence.empty()) {
      std::cout << "\nEvidence\n";
      size_t p = 0;
      while (p < evidence.size()) {
        size_t e = evidence.find('\n', p);
        if (e == std::string::npos) e = evidence.size();
        std::cout << "  " << evidence.substr(p, e - p) << "\n";
        p = e + 1;
      }
    }
  }
}

int cmd_show(const Options& o) {
  auto s = connect(o);
  if (!s) return fail(s.error());
  auto target = resolve_target(*s, o.target);
  if (!target) return fail(target.error());
  auto r = s->request(json{{"cmd", "show"}, {"target", *target}});
  if (!r) return fail(r.error());
  if (o.json) {
    print_json(*r);
  } else if (r->contains("key")) {
    show_kernel(*r);
  } else {
    show_variant(*r);
  }
  return k_exit_ok;
}

int cmd_retry(const Options& o) {
  auto s = connect(o);
  if (!s) return fail(s.error());
  auto target = resolve_target(*s, o.target);
  if (!target) return fail(target.error());
  json req{{"cmd", "retry"}, {"target", *target}};
  if (!o.strategy.empty()) req["strategy"] = o.strategy;
  auto r = s->request(req);
  if (!r) return fail(r.error());
  if (o.json) {
    print_json(*r);
    return k_exit_ok;
  }
  std::cout << "kernel " << demangle(str(*r, "name")) << " (" << str(*r, "key")
            << "): the agent will try "
            << (o.strategy.empty() ? std::string("every strategy") : o.strategy)
            << " again while it is hot\n";
  return k_exit_ok;
}

int cmd_switch(const Options& o, const std::string& cmd) {
  auto s = connect(o);
  if (!s) return fail(s.error());
  auto target = resolve_target(*s, o.target);
  if (!target) return fail(target.error());
  json req{{"cmd", cmd}, {"target", *target}};
  if (o.fleet) req["fleet"] = true;
  auto r = s->request(req);
  if (!r) return fail(r.error());
  if (o.json) {
    print_json(*r);
    return k_exit_ok;
  }
  if (str(*r, "fleet") == "withdrawn") {
    std::cout << "variant " << short_id(str(*r, "id")) << " of " << kernel_display(str(*r, "kernel"))
              << ": disabled here and withdrawn from the fleet (a tombstone in the remote tier: "
                 "other hosts stop adopting it, and those serving it withdraw it at their next "
                 "tombstone lookup)\n";
    return k_exit_ok;
  }
  if (cmd == "evict") {
    uint64_t n = num<uint64_t>(*r, "evicted");
    std::cout << "evicted " << n << " variant" << (n == 1 ? "" : "s") << " of " << o.target << "\n";
  } else if (r->contains("key")) {
    std::cout << "kernel " << demangle(str(*r, "name")) << " (" << str(*r, "key") << "): "
              << (cmd == "disable" ? "disabled; the original runs everywhere"
                                   : "enabled; verified variants may serve it again")
              << "\n";
  } else {
    std::cout << "variant " << short_id(str(*r, "id")) << " of "
              << kernel_display(str(*r, "kernel")) << ": " << str(*r, "state") << "\n";
  }
  return k_exit_ok;
}

// Write the bytes of `in` (from its start) to `file`: a temporary file next to it, then a rename
// (with --force) or a link that fails when `file` appeared meanwhile.
Result<uint64_t> write_export(int in, const std::string& file, bool force) {
  fs::path target(file);
  fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmp = (dir / ("." + target.filename().string() + ".honectl-XXXXXX")).string();
  int out = ::mkstemp(tmp.data());
  if (out < 0)
    return make_error("cannot create a file in " + dir.string() + ": " + std::strerror(errno));
  OwnedFd guard(out);
  auto cleanup = [&](const std::string& why) {
    ::unlink(tmp.c_str());
    return make_error(why);
  };
  if (::fchmod(out, 0644) != 0)
    return cleanup("cannot set the mode of " + tmp + ": " + std::strerror(errno));
  uint64_t total = 0;
  char buf[1 << 16];
  while (true) {
    ssize_t n = ::pread(in, buf, sizeof buf, off_t(total));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return cleanup(std::string("cannot read the export honed sent: ") + std::strerror(errno));
    if (n == 0) break;
    ssize_t off = 0;
    while (off < n) {
      ssize_t w = ::write(out, buf + off, size_t(n - off));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return cleanup("cannot write " + file + ": " + std::strerror(errno));
      off += w;
    }
    total += uint64_t(n);
  }
  if (::fsync(out) != 0) return cleanup("cannot write " + file + ": " + std::strerror(errno));
  if (force) {
    if (::rename(tmp.c_str(), file.c_str()) != 0) {
      return cleanup("cannot replace " + file + ": " + std::strerror(errno));
    }
  } else {
    if (::link(tmp.c_str(), file.c_str()) != 0) {
      int err = errno;
      return cleanup(err == EEXIST ? file + " exists; use --force to overwrite it"
                                   : "cannot create " + file + ": " + std::strerror(err));
    }
    ::unlink(tmp.c_str());
  }
  return total;
}

int cmd_export(const Options& o) {
  std::error_code ec;
  if (!o.force && fs::exists(fs::symlink_status(o.file, ec))) {
    return fail(o.file + " exists; use --force to overwrite it", k_exit_failed);
  }
  auto s = connect(o);
  if (!s) return fail(s.error());
  json req{{"cmd", "export"}};
  if (!o.arch.empty()) req["arch"] = o.arch;
  OwnedFd file;
  auto r = s->request(req, -1, &file);
  if (!r) return fail(r.error());
  if (!file) return fail("honed answered the export without the file", k_exit_failed);
  auto bytes = write_export(file.get(), o.file, o.force);
  if (!bytes) return fail(bytes.error().message, k_exit_failed);
  if (o.json) {
    json j = *r;
    j["file"] = o.file;
    j["bytes"] = *bytes;
    print_json(j);
    return k_exit_ok;
  }
  uint64_t n = num<uint64_t>(*r, "variants");
  std::cout << "exported " << n << " verified variant" << (n == 1 ? "" : "s")
            << (o.arch.empty() ? "" : " for " + o.arch) << " to " << o.file << " ("
            << human_bytes(*bytes) << ")\n";
  return k_exit_ok;
}

int cmd_import(const Options& o) {
  OwnedFd file(::open(o.file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!file) return fail("cannot open " + o.file + ": " + std::strerror(errno), k_exit_failed);
  struct stat st {};
  if (::fstat(file.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return fail(o.file + " is not a regular file", k_exit_failed);
  }
  auto s = connect(o);
  if (!s) return fail(s.error());
  auto r = s->request(json{{"cmd", "import"}}, file.get());
  if (!r) return fail(o.file + ": " + r.error().message, r.error().code);
  if (o.json) {
    print_json(*r);
    return k_exit_ok;
  }
  uint64_t imported = num<uint64_t>(*r, "imported");
  std::cout << "imported " << imported << " variant" << (imported == 1 ? "" : "s") << " from "
            << o.file << " (" << num<uint64_t>(*r, "already_present") << " already present, "
            << num<uint64_t>(*r, "rejected") << " rejected)";
  if (imported) std::cout << "; they serve once re-validated on this host";
  std::cout << "\n";
  for (const auto& p : r->value("problems", json::array())) {
    std::cerr << "honectl: " << o.file << ": " << (p.is_string() ? p.get<std::string>() : p.dump())
              << "\n";
  }
  return k_exit_ok;
}

void jobs_table(const json& jobs, std::ostream& out, size_t indent) {
  Table t({{"JOB", Align::right},
           {"KERNEL", Align::left},
           {"STRATEGY", Align::left},
           {"STATE", Align::left},
           {"VERDICT", Align::left},
           {"SPEEDUP", Align::right},
           {"MESSAGE", Align::left}});
  for (const auto& j : jobs) {
    std::string verdict = str(j, "verdict", "");
    // A strategy's check was only compiled, or only validated on one capture.
    if (!verdict.empty() && j.contains("check")) verdict += " (" + str(j, "check") + " only)";
    t.row({std::to_string(num<uint64_t>(j, "id")), ellipsize(kernel_display(str(j, "kernel")), 32),
           str(j, "strategy"), str(j, "state"), verdict.empty() ? "-" : verdict,
           num<double>(j, "speedup") > 0 ? human_speedup(num<double>(j, "speedup")) : "-",
           ellipsize(str(j, "message", ""), 60)});
  }
  out << t.render(indent);
}

int cmd_jobs(const Options& o) {
  auto s = connect(o);
  if (!s) return fail(s.error());
  auto r = s->request(json{{"cmd", "jobs"}});
  if (!r) return fail(r.error());
  if (o.json) {
    print_json(*r);
    return k_exit_ok;
  }
  const json jobs = r->value("jobs", json::array());
  if (jobs.empty()) {
    std::cout << "no jobs\n";
    return k_exit_ok;
  }
  jobs_table(jobs, std::cout, 0);
  return k_exit_ok;
}

// The whole of a file honectl hands to honed (a submitted candidate), as a descriptor.
Result<OwnedFd> open_regular(const std::string& file) {
  OwnedFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return make_error("cannot open " + file + ": " + std::strerror(errno), k_exit_failed);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return make_error(file + " is not a regular file", k_exit_failed);
  }
  if (st.st_size == 0) return make_error(file + " is empty", k_exit_failed);
  return fd;
}

int cmd_submit(const Options& o) {
  std::string kind = o.kind;
  if (kind.empty()) {
    std::string ext = fs::path(o.file).extension().string();
    if (ext == ".cu" || ext == ".cuh" || ext == ".cpp")
      kind = "cuda";
    else if (ext == ".ptx")
      kind = "ptx";
    else
      return fail("cannot tell the kind of " + o.file +
                      " from its name: give --kind cuda or "
                      "--kind ptx",
                  k_exit_usage);
  }
  if (kind != "cuda" && kind != "ptx") return fail("--kind is cuda or ptx", k_exit_usage);
  if (!o.block.empty() && o.block.size() != 3) {
    return fail("--block takes three numbers: X,Y,Z", k_exit_usage);
  }
  auto file = open_regular(o.file);
  if (!file) return fail(file.error());
  auto s = connect(o);
  if (!s) return fail(s.error());
  auto target = resolve_target(*s, o.target);
  if (!target) return fail(target.error());
  json req{{"cmd", "submit"},
           {"target", *target},
           {"kind", kind},
           {"comparison", o.bitwise ? "bitwise" : "tolerance"},
           {"description", "submitted with honectl from " + fs::path(o.file).filename().string()}};
  if (!o.entry.empty()) req["entry"] = o.entry;
  if (!o.block.empty()) req["block"] = o.block;
  auto r = s->request(req, file->get());
  if (!r) return fail(r.error());
  uint64_t id = num<uint64_t>(*r, "job");
  if (o.no_wait) {
    if (o.json)
      print_json(*r);
    else
      std::cout << "job " << id << " queued for " << str(*r, "kernel") << " (honectl jobs)\n";
    return k_exit_ok;
  }
  if (!o.json) {
    std::cout << "job " << id << ": validating " << o.file << " against "
              << kernel_display(str(*r, "kernel")) << " on captured launches ...\n"
              << std::flush;
  }
  // The job waits for a capture (the application must launch the kernel), then a worker.
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(int64_t(o.wait_s * 1000));
  json job;
  while (true) {
    auto j = s->request(json{{"cmd", "job"}, {"id", id}});
    if (!j) return fail(j.error());
    job = *j;
    if (str(job, "state", "") == "done") break;
    if (std::chrono::steady_clock::now() >= deadline) {
      return fail("job " + std::to_string(id) + " is still " + str(job, "state") + " after " +
                      std::to_string(int(o.wait_s)) + " s; follow it with honectl jobs",
                  k_exit_failed);
    }
    ::usleep(250'000);
  }
  bool verified = str(job, "verdict", "") == "verified";
  if (o.json) {
    print_json(job);
  } else {
    std::cout << "job " << id << ": " << str(job, "verdict") << ": " << str(job, "message", "")
              << "\n";
    if (verified) {
      std::cout << "the variant now serves " << kernel_display(str(job, "kernel"))
                << " in every process that runs it (honectl disable to stop it)\n";
    }
  }
  return verified ? k_exit_ok : k_exit_failed;
}

int cmd_fleet(const Options& o) {
  auto s = connect(o);
  if (!s) return fail(s.error());
  auto r = s->request(json{{"cmd", "fleet"}});
  if (!r) return fail(r.error());
  if (o.json) {
    print_json(*r);
    return k_exit_ok;
  }
  const json remotes = r->value("remotes", json::array());
  if (remotes.empty()) {
    std::cout << "no remote tier: [store.remote] urls is empty in hone.toml\n";
    return k_exit_ok;
  }
  Table t({{"REMOTE"},
           {"STATE"},
           {"HITS", Align::right},
           {"MISSES", Align::right},
           {"PUBLISHED", Align::right},
           {"REJECTED", Align::right},
           {"ERRORS", Align::right},
           {"LAST ERROR"}});
  for (const auto& rem : remotes) {
    std::string state = rem.value("backing_off", false) ? "backing off"
                        : rem.value("reachable", false) ? "reachable"
                        : rem.value("errors", uint64_t(0)) ? "unreachable"
                                                           : "not asked yet";
    if (rem.value("read_only", false)) state += ", read-only";
    t.row({str(rem, "remote"), state, human_count(rem.value("hits", uint64_t(0))),
           human_count(rem.value("misses", uint64_t(0))),
           human_count(rem.value("published", uint64_t(0))),
           human_count(rem.value("rejected", uint64_t(0))),
           human_count(rem.value("errors", uint64_t(0))), ellipsize(str(rem, "last_error"), 60)});
  }
  std::cout << t.render();
  std::cout << "signing: " << (r->value("signing", false) ? "on (key_file)" : "off")
            << ", unsigned objects: "
            << (r->value("require_signature", false) ? "refused" : "validated like any candidate")
            << "\n";
  uint64_t every = r->value("tombstone_interval_s", uint64_t(0));
  std::cout << "tombstones: "
            << (every ? "looked up every " + std::to_string(every) + " s"
                      : std::string("not looked up periodically"))
            << ", variants withdrawn here because of one: "
            << r->value("withdrawals", uint64_t(0)) << "\n";
  return k_exit_ok;
}

int cmd_metrics(const Options& o) {
  auto s = connect(o);
  if (!s) return fail(s.error());
  auto r = s->request(json{{"cmd", "metrics"}});
  if (!r) return fail(r.error());
  if (o.json) {
    print_json(*r);
  } else {
    std::cout << str(*r, "text", "");
  }
  return k_exit_ok;
}

// The configuration as TOML, each value followed by where it came from (containerd config dump
// style): honed's running configuration, or with --local the one honed would read now.
void print_config(const json& r, const std::string& from) {
  std::cout << "# " << from << "\n";
  const std::string file = str(r, "file", "");
  std::cout << "# file: " << (file.empty() ? "none (defaults)" : file) << "\n";
  std::string section;
  const json settings = r.value("settings", json::array());
  size_t width = 0;
  for (const auto& s : settings) width = std::max(width, str(s, "key").size() + 3 + str(s, "value").size());
  for (const auto& s : settings) {
    if (str(s, "section") != section) {
      section = str(s, "section");
      std::cout << "\n[" << section << "]\n";
    }
    std::string line = str(s, "key") + " = " + str(s, "value");
    if (s.value("secret", false) && str(s, "value").rfind("(set", 0) == 0)
      line = "# " + str(s, "key") + " is set (not shown)";
    line.resize(std::max(line.size(), std::min<size_t>(width, 60)), ' ');
    const std::string origin = str(s, "origin");
    std::cout << line << "  # " << (origin == "default" ? "default" : "from " + origin) << "\n";
  }
}

int cmd_config(const Options& o) {
  if (o.local) {
    const bool given = !o.config.empty();
    const std::string path = given ? o.config : config::k_default_path;
    config::Provenance where;
    auto c = config::load(path, !given, config::environment(), {}, &where);
    if (!c) return fail("honectl: " + c.error().message, k_exit_failed);
    json list = json::array();
    for (const auto& s : config::settings(*c, where)) {
      list.push_back({{"section", s.section}, {"key", s.name}, {"value", s.value},
                      {"origin", s.origin}, {"secret", s.secret}});
    }
    json r{{"schema", "hone.config/1"}, {"file", c->source.string()}, {"settings", list}};
    if (o.json) {
      print_json(r);
    } else {
      print_config(r, "the configuration " + path +
                          " and this shell's HONE_* variables give (honed's own environment and "
                          "flags may differ)");
    }
    return k_exit_ok;
  }
  auto s = connect(o);
  if (!s) {
    Error e = s.error();
    e.message += " (honectl config --local reads the file instead)";
    return fail(e);
  }
  auto r = s->request(json{{"cmd", "config"}});
  if (!r) return fail(r.error());
  if (o.json) {
    print_json(*r);
  } else {
    print_config(*r, "honed's running configuration, from " + o.socket);
  }
  return k_exit_ok;
}

} // namespace

int main(int argc, char** argv) {
  Options o;
  o.socket = default_socket();
  bool socket_given = std::getenv("HONE_SOCKET") && *std::getenv("HONE_SOCKET");

  CLI::App app{"honectl: see what honed observed and optimized, and switch any of it off."};
  app.set_version_flag("--version", std::string("honectl ") + k_version);
  app.require_subcommand(1);
  app.footer(k_exit_help);
  auto socket_opt = [&](CLI::App* a) {
    a->add_option("--socket", o.socket,
                  "honed's socket (default: $HONE_SOCKET, else /run/hone/hone.sock)")
        ->each([&](const std::string&) { socket_given = true; });
  };
  auto json_opt = [&](CLI::App* a, const char* what) { a->add_flag("--json", o.json, what); };
  socket_opt(&app);

  std::string target_help = "a kernel (its name, if unambiguous, or its key <image hex>:<entry>) "
                            "or a variant (its id, or the first digits of it)";
  std::map<std::string, CLI::App*> cmds;
  auto add = [&](const char* name, const char* help) {
    CLI::App* c = app.add_subcommand(name, help);
    c->footer(k_exit_help);
    socket_opt(c);
    cmds[name] = c;
    return c;
  };

  auto* status = add("status", "Daemon, processes, top kernels, variants and the store");
  json_opt(status, "Print the daemon's JSON (schema hone.status/1)");
  status->add_option("--top", o.top, "Kernels to show (default 10)");
  status->add_option("--processes", o.processes, "Attached processes to list (default 50)");

  auto* kernels = add("kernels", "Kernels ranked by estimated GPU time, summed over processes");
  json_opt(kernels, "Print the daemon's JSON (schema hone.kernels/1)");

  auto* variants = add("variants", "Variants in the store (of one kernel when KERNEL is given)");
  variants->add_option("KERNEL", o.target, "a kernel name or key");
  json_opt(variants, "Print the daemon's JSON (schema hone.variants/1)");

  auto* show = add("show", "A kernel with its variants, or a variant with its evidence");
  show->add_option("TARGET", o.target, target_help)->required();
  json_opt(show, "Print the daemon's JSON");

  auto* disable = add("disable", "Put a kernel (or one variant) back to the original, everywhere, "
                                 "now; survives restarts");
  disable->add_option("TARGET", o.target, target_help)->required();
  disable->add_flag("--fleet", o.fleet,
                    "a variant only: also withdraw it from the remote tier ([store.remote]) with a "
                    "tombstone, so that other hosts stop adopting, serving and publishing it");
  json_opt(disable, "Print the daemon's JSON");

  auto* enable = add("enable", "Undo disable");
  enable->add_option("TARGET", o.target, target_help)->required();
  json_opt(enable, "Print the daemon's JSON");

  auto* evict = add("evict", "Remove a variant, or every variant of a kernel, from the store");
  evict->add_option("TARGET", o.target, target_help)->required();
  json_opt(evict, "Print the daemon's JSON");

  auto* retry = add("retry", "Let the agent try a kernel again (it never redoes a strategy on its "
                             "own, not even after a restart)");
  retry->add_option("KERNEL", o.target, "the kernel: its name, if unambiguous, or its key")
      ->required();
  retry->add_option("--strategy", o.strategy,
                    "only this strategy (specialize, launch_bounds, readonly, rejit, llm); "
                    "default: every one");
  json_opt(retry, "Print the daemon's JSON");

  auto* exp = add("export", "Write the verified variants to FILE (for `honectl import` elsewhere)");
  exp->add_option("FILE", o.file, "the file to write (mode 0644)")->required();
  exp->add_option("--arch", o.arch, "only variants for this architecture, e.g. sm_90");
  exp->add_flag("--force", o.force, "overwrite FILE if it exists");
  json_opt(exp, "Print the daemon's JSON");

  auto* imp = add("import", "Add the variants of an export FILE (re-validated here before they "
                            "serve)");
  imp->add_option("FILE", o.file, "a file written by honectl export")->required();
  json_opt(imp, "Print the daemon's JSON");

  auto* submit = add("submit", "Hand honed a faster version of a kernel: it is validated on the "
                               "application's captured launches and serves only if it passes");
  submit->add_option("KERNEL", o.target, "the kernel: its name, if unambiguous, or its key")
      ->required();
  submit->add_option("FILE", o.file, "the candidate: CUDA C++ (.cu) or PTX (.ptx)")->required();
  submit->add_option("--entry", o.entry,
                     "the candidate's kernel (default: the original's entry name; give the "
                     "mangled name for a kernel not declared extern \"C\")");
  submit->add_option("--kind", o.kind, "cuda or ptx (default: from FILE's extension)");
  submit->add_flag("--bitwise", o.bitwise,
                   "require every output byte equal (default: floating-point outputs within "
                   "[validation] tolerances, everything else exact)");
  submit
      ->add_option("--block", o.block,
                   "serve only launches with this block shape, X,Y,Z (default: the shape of "
                   "the captured launches)")
      ->delimiter(',')
      ->expected(3);
  submit->add_flag("--no-wait", o.no_wait, "print the job id and return at once");
  submit->add_option("--wait", o.wait_s, "seconds to wait for the verdict (default 600)");
  json_opt(submit, "Print the job's JSON");
  submit->footer(std::string("Exit status: 0 verified (it serves now); 1 rejected, or the request "
                             "failed; 2 usage error; 3 cannot reach honed."));

  auto* jobs = add("jobs", "Validation jobs: queued, running and recently finished, with verdicts");
  json_opt(jobs, "Print the daemon's JSON (schema hone.jobs/1)");

  auto* fleet = add("fleet", "The remote tier: each remote's state, hits, misses, published and "
                             "rejected objects, and its last error");
  json_opt(fleet, "Print the daemon's JSON");

  auto* metrics = add("metrics", "The Prometheus metrics honed exposes");
  json_opt(metrics, "Print the daemon's JSON");

  auto* cfg = add("config", "The effective configuration, each value with where it came from "
                            "(the file and line, an environment variable, a flag, or the default)");
  cfg->add_flag("--local", o.local,
                "compute it here from the file and this shell's HONE_* variables, without honed");
  cfg->add_option("--config", o.config, "with --local: the file to read (default "
                                        "/etc/hone/hone.toml, if it exists)");
  json_opt(cfg, "Print it as JSON (schema hone.config/1)");

  auto* attach = add("attach-service",
                     "Preload hone into a systemd service: writes the drop-in "
                     "/etc/systemd/system/NAME.service.d/hone.conf (LD_PRELOAD, keeping the "
                     "service's own; SupplementaryGroups=hone) and says how to apply it");
  auto* detach = add("detach-service", "Remove the drop-in attach-service wrote for NAME");
  for (CLI::App* c : {attach, detach}) {
    c->add_option("NAME", o.service.name, "the service, e.g. vllm or vllm.service")->required();
    c->add_option("--root", o.service.root,
                  "the file system the units are in (default /; for images and containers)");
  }
  attach->add_option("--library", o.service.library,
                     "the library to preload (default " + installed_shim_path() + ")");
  attach->add_option("--group", o.service.group,
                     "the group allowed on honed's socket (default hone)");
  attach->footer("Exit status: 0 written (or already attached); 1 failed; 2 usage error.");

  auto* doc = add("doctor", "Check the driver, the socket, the daemon, the store and the config, "
                            "and say what to fix");
  doc->add_option("--driver", o.driver,
                  "driver library to try (default: $HONE_WORKER_DRIVER, else worker.driver)");
  doc->add_option("--config", o.config, "config file to check (default /etc/hone/hone.toml)");
  doc->add_option("--state-dir", o.state_dir, "read the store here when honed is down");
  json_opt(doc, "Print the report as JSON (schema hone.doctor/1)");

  // CLI11 reports a mistyped command as "a subcommand is required"; say what is wrong instead.
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--socket") {
      ++i;
      continue;
    }
    if (a.empty() || a[0] == '-') continue;
    if (!cmds.count(a)) {
      std::cerr << "honectl: unknown command '" << a << "' (honectl --help lists the commands)\n";
      return k_exit_usage;
    }
    break;
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? k_exit_ok : k_exit_usage;
  }

  if (status->parsed()) return cmd_status(o);
  if (kernels->parsed()) return cmd_kernels(o);
  if (variants->parsed()) return cmd_variants(o);
  if (show->parsed()) return cmd_show(o);
  if (disable->parsed()) return cmd_switch(o, "disable");
  if (enable->parsed()) return cmd_switch(o, "enable");
  if (evict->parsed()) return cmd_switch(o, "evict");
  if (retry->parsed()) return cmd_retry(o);
  if (exp->parsed()) return cmd_export(o);
  if (imp->parsed()) return cmd_import(o);
  if (metrics->parsed()) return cmd_metrics(o);
  if (fleet->parsed()) return cmd_fleet(o);
  if (submit->parsed()) return cmd_submit(o);
  if (jobs->parsed()) return cmd_jobs(o);
  if (cfg->parsed()) return cmd_config(o);
  if (attach->parsed()) return attach_service(o.service);
  if (detach->parsed()) return detach_service(o.service);
  if (doc->parsed()) {
    DoctorOptions d{o.socket, o.driver, o.config, o.state_dir, socket_given, o.json};
    return doctor(d);
  }
  return k_exit_usage;
}
