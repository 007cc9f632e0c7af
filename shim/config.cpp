#include "shim/config.hpp"

#include <cstdlib>
#include <cstring>

namespace hone::shim {

namespace {

uint64_t number(const char* name, uint64_t fallback, uint64_t max) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  unsigned long long n = std::strtoull(v, &end, 10);
  if (*end != '\0' || n > max) return fallback;
  return n;
}

Config read() {
  Config c;
  const char* d = std::getenv("HONE_DISABLE");
  c.disabled = d && *d && std::strcmp(d, "0") != 0;
  if (const char* l = std::getenv("HONE_LOG")) {
    if (!std::strcmp(l, "debug")) c.log_level = Level::debug;
    else if (!std::strcmp(l, "info")) c.log_level = Level::info;
    else if (!std::strcmp(l, "warn")) c.log_level = Level::warn;
    else if (!std::strcmp(l, "off")) c.log_level = Level::off;
  }
  if (const char* s = std::getenv("HONE_SOCKET"); s && *s && std::strlen(s) < sizeof c.socket) {
    std::strcpy(c.socket, s);
  }
  c.sample_every = uint32_t(number("HONE_SAMPLE_EVERY", c.sample_every, 1u << 30));
  c.report_ms = uint32_t(number("HONE_REPORT_MS", 0, 3600u * 1000));
  c.image_cache_bytes = number("HONE_IMAGE_CACHE_MB", c.image_cache_bytes >> 20, 1u << 20) << 20;
  const char* cupti = std::getenv("HONE_CUPTI");
  c.cupti = cupti && *cupti && std::strcmp(cupti, "0") != 0;
  const char* bounds = std::getenv("HONE_CAPTURE_BOUNDS");
  c.capture_bounds = !(bounds && std::strcmp(bounds, "whole") == 0);
  return c;
}

} // namespace

const Config& config() {
  static const Config c = read();
  return c;
}

} // namespace hone::shim
