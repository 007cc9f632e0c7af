// Helpers for honed's Prometheus text (daemon/control.cpp, Daemon::metrics_text, and the parts
// the fleet and the optimizer add).
#pragma once

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

} // namespace hone::daemon
