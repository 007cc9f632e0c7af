// The LLM strategy (DESIGN.md, "Agent"): a model behind an OpenAI-compatible chat-completions
// endpoint rewrites a hot kernel as CUDA C++, in a multi-turn loop fed by the compiler's errors,
// the validation's mismatches and the benchmark's timings, within budgets of turns, tokens and
// wall time per kernel.
//
// Everything that comes back from the endpoint is untrusted: replies are size-limited, parsed
// strictly, and every text that could reach a log, a status line or an error has the API key
// replaced by "[redacted]" (a hostile server may echo the Authorization header back).
#pragma once

#include "agent/strategy.hpp"
#include "common/result.hpp"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace hone::agent {

struct LlmSettings {
  bool enabled = false;                              // for the daemon: add the strategy at all
  std::string base_url = "http://127.0.0.1:8000/v1"; // requests go to {base_url}/chat/completions
  std::string model;
  std::string api_key; // resolved (resolve_api_key); empty: no Authorization
  double connect_timeout_s = 5;
  double request_timeout_s = 120;           // one whole request, reply included
  uint32_t max_turns = 4;                   // requests per kernel, failed ones included
  uint32_t max_reply_tokens = 4096;         // max_tokens of each request
  uint64_t token_budget_per_kernel = 60000; // usage.total_tokens summed over a kernel's turns
  double wall_budget_s_per_kernel = 900;    // from start() to the end of the session
  uint32_t concurrency = 2;                 // requests in flight over all sessions of the strategy
  uint64_t max_reply_bytes = 1 << 20;       // a larger HTTP body is refused
  double temperature = 0.2;
  uint32_t samples_per_turn = 1; // answers asked for per turn (`n`), each validated
  uint32_t examples = 0;         // verified rewrites of other kernels shown in the first prompt
  // Calls of the tools compile and check within a turn (0: none offered; only with one sample).
  uint32_t tool_calls_per_turn = 0;
  // Work on kernels shipped as SASS only, from their name, parameter layout, launches and (where
  // cuobjdump is installed) SASS listing; candidates are guarded by the captured scalar values.
  bool sass_kernels = false;
  // What the validation holds candidates to, as the prompt tells the model ([validation]).
  double f32_rel = 1e-5;
  double min_speedup = 1.05;
};

// The API key: the value of the environment variable named `api_key_env`, or the contents of
// `api_key_file` (a regular file owned by this user, of mode 0600 or stricter; surrounding
// whitespace removed). Both empty: an empty key (no Authorization header). Errors never contain
// the key.
Result<std::string> resolve_api_key(const std::string& api_key_env,
                                    const std::string& api_key_file);

// The strategy "llm". It does not look at `settings.enabled`: the daemon adds it only when set.
std::unique_ptr<Strategy> make_llm_strategy(LlmSettings settings);

// ---- the client, shared by the sessions of one strategy (llm_client.cpp) -----------------------

// A tool the model called (OpenAI's tool_calls): `arguments` is JSON text.
struct ToolCall {
  std::string id; // the server's, or "call_N" when it gives none (Ollama)
  std::string name;
  std::string arguments;
};

struct ChatMessage {
  ChatMessage() = default;
  ChatMessage(std::string r, std::string c) : role(std::move(r)), content(std::move(c)) {}
  std::string role; // "system", "user", "assistant", "tool"
  std::string content;
  std::vector<ToolCall> tool_calls; // an assistant message that called tools
  std::string tool_call_id;         // a "tool" message: the call it answers
};

struct ChatReply {
  std::string content;       // choices[0].message.content, redacted
  uint64_t total_tokens = 0; // usage.total_tokens, or an estimate from the lengths
  bool truncated = false;    // finish_reason "length": cut at max_tokens
  size_t reasoning_bytes = 0; // in reasoning_content or reasoning: read, never sent back
  std::vector<std::string> more_choices; // choices[1..].message.content, redacted (`n` > 1)
  std::vector<ToolCall> tool_calls;      // choices[0].message.tool_calls (when tools were offered)
};

// Why a request failed, which decides what a session does next.
enum class ChatFailure : int {
  transport = 1, // no usable answer from the server (connection, timeout, HTTP 408/429/5xx): retry
  refused = 2, // HTTP 3xx/4xx: the request itself or the credentials are wrong; retrying won't help
  reply = 3,   // an answer that is not a usable chat completion (too large, bad JSON, no content)
  cancelled = 4,
};

// Error::code of a failed chat(): its ChatFailure.
inline ChatFailure failure_of(const Error& e) {
  return static_cast<ChatFailure>(e.code);
}

class LlmClient {
public:
  explicit LlmClient(LlmSettings settings);

  // POST the conversation to {base_url}/chat/completions and return the reply. Blocks for at most
  // min(request_timeout_s, timeout_s) plus the wait for a free slot (at most `concurrency`
  // requests in flight over all callers); returns soon after `cancel` turns true. Thread-safe.
  //
  // With `tools`, the request offers the tools compile and check (k_tool_names); an endpoint
  // that refuses them (an HTTP 4xx naming tools: vLLM without --enable-auto-tool-choice,
  // llama-server without --jinja, a model Ollama serves without tool support) is asked again
  // without, and never offered them again (tools_refused()).
  Result<ChatReply> chat(const std::vector<ChatMessage>& messages, const std::atomic<bool>& cancel,
                         double timeout_s, bool tools = false);
  bool tools_refused() const { return m_tools_refused; }

  // `text` with every occurrence of the API key replaced by "[redacted]".
  std::string redact(std::string_view text) const;
  // A short, printable, redacted excerpt of an untrusted text for messages: control bytes become
  // spaces, runs of spaces collapse, and it is cut at `max_bytes` (marked with "...").
  std::string excerpt(std::string_view text, size_t max_bytes = 200) const;

  const LlmSettings& settings() const { return m_settings; }

private:
  // One request; a 429 or 503 with Retry-After (seconds) sets `retry_after`.
  Result<ChatReply> chat_once(const std::vector<ChatMessage>& messages,
                              const std::atomic<bool>& cancel, double timeout_s,
                              double* retry_after, bool tools);
  // One request, and one retry after Retry-After when the server asks for it.
  Result<ChatReply> chat_waiting(const std::vector<ChatMessage>& messages,
                                 const std::atomic<bool>& cancel, double timeout_s, bool tools);
  // Wait for a free request slot; false when cancelled first.
  bool acquire(const std::atomic<bool>& cancel);
  void release();

  LlmSettings m_settings;
  std::string m_url;
  std::mutex m_mutex;
  std::condition_variable m_slot_free;
  uint32_t m_in_flight = 0;
  std::atomic<bool> m_tools_refused{false};
};

} // namespace hone::agent
