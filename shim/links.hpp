// The JIT links in progress in the process (cuLinkCreate .. cuLinkDestroy) and what went into each,
// so that the cubin cuLinkComplete returns is known by the PTX it was linked from (hooks_link.cpp,
// Registry::link_output). Plain bookkeeping: no driver call, testable on its own.
#pragma once

#include "common/protocol.hpp"

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace hone::shim {

inline constexpr uint8_t k_jit_input_ptx = 1; // CU_JIT_INPUT_PTX (cuda.h, CUjitInputType)

class Links {
public:
  // cuLinkCreate handed out `state`: a new link with no inputs (a reused handle starts over).
  void created(const void* state);
  // The driver accepted an input of `type` (CUjitInputType) named `name` into `state`. For PTX
  // the text is kept, up to its first NUL or `size` bytes; other inputs are kept by name only.
  void added(const void* state, uint32_t type, const char* name, const void* data, size_t size);
  // What went into `state` so far; nullopt when no input of it was seen.
  std::optional<proto::Image::Linked> inputs(const void* state) const;
  void destroyed(const void* state);
  // Links in progress.
  size_t size() const;

private:
  mutable std::mutex m_mutex;
  std::unordered_map<const void*, proto::Image::Linked> m_states;
};

// The bytes of the file at `path` (cuLinkAddFile's PTX, an image cuModuleLoad read); empty when
// it cannot be read or holds more than `max` bytes.
std::string read_small_file(const char* path, size_t max);

} // namespace hone::shim
