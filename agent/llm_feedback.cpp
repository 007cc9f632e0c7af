#include "agent/llm_feedback.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <utility>
#include <vector>

namespace hone::agent {

namespace {

using nlohmann::json;

std::string time_text(double ns) {
  if (ns >= 1e6) return fmt::format("{:.3f} ms", ns / 1e6);
  return fmt::format("{:.2f} us", ns / 1e3);
}

std::string bytes_text(double bytes) {
  if (bytes >= 1e9) return fmt::format("{:.2f} GB", bytes / 1e9);
  if (bytes >= 1e6) return fmt::format("{:.2f} MB", bytes / 1e6);
  if (bytes >= 1e3) return fmt::format("{:.1f} KB", bytes / 1e3);
  return fmt::format("{:.0f} B", bytes);
}

// "0.35 TB/s, 8% of the 4.30 TB/s roofline"
std::string bandwidth_text(double bytes, double ns, double peak, const char* peak_name) {
  if (ns <= 0) return "";
  double rate = bytes / (ns * 1e-9);
  std::string out = fmt::format("{:.2f} TB/s", rate / 1e12);
  if (peak > 0) {
    out += fmt::format(", {:.0f}% of the {:.2f} TB/s {}", 100 * rate / peak, peak / 1e12, peak_name);
  }
  return out;
}

template <class T> T number(const json& j, const char* key, T otherwise) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return otherwise;
  return it->get<T>();
}

std::string side_text(const char* who, const json& s, const json& profile) {
  const double ns = number<double>(s, "ns", 0);
  std::string line = fmt::format("- {}: {}", who, time_text(ns));
  if (s.contains("bound") && s["bound"].is_string()) {
    // The terms, largest first: what to attack, and how far the next one is.
    std::vector<std::pair<uint64_t, std::string>> terms;
    if (s.contains("terms_ns") && s["terms_ns"].is_object()) {
      for (const auto& [name, v] : s["terms_ns"].items()) {
        if (v.is_number()) terms.emplace_back(v.get<uint64_t>(), name);
      }
    }
    std::sort(terms.begin(), terms.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    std::string parts;
    for (const auto& [v, name] : terms) {
      parts += (parts.empty() ? "" : ", ") + name + " " + time_text(double(v));
    }
    line += "; " + s["bound"].get<std::string>() + "-bound";
    if (!parts.empty()) line += " (" + parts + ")";
  }
  std::vector<std::string> resources;
  if (int r = number<int>(s, "registers", -1); r >= 0) {
    resources.push_back(fmt::format("{} registers", r));
  }
  if (int l = number<int>(s, "local_bytes", -1); l >= 0) {
    resources.push_back(fmt::format("{} B local memory per thread (spills, stack)", l));
  }
  if (int sh = number<int>(s, "static_shared_bytes", -1); sh >= 0) {
    resources.push_back(fmt::format("{} B static shared memory", sh));
  }
  if (!resources.empty()) {
    line += "; ";
    for (size_t i = 0; i < resources.size(); ++i) line += (i ? ", " : "") + resources[i];
  }
  if (int w = number<int>(s, "warps_per_sm", -1); w >= 0) {
    int max = number<int>(s, "max_warps_per_sm", -1);
    line += max > 0 ? fmt::format("; {} of {} warps per SM", w, max)
                    : fmt::format("; {} warps per SM", w);
    if (s.contains("occupancy_limit") && s["occupancy_limit"].is_string()) {
      line += " (limited by " + s["occupancy_limit"].get<std::string>() + ")";
    }
  }
  if (uint64_t waves = number<uint64_t>(s, "waves", 0); waves > 0) {
    line += fmt::format(", {} wave{}", waves, waves == 1 ? "" : "s");
  }
  if (s.contains("dram_bytes")) {
    const double dram = number<double>(s, "dram_bytes", 0);
    line += "; DRAM traffic " + bytes_text(dram) + " = " +
            bandwidth_text(dram, ns, number<double>(s, "dram_bytes_per_s_peak", 0), "roofline");
    if (s.contains("l2_bytes")) line += ", L2 traffic " + bytes_text(number<double>(s, "l2_bytes", 0));
  } else if (double buffers = number<double>(profile, "buffer_bytes", 0); buffers > 0) {
    line += "; its buffers (" + bytes_text(buffers) + ") moved once in that time would be " +
            bandwidth_text(buffers, ns, number<double>(profile, "dram_bytes_per_s_peak", 0),
                           "peak");
  }
  return line;
}

} // namespace

std::string profile_feedback(std::string_view evidence_json) {
  json evidence = json::parse(evidence_json, nullptr, false);
  if (!evidence.is_object() || !evidence.contains("profile")) return "";
  const json& p = evidence["profile"];
  if (!p.is_object() || !p.contains("original") || !p.contains("candidate") ||
      !p["original"].is_object() || !p["candidate"].is_object()) {
    return "";
  }
  const bool modeled = p.value("source", "") == "emulated device cost model";
  std::string head =
      modeled ? "What bounds each kernel, from the cost model of the emulated H100/H200-class GPU "
                "that timed them (on the first captured launch):"
              : "What the driver reports of each kernel (ptxas' resources) and the times measured "
                "on the GPU (first captured launch):";
  return head + "\n" + side_text("original", p["original"], p) + "\n" +
         side_text("candidate", p["candidate"], p) + "\n";
}

} // namespace hone::agent
