// Triton's kernel cache: where the PTX of a cubin Triton loaded can be found.
//
// Triton (torch.compile, vLLM, SGLang) compiles each kernel to PTX, has ptxas make a cubin of it,
// keeps both in its cache, and loads the cubin with cuModuleLoadData: the application's image is
// SASS only, but the PTX it came from is in the cache. The layout is one directory per compiled
// kernel under the cache root, holding NAME.cubin and NAME.ptx beside NAME.json and the other
// stages; the root is $TRITON_CACHE_DIR, else ~/.triton/cache.
//
// Called by the shim (in the application, with its environment and permissions) when honed asks
// for an image: nothing here throws, and the search is bounded.
#pragma once

#include "common/result.hpp"
#include "cuda/fatbin.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace hone::cuda {

// $TRITON_CACHE_DIR, else $HOME/.triton/cache; empty when neither is set.
std::string triton_cache_dir();

// The cubins an image holds: the image itself when it is a cubin; the ELF entries of a fatbin,
// decompressed with `zstd` (nullptr: zstd-compressed entries are skipped). Empty for PTX.
std::vector<std::vector<std::uint8_t>> image_cubins(ImageFormat format,
                                                    std::span<const std::uint8_t> bytes,
                                                    ZstdDecoder zstd);

struct TritonEntry {
  std::string cubin_path; // the cache file whose bytes equal the loaded cubin
  std::string ptx_path;
  std::string ptx;        // its text, without a trailing NUL
};

// Limits of one search, so that a huge or hostile cache costs little.
inline constexpr std::size_t k_triton_max_dirs = 20000;  // kernel directories looked into
inline constexpr std::uint64_t k_triton_max_file = 64ull << 20; // larger files are skipped

// The cache entry in `root` whose NAME.cubin has the bytes of one of `cubins`, with its NAME.ptx.
// nullopt when none matches (or the matching one has no PTX beside it); an error when the root
// cannot be read.
Result<std::optional<TritonEntry>>
find_triton_ptx(const std::string& root, const std::vector<std::vector<std::uint8_t>>& cubins);

} // namespace hone::cuda
