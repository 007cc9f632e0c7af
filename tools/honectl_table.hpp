// How honectl shows things to people: aligned tables and numbers in human units.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hone::ctl {

enum class Align { left, right };

struct Column {
  std::string title;
  Align align = Align::left;
};

// A table printed with aligned columns, two spaces apart, a header line first. Widths count
// characters, not bytes, so "µs" lines up.
class Table {
public:
  explicit Table(std::vector<Column> columns) : m_columns(std::move(columns)) {}

  void row(std::vector<std::string> cells);
  bool empty() const { return m_rows.empty(); }
  // Every line starts with `indent` spaces; trailing spaces are trimmed.
  std::string render(size_t indent = 0) const;

private:
  std::vector<Column> m_columns;
  std::vector<std::vector<std::string>> m_rows;
};

// Characters (UTF-8 code points) in `s`.
size_t display_width(const std::string& s);
// `s` cut to `width` characters, the last one "…" when something was cut.
std::string ellipsize(const std::string& s, size_t width);

// A device time: "812 ns", "45.6 µs", "1.23 ms", "4.56 s", "12.3 min", "2.50 h".
std::string human_duration_ns(double ns);
// An uptime: "42s", "5m 12s", "2h 03m", "3d 04h".
std::string human_uptime(double seconds);
// "512 B", "1.5 KiB", "12.0 MiB", "3.20 GiB".
std::string human_bytes(uint64_t bytes);
// 1234567 -> "1,234,567".
std::string human_count(uint64_t n);
// 1.4237 -> "1.42x"; 0 (not measured) -> "-".
std::string human_speedup(double speedup);

// The demangled form of an Itanium-mangled name ("_Z4axpyfPKfPf" -> "axpy(float, float const*,
// float*)"); the name itself when it is not mangled.
std::string demangle(const std::string& name);
// The first 12 hex digits of an id, as tables show it.
std::string short_id(const std::string& hex);

} // namespace hone::ctl
