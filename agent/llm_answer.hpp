// A model's answer as models really give it, made into one CUDA source and the kernel to launch
// (agent/README.md, "LLM answers"). Asked for `extern "C" __global__ void hone_candidate(...)` in
// one fenced block, models also keep the original kernel's name, leave out extern "C", put their
// reasoning in <think> tags, add a host harness with main() and the runtime's headers, or answer
// in several blocks. What can be used is used on its first turn; what cannot gets a reason that
// says what to change.
#pragma once

#include "common/result.hpp"

#include <string>
#include <string_view>

namespace hone::agent {

// `content` without <think>...</think> blocks (reasoning some servers leave in the content); an
// unclosed <think> drops everything after it.
std::string strip_reasoning(std::string_view content);

struct Answer {
  std::string code;  // the CUDA source to compile, changed as `changes` says
  std::string entry; // the kernel to launch: an extern "C" name
  std::string changes; // what was changed in the model's code ("" when nothing), for the log
};

// The kernel in `reply` (reasoning already stripped). `wanted` is the name asked for
// (hone_candidate), `original` the original kernel's name. The kernel is the one named `wanted`,
// else the one named `original`, else the only __global__ function; the block is the fenced block
// that defines it. A host-side main() is dropped, with the host-only headers; a kernel without
// extern "C" gets it (a template kernel is refused: it has no name to launch).
Result<Answer> extract_answer(std::string_view reply, std::string_view wanted,
                              std::string_view original);

} // namespace hone::agent
