// One launch as the application made it, in the form the shim's slow paths (capture, swap) need.
#pragma once

#include <cstdint>
#include <cstring>

namespace hone::shim {

struct LaunchArgs {
  unsigned grid[3];
  unsigned block[3];
  unsigned shared_bytes;
  void* stream;
  bool per_thread;  // a _ptsz entry point: stream 0 is the per-thread default stream
  void** params;    // kernelParams, or nullptr
  void** extra;     // the extra array (CU_LAUNCH_PARAM_BUFFER_POINTER ...), or nullptr
};

// The parameter buffer and its size an `extra` array carries (cuda.h: CU_LAUNCH_PARAM_END = 0,
// _BUFFER_POINTER = 1, _BUFFER_SIZE = 2, each key followed by its value).
inline bool extra_buffer(void** extra, const uint8_t** buffer, size_t* size) {
  *buffer = nullptr;
  *size = 0;
  for (int i = 0; extra && i < 64 && extra[i] != nullptr; i += 2) {
    auto key = reinterpret_cast<uintptr_t>(extra[i]);
    if (key == 1) *buffer = static_cast<const uint8_t*>(extra[i + 1]);
    else if (key == 2 && extra[i + 1]) std::memcpy(size, extra[i + 1], sizeof(size_t));
  }
  return *buffer != nullptr;
}

} // namespace hone::shim
