// The shim's log: stderr lines prefixed "hone: ", formatted into a stack buffer and written with
// one write(2), so logging never allocates and never interleaves mid-line.
#pragma once

#include <atomic>
#include <cstdint>

namespace hone::shim {

enum class Level : uint8_t { debug = 0, info = 1, warn = 2, off = 3 };

void log(Level level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// Failure kinds logged once per process: the first occurrence is logged, the rest counted.
enum class Once : uint8_t {
  connect, handshake, garbage, stalled, disconnected, unknown_variant, table_full, image_cache,
  no_driver, variant_failed, graph_restore_failed, graph_patch_failed, graph_table_full,
  count
};
bool first_time(Once what);

} // namespace hone::shim
