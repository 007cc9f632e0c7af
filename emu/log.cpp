#include "emu/log.hpp"

#include <cstdlib>
#include <string>
#include <strings.h>
#include <unistd.h>

namespace hone::emu {

namespace {

LogLevel parse_level(const char* value) {
  if (value == nullptr || *value == '\0') return LogLevel::warn;
  if (strcasecmp(value, "debug") == 0) return LogLevel::debug;
  if (strcasecmp(value, "info") == 0) return LogLevel::info;
  if (strcasecmp(value, "warn") == 0 || strcasecmp(value, "warning") == 0) return LogLevel::warn;
  if (strcasecmp(value, "off") == 0 || strcasecmp(value, "none") == 0) return LogLevel::off;
  return LogLevel::warn;
}

} // namespace

LogLevel log_level() {
  static const LogLevel level = parse_level(std::getenv("HONE_EMU_LOG"));
  return level;
}

void log(LogLevel level, std::string_view message) {
  if (!log_enabled(level)) return;
  std::string line;
  try {
    line.reserve(message.size() + 11);
    line.append("hone-emu: ").append(message).push_back('\n');
  } catch (...) {
    return; // out of memory: the log is the first thing to give up
  }
  // One write(2) per line so lines from concurrent threads do not interleave.
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n <= 0) return;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

} // namespace hone::emu
