// The image the emulated JIT linker produces (cuLinkComplete), and the ELF and archive readers the
// linker's inputs need.
//
// On a GPU, cuLinkComplete returns a cubin: an ELF of machine EM_CUDA holding SASS for one SM
// architecture, which cuModuleLoadData then loads without compiling. The emulated device runs PTX,
// so its linker returns an ELF of the same shape (EM_CUDA, the SM architecture in e_flags the way
// ptxas 13.0 writes them for ELF ABI version 8) whose code is the linked PTX, in a section of the
// emulator's own, `.nv.hone.ptx`, beside `.nv.hone.link` (the target and the JIT options the PTX
// was linked with). To cuda::detect_image_format it is a cubin, as the real linker's output is;
// only the emulator's module loader looks inside. Any other cubin holds SASS only.
//
// Everything here is bounds-checked against the bytes it is given; nothing throws but bad_alloc.
#pragma once

#include "common/result.hpp"
#include "emu/program.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hone::emu {

inline constexpr uint16_t k_em_cuda = 190; // EM_CUDA (System V gABI machine numbers)
inline constexpr const char* k_linked_ptx_section = ".nv.hone.ptx";
inline constexpr const char* k_linked_info_section = ".nv.hone.link";

// What a linked image carries.
struct LinkedImage {
  uint32_t arch = 90;     // the SM architecture it was linked for (CU_JIT_TARGET, or the context's)
  CompileOptions options; // CU_JIT_MAX_REGISTERS and CU_JIT_THREADS_PER_BLOCK given to the link
  std::string ptx;        // the linked module, without a terminating NUL
};

// The ELF bytes of `image`.
std::vector<uint8_t> write_linked_image(const LinkedImage& image);

// The linked image `elf` is, nullopt when it is an ELF without `.nv.hone.ptx` (a real cubin or a
// host object), or an error when it is not a readable little-endian ELF64 or its hone sections
// are malformed.
Result<std::optional<LinkedImage>> read_linked_image(std::span<const uint8_t> elf);

// The ELF header fields the linker's inputs are told apart by.
struct ElfInfo {
  uint16_t type = 0;    // ET_REL 1, ET_EXEC 2, ...
  uint16_t machine = 0; // EM_CUDA 190, EM_X86_64 62, ...
  uint32_t flags = 0;
};
Result<ElfInfo> elf_info(std::span<const uint8_t> elf);

// The bytes of the section named `name` of a little-endian ELF64, nullopt when there is none.
Result<std::optional<std::span<const uint8_t>>> elf_section(std::span<const uint8_t> elf,
                                                            std::string_view name);

// One member of a Unix `ar` archive (CU_JIT_INPUT_LIBRARY): its name and bytes.
struct ArchiveMember {
  std::string name;
  std::span<const uint8_t> bytes;
};

// Whether `bytes` starts with the archive magic "!<arch>\n".
bool is_archive(std::span<const uint8_t> bytes);

// The members of a System V / GNU `ar` archive, symbol tables and the long-name table left out.
Result<std::vector<ArchiveMember>> read_archive(std::span<const uint8_t> bytes);

} // namespace hone::emu
