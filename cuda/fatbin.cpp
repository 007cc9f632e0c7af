#include "cuda/fatbin.hpp"

#include <fatbinary_section.h> // __fatBinC_Wrapper_t, FATBINC_*: headers only, no libcuda

#include <algorithm>
#include <cassert>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <new>

namespace hone::cuda {

static_assert(k_fatbin_wrapper_magic == FATBINC_MAGIC);

namespace {

// A readable range. `size` may be k_unknown_size; all arithmetic is on offsets, never on pointers
// past the range, so an unknown size cannot overflow a pointer.
struct Bytes {
  const std::uint8_t* data;
  std::size_t size;

  // Whether [offset, offset + count) is readable.
  bool has(std::uint64_t offset, std::uint64_t count) const {
    return offset <= size && count <= size - offset;
  }
  // Little-endian loads; the caller has checked has(offset, sizeof(T)). Byte-wise so that
  // unaligned images and big-endian hosts read the same (all CUDA formats are little-endian).
  template <class T> T load(std::uint64_t offset) const {
    assert(has(offset, sizeof(T)));
    T value = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) {
      value = static_cast<T>(value | static_cast<T>(static_cast<T>(data[offset + i]) << (8 * i)));
    }
    return value;
  }
  std::uint16_t u16(std::uint64_t offset) const { return load<std::uint16_t>(offset); }
  std::uint32_t u32(std::uint64_t offset) const { return load<std::uint32_t>(offset); }
  std::uint64_t u64(std::uint64_t offset) const { return load<std::uint64_t>(offset); }
};

const std::uint8_t* as_bytes(const void* data) {
  return static_cast<const std::uint8_t*>(data);
}

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...) {
  char buffer[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buffer, sizeof buffer, fmt, args);
  va_end(args);
  return buffer;
}

// Whether `data` starts with `magic`. Compares byte by byte and stops at the first mismatch; no
// magic contains a NUL, so a shorter NUL-terminated PTX string is never read past its end.
bool starts_with(Bytes bytes, std::span<const std::uint8_t> magic) {
  std::size_t i = 0;
  for (std::uint8_t expected : magic) {
    if (!bytes.has(i, 1) || bytes.data[i] != expected) return false;
    ++i;
  }
  return true;
}

constexpr std::uint8_t k_fatbin_magic_bytes[] = {0x50, 0xED, 0x55, 0xBA};
constexpr std::uint8_t k_wrapper_magic_bytes[] = {0xB1, 0x43, 0x62, 0x46};
constexpr std::uint8_t k_elf_magic_bytes[] = {0x7F, 'E', 'L', 'F'};

bool is_space(int c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// PTX ISA, "Module Directives: .version": each module begins with .version, which may be preceded
// only by whitespace and comments. Stops at the first NUL or the end of the range.
bool looks_like_ptx(Bytes bytes) {
  std::size_t i = 0;
  auto at = [&](std::size_t k) -> int { return bytes.has(k, 1) ? bytes.data[k] : 0; };
  while (at(i) != 0) {
    const int c = at(i);
    if (is_space(c)) {
      ++i;
    } else if (c == '/' && at(i + 1) == '/') {
      while (at(i) != 0 && at(i) != '\n') ++i;
    } else if (c == '/' && at(i + 1) == '*') {
      i += 2;
      while (at(i) != 0 && !(at(i) == '*' && at(i + 1) == '/')) ++i;
      if (at(i) == 0) return false;
      i += 2;
    } else {
      break;
    }
  }
  for (char expected : std::string_view(".version")) {
    if (at(i) != expected) return false;
    ++i;
  }
  return at(i) == ' ' || at(i) == '\t';
}

// Bytes before the first NUL, or the whole range; k_unknown_size means "it is a C string".
std::size_t text_length(Bytes bytes) {
  if (bytes.size == k_unknown_size) return std::strlen(reinterpret_cast<const char*>(bytes.data));
  const void* nul = std::memchr(bytes.data, 0, bytes.size);
  return nul ? static_cast<std::size_t>(as_bytes(nul) - bytes.data) : bytes.size;
}

// A cubin's size: the furthest byte any header, header table, section or segment covers.
// Layout per the System V gABI ("ELF Header", "Sections", "Program Header"), both classes,
// little-endian only (every cubin is).
Result<std::size_t> elf_size(Bytes elf) {
  constexpr std::uint32_t k_sht_nobits = 8;
  constexpr std::uint16_t k_pn_xnum = 0xFFFF;
  constexpr std::uint64_t k_max_table_entries = std::uint64_t{1} << 20;
  if (!elf.has(0, 16)) return Error{"truncated ELF identification: need 16 bytes"};
  const std::uint8_t elf_class = elf.data[4];
  if (elf_class != 1 && elf_class != 2) {
    return Error{format("ELF image has unknown class %u (expected 1 or 2)", elf_class)};
  }
  if (elf.data[5] != 1) return Error{"ELF image is not little-endian; no CUDA cubin is"};
  const bool is64 = elf_class == 2;
  const std::uint64_t ehdr_size = is64 ? 64 : 52;
  if (!elf.has(0, ehdr_size)) {
    return Error{format("truncated ELF header: need %" PRIu64 " bytes", ehdr_size)};
  }
  const std::uint64_t phoff = is64 ? elf.u64(0x20) : elf.u32(0x1C);
  const std::uint64_t shoff = is64 ? elf.u64(0x28) : elf.u32(0x20);
  const std::uint64_t field_base = is64 ? 0x34 : 0x28;
  const std::uint64_t ehsize = elf.u16(field_base);
  const std::uint64_t phentsize = elf.u16(field_base + 2);
  std::uint64_t phnum = elf.u16(field_base + 4);
  const std::uint64_t shentsize = elf.u16(field_base + 6);
  std::uint64_t shnum = elf.u16(field_base + 8);
  const std::uint64_t shdr_size = is64 ? 64 : 40;
  const std::uint64_t phdr_size = is64 ? 56 : 32;

  std::uint64_t end = std::max(ehsize, ehdr_size);
  // Covers [offset, offset + count * entsize); checks overflow and readability.
  auto table = [&](const char* what, std::uint64_t offset, std::uint64_t count,
                   std::uint64_t entsize, std::uint64_t min_entsize) -> Result<void> {
    if (count == 0 || offset == 0) return ok();
    if (entsize < min_entsize) {
      return Error{format("ELF %s entries are %" PRIu64 " bytes, less than %" PRIu64, what, entsize,
                          min_entsize)};
    }
    if (count > k_max_table_entries) {
      return Error{format("ELF %s table has %" PRIu64 " entries; refusing more than %" PRIu64, what,
                          count, k_max_table_entries)};
    }
    if (!elf.has(offset, count * entsize)) {
      return Error{format("ELF %s table [%" PRIu64 ", +%" PRIu64 ") is past the readable %zu bytes",
                          what, offset, count * entsize, elf.size)};
    }
    end = std::max(end, offset + count * entsize);
    return ok();
  };

  // Extended numbering (gABI "Sections", "Program Header"): counts that do not fit in the ELF
  // header live in section 0.
  if (shoff != 0 && (shnum == 0 || phnum == k_pn_xnum)) {
    if (shentsize < shdr_size || !elf.has(shoff, shdr_size)) {
      return Error{"ELF extended numbering: section 0 is not readable"};
    }
    if (shnum == 0) shnum = is64 ? elf.u64(shoff + 0x20) : elf.u32(shoff + 0x14);
    if (phnum == k_pn_xnum) phnum = elf.u32(shoff + (is64 ? 0x2C : 0x1C));
  }
  if (auto r = table("section header", shoff, shnum, shentsize, shdr_size); !r) return r.error();
  if (auto r = table("program header", phoff, phnum, phentsize, phdr_size); !r) return r.error();

  auto extend = [&](const char* what, std::uint64_t index, std::uint64_t offset,
                    std::uint64_t size) -> Result<void> {
    if (!elf.has(offset, size)) {
      return Error{format("ELF %s %" PRIu64 " [%" PRIu64 ", +%" PRIu64
                          ") is past the readable %zu bytes",
                          what, index, offset, size, elf.size)};
    }
    end = std::max(end, offset + size);
    return ok();
  };
  if (shoff != 0) {
    for (std::uint64_t i = 0; i < shnum; ++i) {
      const std::uint64_t sh = shoff + i * shentsize;
      const std::uint32_t type = elf.u32(sh + 4);
      if (type == 0 || type == k_sht_nobits) continue; // SHT_NULL, SHT_NOBITS: no file bytes
      const std::uint64_t offset = is64 ? elf.u64(sh + 0x18) : elf.u32(sh + 0x10);
      const std::uint64_t size = is64 ? elf.u64(sh + 0x20) : elf.u32(sh + 0x14);
      if (auto r = extend("section", i, offset, size); !r) return r.error();
    }
  }
  if (phoff != 0) {
    for (std::uint64_t i = 0; i < phnum; ++i) {
      const std::uint64_t ph = phoff + i * phentsize;
      const std::uint64_t offset = is64 ? elf.u64(ph + 0x08) : elf.u32(ph + 0x04);
      const std::uint64_t size = is64 ? elf.u64(ph + 0x20) : elf.u32(ph + 0x10);
      if (auto r = extend("segment", i, offset, size); !r) return r.error();
    }
  }
  if (!elf.has(0, end)) return Error{"ELF header size is past the readable range"};
  return static_cast<std::size_t>(end);
}

// Size of the fatbin container at the start of `bytes`: header size plus fat size.
Result<std::size_t> fatbin_size(Bytes bytes) {
  if (!bytes.has(0, 16)) return Error{"truncated fatbin header: need 16 bytes"};
  const std::uint64_t header_size = bytes.u16(6);
  const std::uint64_t fat_size = bytes.u64(8);
  if (header_size < 16) {
    return Error{format("fatbin header size %" PRIu64 " is less than 16", header_size)};
  }
  if (!bytes.has(header_size, fat_size)) {
    return Error{format("fatbin declares %" PRIu64 " + %" PRIu64
                        " bytes but only %zu are readable (truncated?)",
                        header_size, fat_size, bytes.size)};
  }
  return static_cast<std::size_t>(header_size + fat_size);
}

std::string hex_prefix(Bytes bytes) {
  std::string out;
  for (std::size_t i = 0; i < 8 && bytes.has(i, 1); ++i) {
    out += format("%s%02x", i ? " " : "", bytes.data[i]);
    if (bytes.data[i] == 0) break;
  }
  return out.empty() ? "none" : out;
}

constexpr std::uint64_t k_fatbin_header_min = 16;
constexpr std::uint64_t k_entry_header_min = 64;

// Parse the container at `pos`; append it and its entries to `out`. Returns the end offset.
Result<std::uint64_t> parse_container(Bytes bytes, std::uint64_t pos, Fatbin& out) {
  const std::size_t index = out.containers.size();
  if (!bytes.has(pos, k_fatbin_header_min)) {
    return Error{format("fatbin container %zu at offset %" PRIu64 ": truncated header (%" PRIu64
                        " of 16 bytes)",
                        index, pos, bytes.size - pos)};
  }
  const std::uint32_t magic = bytes.u32(pos);
  if (magic != k_fatbin_magic) {
    return Error{format(
        "fatbin container %zu at offset %" PRIu64 ": magic 0x%08x, expected 0x%08x%s", index, pos,
        magic, k_fatbin_magic,
        magic == k_fatbin_wrapper_magic ? " (this is a __fatBinC_Wrapper_t; use locate_image)"
                                        : "")};
  }
  FatbinContainer container;
  container.offset = pos;
  container.version = bytes.u16(pos + 4);
  container.header_size = bytes.u16(pos + 6);
  container.fat_size = bytes.u64(pos + 8);
  if (container.version != 1) {
    return Error{format("fatbin container %zu at offset %" PRIu64
                        ": version %u, only version 1 is known",
                        index, pos, container.version)};
  }
  if (container.header_size < k_fatbin_header_min) {
    return Error{format("fatbin container %zu at offset %" PRIu64 ": header size %u < 16", index,
                        pos, container.header_size)};
  }
  if (!bytes.has(pos + container.header_size, container.fat_size)) {
    return Error{format("fatbin container %zu at offset %" PRIu64 ": declares %u + %" PRIu64
                        " bytes but only %" PRIu64 " remain (truncated?)",
                        index, pos, container.header_size, container.fat_size, bytes.size - pos)};
  }
  const std::uint64_t end = pos + container.header_size + container.fat_size;
  out.containers.push_back(container);

  for (std::uint64_t e = pos + container.header_size; e < end;) {
    auto fail = [&](const std::string& what) {
      return Error{
          format("fatbin container %zu, entry at offset %" PRIu64 ": %s", index, e, what.c_str())};
    };
    if (end - e < k_entry_header_min) {
      return fail(format("truncated entry header (%" PRIu64 " of 64 bytes left in the container)",
                         end - e));
    }
    FatbinEntry entry;
    entry.offset = e;
    entry.container = index;
    entry.raw_kind = bytes.u16(e + 0x00);
    entry.unknown_field = bytes.u16(e + 0x02);
    entry.header_size = bytes.u32(e + 0x04);
    entry.payload_size = bytes.u64(e + 0x08);
    entry.compressed_size = bytes.u32(e + 0x10);
    const std::uint32_t options_field = bytes.u32(e + 0x14);
    entry.version_minor = bytes.u16(e + 0x18);
    entry.version_major = bytes.u16(e + 0x1A);
    entry.arch = bytes.u32(e + 0x1C);
    const std::uint32_t identifier_offset = bytes.u32(e + 0x20);
    const std::uint32_t identifier_size = bytes.u32(e + 0x24);
    entry.flags = bytes.u64(e + 0x28);
    // e + 0x30: 8 bytes, zero in every entry seen.
    entry.uncompressed_size = bytes.u64(e + 0x38);

    const std::uint64_t header_size = entry.header_size;
    if (header_size < k_entry_header_min || header_size > end - e) {
      return fail(format("entry header size %" PRIu64 " is outside [64, %" PRIu64 "]", header_size,
                         end - e));
    }
    if (entry.payload_size > end - e - header_size) {
      return fail(format("payload of %" PRIu64 " bytes runs past the container (%" PRIu64
                         " bytes left)",
                         entry.payload_size, end - e - header_size));
    }
    // The identifier and the options live in the header's tail, at offsets from the entry start.
    if (identifier_size != 0) {
      if (std::uint64_t{identifier_offset} + identifier_size > header_size) {
        return fail(format("identifier [%u, +%u) is outside the %" PRIu64 "-byte entry header",
                           identifier_offset, identifier_size, header_size));
      }
      std::string_view identifier(reinterpret_cast<const char*>(bytes.data + e + identifier_offset),
                                  identifier_size);
      entry.identifier = identifier.substr(0, identifier.find('\0'));
    }
    if (options_field != 0) {
      // options_field locates a (u32 offset, u32 size) pair, both relative to the entry start.
      if (std::uint64_t{options_field} + 8 > header_size) {
        return fail(format("options descriptor at +%u is outside the %" PRIu64 "-byte entry header",
                           options_field, header_size));
      }
      const std::uint32_t options_offset = bytes.u32(e + options_field);
      const std::uint32_t options_size = bytes.u32(e + options_field + 4);
      if (options_size != 0) {
        if (std::uint64_t{options_offset} + options_size > header_size) {
          return fail(format("options [%u, +%u) are outside the %" PRIu64 "-byte entry header",
                             options_offset, options_size, header_size));
        }
        entry.options = {bytes.data + e + options_offset, options_size};
      }
    }
    const bool lz4 = (entry.flags & fatbin_flags::k_lz4) != 0;
    const bool zstd = (entry.flags & fatbin_flags::k_zstd) != 0;
    if (lz4 && zstd) return fail("flags claim both LZ4 and zstd compression");
    entry.compression = lz4 ? Compression::lz4 : zstd ? Compression::zstd : Compression::none;
    std::uint64_t stored = entry.payload_size;
    if (entry.compression != Compression::none) {
      if (entry.compressed_size > entry.payload_size) {
        return fail(format("compressed size %u exceeds the %" PRIu64 "-byte payload",
                           entry.compressed_size, entry.payload_size));
      }
      stored = entry.compressed_size;
    }
    entry.payload = {bytes.data + e + header_size, static_cast<std::size_t>(stored)};
    entry.kind = entry.raw_kind == 1   ? EntryKind::ptx
                 : entry.raw_kind == 2 ? EntryKind::elf
                                       : EntryKind::other;
    out.entries.push_back(entry);
    e += header_size + entry.payload_size;
  }
  return end;
}

Result<Fatbin> parse_fatbin_unguarded(Bytes bytes) {
  Fatbin out;
  std::uint64_t pos = 0;
  do {
    auto end = parse_container(bytes, pos, out);
    if (!end) return end.error();
    pos = *end;
    // Containers in a .nv_fatbin section may be separated by alignment padding.
    while (pos < bytes.size && bytes.data[pos] == 0) ++pos;
  } while (pos < bytes.size);
  return out;
}

} // namespace

std::string_view to_string(ImageFormat format) {
  switch (format) {
  case ImageFormat::ptx:
    return "ptx";
  case ImageFormat::cubin:
    return "cubin";
  case ImageFormat::fatbin:
    return "fatbin";
  case ImageFormat::fatbin_wrapper:
    return "fatbin wrapper";
  case ImageFormat::unknown:
    break;
  }
  return "unknown";
}

std::string_view to_string(EntryKind kind) {
  switch (kind) {
  case EntryKind::ptx:
    return "ptx";
  case EntryKind::elf:
    return "elf";
  case EntryKind::other:
    break;
  }
  return "other";
}

std::string_view to_string(Compression compression) {
  switch (compression) {
  case Compression::lz4:
    return "lz4";
  case Compression::zstd:
    return "zstd";
  case Compression::none:
    break;
  }
  return "none";
}

ImageFormat detect_image_format(const void* data, std::size_t size_hint) {
  if (data == nullptr) return ImageFormat::unknown;
  const Bytes bytes{as_bytes(data), size_hint};
  if (starts_with(bytes, k_fatbin_magic_bytes)) return ImageFormat::fatbin;
  if (starts_with(bytes, k_wrapper_magic_bytes)) return ImageFormat::fatbin_wrapper;
  if (starts_with(bytes, k_elf_magic_bytes)) return ImageFormat::cubin;
  if (looks_like_ptx(bytes)) return ImageFormat::ptx;
  return ImageFormat::unknown;
}

Result<std::size_t> image_size(const void* data, std::size_t max_size) {
  const Bytes bytes{as_bytes(data), max_size};
  switch (detect_image_format(data, max_size)) {
  case ImageFormat::ptx: {
    const std::size_t length = text_length(bytes);
    return length < max_size ? length + 1 : length;
  }
  case ImageFormat::cubin:
    return elf_size(bytes);
  case ImageFormat::fatbin:
    return fatbin_size(bytes);
  case ImageFormat::fatbin_wrapper:
    return Error{"a __fatBinC_Wrapper_t is not an image: use locate_image to follow it"};
  case ImageFormat::unknown:
    break;
  }
  if (data == nullptr) return Error{"image pointer is null"};
  return Error{
      "unrecognised image (not PTX, a cubin, a fatbin or a fatbin wrapper); first bytes: " +
      hex_prefix(bytes)};
}

Result<const void*> unwrap_fatbin(const void* data, std::size_t max_size) {
  const Bytes bytes{as_bytes(data), max_size};
  if (data == nullptr || !starts_with(bytes, k_wrapper_magic_bytes)) {
    return Error{"not a __fatBinC_Wrapper_t (magic 0x466243b1)"};
  }
  constexpr std::size_t k_data_end =
      offsetof(__fatBinC_Wrapper_t, data) + sizeof(__fatBinC_Wrapper_t::data);
  if (!bytes.has(0, k_data_end)) return Error{"truncated __fatBinC_Wrapper_t"};
  __fatBinC_Wrapper_t wrapper;
  std::memcpy(&wrapper, data, k_data_end);
  if (wrapper.version != FATBINC_VERSION && wrapper.version != FATBINC_LINK_VERSION) {
    return Error{format("__fatBinC_Wrapper_t version %d, expected %d or %d", wrapper.version,
                        FATBINC_VERSION, FATBINC_LINK_VERSION)};
  }
  if (wrapper.data == nullptr) return Error{"__fatBinC_Wrapper_t has a null fatbin pointer"};
  return static_cast<const void*>(wrapper.data);
}

Result<ImageView> locate_image(const void* data, std::size_t max_size) {
  try {
    ImageFormat format = detect_image_format(data, max_size);
    if (format == ImageFormat::fatbin_wrapper) {
      auto inner = unwrap_fatbin(data, max_size);
      if (!inner) return inner.error();
      data = *inner;
      max_size = k_unknown_size;
      format = detect_image_format(data, max_size);
      if (format == ImageFormat::fatbin_wrapper || format == ImageFormat::unknown) {
        return Error{"__fatBinC_Wrapper_t points at something that is not an image"};
      }
    }
    auto size = image_size(data, max_size);
    if (!size) return size.error();
    return ImageView{format, {as_bytes(data), *size}};
  } catch (const std::bad_alloc&) {
    return Error{"out of memory while locating an image"};
  }
}

Result<Fatbin> parse_fatbin(std::span<const std::uint8_t> bytes) {
  try {
    if (bytes.empty()) return Error{"empty fatbin"};
    return parse_fatbin_unguarded(Bytes{bytes.data(), bytes.size()});
  } catch (const std::bad_alloc&) {
    return Error{"out of memory while parsing a fatbin"};
  }
}

std::string arch_name(const FatbinEntry& entry) {
  try {
    const char* prefix = entry.kind == EntryKind::ptx ? "compute_" : "sm_";
    const char* suffix = (entry.flags & fatbin_flags::k_arch_specific)     ? "a"
                         : (entry.flags & fatbin_flags::k_family_specific) ? "f"
                                                                           : "";
    if (entry.kind == EntryKind::other) {
      return format("kind%u_%u%s", entry.raw_kind, entry.arch, suffix);
    }
    return format("%s%u%s", prefix, entry.arch, suffix);
  } catch (const std::bad_alloc&) {
    return {};
  }
}

std::string describe(const FatbinEntry& entry) {
  try {
    std::string line = format("%s %s %u.%u", std::string(to_string(entry.kind)).c_str(),
                              arch_name(entry).c_str(), entry.version_major, entry.version_minor);
    if (entry.compression == Compression::none) {
      line += format(", %" PRIu64 " bytes", entry.payload_size);
    } else {
      line +=
          format(", %s %u -> %" PRIu64 " bytes", std::string(to_string(entry.compression)).c_str(),
                 entry.compressed_size, entry.uncompressed_size);
    }
    if (entry.flags & fatbin_flags::k_debug) line += ", debug";
    if (!entry.identifier.empty()) line += ", " + std::string(entry.identifier);
    return line;
  } catch (const std::bad_alloc&) {
    return {};
  }
}

Result<std::vector<std::uint8_t>> entry_image(const FatbinEntry& entry, ZstdDecoder zstd) {
  try {
    Result<std::vector<std::uint8_t>> image = std::vector<std::uint8_t>{};
    switch (entry.compression) {
    case Compression::none:
      image = std::vector<std::uint8_t>(entry.payload.begin(), entry.payload.end());
      break;
    case Compression::lz4:
      image = lz4_block_decode(entry.payload, entry.uncompressed_size);
      break;
    case Compression::zstd:
      if (zstd == nullptr) {
        image = Error{"no zstd decoder was provided"};
      } else {
        image = zstd(entry.payload, entry.uncompressed_size);
      }
      break;
    }
    if (!image) {
      return Error{format("fatbin entry %s at offset %" PRIu64 ": %s", describe(entry).c_str(),
                          entry.offset, image.error().message.c_str())};
    }
    return image;
  } catch (const std::bad_alloc&) {
    return Error{"out of memory while extracting a fatbin entry"};
  }
}

Result<std::string> entry_ptx(const FatbinEntry& entry, ZstdDecoder zstd) {
  try {
    if (entry.kind != EntryKind::ptx) {
      return Error{"fatbin entry " + describe(entry) + " is not PTX"};
    }
    auto image = entry_image(entry, zstd);
    if (!image) return image.error();
    const auto nul = std::find(image->begin(), image->end(), std::uint8_t{0});
    return std::string(image->begin(), nul);
  } catch (const std::bad_alloc&) {
    return Error{"out of memory while extracting PTX from a fatbin"};
  }
}

const FatbinEntry* select_ptx(const Fatbin& fatbin, std::uint32_t target_arch) {
  // 0 generic, 1 family-specific, 2 arch-specific: at equal arch the more specific PTX may use
  // features the generic one cannot, and it runs on the target all the same.
  auto specificity = [](const FatbinEntry& e) {
    if (e.flags & fatbin_flags::k_arch_specific) return 2;
    if (e.flags & fatbin_flags::k_family_specific) return 1;
    return 0;
  };
  const FatbinEntry* best = nullptr;
  for (const FatbinEntry& e : fatbin.entries) {
    if (e.kind != EntryKind::ptx || e.arch > target_arch) continue;
    // CUDA Programming Guide, "Feature Availability": `a` code runs only on its own arch, `f` code
    // on the later archs of its family (same major).
    const int s = specificity(e);
    if (s == 2 && e.arch != target_arch) continue;
    if (s == 1 && e.arch / 10 != target_arch / 10) continue;
    if (best == nullptr || e.arch > best->arch ||
        (e.arch == best->arch && s > specificity(*best))) {
      best = &e;
    }
  }
  return best;
}

} // namespace hone::cuda
