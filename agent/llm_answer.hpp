// A model's answer as models really give it, made into one CUDA source and the kernel to launch
// (agent/README.md, "LLM answers"). Asked for `extern "C" __global__ void hone_candidate(...)` in
// one fenced block, models also keep the original kernel's name, leave out extern "C", put their
// reasoning in <think> tags, add a host harness with main() and the runtime's headers, or answer
// in several blocks. What can be used is used on its first turn; what cannot gets a reason that
// says what to change.
#pragma once

#include "agent/llm.hpp"
#include "common/result.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace hone::agent {

// The chat completion in an HTTP reply body (OpenAI's chat-completions shape, as OpenAI, vLLM,
// SGLang, llama-server and Ollama's /v1 give it): choices[0].message's content, tool calls (with
// arguments as JSON text or, as Ollama sends them, as an object) and reasoning, the contents of
// the further choices up to `samples`, finish_reason and usage.total_tokens. Without a usage, the
// tokens are estimated from `request_bytes` and the content. Nothing is redacted here. An error
// (Error::code ChatFailure::reply) for a body that is not JSON or has neither content, reasoning
// nor tool calls; it does not quote the body.
Result<ChatReply> parse_chat_reply(std::string_view body, uint32_t samples,
                                   uint64_t request_bytes);

// The CUDA source of a compile or check tool call: the `source` string of its JSON arguments,
// in a fenced block when it has none (extract_answer takes it from there). An error says what
// the arguments must be.
Result<std::string> tool_call_source(std::string_view arguments);

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
