#include "emu/link_image.hpp"

#include <algorithm>
#include <cstring>

namespace hone::emu {

namespace {

// ELF64 layout per the System V gABI ("ELF Header", "Sections"); every CUDA ELF and every host
// object this reads is little-endian.
constexpr size_t k_ehdr_size = 64;
constexpr size_t k_shdr_size = 64;
constexpr uint16_t k_et_exec = 2;
constexpr uint32_t k_sht_progbits = 1;
constexpr uint32_t k_sht_strtab = 3;
constexpr uint32_t k_sht_nobits = 8;
// e_ident as ptxas 13.0 writes it for sm_90: ELFOSABI 0x41 (CUDA), ABI version 8.
constexpr uint8_t k_cuda_osabi = 0x41;
constexpr uint8_t k_cuda_abi_version = 8;
// `.nv.hone.link`: u32 format, u32 arch, u32 max registers, u32 threads per block (0: not given).
constexpr uint32_t k_info_format = 1;
constexpr size_t k_info_size = 16;

uint64_t load(std::span<const uint8_t> b, size_t offset, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= uint64_t(b[offset + i]) << (8 * i);
  return v;
}
uint16_t u16(std::span<const uint8_t> b, size_t o) {
  return uint16_t(load(b, o, 2));
}
uint32_t u32(std::span<const uint8_t> b, size_t o) {
  return uint32_t(load(b, o, 4));
}
uint64_t u64(std::span<const uint8_t> b, size_t o) {
  return load(b, o, 8);
}

void store(std::vector<uint8_t>& b, size_t offset, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i) b[offset + i] = uint8_t(v >> (8 * i));
}

bool has(std::span<const uint8_t> b, uint64_t offset, uint64_t count) {
  return offset <= b.size() && count <= b.size() - offset;
}

// e_flags as ptxas 13.0 writes them in ELF ABI version 8: the SM number in bits 8-15, and low bits
// that were 4 for every sm_7x-sm_9x cubin and 2 for sm_100 (their meaning is undocumented).
uint32_t cuda_elf_flags(uint32_t arch) {
  return 0x06000000u | ((arch & 0xffu) << 8) | (arch >= 100 ? 2u : 4u);
}

struct Section {
  uint32_t name = 0; // offset in .shstrtab
  uint32_t type = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
};

// The section headers of a little-endian ELF64, checked against the bytes.
Result<std::vector<Section>> sections(std::span<const uint8_t> elf, uint64_t& strtab_offset,
                                      uint64_t& strtab_size) {
  auto info = elf_info(elf);
  if (!info) return info.error();
  const uint64_t shoff = u64(elf, 0x28);
  const uint16_t shentsize = u16(elf, 0x3A);
  uint64_t shnum = u16(elf, 0x3C);
  uint64_t shstrndx = u16(elf, 0x3E);
  std::vector<Section> out;
  if (shoff == 0) return out;
  if (shentsize < k_shdr_size) return make_error("ELF section headers are too small");
  if (!has(elf, shoff, k_shdr_size)) return make_error("ELF section header table is truncated");
  // Extended numbering (gABI "Sections"): counts that do not fit live in section 0.
  if (shnum == 0) shnum = u64(elf, shoff + 0x20);
  if (shstrndx == 0xFFFF) shstrndx = u32(elf, shoff + 0x28);
  if (shnum > (uint64_t(1) << 20) || !has(elf, shoff, shnum * shentsize))
    return make_error("ELF section header table is truncated");
  for (uint64_t i = 0; i < shnum; ++i) {
    const uint64_t sh = shoff + i * shentsize;
    Section s;
    s.name = u32(elf, sh);
    s.type = u32(elf, sh + 4);
    s.offset = u64(elf, sh + 0x18);
    s.size = u64(elf, sh + 0x20);
    if (s.type != 0 && s.type != k_sht_nobits && !has(elf, s.offset, s.size))
      return make_error("ELF section " + std::to_string(i) + " lies past the end of the image");
    out.push_back(s);
  }
  if (shstrndx >= out.size() || out[shstrndx].type != k_sht_strtab)
    return make_error("ELF section name table is missing");
  strtab_offset = out[shstrndx].offset;
  strtab_size = out[shstrndx].size;
  return out;
}

std::string_view section_name(std::span<const uint8_t> elf, uint64_t strtab_offset,
                              uint64_t strtab_size, uint32_t name) {
  if (name >= strtab_size) return {};
  const char* start = reinterpret_cast<const char*>(elf.data() + strtab_offset + name);
  size_t max = size_t(strtab_size - name);
  return std::string_view(start, strnlen(start, max));
}

} // namespace

std::vector<uint8_t> write_linked_image(const LinkedImage& image) {
  // .shstrtab, then the two hone sections, then the section header table (8-aligned).
  const std::string names =
      std::string("\0.shstrtab\0", 11) + k_linked_ptx_section + '\0' + k_linked_info_section + '\0';
  const uint32_t name_shstrtab = 1;
  const uint32_t name_ptx = 11;
  const uint32_t name_info = name_ptx + uint32_t(std::strlen(k_linked_ptx_section)) + 1;
  const size_t shstrtab_offset = k_ehdr_size;
  const size_t ptx_offset = shstrtab_offset + names.size();
  const size_t ptx_size = image.ptx.size() + 1; // NUL-terminated, as PTX images are
  const size_t info_offset = (ptx_offset + ptx_size + 3) & ~size_t(3);
  const size_t shoff = (info_offset + k_info_size + 7) & ~size_t(7);
  const size_t shnum = 4;
  std::vector<uint8_t> out(shoff + shnum * k_shdr_size, 0);

  const uint8_t ident[16] = {0x7f, 'E', 'L', 'F', 2, 1, 1, k_cuda_osabi, k_cuda_abi_version};
  std::memcpy(out.data(), ident, sizeof ident);
  store(out, 0x10, k_et_exec, 2);
  store(out, 0x12, k_em_cuda, 2);
  store(out, 0x14, 1, 4); // EV_CURRENT
  store(out, 0x28, shoff, 8);
  store(out, 0x30, cuda_elf_flags(image.arch), 4);
  store(out, 0x34, k_ehdr_size, 2);
  store(out, 0x3A, k_shdr_size, 2);
  store(out, 0x3C, shnum, 2);
  store(out, 0x3E, 1, 2); // .shstrtab

  std::memcpy(out.data() + shstrtab_offset, names.data(), names.size());
  std::memcpy(out.data() + ptx_offset, image.ptx.data(), image.ptx.size());
  store(out, info_offset, k_info_format, 4);
  store(out, info_offset + 4, image.arch, 4);
  store(out, info_offset + 8, image.options.max_registers, 4);
  store(out, info_offset + 12, image.options.threads_per_block, 4);

  auto header = [&](size_t index, uint32_t name, uint32_t type, size_t offset, size_t size,
                    size_t align) {
    const size_t sh = shoff + index * k_shdr_size;
    store(out, sh, name, 4);
    store(out, sh + 4, type, 4);
    store(out, sh + 0x18, offset, 8);
    store(out, sh + 0x20, size, 8);
    store(out, sh + 0x30, align, 8);
  };
  header(1, name_shstrtab, k_sht_strtab, shstrtab_offset, names.size(), 1);
  header(2, name_ptx, k_sht_progbits, ptx_offset, ptx_size, 1);
  header(3, name_info, k_sht_progbits, info_offset, k_info_size, 4);
  return out;
}

Result<ElfInfo> elf_info(std::span<const uint8_t> elf) {
  static constexpr uint8_t k_magic[4] = {0x7f, 'E', 'L', 'F'};
  if (!has(elf, 0, k_ehdr_size) || std::memcmp(elf.data(), k_magic, 4) != 0)
    return make_error("not an ELF image");
  if (elf[4] != 2 || elf[5] != 1)
    return make_error("not a little-endian 64-bit ELF image (every CUDA ELF is one)");
  return ElfInfo{u16(elf, 0x10), u16(elf, 0x12), u32(elf, 0x30)};
}

Result<std::optional<std::span<const uint8_t>>> elf_section(std::span<const uint8_t> elf,
                                                            std::string_view name) {
  uint64_t strtab_offset = 0, strtab_size = 0;
  auto list = sections(elf, strtab_offset, strtab_size);
  if (!list) return list.error();
  for (const Section& s : *list) {
    if (s.type == 0 || section_name(elf, strtab_offset, strtab_size, s.name) != name) continue;
    if (s.type == k_sht_nobits) return std::optional<std::span<const uint8_t>>{};
    return std::optional{elf.subspan(s.offset, s.size)};
  }
  return std::optional<std::span<const uint8_t>>{};
}

Result<std::optional<LinkedImage>> read_linked_image(std::span<const uint8_t> elf) {
  auto info = elf_info(elf);
  if (!info) return info.error();
  auto ptx = elf_section(elf, k_linked_ptx_section);
  if (!ptx) return ptx.error();
  if (!*ptx) return std::optional<LinkedImage>{};
  if (info->machine != k_em_cuda)
    return make_error(std::string("an ELF with a ") + k_linked_ptx_section +
                      " section must have machine EM_CUDA (190)");
  auto meta = elf_section(elf, k_linked_info_section);
  if (!meta) return meta.error();
  if (!*meta || (*meta)->size() < k_info_size || u32(**meta, 0) != k_info_format)
    return make_error(std::string("the ") + k_linked_info_section +
                      " section of a linked image is missing or of an unknown format");
  LinkedImage out;
  out.arch = u32(**meta, 4);
  out.options.max_registers = u32(**meta, 8);
  out.options.threads_per_block = u32(**meta, 12);
  auto text = **ptx;
  size_t n = 0;
  while (n < text.size() && text[n] != 0) ++n;
  out.ptx.assign(reinterpret_cast<const char*>(text.data()), n);
  return std::optional{std::move(out)};
}

bool is_archive(std::span<const uint8_t> bytes) {
  return bytes.size() >= 8 && std::memcmp(bytes.data(), "!<arch>\n", 8) == 0;
}

Result<std::vector<ArchiveMember>> read_archive(std::span<const uint8_t> bytes) {
  // The common ar format (System V / GNU, and BSD long names): a 60-byte header per member —
  // name[16] mtime[12] uid[6] gid[6] mode[8] size[10] "`\n" — then its data, padded to 2 bytes.
  if (!is_archive(bytes)) return make_error("not an ar archive (no !<arch> magic)");
  std::vector<ArchiveMember> out;
  std::string_view long_names;
  size_t pos = 8;
  while (pos < bytes.size()) {
    if (bytes.size() - pos < 60) return make_error("ar archive: truncated member header");
    const char* h = reinterpret_cast<const char*>(bytes.data() + pos);
    if (h[58] != '`' || h[59] != '\n') return make_error("ar archive: bad member header");
    std::string_view raw_name(h, 16);
    std::string_view size_text(h + 48, 10);
    uint64_t size = 0;
    for (char c : size_text) {
      if (c == ' ') break;
      if (c < '0' || c > '9') return make_error("ar archive: bad member size");
      size = size * 10 + uint64_t(c - '0');
    }
    pos += 60;
    if (size > bytes.size() - pos) return make_error("ar archive: member past the end");
    auto data = bytes.subspan(pos, size);
    pos += size + (size & 1);
    while (!raw_name.empty() && raw_name.back() == ' ') raw_name.remove_suffix(1);
    if (raw_name == "/" || raw_name == "/SYM64/" || raw_name == "__.SYMDEF" ||
        raw_name == "__.SYMDEF SORTED")
      continue; // symbol tables
    if (raw_name == "//") {
      long_names = std::string_view(reinterpret_cast<const char*>(data.data()), data.size());
      continue;
    }
    std::string name;
    if (raw_name.size() > 1 && raw_name[0] == '/' && raw_name[1] >= '0' && raw_name[1] <= '9') {
      size_t offset = 0;
      for (char c : raw_name.substr(1)) offset = offset * 10 + size_t(c - '0');
      if (offset >= long_names.size()) return make_error("ar archive: bad long member name");
      auto rest = long_names.substr(offset);
      name = std::string(rest.substr(0, std::min(rest.find('\n'), rest.size())));
      if (!name.empty() && name.back() == '/') name.pop_back();
    } else if (raw_name.starts_with("#1/")) {
      size_t len = 0; // BSD: the name is the first `len` bytes of the data
      for (char c : raw_name.substr(3)) len = len * 10 + size_t(c - '0');
      if (len > data.size()) return make_error("ar archive: bad BSD member name");
      name.assign(reinterpret_cast<const char*>(data.data()),
                  strnlen(reinterpret_cast<const char*>(data.data()), len));
      data = data.subspan(len);
    } else {
      name = std::string(raw_name);
      if (!name.empty() && name.back() == '/') name.pop_back();
    }
    out.push_back({std::move(name), data});
  }
  return out;
}

} // namespace hone::emu
