// Static checks of a candidate's PTX against the original's, before any run: what a candidate may
// not do even when every run would match (common/cheats.hpp names each pattern).
#pragma once

#include "daemon/worker/capture_check.hpp"
#include "ptx/analysis.hpp"

#include <optional>

namespace hone::worker {

// The candidate's entry (`candidate`, analyzed with ptx::analyze_entry) against the original's:
// a `refused` Failure naming the pattern and the instruction when the candidate
//  - writes a module-scope .global variable, in the entry or a function it calls
//    (state-across-launches: nothing ever resets the candidate's module variables);
//  - writes through a pointer parameter the original never writes through (input-modification:
//    a buffer changed and restored before the kernel ends looks unchanged afterwards);
//  - does not wait where the original does (dependent-launch-race): the original executes
//    griddepcontrol.wait and the candidate never does, or the candidate, before a wait on some
//    path, reads global memory through a pointer the original does not read before its own wait,
//    writes through one the original does not write before it, or touches memory at an address
//    the analysis cannot trace to a parameter;
//  - has stores (or a trap) whose value, address or execution can depend on a special register
//    that says when or where it runs (%clock64, %globaltimer, %smid, %warpid, %envreg*, ...:
//    ptx::External) of a kind the original's stores cannot depend on (external-state);
//  - names f16, bf16, tf32 or fp8 types the original, f32 or f64 code, never names, unless the
//    original moves elements of that size through its pointers (precision-downgrade).
// Refuses only what the analysis traces for certain, except before a griddepcontrol.wait, where
// what it cannot trace is refused, and for external-state, where a dependence the analysis cannot
// rule out is refused (it errs on the side of "depends"); nullopt otherwise.
std::optional<Failure> check_candidate(const ptx::EntryInfo& original,
                                       const ptx::EntryInfo& candidate);

// The candidate (analyzed) of an original with no PTX to analyze (SASS only): whether the
// original waits for an upstream kernel (programmatic dependent launch) cannot be known, so the
// candidate must execute griddepcontrol.wait before it touches global memory on any path, which
// costs nothing when the launch is not a dependent one (dependent-launch-race).
std::optional<Failure> check_candidate_of_unknown(const ptx::EntryInfo& candidate);

} // namespace hone::worker
