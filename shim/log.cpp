#include "shim/log.hpp"

#include "shim/config.hpp"

#include <cstdarg>
#include <cstdio>
#include <cstring>

#include <unistd.h>

namespace hone::shim {

namespace {
std::atomic<bool> g_once[size_t(Once::count)];
}

void log(Level level, const char* fmt, ...) {
  if (level < config().log_level) return;
  char buf[1024];
  static constexpr const char* k_names[] = {"debug", "info", "warn"};
  int n = std::snprintf(buf, sizeof buf, "hone: %s: ", k_names[int(level)]);
  va_list ap;
  va_start(ap, fmt);
  int m = std::vsnprintf(buf + n, sizeof buf - size_t(n) - 1, fmt, ap);
  va_end(ap);
  size_t len = size_t(n) + (m < 0 ? 0 : std::min<size_t>(size_t(m), sizeof buf - size_t(n) - 2));
  buf[len++] = '\n';
  ssize_t ignored = ::write(2, buf, len);
  (void)ignored;
}

bool first_time(Once what) { return !g_once[size_t(what)].exchange(true); }

} // namespace hone::shim
