// honed's configuration: /etc/hone/hone.toml (config/hone.toml documents every key), then HONE_*
// environment variables, then command-line flags. Unknown keys and bad values are errors that
// name the key, the file and the line.
#pragma once

#include "common/result.hpp"

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hone::config {

struct ServerConfig {
  std::string socket = "/run/hone/hone.sock";
  uint32_t socket_mode = 0660;       // written in the file as a string of octal digits: "0660"
  std::string socket_group;          // group owning the socket; empty: the daemon's
  std::vector<uint32_t> allowed_uids; // peers allowed besides root and the daemon's own uid
  std::vector<uint32_t> allowed_gids; // peers whose primary group is one of these are allowed
  uint32_t max_connections = 4096;
  uint32_t max_frame_bytes = 4u << 20;      // at most the protocol's limit
  uint32_t max_queued_bytes = 8u << 20;     // per connection, output waiting for a slow peer
  uint32_t handshake_timeout_ms = 5000;
  uint32_t report_interval_ms = 2000;       // told to shims in hello_ack
  bool operator==(const ServerConfig&) const = default;
};

// The store's remote tier (store/README.md, "Remote tier"): verified variants shared between
// hosts through Redis or an HTTP object store. Whatever is fetched is validated here first.
struct RemoteConfig {
  std::vector<std::string> urls;          // redis://..., http(s)://...; attributes after '|'
  uint32_t connect_timeout_ms = 1000;
  uint32_t timeout_ms = 3000;             // a whole request
  uint32_t max_object_mb = 64;
  std::filesystem::path key_file;         // fleet key: signs what is published, checks what is fetched
  bool require_signature = false;         // drop unsigned or badly signed objects unvalidated
  uint32_t tombstone_interval_s = 60;     // look up tombstones of served variants; 0: never
  bool operator==(const RemoteConfig&) const = default;
};

struct StoreConfig {
  std::filesystem::path state_dir = "/var/lib/hone";
  RemoteConfig remote;
  bool operator==(const StoreConfig&) const = default;
};

struct WorkerConfig {
  std::string driver = "libcuda.so.1"; // the libcuda.so.1 workers load (a path or a soname)
  uint32_t start_timeout_s = 30;       // a worker that has not said hello by then is replaced
  bool operator==(const WorkerConfig&) const = default;
};

struct LogConfig {
  std::string level = "info"; // trace, debug, info, warn, error, off
  bool operator==(const LogConfig&) const = default;
};

struct MetricsConfig {
  std::string listen; // "127.0.0.1:9464" to serve /metrics over TCP (loopback only); empty: off
  bool operator==(const MetricsConfig&) const = default;
};

struct OptimizerConfig {
  bool enabled = true;              // run the built-in strategies on hot kernels
  uint32_t hot_min_launches = 100;  // launches (all processes) before a kernel is worth optimizing
  uint32_t hot_top = 8;             // only the top kernels by estimated GPU time
  double gpu_share = 0.25;          // most of the GPU's time validation and benchmarks may take
  double pause_load = 0.9;          // no validation while the applications keep the GPU this busy
  bool operator==(const OptimizerConfig&) const = default;
};

struct CaptureConfig {
  uint32_t captures_per_kernel = 2; // launches captured per kernel, validated on each
  uint32_t max_mb = 256;            // one capture's buffers; larger launches are not captured
  uint32_t total_mb = 1024;         // all captures kept in memory, over all kernels
  bool with_outputs = false;        // also copy the buffers right after the captured launch
  bool persist = false;             // keep captures on disk (0600, state_dir/captures)
  uint32_t timeout_s = 60;          // how long to wait for a launch to capture
  bool operator==(const CaptureConfig&) const = default;
};

struct ValidationConfig {
  double min_speedup = 1.05;        // a variant must be at least this much faster ...
  double noise_factor = 3;          // ... by more than this many times the measured noise
  uint32_t warmup = 3;
  uint32_t runs = 21;               // measured runs of each at most ...
  uint32_t min_runs = 5;            // ... and at least, stopping between once the verdict is certain
  double suspicious_speedup = 10;   // faster than this is re-validated and re-measured first
  uint32_t job_timeout_s = 120;     // a job longer than this kills its worker (timeout verdict)
  double f32_rel = 1e-5, f32_abs = 1e-6;
  double f64_rel = 1e-12, f64_abs = 1e-14;
  double f16_rel = 1e-2, f16_abs = 1e-3;
  uint32_t shadow_every = 10000;    // served launches between shadow checks, per process; 0: off
  bool static_checks = true;        // refuse module-scope writes, precision downgrades, ... early
  bool gpu_scrub = true;            // seeded garbage in shared and local memory before each run
  bool operator==(const ValidationConfig&) const = default;
};

// The LLM strategy (agent/llm.hpp): a model behind an OpenAI-compatible chat-completions
// endpoint. The daemon resolves the key (agent::resolve_api_key) from api_key_env or api_key_file.
struct LlmConfig {
  bool enabled = false;
  std::string base_url = "http://127.0.0.1:8000/v1";
  std::string model;
  std::string api_key_env;           // the name of the variable holding the key
  std::filesystem::path api_key_file; // or a file holding it (0600, owned by honed's user)
  double connect_timeout_s = 5;
  double request_timeout_s = 120;
  uint32_t max_turns = 4;
  uint32_t max_reply_tokens = 4096;
  uint32_t token_budget_per_kernel = 60000;
  double wall_budget_s_per_kernel = 900;
  uint32_t concurrency = 2;
  uint32_t max_reply_bytes = 1u << 20;
  double temperature = 0.2;
  uint32_t samples_per_turn = 1;
  uint32_t examples = 0;
  uint32_t tool_calls_per_turn = 4;
  bool sass_kernels = false;
  bool operator==(const LlmConfig&) const = default;
};

// The strategies honed's agent knows, by name (agent/README.md).
inline constexpr const char* k_strategy_names[] = {"specialize", "launch_bounds", "launch_shape",
                                                   "readonly",   "rejit",         "llm"};

struct AgentConfig {
  // Which strategies run, by name; default all of them ("llm" also needs agent.llm.enabled).
  std::vector<std::string> strategies{std::begin(k_strategy_names), std::end(k_strategy_names)};
  LlmConfig llm;
  bool operator==(const AgentConfig&) const = default;
};

struct Config {
  ServerConfig server;
  StoreConfig store;
  WorkerConfig worker;
  LogConfig log;
  MetricsConfig metrics;
  OptimizerConfig optimizer;
  CaptureConfig capture;
  ValidationConfig validation;
  AgentConfig agent;
  std::filesystem::path source; // the file it was read from, empty for defaults only
  bool operator==(const Config&) const = default;
};

// Command-line values that override the file and the environment (empty: not given). Errors name
// them as honed's flags: --socket, --state-dir, --driver, --log-level.
struct Overrides {
  std::optional<std::string> socket;
  std::optional<std::filesystem::path> state_dir;
  std::optional<std::string> driver;
  std::optional<std::string> log_level;
};

constexpr const char* k_default_path = "/etc/hone/hone.toml";

// Where each key's value came from, by "section.key": "FILE:LINE:COLUMN", "environment variable
// NAME" or "option --flag". A key not listed has its default.
using Provenance = std::map<std::string, std::string>;

// Load `path` (a missing file is an error unless `optional_file`), apply the HONE_* variables of
// `env` (name -> value) and then `overrides`, and validate the result. `provenance` (optional)
// gets where each value that is not a default came from.
Result<Config> load(const std::filesystem::path& path, bool optional_file,
                    const std::map<std::string, std::string>& env, const Overrides& overrides,
                    Provenance* provenance = nullptr);

// One key of a configuration, for `honectl config`: its value as TOML, where it came from
// ("default" when it has its default), and whether the value is withheld (secret keys show
// only whether they are set).
struct Setting {
  std::string section;
  std::string name;
  std::string value;
  std::string origin;
  bool secret = false;
};
// Every key of `c`, in the order of hone.toml.
std::vector<Setting> settings(const Config& c, const Provenance& provenance);

// Parse TOML text directly (tests); `name` labels errors.
Result<Config> parse(std::string_view toml, const std::string& name);

// The process environment as a map (only HONE_* entries).
std::map<std::string, std::string> environment();

// The environment variables load() reads, with the key each overrides (for --help and docs):
// HONE_<SECTION>_<KEY> for every key, then the short aliases (HONE_SOCKET, HONE_STATE_DIR).
const std::vector<std::pair<std::string, std::string>>& environment_keys();

// The documented default configuration: every key commented out with its default value, its
// description and its environment variable. config/hone.toml is this text (config_test checks).
std::string documented_toml();

} // namespace hone::config
