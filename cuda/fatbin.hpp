// CUDA module images: which format a pointer holds, how many bytes it spans, and what a fatbin
// container inside it carries.
//
// The driver accepts three image formats (cuModuleLoadData, cuLibraryLoadData): NUL-terminated PTX
// text, a cubin ELF and a fatbin container; cuModuleLoadFatBinary and the runtime's
// __cudaRegisterFatBinary pass a __fatBinC_Wrapper_t that points at a fatbin. None of these entry
// points says how long the image is, so the size is recovered from the bytes themselves.
//
// The fatbin layout is undocumented by NVIDIA. What this reader relies on was checked against
// fatbins made by nvcc 13.0 (every --compress-mode, -compress-all, -G, -rdc, -Xptxas, sm_90a,
// sm_100a/f, compute_120) and against the .nv_fatbin sections of the CUDA 13 libraries (cuBLAS,
// cuBLASLt, cuRAND, cuFFT, NCCL, cuDNN); field names follow the public reverse-engineering in
// n-eiling/cuda-fatbin-decompression and jiegec/fatbinary. See cuda/README.md for the layout.
//
// Everything here is bounds-checked against the readable length it is given and reports a bad
// image as an Error; nothing throws (allocation failure included) and nothing aborts, so the
// preload shim can call it inside someone else's process.
#pragma once

#include "common/result.hpp"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hone::cuda {

// Pass as a readable length when only a pointer is known (cuModuleLoadData). The image must then
// be well formed up to the size its own headers declare, which is what the driver assumes too.
inline constexpr std::size_t k_unknown_size = std::numeric_limits<std::size_t>::max();

// First four bytes of a fatbin container, little-endian ("P\xED\x55\xBA" in the file).
inline constexpr std::uint32_t k_fatbin_magic = 0xBA55ED50;
// __fatBinC_Wrapper_t::magic (FATBINC_MAGIC in CUDA's fatbinary_section.h).
inline constexpr std::uint32_t k_fatbin_wrapper_magic = 0x466243B1;

enum class ImageFormat {
  ptx,            // NUL-terminated PTX text
  cubin,          // ELF object for one SM architecture
  fatbin,         // fatbin container (magic k_fatbin_magic)
  fatbin_wrapper, // __fatBinC_Wrapper_t pointing at a fatbin; not an image itself
  unknown,
};

std::string_view to_string(ImageFormat format);

// Which format the bytes at `data` are, reading at most `size_hint` bytes (k_unknown_size when
// unknown; reading then stops at the first NUL, so a short PTX string is never over-read).
// PTX is recognised by its first token being `.version` after whitespace and comments (PTX ISA,
// "PTX Module Directives: .version": every module must begin with it).
ImageFormat detect_image_format(const void* data, std::size_t size_hint);

// The image `data` designates: its format and its bytes. A wrapper is followed to its fatbin.
struct ImageView {
  ImageFormat format = ImageFormat::unknown; // never fatbin_wrapper
  std::span<const std::uint8_t> bytes;
};

// How many bytes the image at `data` spans, without reading past `max_size`:
// PTX up to and including its NUL (the whole range if it has none and max_size is known);
// a cubin up to the end of its last section, segment or header table; a fatbin its header size
// plus its fat size (one container). Errors for a wrapper (it is not an image; use locate_image),
// an unknown format, or declared sizes beyond max_size.
Result<std::size_t> image_size(const void* data, std::size_t max_size = k_unknown_size);

// The image `data` designates, following a __fatBinC_Wrapper_t to the fatbin it points at (whose
// readable length is then unknown). This is what to hash for an ImageHash and what to parse.
Result<ImageView> locate_image(const void* data, std::size_t max_size = k_unknown_size);

// The `data` member of a __fatBinC_Wrapper_t (version 1 or 2), or an Error if `data` is not one.
Result<const void*> unwrap_fatbin(const void* data, std::size_t max_size = k_unknown_size);

enum class EntryKind { ptx, elf, other };
enum class Compression { none, lz4, zstd };

std::string_view to_string(EntryKind kind);
std::string_view to_string(Compression compression);

// Bits of FatbinEntry::flags. Observed values; meanings agree with what cuobjdump prints
// (compile_size, host) and with the public reverse-engineering cited above.
namespace fatbin_flags {
inline constexpr std::uint64_t k_64bit = 0x1;
inline constexpr std::uint64_t k_debug = 0x2; // nvcc -G
inline constexpr std::uint64_t k_host_linux = 0x10;
inline constexpr std::uint64_t k_host_mac = 0x20;
inline constexpr std::uint64_t k_host_windows = 0x40;
inline constexpr std::uint64_t k_lz4 = 0x2000;               // LZ4 block (--compress-mode=speed)
inline constexpr std::uint64_t k_zstd = 0x8000;              // zstd frame (default, size, balance)
inline constexpr std::uint64_t k_arch_specific = 0x100000;   // sm_90a, compute_100a
inline constexpr std::uint64_t k_family_specific = 0x200000; // sm_100f
} // namespace fatbin_flags

// One container header. Offsets are from the start of the parsed bytes.
struct FatbinContainer {
  std::uint64_t offset = 0;
  std::uint16_t version = 0;     // 1 in every fatbin seen
  std::uint16_t header_size = 0; // 16; entries start here
  std::uint64_t fat_size = 0;    // bytes of entries after the header
};

// One entry of a container, as stored. Views point into the parsed bytes, which must outlive it.
struct FatbinEntry {
  EntryKind kind = EntryKind::other;
  std::uint16_t raw_kind = 0;        // 1 PTX, 2 ELF; others kept as read
  std::uint16_t unknown_field = 0;   // 0x0101 in every entry seen; meaning unknown
  std::uint32_t header_size = 0;     // 64 plus identifier/options/descriptor bytes
  std::uint64_t payload_size = 0;    // stored bytes after the header, padding included
  std::uint32_t compressed_size = 0; // meaningful when compressed
  std::uint16_t version_major = 0;   // PTX ISA version for PTX (9.0); cubin ABI version (1.8)
  std::uint16_t version_minor = 0;
  std::uint32_t arch = 0;              // SM number: 75 for sm_75/compute_75, 100 for sm_100a
  std::uint64_t flags = 0;             // fatbin_flags
  std::uint64_t uncompressed_size = 0; // meaningful when compressed
  Compression compression = Compression::none;
  std::string_view identifier; // nvcc source name (-G, fatbinary --ident); usually empty
  // Bytes the entry's options field points at: ptxas options text for PTX ("-O2  "); a binary
  // descriptor for sm_100+ ELF. Empty when absent.
  std::span<const std::uint8_t> options;
  // The stored image: compressed_size bytes when compressed, else payload_size bytes (so possibly
  // followed by NUL padding).
  std::span<const std::uint8_t> payload;
  std::uint64_t offset = 0;  // of the entry header, from the start of the parsed bytes
  std::size_t container = 0; // index into Fatbin::containers
};

struct Fatbin {
  std::vector<FatbinContainer> containers;
  std::vector<FatbinEntry> entries; // in file order, all containers
};

// Parse one or more fatbin containers laid end to end (zero padding between them is allowed, as in
// a .nv_fatbin section). Every size is checked against `bytes`; the result views into `bytes`.
Result<Fatbin> parse_fatbin(std::span<const std::uint8_t> bytes);
// The result would view into a temporary that dies at the end of the statement.
Result<Fatbin> parse_fatbin(std::vector<std::uint8_t>&& bytes) = delete;

// "sm_75", "compute_90", "sm_90a", "compute_100f"; "kind3_75" for an unknown kind.
std::string arch_name(const FatbinEntry& entry);

// One line for listings: "ptx compute_90 9.0, zstd 379 -> 814 bytes".
std::string describe(const FatbinEntry& entry);

// A zstd decoder: decompress `in` into exactly `expected_size` bytes. A function pointer so that a
// caller that must not depend on libzstd can pass its own, or nullptr to refuse zstd entries.
using ZstdDecoder = Result<std::vector<std::uint8_t>> (*)(std::span<const std::uint8_t> in,
                                                          std::uint64_t expected_size);

// libzstd's one-shot decoder (cuda/zstd_decode.cpp, the only file that needs libzstd).
Result<std::vector<std::uint8_t>> zstd_decode(std::span<const std::uint8_t> in,
                                              std::uint64_t expected_size);

// Decode one LZ4 block (the LZ4 Block Format: sequences of literals and matches, no frame header)
// into exactly `expected_size` bytes.
Result<std::vector<std::uint8_t>> lz4_block_decode(std::span<const std::uint8_t> in,
                                                   std::uint64_t expected_size);

// Entries claiming more than this uncompressed are rejected before any allocation.
inline constexpr std::uint64_t k_max_uncompressed_size = std::uint64_t{1} << 30;

// The entry's image bytes, decompressed when stored compressed.
Result<std::vector<std::uint8_t>> entry_image(const FatbinEntry& entry,
                                              ZstdDecoder zstd = &zstd_decode);

// The PTX text of a PTX entry, decompressed, without the trailing NUL and padding. fatbinary
// stores PTX with comments removed and whitespace collapsed, so it differs in layout from the
// `nvcc -ptx` output it came from, not in tokens.
Result<std::string> entry_ptx(const FatbinEntry& entry, ZstdDecoder zstd = &zstd_decode);

// The PTX entry a driver would JIT for SM `target_arch` (e.g. 86): the highest PTX arch not above
// it. Arch-specific PTX (compute_90a) counts only for exactly its arch, family-specific
// (compute_100f) only within its family (same arch / 10); at equal arch the more specific wins.
// nullptr when none fits.
const FatbinEntry* select_ptx(const Fatbin& fatbin, std::uint32_t target_arch);

} // namespace hone::cuda
