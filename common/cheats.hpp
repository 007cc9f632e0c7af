// The catalogue of ways a candidate kernel can pass a check without doing its job (docs/security.md,
// "Validation"): each has an id that a refusing verdict names (the evidence's "pattern", and the
// verdict message), a title for people, and the defence that catches it. The corpus of hostile
// candidates in tests/cheats/ holds one candidate per pattern that applies to a same-signature
// kernel.
#pragma once

#include <array>
#include <string_view>

namespace hone {

struct CheatPattern {
  std::string_view id;      // in evidence, messages, honectl show and the corpus
  std::string_view title;   // what the candidate does
  std::string_view defence; // what refuses it
};

inline constexpr std::array<CheatPattern, 14> k_cheat_patterns{{
    {"result-reuse", "relies on what output memory held: writes nothing, or only part",
     "outputs poisoned twice (0xFF, then 0x5A) before the candidate runs"},
    {"input-modification", "writes a buffer the original only reads (even if restored later)",
     "every byte of every buffer compared; stores through a pointer the original only reads "
     "refused in the candidate's PTX"},
    {"uninitialized-memory", "reads shared or local memory it never wrote",
     "shared and local memory filled with different garbage per run on the emulated device"},
    {"state-across-launches", "keeps state in module-scope device memory between launches",
     "writes to module-scope variables refused in the candidate's PTX; served launches "
     "shadow-checked"},
    {"input-specific", "a shortcut for the captured values or shapes, or work skipped for inputs "
     "the captures lack",
     "perturbed copies of each capture: other floating-point values, halved sizes"},
    {"degenerate-output", "zeros or a constant where the original's outputs are small",
     "tolerance relative to the original's output magnitude; constant outputs the original does "
     "not give refused"},
    {"precision-downgrade", "computes in a narrower floating-point type than the original",
     "f16, bf16 or tf32 arithmetic or conversions the original lacks refused in the PTX"},
    {"out-of-bounds", "reads or writes outside its buffers",
     "guard zones around every buffer, checked after every run, refilled with another pattern "
     "per run"},
    {"race", "a result that depends on the schedule",
     "two schedules for the candidate, eight for the original"},
    {"dependent-launch-race",
     "drops or moves the original's wait for the kernel before it (griddepcontrol.wait, "
     "programmatic dependent launch) and reads what that kernel writes before it is done",
     "static: a candidate of an original that waits must wait too, and before its wait touch "
     "global memory only through pointers the original touches before its own"},
    {"external-state",
     "results that depend on the clock, the time or where it runs (%clock64, %globaltimer, "
     "%smid, %warpid, %envreg...), not only on its inputs: a time bomb, a shortcut on one SM",
     "static: stores whose value, address or execution can depend on such a register refused "
     "unless the original's can too; on the emulated device %globaltimer starts from another "
     "epoch in each rerun"},
    {"warm-cache", "fast only because its data is already in cache",
     "L2 flushed between timed runs on a GPU; the emulated device keeps no cache between launches"},
    {"correct-while-checked", "correct on the launches validation sees, wrong later",
     "module-scope writes refused; served launches shadow-checked against the original"},
    {"timing", "a speedup that does not hold",
     "speedups over the suspicious threshold re-validated under new schedules and re-measured"},
}};

// The pattern with `id`, or nullptr.
inline const CheatPattern* cheat_pattern(std::string_view id) {
  for (const auto& p : k_cheat_patterns) {
    if (p.id == id) return &p;
  }
  return nullptr;
}

} // namespace hone
