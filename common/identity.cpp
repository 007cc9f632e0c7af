#include "common/identity.hpp"

// Header-only xxHash, inlined here: nothing is exported and no libxxhash is loaded, which keeps
// the preload shim free of shared-library dependencies.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace hone {

ImageHash ImageHash::of(const void* data, size_t size) {
  XXH128_hash_t h = XXH3_128bits(data, size);
  return ImageHash{h.low64, h.high64};
}

std::string ImageHash::hex() const {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s(32, '0');
  for (int i = 0; i < 16; ++i) {
    s[size_t(i)] = digits[(hi >> (60 - 4 * i)) & 0xf];
    s[size_t(16 + i)] = digits[(lo >> (60 - 4 * i)) & 0xf];
  }
  return s;
}

std::optional<ImageHash> ImageHash::from_hex(std::string_view text) {
  if (text.size() != 32) return std::nullopt;
  ImageHash h;
  for (size_t i = 0; i < 32; ++i) {
    char c = text[i];
    int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                                  : -1;
    if (v < 0) return std::nullopt;
    uint64_t& half = i < 16 ? h.hi : h.lo;
    half = (half << 4) | uint64_t(v);
  }
  return h;
}

std::optional<KernelKey> KernelKey::parse(std::string_view text) {
  auto colon = text.find(':');
  if (colon != 32 || text.size() == 33) return std::nullopt;
  auto image = ImageHash::from_hex(text.substr(0, 32));
  if (!image) return std::nullopt;
  return KernelKey{*image, std::string(text.substr(33))};
}

} // namespace hone
