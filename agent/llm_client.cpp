// The chat-completions client of the LLM strategy: one libcurl transfer per request, driven
// through a multi handle so that a cancelled session stops waiting within k_poll_ms, however long
// the server takes.
#include "agent/llm.hpp"

#include "agent/llm_answer.hpp"

#include "common/version.hpp"

#include <curl/curl.h>
#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace hone::agent {

namespace {

using json = nlohmann::json;

// How often a request in flight looks at its cancel flag.
constexpr int k_poll_ms = 50;
// No API key file is larger than this.
constexpr size_t k_max_key_file_bytes = 64 << 10;

// curl_global_init is not thread-safe and must run once before any other libcurl call.
CURLcode global_init() {
  static std::once_flag once;
  static CURLcode result = CURLE_OK;
  std::call_once(once, [] { result = curl_global_init(CURL_GLOBAL_DEFAULT); });
  return result;
}

std::string_view trim(std::string_view s) {
  const char* space = " \t\r\n";
  size_t b = s.find_first_not_of(space);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(space) - b + 1);
}

// A key goes into an HTTP header: anything but visible ASCII could split or forge headers.
bool printable_key(std::string_view key) {
  return std::all_of(key.begin(), key.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

Result<std::string> checked_key(std::string_view raw, const std::string& origin) {
  std::string_view key = trim(raw);
  if (key.empty()) return make_error(origin + " is empty");
  if (!printable_key(key)) {
    return make_error(origin + " holds spaces, line breaks or other characters that cannot go "
                               "into an HTTP header; it must hold the key alone");
  }
  return std::string(key);
}

std::string mode_text(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", unsigned(mode & 07777));
  return buf;
}

struct EasyDeleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct MultiDeleter {
  void operator()(CURLM* m) const { curl_multi_cleanup(m); }
};
struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};

// The body of a reply as it arrives, refused past its limit.
struct Sink {
  std::string body;
  uint64_t limit = 0;
  bool too_large = false;
};

size_t on_data(char* data, size_t size, size_t count, void* user) {
  auto* sink = static_cast<Sink*>(user);
  size_t n = size * count;
  if (sink->body.size() + n > sink->limit) {
    sink->too_large = true;
    return 0; // anything but n aborts the transfer (CURLE_WRITE_ERROR)
  }
  sink->body.append(data, n);
  return n;
}

Error failure(ChatFailure kind, std::string message) {
  return make_error(std::move(message), static_cast<int>(kind));
}

// The HTTP statuses worth a retry: the server is overloaded or failed, not the request.
bool transient_status(long status) {
  return status == 408 || status == 429 || status >= 500;
}

// The tools a turn offers (agent/README.md, "LLM tools"): both take the complete source.
json tool_definitions() {
  const json source = {
      {"type", "object"},
      {"properties",
       {{"source",
         {{"type", "string"},
          {"description", "The complete CUDA source, with the extern \"C\" __global__ void "
                          "hone_candidate(...) kernel taking the original's parameters."}}}}},
      {"required", {"source"}}};
  return json::array(
      {{{"type", "function"},
        {"function",
         {{"name", "compile"},
          {"description",
           "Compile a CUDA source with NVRTC as a candidate is compiled, and load it. Returns the "
           "compiler's log, or that it compiled and takes the original's parameters, with the "
           "registers, local and shared memory it uses. Nothing is run."},
          {"parameters", source}}}},
       {{"type", "function"},
        {"function",
         {{"name", "check"},
          {"description",
           "Compile a CUDA source and validate hone_candidate against the original on one "
           "captured launch, as the final validation does, without timing it. Returns that it "
           "is correct, or what is wrong: the compiler's log, a mismatch (buffer, element and "
           "both values), an out-of-bounds access, a race."},
          {"parameters", source}}}}});
}

json message_json(const ChatMessage& m) {
  json out = {{"role", m.role}, {"content", m.content}};
  if (!m.tool_calls.empty()) {
    out["tool_calls"] = json::array();
    for (const auto& c : m.tool_calls) {
      out["tool_calls"].push_back(
          {{"id", c.id},
           {"type", "function"},
           {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    }
  }
  if (!m.tool_call_id.empty()) out["tool_call_id"] = m.tool_call_id;
  return out;
}

// Does a refusal speak of tools ("tool choice", "tools param requires --jinja", "does not
// support tools")?
bool names_tools(std::string_view message) {
  std::string lower(message);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  return lower.find("tool") != std::string::npos;
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

} // namespace

Result<std::string> resolve_api_key(const std::string& api_key_env,
                                    const std::string& api_key_file) {
  if (!api_key_env.empty() && !api_key_file.empty()) {
    return make_error("both agent.llm.api_key_env and agent.llm.api_key_file are set; set one");
  }
  if (!api_key_env.empty()) {
    const char* value = std::getenv(api_key_env.c_str());
    if (!value || !*value) {
      return make_error("the environment variable " + api_key_env +
                        " (agent.llm.api_key_env) that should hold the API key is not set");
    }
    return checked_key(value, "the environment variable " + api_key_env);
  }
  if (api_key_file.empty()) return std::string();

  const std::string what = "the API key file " + api_key_file + " (agent.llm.api_key_file)";
  int fd = ::open(api_key_file.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return make_error("cannot read " + what + ": " + std::strerror(errno));
  struct stat st {};
  std::string problem;
  std::string text;
  if (::fstat(fd, &st) != 0) {
    problem = std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    problem = "it is not a regular file";
  } else if (st.st_uid != ::geteuid()) {
    problem = "it is owned by uid " + std::to_string(st.st_uid) + ", not by this user (uid " +
              std::to_string(::geteuid()) + ")";
  } else if ((st.st_mode & 077) != 0) {
    // Readable by others means the key is no longer a secret of this service.
    problem = "its mode is " + mode_text(st.st_mode) + "; it must be 0600 or stricter (chmod 600 " +
              api_key_file + ")";
  } else if (uint64_t(st.st_size) > k_max_key_file_bytes) {
    problem = "it is larger than 64 KiB, which no key is";
  } else {
    char buf[4096];
    for (;;) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        problem = std::strerror(errno);
        break;
      }
      if (n == 0) break;
      text.append(buf, size_t(n));
      if (text.size() > k_max_key_file_bytes) {
        problem = "it is larger than 64 KiB, which no key is";
        break;
      }
    }
  }
  ::close(fd);
  if (!problem.empty()) return make_error("cannot use " + what + ": " + problem);
  return checked_key(text, what);
}

LlmClient::LlmClient(LlmSettings settings) : m_settings(std::move(settings)) {
  std::string base = m_settings.base_url;
  while (!base.empty() && base.back() == '/') base.pop_back();
  m_url = base + "/chat/completions";
  m_settings.concurrency = std::max<uint32_t>(1, m_settings.concurrency);
}

std::string LlmClient::redact(std::string_view text) const {
  const std::string& key = m_settings.api_key;
  std::string out(text);
  if (key.empty()) return out;
  for (size_t at = out.find(key); at != std::string::npos; at = out.find(key, at)) {
    out.replace(at, key.size(), "[redacted]");
    at += std::strlen("[redacted]");
  }
  return out;
}

std::string LlmClient::excerpt(std::string_view text, size_t max_bytes) const {
  std::string clean;
  for (char ch : redact(text)) {
    auto c = static_cast<unsigned char>(ch);
    char out = c < 0x20 || c == 0x7f ? ' ' : ch;
    if (out == ' ' && (clean.empty() || clean.back() == ' ')) continue;
    clean += out;
  }
  while (!clean.empty() && clean.back() == ' ') clean.pop_back();
  if (clean.size() <= max_bytes) return clean;
  size_t cut = max_bytes;
  // Never end inside a UTF-8 sequence.
  while (cut > 0 && (static_cast<unsigned char>(clean[cut]) & 0xc0) == 0x80) --cut;
  return clean.substr(0, cut) + "...";
}

bool LlmClient::acquire(const std::atomic<bool>& cancel) {
  std::unique_lock lock(m_mutex);
  while (m_in_flight >= m_settings.concurrency) {
    if (cancel) return false;
    // The cancel flag belongs to the caller and signals no condition variable: look at it often.
    m_slot_free.wait_for(lock, std::chrono::milliseconds(k_poll_ms));
  }
  if (cancel) return false;
  ++m_in_flight;
  return true;
}

void LlmClient::release() {
  {
    std::lock_guard lock(m_mutex);
    --m_in_flight;
  }
  m_slot_free.notify_one();
}

Result<ChatReply> LlmClient::chat(const std::vector<ChatMessage>& messages,
                                  const std::atomic<bool>& cancel, double timeout_s, bool tools) {
  if (CURLcode init = global_init(); init != CURLE_OK) {
    return failure(ChatFailure::transport,
                   std::string("libcurl failed to initialize: ") + curl_easy_strerror(init));
  }
  if (!acquire(cancel)) return failure(ChatFailure::cancelled, "cancelled");
  struct Slot {
    LlmClient* client;
    ~Slot() { client->release(); }
  } slot{this};
  const auto start = std::chrono::steady_clock::now();
  tools = tools && !m_tools_refused;
  auto r = chat_waiting(messages, cancel, timeout_s, tools);
  if (!r && tools && failure_of(r.error()) == ChatFailure::refused &&
      names_tools(r.error().message)) {
    // The endpoint does not take tool calls: the turn loop without them, from now on.
    if (!m_tools_refused.exchange(true)) {
      spdlog::info("llm: the endpoint refused the tools compile and check ({}); asking without "
                   "them from now on",
                   excerpt(r.error().message, 160));
    }
    double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return chat_waiting(messages, cancel, timeout_s - spent, false);
  }
  return r;
}

Result<ChatReply> LlmClient::chat_waiting(const std::vector<ChatMessage>& messages,
                                          const std::atomic<bool>& cancel, double timeout_s,
                                          bool tools) {
  const auto start = std::chrono::steady_clock::now();
  double retry_after = 0;
  auto r = chat_once(messages, cancel, timeout_s, &retry_after, tools);
  if (r || failure_of(r.error()) != ChatFailure::transport || retry_after <= 0) return r;
  // Rate-limited (429 or 503 with Retry-After): wait as told, once, when the time allows it.
  double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (spent + retry_after >= timeout_s) return r;
  spdlog::info("llm: {}; retrying in {} s as the server asks (Retry-After)",
               excerpt(r.error().message, 120), seconds_text(retry_after));
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                         std::chrono::duration<double>(retry_after));
  while (std::chrono::steady_clock::now() < until) {
    if (cancel) return failure(ChatFailure::cancelled, "cancelled");
    std::this_thread::sleep_for(std::chrono::milliseconds(k_poll_ms));
  }
  return chat_once(messages, cancel, timeout_s - spent - retry_after, nullptr, tools);
}

Result<ChatReply> LlmClient::chat_once(const std::vector<ChatMessage>& messages,
                                       const std::atomic<bool>& cancel, double timeout_s,
                                       double* retry_after, bool tools) {
  json request = {{"model", m_settings.model},
                  {"max_tokens", m_settings.max_reply_tokens},
                  {"temperature", m_settings.temperature},
                  {"messages", json::array()}};
  // Several answers in one request where the endpoint supports it (others send one: the session
  // asks again for the rest).
  if (m_settings.samples_per_turn > 1) request["n"] = m_settings.samples_per_turn;
  for (const auto& m : messages) request["messages"].push_back(message_json(m));
  if (tools) {
    request["tools"] = tool_definitions();
    request["tool_choice"] = "auto";
  }
  // A kernel's source may hold bytes that are not UTF-8; replace them rather than fail.
  const std::string body = request.dump(-1, ' ', false, json::error_handler_t::replace);

  std::unique_ptr<curl_slist, SlistDeleter> headers;
  auto add_header = [&](const std::string& h) {
    headers.reset(curl_slist_append(headers.release(), h.c_str()));
  };
  add_header("Content-Type: application/json");
  add_header("Accept: application/json");
  add_header("Expect:"); // no 100-continue round trip before a large prompt
  if (!m_settings.api_key.empty()) add_header("Authorization: Bearer " + m_settings.api_key);
  if (!headers) return failure(ChatFailure::transport, "libcurl could not build the headers");

  const double limit_s = std::max(0.001, std::min(m_settings.request_timeout_s, timeout_s));
  Sink sink;
  sink.limit = m_settings.max_reply_bytes;
  char curl_error[CURL_ERROR_SIZE] = {};

  // Declared after everything the transfer points to, so that it is cleaned up first.
  std::unique_ptr<CURL, EasyDeleter> easy(curl_easy_init());
  std::unique_ptr<CURLM, MultiDeleter> multi(curl_multi_init());
  if (!easy || !multi) return failure(ChatFailure::transport, "libcurl could not start a request");
  CURL* e = easy.get();
  curl_easy_setopt(e, CURLOPT_URL, m_url.c_str());
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_POST, 1L);
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.size()));
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(e, CURLOPT_USERAGENT, (std::string("hone/") + k_version).c_str());
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                   long(std::ceil(std::min(m_settings.connect_timeout_s, limit_s) * 1000)));
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, long(std::ceil(limit_s * 1000)));
  curl_easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(m_settings.max_reply_bytes));
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, curl_error);

  spdlog::debug("llm: POST {} ({} bytes, {} messages)", redact(m_url), body.size(),
                messages.size());
  curl_multi_add_handle(multi.get(), e);
  struct Attached {
    CURLM* multi;
    CURL* easy;
    ~Attached() { curl_multi_remove_handle(multi, easy); }
  } attached{multi.get(), e};

  CURLcode result = CURLE_OK;
  for (;;) {
    int running = 0;
    if (CURLMcode m = curl_multi_perform(multi.get(), &running); m != CURLM_OK) {
      return failure(ChatFailure::transport,
                     std::string("libcurl failed: ") + curl_multi_strerror(m));
    }
    if (running == 0) {
      int left = 0;
      CURLMsg* msg = curl_multi_info_read(multi.get(), &left);
      result = msg && msg->msg == CURLMSG_DONE ? msg->data.result : CURLE_RECV_ERROR;
      break;
    }
    if (cancel) return failure(ChatFailure::cancelled, "cancelled");
    curl_multi_poll(multi.get(), nullptr, 0, k_poll_ms, nullptr);
  }

  if (sink.too_large || result == CURLE_FILESIZE_EXCEEDED) {
    return failure(ChatFailure::reply, "reply larger than " +
                                           std::to_string(m_settings.max_reply_bytes) +
                                           " bytes (agent.llm.max_reply_bytes)");
  }
  if (result == CURLE_OPERATION_TIMEDOUT) {
    return failure(ChatFailure::transport,
                   redact("no reply from " + m_url + " within " + seconds_text(limit_s) + " s" +
                          (curl_error[0] ? std::string(" (") + curl_error + ")" : "")));
  }
  if (result != CURLE_OK) {
    std::string why = curl_error[0] ? curl_error : curl_easy_strerror(result);
    return failure(ChatFailure::transport, redact("request to " + m_url + " failed: " + why));
  }

  long status = 0;
  curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
  if (status < 200 || status >= 300) {
    std::string message = "HTTP " + std::to_string(status) + " from " + redact(m_url);
    if (status >= 300 && status < 400) message += " (redirects are not followed)";
    std::string snippet = excerpt(sink.body);
    if (!snippet.empty()) message += ": " + snippet;
    // Retry-After in seconds (the HTTP-date form is not followed), at most a minute.
    curl_header* h = nullptr;
    if (retry_after && (status == 429 || status == 503) &&
        curl_easy_header(e, "Retry-After", 0, CURLH_HEADER, -1, &h) == CURLHE_OK && h &&
        h->value) {
      char* end = nullptr;
      double s = std::strtod(h->value, &end);
      if (end != h->value && s > 0 && s <= 60) {
        *retry_after = s;
        message += " (Retry-After: " + seconds_text(s) + " s)";
      }
    }
    return failure(transient_status(status) ? ChatFailure::transport : ChatFailure::refused,
                   std::move(message));
  }

  auto parsed = parse_chat_reply(sink.body, m_settings.samples_per_turn, body.size());
  if (!parsed) {
    return failure(ChatFailure::reply, parsed.error().message + ": " + excerpt(sink.body));
  }
  ChatReply out = std::move(*parsed);
  // A hostile server may echo the Authorization header back: nothing it says keeps the key.
  out.content = redact(out.content);
  for (auto& more : out.more_choices) more = redact(more);
  for (auto& call : out.tool_calls) call.arguments = redact(call.arguments);
  spdlog::debug("llm: HTTP {}, {} bytes, {} tokens", status, sink.body.size(), out.total_tokens);
  return out;
}

} // namespace hone::agent
