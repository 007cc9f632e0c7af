#include "shim/registry.hpp"
#include "shim/counts.hpp"

#include "shim/graph.hpp"

#include "cuda/fatbin.hpp"
#include "shim/config.hpp"
#include "shim/log.hpp"
#include "shim/real.hpp"
#include "ptx/symbols.hpp"

#include <array>
#include <unordered_map>

namespace hone::shim {

bool FunctionTable::put(const void* handle, KernelRecord* record) {
  uintptr_t key = reinterpret_cast<uintptr_t>(handle);
  if (!key) return false;
  size_t i = hash(key);
  for (size_t probe = 0; probe < k_capacity; ++probe, i = (i + 1) & (k_capacity - 1)) {
    uintptr_t k = m_slots[i].key.load(std::memory_order_relaxed);
    if (k == key) {
      m_slots[i].record.store(record, std::memory_order_release);
      return true;
    }
    if (k == 0) {
      // record first, then the key: a reader that sees the key sees the record
      m_slots[i].record.store(record, std::memory_order_relaxed);
      m_slots[i].key.store(key, std::memory_order_release);
      return true;
    }
  }
  return false;
}

void FunctionTable::set_swap(const void* handle, Swap* swap) {
  if (const Slot* s = find_slot(handle)) {
    Slot& slot = const_cast<Slot&>(*s);
    const Swap* old = slot.swap.exchange(swap, std::memory_order_acq_rel);
    // The record's divert word follows: set after the swap is published (a launch that sees it
    // on the full path sees the swap), cleared after it is withdrawn.
    KernelRecord* r = slot.record.load(std::memory_order_acquire);
    if (r && !old != !swap) {
      r->swapped_handles += swap ? 1 : -1;
      if (r->swapped_handles) {
        r->divert.fetch_or(KernelRecord::k_divert_swapped, std::memory_order_release);
      } else {
        r->divert.fetch_and(~KernelRecord::k_divert_swapped, std::memory_order_release);
      }
    }
  }
  // Executable graphs whose nodes may run this handle are reconciled before their next replay.
  g_swap_generation.fetch_add(1, std::memory_order_acq_rel);
}

struct Registry::State {
  std::unordered_map<KernelKey, std::vector<Registry::Handle>> handles;
  struct Module {
    std::shared_ptr<ImageInfo> image;
    std::vector<const void*> functions;
  };
  std::unordered_map<const void*, Module> modules;
  std::unordered_map<KernelKey, KernelRecord*> by_key;
  std::vector<KernelRecord*> all;
  std::unordered_map<ImageHash, std::shared_ptr<ImageInfo>> images;
  std::unordered_map<ImageHash, proto::SourceInfo> sources;
  std::unordered_map<ImageHash, std::shared_ptr<const proto::Image::Linked>> links;
  uint64_t cached_bytes = 0;
  uint64_t next_id = 1;
};

Registry::State& Registry::state() {
  if (!m_state) m_state = new State(); // never freed: hooks may run during exit
  return *m_state;
}

namespace {

proto::ImageFormat format_of(cuda::ImageFormat f) {
  switch (f) {
  case cuda::ImageFormat::ptx:
    return proto::ImageFormat::ptx;
  case cuda::ImageFormat::cubin:
    return proto::ImageFormat::cubin;
  case cuda::ImageFormat::fatbin:
    return proto::ImageFormat::fatbin;
  default:
    return proto::ImageFormat::unknown;
  }
}

} // namespace

void Registry::module_loaded(const void* module, const void* data, size_t size) {
  if (!module || !data) return;
  // Locate and hash outside the lock: this is the one expensive step, done once per load.
  auto view = cuda::locate_image(data, size ? size : cuda::k_unknown_size);
  auto info = std::make_shared<ImageInfo>();
  if (view) {
    info->format = format_of(view->format);
    info->size = view->bytes.size();
    info->hash = ImageHash::of(view->bytes.data(), view->bytes.size());
  } else {
    log(Level::debug, "module image not recognised (%s); its kernels are counted without a hash",
        view.error().message.c_str());
  }
  std::lock_guard lock(m_mutex);
  State& s = state();
  if (view) {
    auto it = s.images.find(info->hash);
    if (it != s.images.end()) {
      info = it->second; // the same image loaded again (another context)
    } else {
      if (s.cached_bytes + info->size <= config().image_cache_bytes) {
        info->bytes = std::make_shared<const std::string>(
            reinterpret_cast<const char*>(view->bytes.data()), view->bytes.size());
        s.cached_bytes += info->size;
      } else if (first_time(Once::image_cache)) {
        log(Level::info, "image cache full (HONE_IMAGE_CACHE_MB): later images are not kept");
      }
      info->source_known = s.sources.count(info->hash) > 0;
      s.images.emplace(info->hash, info);
    }
  }
  s.modules[module] = State::Module{info, {}};
}

void Registry::module_unloaded(const void* module) {
  std::lock_guard lock(m_mutex);
  State& s = state();
  auto it = s.modules.find(module);
  if (it == s.modules.end()) return;
  for (const void* f : it->second.functions) functions.put(f, nullptr);
  s.modules.erase(it);
}

namespace {

KernelRecord* record_for(Registry::State& s, const KernelKey& key, const ImageInfo* image,
                         std::atomic<bool>& added) {
  auto it = s.by_key.find(key);
  if (it != s.by_key.end()) return it->second;
  added.store(true, std::memory_order_release);
  auto* r = new KernelRecord();
  r->id = s.next_id++;
  r->index = uint32_t(s.all.size());
  r->key = key;
  if (image) {
    r->format = image->format;
    r->image_size = image->size;
    r->source_known = image->source_known;
  }
  s.by_key.emplace(key, r);
  s.all.push_back(r);
  return r;
}

} // namespace

KernelRecord* Registry::function_found(const void* handle, const void* module, const char* name,
                                       void* context, bool kernel_handle) {
  if (!handle || !name) return nullptr;
  std::lock_guard lock(m_mutex);
  State& s = state();
  auto it = s.modules.find(module);
  const ImageInfo* image = it != s.modules.end() ? it->second.image.get() : nullptr;
  KernelKey key{image ? image->hash : ImageHash{}, name};
  KernelRecord* r = record_for(s, key, image, m_added);
  if (!functions.put(handle, r)) {
    if (first_time(Once::table_full))
      log(Level::warn, "function table full: later kernels are not counted");
    return r;
  }
  if (it != s.modules.end()) it->second.functions.push_back(handle);
  s.handles[key].push_back(Handle{handle, context, kernel_handle});
  return r;
}

std::vector<Registry::Handle> Registry::handles_of(const KernelKey& key) {
  std::lock_guard lock(m_mutex);
  State& s = state();
  auto it = s.handles.find(key);
  if (it == s.handles.end()) return {};
  // only handles still pointing at the kernel (unloaded ones were withdrawn from the table)
  std::vector<Handle> live;
  for (const auto& h : it->second) {
    if (functions.find(h.handle)) live.push_back(h);
  }
  return live;
}

KernelRecord* Registry::record_of(uint64_t id) {
  std::lock_guard lock(m_mutex);
  for (KernelRecord* r : state().all) {
    if (r->id == id) return r;
  }
  return nullptr;
}

KernelRecord* Registry::function_unknown(const void* handle) {
  using GetName = int (*)(const char**, const void*);
  auto get_name = real_as<GetName>(Fn::cuFuncGetName);
  const char* name = nullptr;
  if (!get_name || get_name(&name, handle) != 0 || !name) return nullptr;
  std::lock_guard lock(m_mutex);
  State& s = state();
  if (KernelRecord* r = functions.find(handle)) return r;
  KernelRecord* r = record_for(s, KernelKey{ImageHash{}, name}, nullptr, m_added);
  functions.put(handle, r);
  return r;
}

void Registry::alias_function(const void* function, const void* kernel) {
  std::lock_guard lock(m_mutex);
  if (KernelRecord* r = functions.find(kernel)) functions.put(function, r);
}

void Registry::alias_module(const void* module, const void* library) {
  std::lock_guard lock(m_mutex);
  State& s = state();
  auto it = s.modules.find(library);
  if (it != s.modules.end()) s.modules[module] = State::Module{it->second.image, {}};
}

void Registry::nvrtc_output(const proto::SourceInfo& source, const void* data, size_t size) {
  if (!data || !size) return;
  ImageHash h = ImageHash::of(data, size);
  std::lock_guard lock(m_mutex);
  State& s = state();
  s.sources[h] = source;
  if (auto it = s.images.find(h); it != s.images.end()) it->second->source_known = true;
}

void Registry::link_output(const void* data, size_t size, proto::Image::Linked inputs) {
  if (!data) return;
  // Hashed as module_loaded will hash the image the application loads from it.
  auto view = cuda::locate_image(data, size ? size : cuda::k_unknown_size);
  if (!view) {
    log(Level::debug, "JIT link output not recognised (%s); its inputs are not kept",
        view.error().message.c_str());
    return;
  }
  const ImageHash h = ImageHash::of(view->bytes.data(), view->bytes.size());
  // The NVRTC outputs are keyed by the bytes nvrtcGetPTX wrote, with their NUL.
  auto nvrtc_key = [](const std::string& ptx) {
    std::string with_nul = ptx;
    with_nul.push_back('\0');
    return std::array{ImageHash::of(with_nul.data(), with_nul.size()),
                      ImageHash::of(ptx.data(), ptx.size())};
  };
  uint64_t bytes = 0;
  for (const auto& in : inputs.inputs) bytes += in.ptx.size() + in.name.size();
  std::lock_guard lock(m_mutex);
  State& s = state();
  std::optional<proto::SourceInfo> source;
  for (auto& in : inputs.inputs) {
    if (in.ptx.empty() || source) continue;
    for (const ImageHash& k : nvrtc_key(in.ptx)) {
      if (auto src = s.sources.find(k); src != s.sources.end()) {
        source = src->second;
        in.from_nvrtc = true;
        break;
      }
    }
  }
  if (s.links.count(h)) return; // the same link made again (another thread, another context)
  if (s.cached_bytes + bytes > config().image_cache_bytes) {
    // Over the cache: the inputs are kept by name and size, their text dropped.
    for (auto& in : inputs.inputs) in.ptx.clear();
    if (first_time(Once::image_cache)) {
      log(Level::info, "image cache full (HONE_IMAGE_CACHE_MB): later images are not kept");
    }
  } else {
    s.cached_bytes += bytes;
  }
  s.links[h] = std::make_shared<const proto::Image::Linked>(std::move(inputs));
  if (source) {
    s.sources[h] = std::move(*source);
    if (auto it = s.images.find(h); it != s.images.end()) it->second->source_known = true;
  }
}

bool Registry::image(const ImageHash& hash, std::shared_ptr<const std::string>* bytes,
                     proto::ImageFormat* format, std::optional<proto::SourceInfo>* source,
                     std::optional<proto::Image::Linked>* linked) {
  std::lock_guard lock(m_mutex);
  State& s = state();
  auto it = s.images.find(hash);
  if (it == s.images.end() || !it->second->bytes) return false;
  *bytes = it->second->bytes;
  *format = it->second->format;
  if (auto src = s.sources.find(hash); src != s.sources.end()) *source = src->second;
  if (linked) {
    if (auto l = s.links.find(hash); l != s.links.end()) *linked = *l->second;
  }
  return true;
}

std::shared_ptr<const std::string> Registry::image_bytes(const ImageHash& hash,
                                                         proto::ImageFormat* format) {
  std::lock_guard lock(m_mutex);
  State& s = state();
  auto it = s.images.find(hash);
  if (it == s.images.end()) return nullptr;
  *format = it->second->format;
  return it->second->bytes;
}

std::shared_ptr<const std::string> Registry::entry_ptx(const KernelKey& key) {
  std::shared_ptr<const proto::Image::Linked> linked;
  {
    std::lock_guard lock(m_mutex);
    State& s = state();
    auto it = s.images.find(key.image);
    if (it != s.images.end() && it->second->format == proto::ImageFormat::ptx) {
      return it->second->bytes;
    }
    auto l = s.links.find(key.image);
    if (l == s.links.end()) return nullptr;
    linked = l->second;
  }
  // Scanned outside the lock: the inputs are immutable once kept.
  for (const auto& in : linked->inputs) {
    if (in.ptx.empty()) continue;
    if (ptx::module_symbols(in.ptx).entries.count(key.entry)) {
      return std::make_shared<const std::string>(in.ptx);
    }
  }
  return nullptr;
}

std::vector<KernelRecord*> Registry::records() {
  std::lock_guard lock(m_mutex);
  return state().all;
}

void Registry::reset_after_fork() {
  // The child is single-threaded here; the mutex was taken in the prepare handler.
  functions.clear_swaps();
  State& s = state();
  for (KernelRecord* r : s.all) {
    r->launches.store(0, std::memory_order_relaxed);
    r->sampled.store(0, std::memory_order_relaxed);
    r->sampled_ns.store(0, std::memory_order_relaxed);
    r->variant_launches.store(0, std::memory_order_relaxed);
    r->graph_launches.store(0, std::memory_order_relaxed);
    r->reported_graph_launches = 0;
    r->reported_graph = GraphReport{};
    r->fallbacks.store(0, std::memory_order_relaxed);
    r->divert.store(0, std::memory_order_relaxed); // no capture due, no variant loaded
    r->swapped_handles = 0;
    r->reported_variant_launches = 0;
    r->guard_misses.store(0, std::memory_order_relaxed);
    r->reported_guard_misses = 0;
    r->announced = false;
    r->reported_launches = 0;
    r->reported_sampled = 0;
  }
  counts::reset_after_fork();
}

FunctionTable g_function_table;

namespace detail {

std::atomic<Registry*> g_registry{nullptr};

Registry& make_registry() {
  static Registry* r = new Registry(); // never destroyed: hooks may run during exit
  g_registry.store(r, std::memory_order_release);
  return *r;
}

} // namespace detail

uint64_t launches_total(const KernelRecord& r) {
  return r.launches.load(std::memory_order_relaxed) + counts::launches(r.index);
}

uint64_t variant_launches_total(const KernelRecord& r) {
  return r.variant_launches.load(std::memory_order_relaxed) + counts::variant_launches(r.index);
}

} // namespace hone::shim
