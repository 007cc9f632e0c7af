// Helpers for honed's Prometheus text (daemon/control.cpp, Daemon::metrics_text, and the parts
// the fleet and the optimizer add).
#pragma once

#include <cstdio>
#include <string>

namespace hone::daemon {

// A label value as the exposition format wants it: backslash, double quote and newline escaped.
inline std::string escape_label(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

// One sample with its HELP and TYPE lines: `name{labels} value`.
inline void append_metric(std::string& out, const char* name, const char* type, const char* help,
                          double value, const std::string& labels = {}) {
  out += std::string("# HELP ") + name + ' ' + help + "\n# TYPE " + name + ' ' + type + '\n' + name;
  if (!labels.empty()) out += "{" + labels + "}";
  char buf[64];
  std::snprintf(buf, sizeof buf, " %.17g\n", value);
  out += buf;
}

} // namespace hone::daemon
