// The shim's settings, read from the environment once, at initialisation (never on a launch).
#pragma once

#include "shim/log.hpp"

#include <cstdint>

namespace hone::shim {

struct Config {
  bool disabled = false;        // HONE_DISABLE=1: pure pass-through
  Level log_level = Level::warn;  // HONE_LOG=debug|info|warn|off
  char socket[108] = "/run/hone/hone.sock"; // HONE_SOCKET (sun_path is 108 bytes)
  uint32_t sample_every = 100;  // HONE_SAMPLE_EVERY: time 1 launch in N with events; 0: never
  uint32_t report_ms = 0;       // HONE_REPORT_MS: report interval; 0: the daemon's
  uint64_t image_cache_bytes = 256ull << 20; // HONE_IMAGE_CACHE_MB: image copies kept for the daemon
  bool cupti = false; // HONE_CUPTI=1: time graph kernels per node from CUPTI records (shim/cupti.hpp)
  // HONE_CAPTURE_BOUNDS=probe (default) | whole: capture the bytes a bounds probe sees a launch
  // touch, or every allocation whole (shim/README.md, "Bounded captures")
  bool capture_bounds = true;
};

const Config& config();

} // namespace hone::shim
