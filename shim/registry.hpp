// What the shim knows about the process's kernels: module images, the kernels looked up in them,
// and the per-kernel counters the launch path bumps.
//
// The launch path only reads: FunctionTable::find is lock-free and never allocates. Everything
// else (a module load, a function lookup, a function never seen before) takes the registry mutex
// and may allocate: it happens once per object, not once per launch.
#pragma once

#include "common/guard.hpp"
#include "common/identity.hpp"
#include "common/protocol.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace hone::shim {

// A pointer in a kernel's parameters, from the PTX analysis of its image (shim/pointer_fields.hpp).
struct PointerField {
  uint32_t param = 0;  // parameter index (kernelParams launches)
  uint32_t field = 0;  // byte offset of the pointer inside the parameter
  uint32_t offset = 0; // byte offset of the pointer in the parameter buffer (extra launches)
  // false: an 8-byte field of a parameter the kernel reads through its address; it may hold data,
  // and is a pointer only when its value lies in a device allocation
  bool certain = true;
};

// What a report last said of a kernel's graphs (reporter thread).
struct GraphReport {
  uint32_t graphs = 0, nodes = 0, nodes_serving = 0;
  bool operator==(const GraphReport&) const = default;
};

// One kernel (KernelKey) in this process, however many contexts or handles it has.
struct KernelRecord {
  // First, at fixed offsets: what the launch entry stubs read (shim/launch_stubs_x86_64.cpp).
  uint32_t index = 0; // dense, from 0: its counters in each thread's block (shim/counts.hpp)
  // What sends a launch of the kernel to the hook's full path, in one word beside `index` for the
  // fast path (shim/fast_path.hpp): the launches still to capture (the low 31 bits), and
  // k_divert_swapped while a variant serves one of its handles.
  static constexpr uint32_t k_divert_swapped = 1u << 31;
  static constexpr uint32_t k_captures_mask = k_divert_swapped - 1;
  std::atomic<uint32_t> divert{0};
  uint32_t swapped_handles = 0; // handles a variant serves (registry mutex)

  uint32_t captures_pending() const {
    return divert.load(std::memory_order_relaxed) & k_captures_mask;
  }
  void set_captures_pending(uint32_t n) {
    uint32_t v = divert.load(std::memory_order_relaxed);
    while (!divert.compare_exchange_weak(v, (v & k_divert_swapped) | (n & k_captures_mask),
                                         std::memory_order_release, std::memory_order_relaxed)) {
    }
  }
  // One capture claimed from those pending; false when none was.
  bool take_capture() {
    uint32_t v = divert.load(std::memory_order_relaxed);
    while (v & k_captures_mask) {
      if (divert.compare_exchange_weak(v, v - 1, std::memory_order_relaxed)) return true;
    }
    return false;
  }

  uint64_t id = 0;
  KernelKey key;
  proto::ImageFormat format = proto::ImageFormat::unknown;
  uint64_t image_size = 0;
  bool source_known = false;

  // Launches and variant launches are counted per thread (counts::of(index)); these hold only
  // what graph replays add (shim/graph.cpp). Totals: launches_total(), variant_launches_total().
  std::atomic<uint64_t> launches{0};
  std::atomic<uint64_t> sampled{0};
  std::atomic<uint64_t> sampled_ns{0};
  std::atomic<uint64_t> grid{0}; // last launch: x | y << 32 (z in grid_z)
  std::atomic<uint32_t> grid_z{0};
  std::atomic<uint64_t> block{0}; // x | y << 16 | z << 32

  std::atomic<uint64_t> graph_launches{0};   // of launches, those replayed in CUDA graphs
  std::atomic<uint64_t> variant_launches{0}; // served by an installed variant
  std::atomic<uint64_t> fallbacks{0};        // variant launches that failed over to the original
  std::atomic<uint64_t> guard_misses{0};     // launches a variant was installed for that its guard refused

  // Capture: how many launches (captures_pending()), and the request below.
  std::mutex capture_mutex; // guards the request below
  uint64_t capture_request = 0;
  uint64_t capture_max_bytes = 0;
  bool capture_outputs = false;
  bool capture_whole = false; // CaptureRequest::whole
  // The pending captures are a shadow check's: only launches a variant serves, running it.
  std::atomic<bool> capture_shadow{false};

  // Pointer fields of the parameters, from the PTX analysis (computed once, on a capture).
  std::once_flag pointers_once;
  bool pointers_known = false;
  std::vector<PointerField> pointers;

  // Reporter thread only.
  bool announced = false;
  uint64_t reported_launches = 0;
  uint64_t reported_sampled = 0;
  uint64_t reported_variant_launches = 0;
  uint64_t reported_guard_misses = 0;
  uint64_t reported_graph_launches = 0;
  GraphReport reported_graph;
};

// A variant serving one function handle (DESIGN.md, "Hot swap"): its function in the handle's
// context and the guard a launch must pass. Never freed: a launch may still hold it.
struct Swap {
  // A no_alias guard reads at most this many pointer fields per launch (their allocations go in a
  // stack array); a kernel with more is refused at install.
  static constexpr size_t k_max_alias_fields = 32;

  void* function = nullptr;   // CUfunction of the variant
  void* context = nullptr;    // where it was loaded; a CUkernel launch elsewhere runs the original
  bool kernel_handle = false; // the handle is a CUkernel (context-independent)
  Guard guard;
  VariantId variant;
  std::vector<PointerField> alias_fields; // no_alias: the fields that must not share an allocation
};

// CUfunction / CUkernel handle -> KernelRecord, lock-free for readers. Open addressing; keys are
// never removed (an unloaded function's slot is pointed at nothing), so a reader racing an
// unload sees either the record or nullptr, never freed memory: records live until exit.
class FunctionTable {
public:
  static constexpr size_t k_capacity = 1u << 16;

  struct Slot {
    std::atomic<uintptr_t> key{0};
    std::atomic<KernelRecord*> record{nullptr};
    std::atomic<Swap*> swap{nullptr};
  };

  const Slot* find_slot(const void* handle) const {
    uintptr_t key = reinterpret_cast<uintptr_t>(handle);
    if (!key) return nullptr;
    size_t i = hash(key);
    for (size_t probe = 0; probe < k_capacity; ++probe, i = (i + 1) & (k_capacity - 1)) {
      uintptr_t k = m_slots[i].key.load(std::memory_order_acquire);
      if (k == key) return &m_slots[i];
      if (k == 0) return nullptr;
    }
    return nullptr;
  }
  // The slot of `handle` when it is where the hash puts it first (almost always: the table is
  // large), else nullptr: the launch path's first try, find_slot() its second.
  const Slot* find_first(const void* handle) const {
    uintptr_t key = reinterpret_cast<uintptr_t>(handle);
    const Slot& s = m_slots[hash(key)];
    return key && s.key.load(std::memory_order_acquire) == key ? &s : nullptr;
  }
  KernelRecord* find(const void* handle) const {
    const Slot* s = find_slot(handle);
    return s ? s->record.load(std::memory_order_acquire) : nullptr;
  }
  // Caller holds the registry mutex. False when the table is full.
  bool put(const void* handle, KernelRecord* record);
  // Publish (or, with nullptr, withdraw) the variant serving `handle`. Caller holds the mutex.
  void set_swap(const void* handle, Swap* swap);
  // A forked child has none of the parent's variants loaded.
  void clear_swaps() {
    for (auto& s : m_slots) s.swap.store(nullptr, std::memory_order_relaxed);
  }

private:
  static size_t hash(uintptr_t k) {
    return size_t((k >> 4) * 0x9E3779B97F4A7C15ull >> 48) & (k_capacity - 1);
  }
  Slot m_slots[k_capacity];
};

struct ImageInfo {
  ImageHash hash;
  proto::ImageFormat format = proto::ImageFormat::unknown;
  uint64_t size = 0;
  std::shared_ptr<const std::string> bytes; // nullptr when over the cache limit
  bool source_known = false;
};

// The process's function table: a static object, so that the launch path finds it at a constant
// address (no load of the registry's pointer first).
extern FunctionTable g_function_table __asm__("hone_shim_function_table");

class Registry {
public:
  FunctionTable& functions = g_function_table;

  // A module (or library) was loaded from `data` (size recovered from the image itself when 0).
  void module_loaded(const void* module, const void* data, size_t size);
  void module_unloaded(const void* module);
  // `handle` (CUfunction or CUkernel) is entry `name` of `module`, looked up in `context`.
  KernelRecord* function_found(const void* handle, const void* module, const char* name,
                               void* context, bool kernel_handle);

  // The handles of a kernel, with the context each was looked up in (for installing variants).
  struct Handle {
    const void* handle;
    void* context;
    bool kernel_handle;
  };
  std::vector<Handle> handles_of(const KernelKey& key);
  KernelRecord* record_of(uint64_t id);
  // A launch of a function the shim never saw looked up: name it through the driver.
  KernelRecord* function_unknown(const void* handle);
  // CUkernel -> CUfunction (cuKernelGetFunction), CUlibrary -> CUmodule (cuLibraryGetModule).
  void alias_function(const void* function, const void* kernel);
  void alias_module(const void* module, const void* library);

  // NVRTC output: the program's source, and the bytes it produced (PTX or CUBIN).
  void nvrtc_output(const proto::SourceInfo& source, const void* data, size_t size);

  // The JIT linker made the image at `data` (`size` bytes, or from its headers when 0) from
  // `inputs` (cuLinkComplete): kept by the image's hash for the daemon. A PTX input that an NVRTC
  // program produced brings that program's source to the image (the first such input only).
  void link_output(const void* data, size_t size, proto::Image::Linked inputs);

  // The bytes of an image for the daemon, its NVRTC source and its link's inputs when known.
  bool image(const ImageHash& hash, std::shared_ptr<const std::string>* bytes,
             proto::ImageFormat* format, std::optional<proto::SourceInfo>* source,
             std::optional<proto::Image::Linked>* linked = nullptr);
  // The PTX that defines `key`'s entry: its image when that is PTX, else the PTX input of the
  // JIT link that made it; nullptr when the shim has neither (for the pointer analysis).
  std::shared_ptr<const std::string> entry_ptx(const KernelKey& key);
  // The bytes of a loaded image and their format, when the shim kept them.
  std::shared_ptr<const std::string> image_bytes(const ImageHash& hash, proto::ImageFormat* format);

  // Every record (the reporter walks them).
  std::vector<KernelRecord*> records();
  // Whether records were added since the last call (the reporter announces them at once).
  bool take_added() { return m_added.exchange(false, std::memory_order_acq_rel); }

  // A forked child starts clean: counters zero, nothing announced.
  void reset_after_fork();

  std::mutex& mutex() { return m_mutex; }

  struct State; // registry.cpp

private:
  std::mutex m_mutex;
  std::atomic<bool> m_added{false};
  State* m_state = nullptr;
  State& state();
};

namespace detail {
extern std::atomic<Registry*> g_registry;
Registry& make_registry();
} // namespace detail

// The process's registry (made on first use, never destroyed: hooks may run during exit).
inline Registry& registry() {
  Registry* r = detail::g_registry.load(std::memory_order_acquire);
  return __builtin_expect(r != nullptr, 1) ? *r : detail::make_registry();
}

// A kernel's launches and variant launches so far, over every thread (the reporter).
uint64_t launches_total(const KernelRecord& r);
uint64_t variant_launches_total(const KernelRecord& r);

} // namespace hone::shim
