// The emulated JIT linker (cuLink*): PTX modules linked into one.
//
// A GPU's linker compiles each PTX input to relocatable SASS and links those into a cubin,
// resolving
// `.extern` functions and variables of one input by `.visible` (or `.weak`) definitions of another
// (PTX ISA, "Linking Directives"). The emulated device runs PTX, so its linker links at the PTX
// level: the inputs become one module with every reference resolved, which the executor loads like
// any other (emu/link_image.hpp wraps it in an ELF like a cubin). The rules are the relocatable
// device code rules nvlink applies:
//   - one definition per external symbol: two `.visible` definitions are an error, a `.visible`
//     one overrides `.weak` ones, and of several `.weak` ones the first linked wins;
//   - every `.extern` reference must be defined by some input, except the functions the driver
//     itself provides to every module (vprintf, malloc, free, __assertfail);
//   - symbols without linkage directive are internal to their input: equal names in two inputs are
//     two symbols (renamed apart in the merged module).
// Archive members (CU_JIT_INPUT_LIBRARY) take part only when they define a symbol that is still
// undefined, as a static linker pulls them.
//
// A single input with nothing to change is passed through byte for byte, so that the PTX lines a
// fault message names are the input's own.
#pragma once

#include "common/result.hpp"
#include "emu/program.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace hone::emu {

// One PTX module taking part in a link.
struct LinkUnit {
  std::string name; // the input's name for logs ("kernel.ptx", "libfoo.a(bar.o)")
  std::string ptx;
  // JIT options given to cuLinkAddData for this input alone (they override the link's).
  std::optional<uint32_t> max_registers;
  std::optional<uint32_t> threads_per_block;
};

struct LinkOutput {
  std::string ptx;
  // What the loader's ptxas run gets (-maxrregcount, -maxntid). When inputs override the link's
  // register options, those are written into each entry as `.maxnreg`/`.maxntid` instead and
  // these stay 0.
  CompileOptions options;
  std::string info; // lines for the info log (what was linked; members pulled; names renamed)
};

// Check that `unit` is PTX this link can take for SM `target` (it parses, 64-bit addresses, a
// `.target` not above `target`). Errors carry the CUresult cuLinkAddData returns
// (CUDA_ERROR_INVALID_PTX) and a message for the error log.
Result<void> check_link_unit(const LinkUnit& unit, uint32_t target);

// Link `units` (all of them) and whichever of `members` (archive members) resolve a symbol left
// undefined, for SM `target`, with the link-level register options `options`. Errors carry a
// CUresult: CUDA_ERROR_NOT_FOUND for an undefined reference, CUDA_ERROR_INVALID_PTX for
// conflicting definitions or inputs that do not parse, CUDA_ERROR_INVALID_VALUE for no input.
Result<LinkOutput> link_units(const std::vector<LinkUnit>& units,
                              const std::vector<LinkUnit>& members, uint32_t target,
                              const CompileOptions& options);

// The PTX a linker input of `type` (a CUjitInputType) carries for SM `target`: the text itself,
// a fatbin's PTX entry for it, the PTX of a linked image (emu/link_image.hpp), the fatbin of
// a host object, or each member of an archive that carries PTX (`members`, for a library). Errors
// carry the CUresult cuLinkAddData returns and say what the input holds instead.
struct InputCode {
  std::vector<LinkUnit> units;   // taken whole
  std::vector<LinkUnit> members; // archive members, pulled when needed
  std::string notes;             // for the info log (members skipped, and why)
};
Result<InputCode> link_input(int type, std::span<const uint8_t> bytes, const std::string& name,
                             uint32_t target);

} // namespace hone::emu
