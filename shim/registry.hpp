// What the shim knows about the process's kernels: module images, the kernels looked up in them,
// and the per-kernel counters the launch path bumps.
//
// The launch path only reads: FunctionTable::find is lock-free and never allocates. Everything
// else (a module load, a function lookup, a function never seen before) takes the registry mutex
// and may allocate: it happens once per object, not once per launch.
#pragma once

#include "common/identity.hpp"
#include "common/protocol.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace hone::shim {

// One kernel (KernelKey) in this process, however many contexts or handles it has.
struct KernelRecord {
  uint64_t id = 0;
  KernelKey key;
  proto::ImageFormat format = proto::ImageFormat::unknown;
  uint64_t image_size = 0;
  bool source_known = false;

  std::atomic<uint64_t> launches{0};
  std::atomic<uint64_t> next_sample{0}; // launch number of the next timed launch
  std::atomic<uint64_t> sampled{0};
  std::atomic<uint64_t> sampled_ns{0};
  std::atomic<uint64_t> grid{0};  // last launch: x | y << 32 (z in grid_z)
  std::atomic<uint32_t> grid_z{0};
  std::atomic<uint64_t> block{0}; // x | y << 16 | z << 32

  // Reporter thread only.
  bool announced = false;
  uint64_t reported_launches = 0;
  uint64_t reported_sampled = 0;
};

// CUfunction / CUkernel handle -> KernelRecord, lock-free for readers. Open addressing; keys are
// never removed (an unloaded function's slot is pointed at nothing), so a reader racing an
// unload sees either the record or nullptr, never freed memory: records live until exit.
class FunctionTable {
public:
  static constexpr size_t k_capacity = 1u << 16;

  KernelRecord* find(const void* handle) const {
    uintptr_t key = reinterpret_cast<uintptr_t>(handle);
    if (!key) return nullptr;
    size_t i = hash(key);
    for (size_t probe = 0; probe < k_capacity; ++probe, i = (i + 1) & (k_capacity - 1)) {
      uintptr_t k = m_slots[i].key.load(std::memory_order_acquire);
      if (k == key) return m_slots[i].record.load(std::memory_order_acquire);
      if (k == 0) return nullptr;
    }
    return nullptr;
  }
  // Caller holds the registry mutex. False when the table is full.
  bool put(const void* handle, KernelRecord* record);

private:
  static size_t hash(uintptr_t k) { return size_t((k >> 4) * 0x9E3779B97F4A7C15ull >> 48) & (k_capacity - 1); }
  struct Slot {
    std::atomic<uintptr_t> key{0};
    std::atomic<KernelRecord*> record{nullptr};
  };
  Slot m_slots[k_capacity];
};

struct ImageInfo {
  ImageHash hash;
  proto::ImageFormat format = proto::ImageFormat::unknown;
  uint64_t size = 0;
  std::shared_ptr<const std::string> bytes; // nullptr when over the cache limit
  bool source_known = false;
};

class Registry {
public:
  FunctionTable functions;

  // A module (or library) was loaded from `data` (size recovered from the image itself when 0).
  void module_loaded(const void* module, const void* data, size_t size);
  void module_unloaded(const void* module);
  // `handle` (CUfunction or CUkernel) is entry `name` of `module`.
  KernelRecord* function_found(const void* handle, const void* module, const char* name);
  // A launch of a function the shim never saw looked up: name it through the driver.
  KernelRecord* function_unknown(const void* handle);
  // CUkernel -> CUfunction (cuKernelGetFunction), CUlibrary -> CUmodule (cuLibraryGetModule).
  void alias_function(const void* function, const void* kernel);
  void alias_module(const void* module, const void* library);

  // NVRTC output: the program's source, and the bytes it produced (PTX or CUBIN).
  void nvrtc_output(const proto::SourceInfo& source, const void* data, size_t size);

  // The bytes of an image for the daemon, and its NVRTC source when known.
  bool image(const ImageHash& hash, std::shared_ptr<const std::string>* bytes,
             proto::ImageFormat* format, std::optional<proto::SourceInfo>* source);

  // Every record (the reporter walks them).
  std::vector<KernelRecord*> records();

  // A forked child starts clean: counters zero, nothing announced.
  void reset_after_fork();

  std::mutex& mutex() { return m_mutex; }

  struct State; // registry.cpp

private:
  std::mutex m_mutex;
  State* m_state = nullptr;
  State& state();
};

Registry& registry();

} // namespace hone::shim
