#include "tools/honectl_table.hpp"

#include <cxxabi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>

namespace hone::ctl {

void Table::row(std::vector<std::string> cells) {
  cells.resize(m_columns.size());
  m_rows.push_back(std::move(cells));
}

std::string Table::render(size_t indent) const {
  std::vector<size_t> width(m_columns.size());
  for (size_t c = 0; c < m_columns.size(); ++c) {
    width[c] = display_width(m_columns[c].title);
    for (const auto& r : m_rows) width[c] = std::max(width[c], display_width(r[c]));
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    std::string l(indent, ' ');
    for (size_t c = 0; c < cells.size(); ++c) {
      size_t pad = width[c] - display_width(cells[c]);
      if (c) l += "  ";
      if (m_columns[c].align == Align::right) l.append(pad, ' ');
      l += cells[c];
      if (m_columns[c].align == Align::left) l.append(pad, ' ');
    }
    while (!l.empty() && l.back() == ' ') l.pop_back();
    out += l;
    out += '\n';
  };
  std::vector<std::string> header;
  for (const auto& c : m_columns) header.push_back(c.title);
  line(header);
  for (const auto& r : m_rows) line(r);
  return out;
}

size_t display_width(const std::string& s) {
  size_t n = 0;
  for (unsigned char ch : s) n += (ch & 0xC0) != 0x80;
  return n;
}

std::string ellipsize(const std::string& s, size_t width) {
  if (display_width(s) <= width || width == 0) return s;
  std::string out;
  size_t chars = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char ch = static_cast<unsigned char>(s[i]);
    if ((ch & 0xC0) != 0x80) {
      if (chars + 1 == width) break;
      ++chars;
    }
    out += s[i];
  }
  return out + "…";
}

namespace {
std::string printf_string(const char* fmt, double v, const char* unit) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v, unit);
  return buf;
}

// Three significant digits: 1.23, 12.3, 123.
std::string three_digits(double v, const char* unit) {
  if (v < 9.995) return printf_string("%.2f %s", v, unit);
  if (v < 99.95) return printf_string("%.1f %s", v, unit);
  return printf_string("%.0f %s", v, unit);
}
} // namespace

std::string human_duration_ns(double ns) {
  if (!(ns > 0)) return "0";
  if (ns < 1e3) return printf_string("%.0f %s", ns, "ns");
  if (ns < 1e6 - 500) return three_digits(ns / 1e3, "µs");
  if (ns < 1e9 - 5e5) return three_digits(ns / 1e6, "ms");
  if (ns < 60e9) return three_digits(ns / 1e9, "s");
  if (ns < 3600e9) return three_digits(ns / 60e9, "min");
  return three_digits(ns / 3600e9, "h");
}

std::string human_uptime(double seconds) {
  auto s = uint64_t(seconds < 0 ? 0 : seconds);
  char buf[64];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%llus", static_cast<unsigned long long>(s));
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%llum %02llus", static_cast<unsigned long long>(s / 60),
                  static_cast<unsigned long long>(s % 60));
  } else if (s < 86400) {
    std::snprintf(buf, sizeof buf, "%lluh %02llum", static_cast<unsigned long long>(s / 3600),
                  static_cast<unsigned long long>(s / 60 % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%llud %02lluh", static_cast<unsigned long long>(s / 86400),
                  static_cast<unsigned long long>(s / 3600 % 24));
  }
  return buf;
}

std::string human_bytes(uint64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = double(bytes) / 1024;
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  size_t u = 0;
  while (v >= 1024 && u + 1 < std::size(units)) {
    v /= 1024;
    ++u;
  }
  return three_digits(v, units[u]);
}

std::string human_count(uint64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string human_speedup(double speedup) {
  if (!(speedup > 0)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fx", speedup);
  return buf;
}

std::string demangle(const std::string& name) {
  if (name.rfind("_Z", 0) != 0) return name;
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(
      abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), std::free);
  return status == 0 && out ? std::string(out.get()) : name;
}

std::string short_id(const std::string& hex) {
  return hex.substr(0, 12);
}

} // namespace hone::ctl
