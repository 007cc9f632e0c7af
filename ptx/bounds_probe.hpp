// A bounds probe: an instrumented copy of one kernel that records, for one launch, the lowest and
// highest global address it touches inside each of a set of device allocations, and changes no
// memory of the application (shim/README.md, "Bounded captures").
//
// The probe runs once, just before a captured launch, with the launch's own shape and parameter
// bytes: its loads are real (so addresses that depend on data are the ones the kernel computes),
// its stores and reductions to global memory are suppressed (discard.global.L2, which leaves bytes
// undefined, is dropped). A kernel that may wait for another thread's store (a global atomic,
// whose result can be polled, or a volatile/relaxed/acquire load) gets no probe: suppressed
// stores would make it spin forever. Every global or
// generic access then looks its address up in a table the shim fills, and widens the matching
// record with atom.global.min/max.u64 (PTX ISA 9.7.13.5, "atom").
//
// Table layout (device memory, 8-byte words), pointed to by the module's `.global .u64`
// k_probe_table_symbol:
//   [0]            N, the number of records
//   [1 + 4i + 0]   base of allocation i
//   [1 + 4i + 1]   end of allocation i (one past its last byte)
//   [1 + 4i + 2]   lowest address touched (the shim initializes it to ~0)
//   [1 + 4i + 3]   one past the highest byte touched (initialized to 0)
#pragma once

#include "common/result.hpp"
#include "ptx/ir.hpp"

#include <string>
#include <string_view>

namespace hone::ptx {

inline constexpr std::string_view k_probe_table_symbol = "__hone_probe_table";
inline constexpr uint64_t k_probe_record_bytes = 32;
inline constexpr uint64_t k_probe_header_bytes = 8;

// The PTX text of a module holding `entry` of `module`, instrumented as above, and every .func of
// the module likewise (calls reach them). An error says why no probe can be made: an instruction
// whose effect on global memory the probe cannot see or suppress (texture and surface access,
// bulk and tensor copies, multimem, a call to a function without a body such as vprintf), one
// that may wait for another thread's store (above), or an instruction the IR does not model.
Result<std::string> bounds_probe(const Module& module, std::string_view entry);

} // namespace hone::ptx
