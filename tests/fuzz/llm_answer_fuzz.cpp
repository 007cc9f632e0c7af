// libFuzzer target: what a model's server sends back, as the LLM strategy reads it
// (agent/llm_answer.*). The input is tried twice: as the HTTP body of a chat completion
// (parse_chat_reply: OpenAI's shape, tool calls with arguments as text or as Ollama's object,
// reasoning fields, several choices), whose contents and tool-call sources then go where the
// strategy sends them; and as the text of a message itself (strip_reasoning, then extract_answer:
// fenced blocks, kernels, host code, extern "C"), since a mutation rarely stays valid JSON.
//
// Nothing may crash, hang or over-read; an answer must name a kernel that its code defines with
// C linkage, and a reply's parts must come from the body.
#include "agent/llm_answer.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

using namespace hone::agent;

namespace {

constexpr std::string_view k_wanted = "hone_candidate";
constexpr std::string_view k_original = "axpy";

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "llm_answer_fuzz: %s\n", what);
  std::abort();
}

// The model's text, as the strategy handles a turn's content.
void answer(std::string_view content) {
  const std::string text = strip_reasoning(content);
  if (text.size() > content.size()) fail("strip_reasoning made the text longer");
  for (std::string_view original : {k_original, std::string_view()}) {
    auto a = extract_answer(text, k_wanted, original);
    if (!a) {
      if (a.error().message.empty()) fail("a refusal without a reason");
      continue;
    }
    if (a->entry.empty()) fail("an answer without a kernel");
    if (a->code.find(a->entry) == std::string::npos) fail("the kernel is not in the code");
    if (a->code.find("extern \"C\"") == std::string::npos) fail("the code has no C linkage");
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  auto reply = parse_chat_reply(in, 4, 1000);
  if (reply) {
    if (reply->content.size() > size) fail("content longer than the body");
    if (reply->more_choices.size() > 3) fail("more choices than asked for");
    answer(reply->content);
    for (const auto& more : reply->more_choices) answer(more);
    for (const auto& call : reply->tool_calls) {
      if (call.id.empty()) fail("a tool call without an id");
      auto source = tool_call_source(call.arguments);
      if (source) answer(*source);
    }
  } else if (reply.error().message.empty()) {
    fail("a refused reply without a reason");
  }
  (void)tool_call_source(in);
  answer(in);
  return 0;
}
