// Kernel identity (DESIGN.md, "Kernel identity"): what names a kernel across processes, restarts
// and machines.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace hone {

// 128-bit xxh3 of a module image's bytes (PTX text with its NUL, cubin ELF, or fatbin).
struct ImageHash {
  uint64_t lo = 0;
  uint64_t hi = 0;

  static ImageHash of(const void* data, size_t size);
  // 32 lowercase hex digits, high half first.
  std::string hex() const;
  static std::optional<ImageHash> from_hex(std::string_view hex);
  bool empty() const { return lo == 0 && hi == 0; }
  friend bool operator==(const ImageHash&, const ImageHash&) = default;
  friend auto operator<=>(const ImageHash&, const ImageHash&) = default;
};

// An image and the (mangled) name of one entry in it.
struct KernelKey {
  ImageHash image;
  std::string entry;

  // "<hex>:<entry>", the form honectl and logs use.
  std::string str() const { return image.hex() + ":" + entry; }
  static std::optional<KernelKey> parse(std::string_view text);
  friend bool operator==(const KernelKey&, const KernelKey&) = default;
  friend auto operator<=>(const KernelKey&, const KernelKey&) = default;
};

} // namespace hone

template <> struct std::hash<hone::ImageHash> {
  size_t operator()(const hone::ImageHash& h) const noexcept { return size_t(h.lo ^ (h.hi * 31)); }
};
template <> struct std::hash<hone::KernelKey> {
  size_t operator()(const hone::KernelKey& k) const noexcept {
    return std::hash<hone::ImageHash>()(k.image) ^ std::hash<std::string>()(k.entry);
  }
};

namespace hone {

// A variant of a kernel: 128-bit hash of everything that makes it what it is (the kernel, the
// target, the code and its guard). Same inputs, same id, on any host.
struct VariantId {
  ImageHash h;
  std::string hex() const { return h.hex(); }
  static std::optional<VariantId> from_hex(std::string_view text) {
    auto h = ImageHash::from_hex(text);
    if (!h) return std::nullopt;
    return VariantId{*h};
  }
  friend bool operator==(const VariantId&, const VariantId&) = default;
  friend auto operator<=>(const VariantId&, const VariantId&) = default;
};

} // namespace hone
