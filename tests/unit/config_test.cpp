// config/: defaults, the shipped hone.toml, every error message, and the layering
// file < HONE_* environment < command-line flags.
#include "common/protocol.hpp"
#include "config/config.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <unistd.h>

namespace {

using namespace hone;
using namespace hone::config;
namespace fs = std::filesystem;

const fs::path k_shipped = fs::path(HONE_SOURCE_DIR) / "config" / "hone.toml";

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A Config equal to the defaults except for where it came from.
Config without_source(Config c) {
  c.source.clear();
  return c;
}

Config parsed(const std::string& toml) {
  auto c = parse(toml, "hone.toml");
  EXPECT_TRUE(c) << c.error().message;
  return c ? without_source(*c) : Config{};
}

std::string parse_error(const std::string& toml) {
  auto c = parse(toml, "hone.toml");
  EXPECT_FALSE(c) << "accepted:\n" << toml;
  return c ? std::string() : c.error().message;
}

Result<Config> load_env(const std::map<std::string, std::string>& env, const Overrides& o = {}) {
  return load("/nonexistent/hone.toml", true, env, o);
}

std::string env_error(const std::map<std::string, std::string>& env) {
  auto c = load_env(env);
  EXPECT_FALSE(c);
  return c ? std::string() : c.error().message;
}

// A temporary directory, removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "hone-config-test-XXXXXX").string();
    path = ::mkdtemp(t.data());
  }
  ~TempDir() { fs::remove_all(path); }
  fs::path write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name, std::ios::binary) << text;
    return path / name;
  }
};

const std::string k_server_keys =
    "known keys: socket, socket_mode, socket_group, allowed_uids, allowed_gids, max_connections, "
    "max_frame_bytes, max_queued_bytes, handshake_timeout_ms, report_interval_ms";
const std::string k_sections =
    "server, store, store.remote, worker, log, metrics, optimizer, capture, validation, agent, "
    "agent.llm";

TEST(ConfigDefaults, AreTheDocumentedOnes) {
  Config c;
  EXPECT_EQ(c.server.socket, "/run/hone/hone.sock");
  EXPECT_EQ(c.server.socket_mode, 0660u);
  EXPECT_EQ(c.server.socket_group, "");
  EXPECT_TRUE(c.server.allowed_uids.empty());
  EXPECT_TRUE(c.server.allowed_gids.empty());
  EXPECT_EQ(c.server.max_connections, 4096u);
  EXPECT_EQ(c.server.max_frame_bytes, proto::k_max_payload);
  EXPECT_EQ(c.server.max_queued_bytes, 8u << 20);
  EXPECT_EQ(c.server.handshake_timeout_ms, 5000u);
  EXPECT_EQ(c.server.report_interval_ms, 2000u);
  EXPECT_EQ(c.store.state_dir, "/var/lib/hone");
  EXPECT_EQ(c.worker.driver, "libcuda.so.1");
  EXPECT_EQ(c.log.level, "info");
  EXPECT_EQ(c.metrics.listen, "");
  EXPECT_TRUE(c.optimizer.enabled);
  EXPECT_EQ(c.optimizer.hot_min_launches, 100u);
  EXPECT_EQ(c.optimizer.hot_top, 8u);
  EXPECT_EQ(c.capture.captures_per_kernel, 2u);
  EXPECT_EQ(c.capture.max_mb, 256u);
  EXPECT_EQ(c.capture.total_mb, 1024u);
  EXPECT_FALSE(c.capture.with_outputs);
  EXPECT_FALSE(c.capture.persist);
  EXPECT_EQ(c.capture.timeout_s, 60u);
  EXPECT_EQ(c.validation.min_speedup, 1.05);
  EXPECT_EQ(c.validation.noise_factor, 3.0);
  EXPECT_EQ(c.validation.warmup, 3u);
  EXPECT_EQ(c.validation.runs, 21u);
  EXPECT_EQ(c.validation.min_runs, 5u);
  EXPECT_EQ(c.validation.suspicious_speedup, 10.0);
  EXPECT_EQ(c.validation.job_timeout_s, 120u);
  EXPECT_EQ(c.validation.f32_rel, 1e-5);
  EXPECT_EQ(c.validation.f32_abs, 1e-6);
  EXPECT_EQ(c.validation.f64_rel, 1e-12);
  EXPECT_EQ(c.validation.f64_abs, 1e-14);
  EXPECT_EQ(c.validation.f16_rel, 1e-2);
  EXPECT_EQ(c.validation.f16_abs, 1e-3);
  EXPECT_FALSE(c.agent.llm.enabled);
  EXPECT_EQ(c.agent.llm.base_url, "http://127.0.0.1:8000/v1");
  EXPECT_EQ(c.agent.llm.model, "");
  EXPECT_EQ(c.agent.llm.api_key_env, "");
  EXPECT_EQ(c.agent.llm.api_key_file, "");
  EXPECT_EQ(c.agent.llm.connect_timeout_s, 5.0);
  EXPECT_EQ(c.agent.llm.request_timeout_s, 120.0);
  EXPECT_EQ(c.agent.llm.max_turns, 4u);
  EXPECT_EQ(c.agent.llm.max_reply_tokens, 4096u);
  EXPECT_EQ(c.agent.llm.token_budget_per_kernel, 60000u);
  EXPECT_EQ(c.agent.llm.wall_budget_s_per_kernel, 900.0);
  EXPECT_EQ(c.agent.llm.concurrency, 2u);
  EXPECT_EQ(c.agent.llm.max_reply_bytes, 1u << 20);
  EXPECT_EQ(c.agent.llm.temperature, 0.2);
  EXPECT_EQ(std::string(k_default_path), "/etc/hone/hone.toml");
}

TEST(ConfigDefaults, EmptyFileGivesDefaults) {
  EXPECT_EQ(parsed(""), Config{});
  EXPECT_EQ(parsed("[server]\n[store]\n[worker]\n[log]\n[metrics]\n[optimizer]\n[capture]\n"
                   "[validation]\n[agent.llm]\n"),
            Config{});
  auto c = parse("", "some.toml");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->source, "some.toml");
}

TEST(ShippedFile, LoadsToTheDefaults) {
  auto c = load(k_shipped, false, {}, {});
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->source, k_shipped);
  EXPECT_EQ(without_source(*c), Config{});
}

TEST(ShippedFile, IsTheDocumentedToml) {
  std::string shipped = read(k_shipped);
  std::string expected = documented_toml();
  if (shipped != expected) {
    fs::path out = fs::path(HONE_BINARY_DIR) / "tests" / "hone.toml.expected";
    std::ofstream(out, std::ios::binary) << expected;
    FAIL()
        << "config/hone.toml differs from documented_toml() (the key table in config/config.cpp).\n"
        << "Review and take the generated one with: cp " << out.string() << " "
        << k_shipped.string();
  }
}

// Independent of documented_toml(): every key of the table appears once in hone.toml, commented
// out in its section, and uncommenting them all still gives the defaults.
TEST(ShippedFile, ListsEveryKeyWithItsDefault) {
  std::set<std::string> table;
  for (const auto& [var, key] : environment_keys()) table.insert(key);

  std::istringstream in(read(k_shipped));
  std::string line, section, uncommented;
  std::multiset<std::string> listed;
  while (std::getline(in, line)) {
    if (line.size() > 2 && line.front() == '[' && line.back() == ']')
      section = line.substr(1, line.size() - 2);
    auto eq = line.find(" = ");
    if (line.size() > 1 && line[0] == '#' && line[1] != ' ' && eq != std::string::npos) {
      listed.insert(section + "." + line.substr(1, eq - 1));
      line = line.substr(1);
    }
    uncommented += line + "\n";
  }
  EXPECT_EQ(std::set<std::string>(listed.begin(), listed.end()), table);
  EXPECT_EQ(listed.size(), table.size()) << "a key is listed twice";
  EXPECT_EQ(parsed(uncommented), Config{}) << uncommented;
}

TEST(EnvironmentKeys, NameEveryKeyAndTheAliases) {
  const auto& keys = environment_keys();
  std::map<std::string, std::string> vars(keys.begin(), keys.end());
  EXPECT_EQ(vars.size(), keys.size()) << "two keys share an environment variable";
  for (const auto& [var, key] : keys) {
    if (var == "HONE_SOCKET" || var == "HONE_STATE_DIR") continue;
    std::string expected = "HONE_";
    for (char c : key)
      expected += c == '.' ? '_' : char(std::toupper(static_cast<unsigned char>(c)));
    EXPECT_EQ(var, expected);
  }
  EXPECT_EQ(vars.at("HONE_SOCKET"), "server.socket");
  EXPECT_EQ(vars.at("HONE_STATE_DIR"), "store.state_dir");
  for (const char* v : {"HONE_SERVER_SOCKET",
                        "HONE_SERVER_SOCKET_MODE",
                        "HONE_SERVER_SOCKET_GROUP",
                        "HONE_SERVER_ALLOWED_UIDS",
                        "HONE_SERVER_ALLOWED_GIDS",
                        "HONE_SERVER_MAX_CONNECTIONS",
                        "HONE_SERVER_MAX_FRAME_BYTES",
                        "HONE_SERVER_MAX_QUEUED_BYTES",
                        "HONE_SERVER_HANDSHAKE_TIMEOUT_MS",
                        "HONE_SERVER_REPORT_INTERVAL_MS",
                        "HONE_STORE_STATE_DIR",
                        "HONE_WORKER_DRIVER",
                        "HONE_WORKER_START_TIMEOUT_S",
                        "HONE_LOG_LEVEL",
                        "HONE_METRICS_LISTEN",
                        "HONE_OPTIMIZER_ENABLED",
                        "HONE_OPTIMIZER_HOT_MIN_LAUNCHES",
                        "HONE_OPTIMIZER_HOT_TOP",
                        "HONE_CAPTURE_CAPTURES_PER_KERNEL",
                        "HONE_CAPTURE_MAX_MB",
                        "HONE_CAPTURE_TOTAL_MB",
                        "HONE_OPTIMIZER_GPU_SHARE",
                        "HONE_OPTIMIZER_PAUSE_LOAD",
                        "HONE_CAPTURE_WITH_OUTPUTS",
                        "HONE_CAPTURE_PERSIST",
                        "HONE_CAPTURE_TIMEOUT_S",
                        "HONE_VALIDATION_MIN_SPEEDUP",
                        "HONE_VALIDATION_NOISE_FACTOR",
                        "HONE_VALIDATION_WARMUP",
                        "HONE_VALIDATION_RUNS",
                        "HONE_VALIDATION_MIN_RUNS",
                        "HONE_VALIDATION_SUSPICIOUS_SPEEDUP",
                        "HONE_VALIDATION_JOB_TIMEOUT_S",
                        "HONE_VALIDATION_F32_REL",
                        "HONE_VALIDATION_F32_ABS",
                        "HONE_VALIDATION_F64_REL",
                        "HONE_VALIDATION_F64_ABS",
                        "HONE_VALIDATION_F16_REL",
                        "HONE_VALIDATION_F16_ABS",
                        "HONE_VALIDATION_SHADOW_EVERY",
                        "HONE_VALIDATION_STATIC_CHECKS",
                        "HONE_VALIDATION_GPU_SCRUB",
                        "HONE_AGENT_LLM_ENABLED",
                        "HONE_AGENT_LLM_BASE_URL",
                        "HONE_AGENT_LLM_MODEL",
                        "HONE_AGENT_LLM_API_KEY_ENV",
                        "HONE_AGENT_LLM_API_KEY_FILE",
                        "HONE_AGENT_LLM_CONNECT_TIMEOUT_S",
                        "HONE_AGENT_LLM_REQUEST_TIMEOUT_S",
                        "HONE_AGENT_LLM_MAX_TURNS",
                        "HONE_AGENT_LLM_MAX_REPLY_TOKENS",
                        "HONE_AGENT_LLM_TOKEN_BUDGET_PER_KERNEL",
                        "HONE_AGENT_LLM_WALL_BUDGET_S_PER_KERNEL",
                        "HONE_AGENT_LLM_CONCURRENCY",
                        "HONE_AGENT_LLM_MAX_REPLY_BYTES",
                        "HONE_AGENT_LLM_TEMPERATURE",
                        "HONE_AGENT_LLM_SAMPLES_PER_TURN",
                        "HONE_AGENT_LLM_EXAMPLES",
                        "HONE_AGENT_LLM_TOOL_CALLS_PER_TURN",
                        "HONE_AGENT_LLM_SASS_KERNELS"}) {
    EXPECT_TRUE(vars.count(v)) << v;
  }
  EXPECT_EQ(keys.size(), 69u);
}

TEST(ConfigFile, SetsEveryKey) {
  Config c = parsed(R"(
[server]
socket = "/tmp/h.sock"
socket_mode = "0600"
socket_group = "video"
allowed_uids = [1000, 1001]
allowed_gids = [44]
max_connections = 10
max_frame_bytes = 65536
max_queued_bytes = 1048576
handshake_timeout_ms = 100
report_interval_ms = 3600000

[store]
state_dir = "/srv/hone"

[worker]
driver = "/opt/hone/lib/emu/libcuda.so.1"
start_timeout_s = 90

[log]
level = "debug"

[metrics]
listen = "127.0.0.1:9464"
)");
  EXPECT_EQ(c.server.socket, "/tmp/h.sock");
  EXPECT_EQ(c.server.socket_mode, 0600u);
  EXPECT_EQ(c.server.socket_group, "video");
  EXPECT_EQ(c.server.allowed_uids, (std::vector<uint32_t>{1000, 1001}));
  EXPECT_EQ(c.server.allowed_gids, (std::vector<uint32_t>{44}));
  EXPECT_EQ(c.server.max_connections, 10u);
  EXPECT_EQ(c.server.max_frame_bytes, 65536u);
  EXPECT_EQ(c.server.max_queued_bytes, 1048576u);
  EXPECT_EQ(c.server.handshake_timeout_ms, 100u);
  EXPECT_EQ(c.server.report_interval_ms, 3600000u);
  EXPECT_EQ(c.store.state_dir, "/srv/hone");
  EXPECT_EQ(c.worker.driver, "/opt/hone/lib/emu/libcuda.so.1");
  EXPECT_EQ(c.worker.start_timeout_s, 90u);
  EXPECT_EQ(c.log.level, "debug");
  EXPECT_EQ(c.metrics.listen, "127.0.0.1:9464");
}

TEST(ConfigFile, SetsTheOptimizerCaptureAndValidationKeys) {
  Config c = parsed(R"(
[optimizer]
enabled = false
hot_min_launches = 1000000000
hot_top = 1
gpu_share = 0.5
pause_load = 0

[capture]
captures_per_kernel = 64
max_mb = 65536
total_mb = 1048576
with_outputs = true
persist = true
timeout_s = 3600

[validation]
min_speedup = 1.2
noise_factor = 0
warmup = 0
runs = 3
min_runs = 3
suspicious_speedup = 1e6
job_timeout_s = 5
f32_rel = 1e-4
f32_abs = 2.5E-7
f64_rel = 0.0
f64_abs = 1
f16_rel = 0.05
shadow_every = 77
static_checks = false
gpu_scrub = false
f16_abs = -0.0
)");
  EXPECT_FALSE(c.optimizer.enabled);
  EXPECT_EQ(c.optimizer.hot_min_launches, 1000000000u);
  EXPECT_DOUBLE_EQ(c.optimizer.gpu_share, 0.5);
  EXPECT_DOUBLE_EQ(c.optimizer.pause_load, 0.0);
  EXPECT_EQ(c.optimizer.hot_top, 1u);
  EXPECT_EQ(c.capture.captures_per_kernel, 64u);
  EXPECT_EQ(c.capture.max_mb, 65536u);
  EXPECT_EQ(c.capture.total_mb, 1048576u);
  EXPECT_TRUE(c.capture.with_outputs);
  EXPECT_TRUE(c.capture.persist);
  EXPECT_EQ(c.capture.timeout_s, 3600u);
  EXPECT_EQ(c.validation.min_speedup, 1.2);
  EXPECT_EQ(c.validation.noise_factor, 0.0); // a TOML integer is a number too
  EXPECT_EQ(c.validation.warmup, 0u);
  EXPECT_EQ(c.validation.runs, 3u);
  EXPECT_EQ(c.validation.min_runs, 3u);
  EXPECT_EQ(c.validation.suspicious_speedup, 1e6);
  EXPECT_EQ(c.validation.job_timeout_s, 5u);
  EXPECT_EQ(c.validation.f32_rel, 1e-4);
  EXPECT_EQ(c.validation.f32_abs, 2.5e-7);
  EXPECT_EQ(c.validation.f64_rel, 0.0);
  EXPECT_EQ(c.validation.f64_abs, 1.0);
  EXPECT_EQ(c.validation.f16_rel, 0.05);
  EXPECT_EQ(c.validation.shadow_every, 77u);
  EXPECT_FALSE(c.validation.static_checks);
  EXPECT_FALSE(c.validation.gpu_scrub);
  EXPECT_EQ(c.validation.f16_abs, 0.0);
  EXPECT_FALSE(std::signbit(c.validation.f16_abs)); // -0.0 reads as 0
  EXPECT_EQ(parsed("[validation]\nmin_speedup = 2\n").validation.min_speedup, 2.0);
  EXPECT_EQ(parsed("[validation]\nmin_speedup = 1\n").validation.min_speedup, 1.0);
  EXPECT_EQ(parsed("[validation]\nmin_speedup = 100.0\n").validation.min_speedup, 100.0);
  EXPECT_EQ(parsed("validation = { min_speedup = 1.5 }\n").validation.min_speedup, 1.5);
  EXPECT_EQ(parsed("optimizer.enabled = true\n").optimizer.enabled, true);
}

TEST(ConfigFile, SetsTheAgentLlmKeys) {
  Config c = parsed(R"(
[agent.llm]
enabled = true
base_url = "https://llm.example.com/v1/"
model = "qwen2.5-coder-32b"
api_key_file = "/etc/hone/llm.key"
connect_timeout_s = 0.5
request_timeout_s = 3600
max_turns = 100
max_reply_tokens = 16
token_budget_per_kernel = 4000000000
wall_budget_s_per_kernel = 10
concurrency = 64
max_reply_bytes = 4096
temperature = 0
)");
  const LlmConfig& llm = c.agent.llm;
  EXPECT_TRUE(llm.enabled);
  EXPECT_EQ(llm.base_url, "https://llm.example.com/v1/");
  EXPECT_EQ(llm.model, "qwen2.5-coder-32b");
  EXPECT_EQ(llm.api_key_env, "");
  EXPECT_EQ(llm.api_key_file, "/etc/hone/llm.key");
  EXPECT_EQ(llm.connect_timeout_s, 0.5);
  EXPECT_EQ(llm.request_timeout_s, 3600.0);
  EXPECT_EQ(llm.max_turns, 100u);
  EXPECT_EQ(llm.max_reply_tokens, 16u);
  EXPECT_EQ(llm.token_budget_per_kernel, 4000000000u);
  EXPECT_EQ(llm.wall_budget_s_per_kernel, 10.0);
  EXPECT_EQ(llm.concurrency, 64u);
  EXPECT_EQ(llm.max_reply_bytes, 4096u);
  EXPECT_EQ(llm.temperature, 0.0);
  // The other spellings of a nested table, and a key from the environment.
  EXPECT_EQ(parsed("agent.llm.model = \"m\"\n").agent.llm.model, "m");
  EXPECT_EQ(parsed("[agent]\nllm = { max_turns = 2 }\n").agent.llm.max_turns, 2u);
  EXPECT_EQ(parsed("[agent]\n").agent, AgentConfig{});
  EXPECT_EQ(parsed("[agent.llm]\napi_key_env = \"OPENAI_API_KEY\"\n").agent.llm.api_key_env,
            "OPENAI_API_KEY");
  EXPECT_EQ(parsed("[agent.llm]\nbase_url = \"http://[::1]:8000/v1\"\n").agent.llm.base_url,
            "http://[::1]:8000/v1");
}

TEST(ConfigFile, AcceptsOtherTomlSpellings) {
  // Dotted keys, inline tables and TOML's own octal integers mean the same thing.
  EXPECT_EQ(parsed("server.socket = \"/a.sock\"\n").server.socket, "/a.sock");
  EXPECT_EQ(parsed("server = { max_connections = 7 }\n").server.max_connections, 7u);
  EXPECT_EQ(parsed("[server]\nsocket_mode = 0o640\n").server.socket_mode, 0640u);
  EXPECT_EQ(parsed("[server]\nsocket_mode = \"600\"\n").server.socket_mode, 0600u);
  EXPECT_EQ(parsed("[server]\nsocket_mode = \"0\"\n").server.socket_mode, 0u);
  EXPECT_EQ(parsed("[server]\nallowed_uids = []\n").server.allowed_uids, std::vector<uint32_t>{});
}

TEST(ConfigErrors, UnknownKeyNamesLineSectionAndKnownKeys) {
  EXPECT_EQ(parse_error("[server]\nsocket = \"/run/x.sock\"\n\n\n\n\nsockett = 1\n"),
            "hone.toml:7:1: unknown key 'sockett' in [server] (did you mean 'socket'?); " +
                k_server_keys);
  EXPECT_EQ(parse_error("[log]\n  verbosity = \"debug\"\n"),
            "hone.toml:2:3: unknown key 'verbosity' in [log]; known keys: level");
}

TEST(ConfigErrors, UnknownSection) {
  EXPECT_EQ(parse_error("\n[sever]\nsocket = \"/a\"\n"),
            "hone.toml:2:2: unknown section [sever] (did you mean [server]?); known sections: " +
                k_sections);
  EXPECT_EQ(parse_error("[agent.lm]\n"),
            "hone.toml:1:8: unknown section [agent.lm] (did you mean [agent.llm]?); known "
            "sections: " +
                k_sections);
  EXPECT_EQ(parse_error("[agent]\nmodel = \"m\"\n"),
            "hone.toml:2:1: unknown key 'model' in [agent] (it belongs in [agent.llm]); known "
            "keys: strategies");
  EXPECT_EQ(parse_error("[validaton]\n"),
            "hone.toml:1:2: unknown section [validaton] (did you mean [validation]?); known "
            "sections: " +
                k_sections);
  EXPECT_EQ(parse_error("[server.tls]\n"),
            "hone.toml:1:9: unknown section [server.tls]; known sections: " + k_sections);
}

TEST(ConfigErrors, KeyOutsideAnySection) {
  EXPECT_EQ(
      parse_error("socket = \"/a.sock\"\n"),
      "hone.toml:1:1: key 'socket' is outside any section (it belongs in [server]); sections: " +
          k_sections);
  EXPECT_EQ(parse_error("persist = true\n"),
            "hone.toml:1:1: key 'persist' is outside any section (it belongs in [capture]); "
            "sections: " +
                k_sections);
  EXPECT_EQ(parse_error("server = 5\n"), "hone.toml:1:1: [server] must be a table of keys, got 5");
  EXPECT_EQ(parse_error("[[server]]\n"),
            "hone.toml:1:3: [server] must be a table of keys, got an array");
}

TEST(ConfigErrors, WrongType) {
  EXPECT_EQ(parse_error("[server]\n\nmax_connections = \"many\"\n"),
            "hone.toml:3:19: server.max_connections must be an integer between 1 and 1000000, got "
            "\"many\"");
  EXPECT_EQ(
      parse_error("[server]\nmax_connections = 1.5\n"),
      "hone.toml:2:19: server.max_connections must be an integer between 1 and 1000000, got 1.5");
  EXPECT_EQ(
      parse_error("[server]\nmax_connections = true\n"),
      "hone.toml:2:19: server.max_connections must be an integer between 1 and 1000000, got true");
  EXPECT_EQ(parse_error("[server]\nsocket = 5\n"),
            "hone.toml:2:10: server.socket must be an absolute path of at most 107 bytes "
            "(the size of a unix socket address), got 5");
  EXPECT_EQ(
      parse_error("[log]\nlevel = [\"info\"]\n"),
      "hone.toml:2:9: log.level must be one of trace, debug, info, warn, error, off, got an array");
  EXPECT_EQ(parse_error("[server]\nsocket = { path = \"/a\" }\n"),
            "hone.toml:2:10: server.socket must be an absolute path of at most 107 bytes "
            "(the size of a unix socket address), got a table");
}

TEST(ConfigErrors, OutOfRange) {
  const std::string conn = "server.max_connections must be an integer between 1 and 1000000, got ";
  EXPECT_EQ(parse_error("[server]\nmax_connections = 0\n"), "hone.toml:2:19: " + conn + "0");
  EXPECT_EQ(parse_error("[server]\nmax_connections = 1000001\n"),
            "hone.toml:2:19: " + conn + "1000001");
  EXPECT_EQ(parse_error("[server]\nmax_connections = -1\n"), "hone.toml:2:19: " + conn + "-1");
  EXPECT_EQ(parse_error("[server]\nmax_connections = 99999999999999\n"),
            "hone.toml:2:19: " + conn + "99999999999999");
  EXPECT_EQ(parsed("[server]\nmax_connections = 1000000\n").server.max_connections, 1000000u);
  EXPECT_EQ(parse_error("[server]\nhandshake_timeout_ms = 99\n"),
            "hone.toml:2:24: server.handshake_timeout_ms must be an integer between 100 and "
            "300000, got 99");
}

TEST(ConfigErrors, Booleans) {
  const std::string enabled = "optimizer.enabled must be true or false, got ";
  EXPECT_EQ(parse_error("[optimizer]\nenabled = 1\n"), "hone.toml:2:11: " + enabled + "1");
  EXPECT_EQ(parse_error("[optimizer]\nenabled = \"no\"\n"),
            "hone.toml:2:11: " + enabled + "\"no\" (a string: write true or false unquoted)");
  EXPECT_EQ(parse_error("[optimizer]\nenabled = \"false\"\n"),
            "hone.toml:2:11: " + enabled + "\"false\" (a string: write true or false unquoted)");
  EXPECT_EQ(parse_error("[optimizer]\nenabled = \"maybe\"\n"),
            "hone.toml:2:11: " + enabled + "\"maybe\"");
  EXPECT_EQ(parse_error("[capture]\n\n  persist = [true]\n"),
            "hone.toml:3:13: capture.persist must be true or false, got an array");
  // TOML's own booleans are lower case; anything else is not valid TOML.
  std::string e = parse_error("[capture]\npersist = True\n");
  EXPECT_EQ(e.rfind("hone.toml:2:", 0), 0u) << e;
  EXPECT_NE(e.find("not valid TOML"), std::string::npos) << e;
}

TEST(ConfigErrors, Numbers) {
  const std::string speedup = "validation.min_speedup must be a number between 1 and 100, got ";
  auto err = [](const std::string& v) {
    return parse_error("[validation]\nmin_speedup = " + v + "\n");
  };
  EXPECT_EQ(err("0.99"), "hone.toml:2:15: " + speedup + "0.99");
  EXPECT_EQ(err("0"), "hone.toml:2:15: " + speedup + "0");
  EXPECT_EQ(err("101"), "hone.toml:2:15: " + speedup + "101");
  EXPECT_EQ(err("-1.5"), "hone.toml:2:15: " + speedup + "-1.5");
  // Shown exactly, not rounded to 100.
  EXPECT_EQ(err("100.0000001"), "hone.toml:2:15: " + speedup + "100.0000001");
  EXPECT_EQ(err("nan"), "hone.toml:2:15: " + speedup + "nan");
  EXPECT_EQ(err("inf"), "hone.toml:2:15: " + speedup + "inf");
  EXPECT_EQ(err("-inf"), "hone.toml:2:15: " + speedup + "-inf");
  EXPECT_EQ(err("\"1.2\""),
            "hone.toml:2:15: " + speedup + "\"1.2\" (a string: write the number unquoted)");
  EXPECT_EQ(err("\"fast\""), "hone.toml:2:15: " + speedup + "\"fast\"");
  EXPECT_EQ(err("true"), "hone.toml:2:15: " + speedup + "true");
  EXPECT_EQ(err("[1.2]"), "hone.toml:2:15: " + speedup + "an array");
  EXPECT_EQ(parse_error("[validation]\nsuspicious_speedup = 1e7\n"),
            "hone.toml:2:22: validation.suspicious_speedup must be a number between 1.5 and 1e6, "
            "got 1e7");
  EXPECT_EQ(parse_error("[validation]\nsuspicious_speedup = 1.25\n"),
            "hone.toml:2:22: validation.suspicious_speedup must be a number between 1.5 and 1e6, "
            "got 1.25");
  EXPECT_EQ(parse_error("[validation]\nf32_rel = 1.5\n"),
            "hone.toml:2:11: validation.f32_rel must be a number between 0 and 1, got 1.5");
  EXPECT_EQ(parse_error("[validation]\nf64_abs = -1e-14\n"),
            "hone.toml:2:11: validation.f64_abs must be a number between 0 and 1, got -1e-14");
  // Integer keys stay integers.
  EXPECT_EQ(parse_error("[validation]\nruns = 21.0\n"),
            "hone.toml:2:8: validation.runs must be an integer between 3 and 10000, got 21");
  EXPECT_EQ(parse_error("[validation]\nruns = 2\n"),
            "hone.toml:2:8: validation.runs must be an integer between 3 and 10000, got 2");
  EXPECT_EQ(parse_error("[capture]\ncaptures_per_kernel = 65\n"),
            "hone.toml:2:23: capture.captures_per_kernel must be an integer between 1 and 64, got "
            "65");
  EXPECT_EQ(parse_error("[optimizer]\nhot_min_launches = 0\n"),
            "hone.toml:2:20: optimizer.hot_min_launches must be an integer between 1 and "
            "1000000000, got 0");
}

TEST(ConfigErrors, CapturesMustFitTheirTotal) {
  EXPECT_EQ(parse_error("[capture]\ntotal_mb = 100\n"),
            "hone.toml:2:12: capture.total_mb must be at least capture.max_mb (256, the default) "
            "so that the largest capture fits, got 100");
  EXPECT_EQ(parse_error("[capture]\ntotal_mb = 2048\nmax_mb = 4096\n"),
            "hone.toml:2:12: capture.total_mb must be at least capture.max_mb (4096, from "
            "hone.toml:3:10) so that the largest capture fits, got 2048");
  // Only max_mb set: the message points at the default total.
  EXPECT_EQ(parse_error("[capture]\nmax_mb = 4096\n"),
            "defaults: capture.total_mb must be at least capture.max_mb (4096, from "
            "hone.toml:2:10) so that the largest capture fits, got 1024");
  EXPECT_EQ(parsed("[capture]\nmax_mb = 64\ntotal_mb = 64\n").capture.total_mb, 64u);
}

TEST(ConfigErrors, FrameLimitIsTheProtocols) {
  EXPECT_EQ(parsed("[server]\nmax_frame_bytes = " + std::to_string(proto::k_max_payload) + "\n")
                .server.max_frame_bytes,
            proto::k_max_payload);
  EXPECT_EQ(parse_error("[server]\nmax_frame_bytes = 4194305\n"),
            "hone.toml:2:19: server.max_frame_bytes must be an integer between 65536 and 4194304 "
            "(4 MiB is the protocol's largest frame), got 4194305");
}

TEST(ConfigErrors, QueueMustHoldAFrame) {
  EXPECT_EQ(parse_error("[server]\nmax_queued_bytes = 65536\n"),
            "hone.toml:2:20: server.max_queued_bytes must be at least server.max_frame_bytes "
            "(4194304, the "
            "default) so that one whole frame can wait for a slow peer, got 65536");
  EXPECT_EQ(parse_error("[server]\nmax_frame_bytes = 70000\nmax_queued_bytes = 65536\n"),
            "hone.toml:3:20: server.max_queued_bytes must be at least server.max_frame_bytes "
            "(70000, from "
            "hone.toml:2:19) so that one whole frame can wait for a slow peer, got 65536");
  EXPECT_EQ(parse_error("[server]\nmax_frame_bytes = 4194304\nmax_queued_bytes = 4194303\n")
                .substr(0, 16),
            "hone.toml:3:20: ");
  EXPECT_EQ(parsed("[server]\nmax_frame_bytes = 65536\nmax_queued_bytes = 65536\n")
                .server.max_queued_bytes,
            65536u);
}

TEST(ConfigErrors, SocketMode) {
  const std::string mode =
      "server.socket_mode must be a string of octal digits from \"0000\" to \"0777\", "
      "such as \"0660\", got ";
  EXPECT_EQ(parse_error("[server]\nsocket_mode = \"0680\"\n"),
            "hone.toml:2:15: " + mode + "\"0680\"");
  EXPECT_EQ(parse_error("[server]\nsocket_mode = \"1777\"\n"),
            "hone.toml:2:15: " + mode + "\"1777\"");
  EXPECT_EQ(parse_error("[server]\nsocket_mode = \"00660\"\n"),
            "hone.toml:2:15: " + mode + "\"00660\"");
  EXPECT_EQ(parse_error("[server]\nsocket_mode = \"\"\n"), "hone.toml:2:15: " + mode + "\"\"");
  EXPECT_EQ(parse_error("[server]\nsocket_mode = \"rw-rw----\"\n"),
            "hone.toml:2:15: " + mode + "\"rw-rw----\"");
  EXPECT_EQ(parse_error("[server]\nsocket_mode = 660\n"),
            "hone.toml:2:15: " + mode + "660 (a decimal number: quote the octal digits)");
  EXPECT_EQ(parse_error("[server]\nsocket_mode = 0o1777\n"), "hone.toml:2:15: " + mode + "0o1777");
}

TEST(ConfigErrors, SocketPath) {
  const std::string socket = "server.socket must be an absolute path of at most 107 bytes "
                             "(the size of a unix socket address), got ";
  std::string ok_path = "/" + std::string(106, 's');
  std::string long_path = "/" + std::string(107, 's');
  EXPECT_EQ(parsed("[server]\nsocket = \"" + ok_path + "\"\n").server.socket, ok_path);
  EXPECT_EQ(parse_error("[server]\nsocket = \"" + long_path + "\"\n"),
            "hone.toml:2:10: " + socket + "\"" + long_path + "\" (108 bytes)");
  EXPECT_EQ(parse_error("[server]\nsocket = \"hone.sock\"\n"),
            "hone.toml:2:10: " + socket + "\"hone.sock\"");
  EXPECT_EQ(parse_error("[server]\nsocket = \"\"\n"), "hone.toml:2:10: " + socket + "\"\"");
  EXPECT_EQ(parse_error("[server]\nsocket = \"/a\\u0000b\"\n"),
            "hone.toml:2:10: " + socket + "\"/a\\x00b\" (it contains a NUL byte)");
}

TEST(ConfigErrors, StateDirMustBeAbsolute) {
  EXPECT_EQ(parse_error("[store]\nstate_dir = \"var/lib/hone\"\n"),
            "hone.toml:2:13: store.state_dir must be an absolute path, got \"var/lib/hone\"");
  EXPECT_EQ(parse_error("[store]\nstate_dir = \"\"\n"),
            "hone.toml:2:13: store.state_dir must be an absolute path, got \"\"");
}

TEST(ConfigErrors, MetricsOnlyOnLoopback) {
  EXPECT_EQ(parsed("[metrics]\nlisten = \"127.0.0.1:9464\"\n").metrics.listen, "127.0.0.1:9464");
  EXPECT_EQ(parsed("[metrics]\nlisten = \"127.3.2.1:1\"\n").metrics.listen, "127.3.2.1:1");
  EXPECT_EQ(parsed("[metrics]\nlisten = \"[::1]:65535\"\n").metrics.listen, "[::1]:65535");
  const std::string listen =
      "metrics.listen must be empty (off) or a loopback address and port such as "
      "\"127.0.0.1:9464\" or "
      "\"[::1]:9464\" (only 127.0.0.0/8 and ::1: /metrics has no authentication and names the "
      "processes and "
      "kernels on this host; scrape it locally or through an authenticating proxy), got ";
  auto err = [](const std::string& v) {
    return parse_error("[metrics]\nlisten = \"" + v + "\"\n");
  };
  EXPECT_EQ(err("0.0.0.0:9464"),
            "hone.toml:2:10: " + listen + "\"0.0.0.0:9464\" (not a loopback address)");
  EXPECT_EQ(err("10.0.0.1:9464"),
            "hone.toml:2:10: " + listen + "\"10.0.0.1:9464\" (not a loopback address)");
  EXPECT_EQ(err("[::]:9464"),
            "hone.toml:2:10: " + listen + "\"[::]:9464\" (not the loopback address)");
  EXPECT_EQ(err("[::ffff:127.0.0.1]:9464"),
            "hone.toml:2:10: " + listen + "\"[::ffff:127.0.0.1]:9464\" (not the loopback address)");
  EXPECT_EQ(err("localhost:9464"),
            "hone.toml:2:10: " + listen +
                "\"localhost:9464\" (not an IP address; host names are not resolved)");
  EXPECT_EQ(err("::1:9464"),
            "hone.toml:2:10: " + listen + "\"::1:9464\" (write an IPv6 address in brackets)");
  EXPECT_EQ(err("127.0.0.1"), "hone.toml:2:10: " + listen + "\"127.0.0.1\" (no port)");
  EXPECT_EQ(err("127.0.0.1:0"),
            "hone.toml:2:10: " + listen + "\"127.0.0.1:0\" (the port must be 1 to 65535)");
  EXPECT_EQ(err("127.0.0.1:65536"),
            "hone.toml:2:10: " + listen + "\"127.0.0.1:65536\" (the port must be 1 to 65535)");
  EXPECT_EQ(err("127.0.0.1:http"),
            "hone.toml:2:10: " + listen + "\"127.0.0.1:http\" (the port must be 1 to 65535)");
  EXPECT_EQ(err("127.1:9464"),
            "hone.toml:2:10: " + listen +
                "\"127.1:9464\" (not an IP address; host names are not resolved)");
}

TEST(ConfigErrors, LogLevel) {
  for (const char* level : {"trace", "debug", "info", "warn", "error", "off"}) {
    EXPECT_EQ(parsed(std::string("[log]\nlevel = \"") + level + "\"\n").log.level, level);
  }
  EXPECT_EQ(parse_error("[log]\nlevel = \"verbose\"\n"),
            "hone.toml:2:9: log.level must be one of trace, debug, info, warn, error, off, got "
            "\"verbose\"");
  EXPECT_EQ(
      parse_error("[log]\nlevel = \"INFO\"\n"),
      "hone.toml:2:9: log.level must be one of trace, debug, info, warn, error, off, got \"INFO\"");
}

TEST(ConfigErrors, IdLists) {
  EXPECT_EQ(parse_error("[server]\nallowed_uids = [1000, \"x\"]\n"),
            "hone.toml:2:23: server.allowed_uids[1] must be an integer between 0 and 4294967294, "
            "got \"x\"");
  EXPECT_EQ(
      parse_error("[server]\nallowed_gids = [-1]\n"),
      "hone.toml:2:17: server.allowed_gids[0] must be an integer between 0 and 4294967294, got -1");
  EXPECT_EQ(parse_error("[server]\nallowed_uids = [4294967295]\n"),
            "hone.toml:2:17: server.allowed_uids[0] must be an integer between 0 and 4294967294, "
            "got 4294967295");
  EXPECT_EQ(parse_error("[server]\nallowed_uids = 1000\n"),
            "hone.toml:2:16: server.allowed_uids must be an array of integers between 0 and "
            "4294967294, got 1000");
}

TEST(ConfigErrors, DriverAndGroup) {
  EXPECT_EQ(parsed("[worker]\ndriver = \"libcuda.so\"\n").worker.driver, "libcuda.so");
  EXPECT_EQ(parse_error("[worker]\ndriver = \"lib/libcuda.so.1\"\n"),
            "hone.toml:2:10: worker.driver must be a library name such as \"libcuda.so.1\" or an "
            "absolute path, "
            "got \"lib/libcuda.so.1\"");
  EXPECT_EQ(parse_error("[worker]\ndriver = \"\"\n").substr(0, 30),
            "hone.toml:2:10: worker.driver ");
  EXPECT_EQ(parsed("[server]\nsocket_group = \"44\"\n").server.socket_group, "44");
  EXPECT_EQ(parsed("[server]\nsocket_group = \"gpu-users\"\n").server.socket_group, "gpu-users");
  EXPECT_EQ(parse_error("[server]\nsocket_group = \"gpu users\"\n"),
            "hone.toml:2:16: server.socket_group must be empty or a group name or number, got "
            "\"gpu users\"");
}

TEST(ConfigErrors, AgentLlm) {
  EXPECT_EQ(parse_error("[agent.llm]\nenabled = true\n"),
            "hone.toml:2:11: agent.llm.enabled is true but agent.llm.model is empty: name the "
            "model the endpoint serves");
  EXPECT_EQ(parse_error("[agent.llm]\nenabled = true\nmodel = \"m\"\nbase_url = \"\"\n"),
            "hone.toml:2:11: agent.llm.enabled is true but agent.llm.base_url is empty: give the "
            "endpoint's URL");
  // Disabled, the endpoint may stay unnamed.
  EXPECT_EQ(parsed("[agent.llm]\nbase_url = \"\"\n").agent.llm.base_url, "");
  EXPECT_EQ(parse_error("[agent.llm]\napi_key_env = \"KEY\"\napi_key_file = \"/k\"\n"),
            "hone.toml:3:16: agent.llm.api_key_file and agent.llm.api_key_env (set at "
            "hone.toml:2:15) are both set; the key must come from one of them");

  const std::string url = "agent.llm.base_url must be empty or an http:// or https:// URL such "
                          "as \"http://127.0.0.1:8000/v1\", got ";
  auto url_error = [](const std::string& v) {
    return parse_error("[agent.llm]\nbase_url = \"" + v + "\"\n");
  };
  EXPECT_EQ(url_error("ftp://h/v1"),
            "hone.toml:2:12: " + url + "\"ftp://h/v1\" (not an http:// or https:// URL)");
  EXPECT_EQ(url_error("127.0.0.1:8000"),
            "hone.toml:2:12: " + url + "\"127.0.0.1:8000\" (not an http:// or https:// URL)");
  EXPECT_EQ(url_error("https:///v1"), "hone.toml:2:12: " + url + "\"https:///v1\" (no host)");
  EXPECT_EQ(url_error("https://h/v1?x=1"),
            "hone.toml:2:12: " + url +
                "\"https://h/v1?x=1\" (no query or fragment: requests go to "
                "<base_url>/chat/completions)");
  EXPECT_EQ(url_error("https://h /v1"),
            "hone.toml:2:12: " + url +
                "\"https://h /v1\" (it contains spaces or control characters)");
  EXPECT_EQ(url_error("https://user:pw@h/v1"),
            "hone.toml:2:12: " + url +
                "\"https://user:pw@h/v1\" (credentials in the URL would show in logs: use "
                "api_key_env or api_key_file)");

  // A wrong key name may be the key itself: it is not shown.
  EXPECT_EQ(parse_error("[agent.llm]\napi_key_env = \"sk-abc123-secret\"\n"),
            "hone.toml:2:15: agent.llm.api_key_env must be empty or the name of an environment "
            "variable, such as \"OPENAI_API_KEY\", got a value not shown here, in case it is the "
            "key itself");
  EXPECT_EQ(parse_error("[agent.llm]\napi_key_file = \"sk-abc123-secret\"\n"),
            "hone.toml:2:16: agent.llm.api_key_file must be empty or an absolute path, got a value "
            "not shown here, in case it is the key itself");
  EXPECT_EQ(parse_error("[agent.llm]\nmodel = \"a\\nb\"\n"),
            "hone.toml:2:9: agent.llm.model must be a model name of at most 256 printable "
            "characters, got \"a\\x0ab\"");
  EXPECT_EQ(parse_error("[agent.llm]\nmax_turns = 0\n"),
            "hone.toml:2:13: agent.llm.max_turns must be an integer between 1 and 100, got 0");
  EXPECT_EQ(parse_error("[agent.llm]\ntemperature = 2.5\n"),
            "hone.toml:2:15: agent.llm.temperature must be a number between 0 and 2, got 2.5");
  EXPECT_EQ(parse_error("[agent.llm]\ntoken_budget_per_kernel = 5000000000\n"),
            "hone.toml:2:27: agent.llm.token_budget_per_kernel must be an integer between 1000 "
            "and 4000000000, got 5000000000");
  EXPECT_EQ(parse_error("[agent.llm]\nmax_reply_bytes = 1024\n"),
            "hone.toml:2:19: agent.llm.max_reply_bytes must be an integer between 4096 and "
            "268435456, got 1024");
  EXPECT_EQ(parse_error("[agent.llm]\nrequest_timeout_s = 0.5\n"),
            "hone.toml:2:21: agent.llm.request_timeout_s must be a number between 1 and 3600, "
            "got 0.5");
}

TEST(ConfigErrors, TomlSyntaxWithPosition) {
  std::string e = parse_error("[server]\nsocket = = 1\n");
  EXPECT_EQ(e.rfind("hone.toml:2:10: not valid TOML: ", 0), 0u) << e;
  e = parse_error("[server]\nmax_connections = 1\nmax_connections = 2\n");
  EXPECT_EQ(e.rfind("hone.toml:3:", 0), 0u) << e;
  EXPECT_NE(e.find("not valid TOML"), std::string::npos) << e;
  e = parse_error("[server]\nsocket = \"/unterminated\n");
  EXPECT_EQ(e.rfind("hone.toml:2:", 0), 0u) << e;
  e = parse_error("[server]\nsocket = \"\xff\"\n");
  EXPECT_EQ(e.rfind("hone.toml:2:", 0), 0u) << e;
}

TEST(ConfigErrors, ValuesInMessagesAreEscapedAndShort) {
  std::string e = parse_error("[log]\nlevel = \"a\\u001b[31mred\"\n");
  EXPECT_EQ(e, "hone.toml:2:9: log.level must be one of trace, debug, info, warn, error, off, got "
               "\"a\\x1b[31mred\"");
  e = parse_error("[log]\nlevel = \"" + std::string(5000, 'x') + "\"\n");
  EXPECT_LT(e.size(), 300u);
  EXPECT_NE(e.find("...\""), std::string::npos);
}

TEST(ConfigLoad, ErrorsNameTheFile) {
  TempDir dir;
  auto p = dir.write("hone.toml", "[server]\nsockett = \"/a\"\n");
  auto c = load(p, false, {}, {});
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().message.rfind(p.string() + ":2:1: unknown key 'sockett' in [server]", 0), 0u)
      << c.error().message;
}

TEST(ConfigLoad, MissingFile) {
  auto c = load("/nonexistent/hone.toml", true, {}, {});
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(*c, Config{});
  EXPECT_TRUE(c->source.empty());

  c = load("/nonexistent/hone.toml", false, {}, {});
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().message, "cannot read /nonexistent/hone.toml: No such file or directory");
}

TEST(ConfigLoad, MissingOptionalFileStillTakesEnvironmentAndFlags) {
  Overrides o;
  o.log_level = "warn";
  auto c = load("/nonexistent/hone.toml", true, {{"HONE_SOCKET", "/e.sock"}}, o);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->server.socket, "/e.sock");
  EXPECT_EQ(c->log.level, "warn");
}

TEST(ConfigLoad, NotAFile) {
  TempDir dir;
  for (bool optional : {true, false}) {
    auto c = load(dir.path, optional, {}, {});
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error().message, "cannot read " + dir.path.string() + ": it is a directory");
  }
  auto big = dir.write("big.toml", "# " + std::string(2u << 20, 'x') + "\n");
  auto c = load(big, false, {}, {});
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().message,
            "cannot read " + big.string() + ": it is larger than 1 MiB, which no configuration is");
}

TEST(ConfigEnvironment, EveryKeyHasAVariable) {
  auto c = load_env({{"HONE_SERVER_SOCKET", "/e.sock"},
                     {"HONE_SERVER_SOCKET_MODE", "0640"},
                     {"HONE_SERVER_SOCKET_GROUP", "video"},
                     {"HONE_SERVER_ALLOWED_UIDS", "1000, 1001"},
                     {"HONE_SERVER_ALLOWED_GIDS", "44"},
                     {"HONE_SERVER_MAX_CONNECTIONS", "12"},
                     {"HONE_SERVER_MAX_FRAME_BYTES", "65536"},
                     {"HONE_SERVER_MAX_QUEUED_BYTES", "65536"},
                     {"HONE_SERVER_HANDSHAKE_TIMEOUT_MS", "250"},
                     {"HONE_SERVER_REPORT_INTERVAL_MS", "500"},
                     {"HONE_STORE_STATE_DIR", "/srv/hone"},
                     {"HONE_WORKER_DRIVER", "/opt/emu/libcuda.so.1"},
                     {"HONE_LOG_LEVEL", "trace"},
                     {"HONE_METRICS_LISTEN", "[::1]:9464"},
                     {"HONE_OPTIMIZER_ENABLED", "no"},
                     {"HONE_OPTIMIZER_HOT_MIN_LAUNCHES", "5"},
                     {"HONE_OPTIMIZER_HOT_TOP", "3"},
                     {"HONE_CAPTURE_CAPTURES_PER_KERNEL", "4"},
                     {"HONE_CAPTURE_MAX_MB", "16"},
                     {"HONE_CAPTURE_TOTAL_MB", "32"},
                     {"HONE_CAPTURE_WITH_OUTPUTS", "yes"},
                     {"HONE_CAPTURE_PERSIST", "on"},
                     {"HONE_CAPTURE_TIMEOUT_S", "9"},
                     {"HONE_VALIDATION_MIN_SPEEDUP", "1.2"},
                     {"HONE_VALIDATION_NOISE_FACTOR", "2"},
                     {"HONE_VALIDATION_WARMUP", "1"},
                     {"HONE_VALIDATION_RUNS", "5"},
                     {"HONE_VALIDATION_SUSPICIOUS_SPEEDUP", "2.5e1"},
                     {"HONE_VALIDATION_JOB_TIMEOUT_S", "30"},
                     {"HONE_VALIDATION_F32_REL", "1e-4"},
                     {"HONE_VALIDATION_F32_ABS", "1E-7"},
                     {"HONE_VALIDATION_F64_REL", "0.000000001"},
                     {"HONE_VALIDATION_F64_ABS", "0"},
                     {"HONE_VALIDATION_F16_REL", ".02"},
                     {"HONE_VALIDATION_F16_ABS", "1e-3"}});
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_FALSE(c->optimizer.enabled);
  EXPECT_EQ(c->optimizer.hot_min_launches, 5u);
  EXPECT_EQ(c->optimizer.hot_top, 3u);
  EXPECT_EQ(c->capture.captures_per_kernel, 4u);
  EXPECT_EQ(c->capture.max_mb, 16u);
  EXPECT_EQ(c->capture.total_mb, 32u);
  EXPECT_TRUE(c->capture.with_outputs);
  EXPECT_TRUE(c->capture.persist);
  EXPECT_EQ(c->capture.timeout_s, 9u);
  EXPECT_EQ(c->validation.min_speedup, 1.2);
  EXPECT_EQ(c->validation.noise_factor, 2.0);
  EXPECT_EQ(c->validation.warmup, 1u);
  EXPECT_EQ(c->validation.runs, 5u);
  EXPECT_EQ(c->validation.suspicious_speedup, 25.0);
  EXPECT_EQ(c->validation.job_timeout_s, 30u);
  EXPECT_EQ(c->validation.f32_rel, 1e-4);
  EXPECT_EQ(c->validation.f32_abs, 1e-7);
  EXPECT_EQ(c->validation.f64_rel, 1e-9);
  EXPECT_EQ(c->validation.f64_abs, 0.0);
  EXPECT_EQ(c->validation.f16_rel, 0.02);
  EXPECT_EQ(c->validation.f16_abs, 1e-3);
  EXPECT_EQ(c->server.socket, "/e.sock");
  EXPECT_EQ(c->server.socket_mode, 0640u);
  EXPECT_EQ(c->server.socket_group, "video");
  EXPECT_EQ(c->server.allowed_uids, (std::vector<uint32_t>{1000, 1001}));
  EXPECT_EQ(c->server.allowed_gids, (std::vector<uint32_t>{44}));
  EXPECT_EQ(c->server.max_connections, 12u);
  EXPECT_EQ(c->server.max_frame_bytes, 65536u);
  EXPECT_EQ(c->server.max_queued_bytes, 65536u);
  EXPECT_EQ(c->server.handshake_timeout_ms, 250u);
  EXPECT_EQ(c->server.report_interval_ms, 500u);
  EXPECT_EQ(c->store.state_dir, "/srv/hone");
  EXPECT_EQ(c->worker.driver, "/opt/emu/libcuda.so.1");
  EXPECT_EQ(c->log.level, "trace");
  EXPECT_EQ(c->metrics.listen, "[::1]:9464");
}

TEST(ConfigEnvironment, AgentLlm) {
  auto c = load_env({{"HONE_AGENT_LLM_ENABLED", "on"},
                     {"HONE_AGENT_LLM_BASE_URL", "https://llm.example.com/v1"},
                     {"HONE_AGENT_LLM_MODEL", "gpt-x"},
                     {"HONE_AGENT_LLM_API_KEY_ENV", "OPENAI_API_KEY"},
                     {"HONE_AGENT_LLM_CONNECT_TIMEOUT_S", "2.5"},
                     {"HONE_AGENT_LLM_REQUEST_TIMEOUT_S", "60"},
                     {"HONE_AGENT_LLM_MAX_TURNS", "8"},
                     {"HONE_AGENT_LLM_MAX_REPLY_TOKENS", "8192"},
                     {"HONE_AGENT_LLM_TOKEN_BUDGET_PER_KERNEL", "100000"},
                     {"HONE_AGENT_LLM_WALL_BUDGET_S_PER_KERNEL", "1800"},
                     {"HONE_AGENT_LLM_CONCURRENCY", "4"},
                     {"HONE_AGENT_LLM_MAX_REPLY_BYTES", "2097152"},
                     {"HONE_AGENT_LLM_TEMPERATURE", "0.7"}});
  ASSERT_TRUE(c) << c.error().message;
  const LlmConfig& llm = c->agent.llm;
  EXPECT_TRUE(llm.enabled);
  EXPECT_EQ(llm.base_url, "https://llm.example.com/v1");
  EXPECT_EQ(llm.model, "gpt-x");
  EXPECT_EQ(llm.api_key_env, "OPENAI_API_KEY");
  EXPECT_EQ(llm.connect_timeout_s, 2.5);
  EXPECT_EQ(llm.request_timeout_s, 60.0);
  EXPECT_EQ(llm.max_turns, 8u);
  EXPECT_EQ(llm.max_reply_tokens, 8192u);
  EXPECT_EQ(llm.token_budget_per_kernel, 100000u);
  EXPECT_EQ(llm.wall_budget_s_per_kernel, 1800.0);
  EXPECT_EQ(llm.concurrency, 4u);
  EXPECT_EQ(llm.max_reply_bytes, 2097152u);
  EXPECT_EQ(llm.temperature, 0.7);
  c = load_env({{"HONE_AGENT_LLM_API_KEY_FILE", "/run/credentials/hone/llm"}});
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->agent.llm.api_key_file, "/run/credentials/hone/llm");

  EXPECT_EQ(env_error({{"HONE_AGENT_LLM_ENABLED", "1"}}),
            "environment variable HONE_AGENT_LLM_ENABLED: agent.llm.enabled is true but "
            "agent.llm.model is empty: name the model the endpoint serves");
  // The environment repairs the file: the check runs once, on the result.
  TempDir dir;
  auto p = dir.write("hone.toml", "[agent.llm]\nenabled = true\n");
  c = load(p, false, {{"HONE_AGENT_LLM_MODEL", "m"}}, {});
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->agent.llm.model, "m");
  // A key given where its name belongs is not echoed; nor is one in a variable hone reads not.
  EXPECT_EQ(env_error({{"HONE_AGENT_LLM_API_KEY_ENV", "sk-abc 123"}}),
            "environment variable HONE_AGENT_LLM_API_KEY_ENV: agent.llm.api_key_env must be empty "
            "or the name of an environment variable, such as \"OPENAI_API_KEY\", got a value not "
            "shown here, in case it is the key itself");
  std::string e = env_error({{"HONE_AGENT_LLM_API_KEY", "sk-abc123-secret"}});
  EXPECT_EQ(e.rfind("environment variable HONE_AGENT_LLM_API_KEY is not a hone setting (did you "
                    "mean HONE_AGENT_LLM_API_KEY_ENV?); the [agent.llm] variables are ",
                    0),
            0u)
      << e;
  EXPECT_EQ(e.find("sk-abc123-secret"), std::string::npos) << e;
}

TEST(ConfigEnvironment, ShortAliases) {
  auto c = load_env({{"HONE_SOCKET", "/s.sock"}, {"HONE_STATE_DIR", "/srv/s"}});
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->server.socket, "/s.sock");
  EXPECT_EQ(c->store.state_dir, "/srv/s");
  // Both set: fine when they agree, an error when they do not.
  c = load_env({{"HONE_SOCKET", "/s.sock"}, {"HONE_SERVER_SOCKET", "/s.sock"}});
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(env_error({{"HONE_SOCKET", "/a.sock"}, {"HONE_SERVER_SOCKET", "/b.sock"}}),
            "environment variables HONE_SOCKET=\"/a.sock\" and HONE_SERVER_SOCKET=\"/b.sock\" "
            "disagree about "
            "server.socket; unset one of them");
}

TEST(ConfigEnvironment, ValuesAreValidatedAndNamed) {
  EXPECT_EQ(env_error({{"HONE_SERVER_MAX_CONNECTIONS", "many"}}),
            "environment variable HONE_SERVER_MAX_CONNECTIONS: server.max_connections must be an "
            "integer between "
            "1 and 1000000, got \"many\"");
  for (const char* bad : {"+5", " 5", "5 ", "0x10", "-1", "1e3", "0"}) {
    EXPECT_FALSE(load_env({{"HONE_SERVER_MAX_CONNECTIONS", bad}})) << bad;
  }
  EXPECT_EQ(env_error({{"HONE_SERVER_SOCKET_MODE", "0968"}}),
            "environment variable HONE_SERVER_SOCKET_MODE: server.socket_mode must be octal digits "
            "from 0000 to "
            "0777, such as 0660, got \"0968\"");
  EXPECT_EQ(env_error({{"HONE_SERVER_ALLOWED_UIDS", "1000,,1"}}),
            "environment variable HONE_SERVER_ALLOWED_UIDS: server.allowed_uids must be a "
            "comma-separated list "
            "of integers between 0 and 4294967294, got \"1000,,1\"");
  EXPECT_EQ(env_error({{"HONE_SOCKET", "relative.sock"}}),
            "environment variable HONE_SOCKET: server.socket must be an absolute path of at most "
            "107 bytes (the "
            "size of a unix socket address), got \"relative.sock\"");
  EXPECT_EQ(env_error({{"HONE_STATE_DIR", "state"}}),
            "environment variable HONE_STATE_DIR: store.state_dir must be an absolute path, got "
            "\"state\"");
  EXPECT_EQ(env_error({{"HONE_METRICS_LISTEN", "0.0.0.0:9464"}}).substr(0, 61),
            "environment variable HONE_METRICS_LISTEN: metrics.listen must");
  EXPECT_EQ(
      env_error({{"HONE_SERVER_MAX_QUEUED_BYTES", "65536"}}),
      "environment variable HONE_SERVER_MAX_QUEUED_BYTES: server.max_queued_bytes must be at least "
      "server.max_frame_bytes (4194304, the default) so that one whole frame can wait for a slow "
      "peer, "
      "got 65536");
}

TEST(ConfigEnvironment, Booleans) {
  for (const char* yes : {"true", "1", "yes", "on", "TRUE", "Yes", "oN"}) {
    auto c = load_env({{"HONE_CAPTURE_PERSIST", yes}});
    ASSERT_TRUE(c) << yes << ": " << c.error().message;
    EXPECT_TRUE(c->capture.persist) << yes;
  }
  for (const char* no : {"false", "0", "no", "off", "False", "NO", "OFF"}) {
    auto c = load_env({{"HONE_OPTIMIZER_ENABLED", no}});
    ASSERT_TRUE(c) << no << ": " << c.error().message;
    EXPECT_FALSE(c->optimizer.enabled) << no;
  }
  const std::string bad =
      "environment variable HONE_OPTIMIZER_ENABLED: optimizer.enabled must be true or false (or "
      "1/0, yes/no, on/off), got ";
  for (const char* v : {"maybe", "y", "n", "2", "00", " yes", "yes ", "truee", "enabled", "-1"}) {
    EXPECT_EQ(env_error({{"HONE_OPTIMIZER_ENABLED", v}}), bad + "\"" + v + "\"") << v;
  }
  EXPECT_EQ(load_env({{"HONE_CAPTURE_WITH_OUTPUTS", ""}})->capture.with_outputs, false);
}

TEST(ConfigEnvironment, Numbers) {
  auto number = [](const char* var, const char* text) {
    auto c = load_env({{var, text}});
    EXPECT_TRUE(c) << var << "=" << text << ": " << c.error().message;
    return c ? *c : Config{};
  };
  EXPECT_EQ(number("HONE_VALIDATION_MIN_SPEEDUP", "1.2").validation.min_speedup, 1.2);
  EXPECT_EQ(number("HONE_VALIDATION_MIN_SPEEDUP", "2").validation.min_speedup, 2.0);
  EXPECT_EQ(number("HONE_VALIDATION_MIN_SPEEDUP", "1.5e1").validation.min_speedup, 15.0);
  EXPECT_EQ(number("HONE_VALIDATION_MIN_SPEEDUP", "100").validation.min_speedup, 100.0);
  EXPECT_EQ(number("HONE_VALIDATION_F64_ABS", "1e-15").validation.f64_abs, 1e-15);
  EXPECT_EQ(number("HONE_VALIDATION_F64_ABS", "2.5E-16").validation.f64_abs, 2.5e-16);
  EXPECT_EQ(number("HONE_VALIDATION_SUSPICIOUS_SPEEDUP", "1e6").validation.suspicious_speedup, 1e6);
  Config zero = number("HONE_VALIDATION_NOISE_FACTOR", "-0");
  EXPECT_EQ(zero.validation.noise_factor, 0.0);
  EXPECT_FALSE(std::signbit(zero.validation.noise_factor));

  const std::string speedup = "environment variable HONE_VALIDATION_MIN_SPEEDUP: "
                              "validation.min_speedup must be a number between 1 and 100, got ";
  for (const char* v : {"nan", "NaN", "-nan", "inf", "-inf", "infinity", "0.5", "100.5", "1e400",
                        "+1.2", " 1.2", "1.2 ", "1,2", "1.2x", "0x1p1", "fast", "1e", "."}) {
    EXPECT_EQ(env_error({{"HONE_VALIDATION_MIN_SPEEDUP", v}}), speedup + "\"" + v + "\"") << v;
  }
  EXPECT_EQ(env_error({{"HONE_VALIDATION_F32_REL", "1e-400"}}).substr(0, 65),
            "environment variable HONE_VALIDATION_F32_REL: validation.f32_rel ");
  EXPECT_EQ(env_error({{"HONE_VALIDATION_SUSPICIOUS_SPEEDUP", "1.4"}}),
            "environment variable HONE_VALIDATION_SUSPICIOUS_SPEEDUP: "
            "validation.suspicious_speedup must be a number between 1.5 and 1e6, got \"1.4\"");
  // Integer keys take no fractions or exponents, in these sections too.
  EXPECT_EQ(env_error({{"HONE_VALIDATION_RUNS", "1e3"}}),
            "environment variable HONE_VALIDATION_RUNS: validation.runs must be an integer between "
            "3 and 10000, got \"1e3\"");
}

TEST(ConfigEnvironment, CapturesMustFitTheirTotal) {
  EXPECT_EQ(env_error({{"HONE_CAPTURE_TOTAL_MB", "128"}}),
            "environment variable HONE_CAPTURE_TOTAL_MB: capture.total_mb must be at least "
            "capture.max_mb (256, the default) so that the largest capture fits, got 128");
  EXPECT_EQ(env_error({{"HONE_CAPTURE_MAX_MB", "2048"}}),
            "defaults: capture.total_mb must be at least capture.max_mb (2048, from environment "
            "variable HONE_CAPTURE_MAX_MB) so that the largest capture fits, got 1024");
  // A later layer repairs an earlier one: the check runs once, on the result.
  TempDir dir;
  auto p = dir.write("hone.toml", "[capture]\nmax_mb = 2048\n");
  auto c = load(p, false, {{"HONE_CAPTURE_TOTAL_MB", "4096"}}, {});
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->capture.max_mb, 2048u);
  EXPECT_EQ(c->capture.total_mb, 4096u);
}

TEST(ConfigEnvironment, EmptyIsUnset) {
  auto c =
      load_env({{"HONE_SOCKET", ""}, {"HONE_LOG_LEVEL", ""}, {"HONE_SERVER_MAX_CONNECTIONS", ""}});
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(*c, Config{});
}

TEST(ConfigEnvironment, UnknownVariables) {
  // Typos in a section's namespace are errors...
  EXPECT_EQ(env_error({{"HONE_SERVER_SOCKETT", "/a"}}),
            "environment variable HONE_SERVER_SOCKETT is not a hone setting (did you mean "
            "HONE_SERVER_SOCKET?); "
            "the [server] variables are HONE_SERVER_SOCKET, HONE_SERVER_SOCKET_MODE, "
            "HONE_SERVER_SOCKET_GROUP, "
            "HONE_SERVER_ALLOWED_UIDS, HONE_SERVER_ALLOWED_GIDS, HONE_SERVER_MAX_CONNECTIONS, "
            "HONE_SERVER_MAX_FRAME_BYTES, HONE_SERVER_MAX_QUEUED_BYTES, "
            "HONE_SERVER_HANDSHAKE_TIMEOUT_MS, "
            "HONE_SERVER_REPORT_INTERVAL_MS");
  EXPECT_EQ(
      env_error({{"HONE_LOG_LEVL", "debug"}}),
      "environment variable HONE_LOG_LEVL is not a hone setting (did you mean HONE_LOG_LEVEL?); "
      "the [log] variables are HONE_LOG_LEVEL");
  std::string e = env_error({{"HONE_VALIDATION_MIN_SPEEDUPP", "1.2"}});
  EXPECT_EQ(e.rfind("environment variable HONE_VALIDATION_MIN_SPEEDUPP is not a hone setting (did "
                    "you mean HONE_VALIDATION_MIN_SPEEDUP?); the [validation] variables are "
                    "HONE_VALIDATION_MIN_SPEEDUP, ",
                    0),
            0u)
      << e;
  // ...the variables of the shim, the emulated device and the rest of hone are not.
  auto c = load_env({{"HONE_LOG", "debug"},
                     {"HONE_DISABLE", "1"},
                     {"HONE_EMU_THREADS", "4"},
                     {"HONE_REPORT_MS", "100"},
                     {"HONE_SAMPLE_EVERY", "1"},
                     {"PATH", "/bin"}});
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(*c, Config{});
}

TEST(ConfigLayers, FileThenEnvironmentThenFlags) {
  TempDir dir;
  auto p = dir.write("hone.toml", "[server]\nsocket = \"/file.sock\"\nmax_connections = 5\n"
                                  "[log]\nlevel = \"error\"\n[store]\nstate_dir = \"/file\"\n");
  std::map<std::string, std::string> env = {{"HONE_SOCKET", "/env.sock"},
                                            {"HONE_LOG_LEVEL", "warn"}};
  Overrides flags;
  flags.socket = "/flag.sock";

  auto c = load(p, false, {}, {});
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->server.socket, "/file.sock");
  EXPECT_EQ(c->log.level, "error");

  c = load(p, false, env, {});
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->server.socket, "/env.sock");
  EXPECT_EQ(c->log.level, "warn");
  EXPECT_EQ(c->server.max_connections, 5u); // untouched by the environment

  c = load(p, false, env, flags);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->server.socket, "/flag.sock");
  EXPECT_EQ(c->log.level, "warn");
  EXPECT_EQ(c->store.state_dir, "/file");
  EXPECT_EQ(c->source, p);

  Overrides all;
  all.socket = "/f.sock";
  all.state_dir = "/f/state";
  all.driver = "/f/libcuda.so.1";
  all.log_level = "off";
  c = load(p, false, env, all);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->server.socket, "/f.sock");
  EXPECT_EQ(c->store.state_dir, "/f/state");
  EXPECT_EQ(c->worker.driver, "/f/libcuda.so.1");
  EXPECT_EQ(c->log.level, "off");
}

TEST(ConfigLayers, LaterLayerRepairsEarlierCrossKeyValue) {
  // Cross-key checks run once, on the result of all layers.
  TempDir dir;
  auto p = dir.write("hone.toml", "[server]\nmax_frame_bytes = 65536\nmax_queued_bytes = 65536\n");
  auto c = load(p, false, {{"HONE_SERVER_MAX_QUEUED_BYTES", "1048576"}}, {});
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->server.max_queued_bytes, 1048576u);
  c = load(p, false, {{"HONE_SERVER_MAX_FRAME_BYTES", "131072"}}, {});
  ASSERT_FALSE(c);
  EXPECT_EQ(
      c.error().message,
      p.string() +
          ":3:20: server.max_queued_bytes must be at least server.max_frame_bytes (131072, from "
          "environment variable HONE_SERVER_MAX_FRAME_BYTES) so that one whole frame can wait for "
          "a slow peer, got 65536");
}

TEST(ConfigLayers, FlagsAreValidatedAndNamed) {
  Overrides o;
  o.log_level = "loud";
  auto c = load_env({}, o);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().message, "option --log-level: log.level must be one of trace, debug, info, "
                               "warn, error, off, got \"loud\"");
  o = {};
  o.state_dir = "relative";
  c = load_env({}, o);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().message,
            "option --state-dir: store.state_dir must be an absolute path, got \"relative\"");
  o = {};
  o.socket = "/" + std::string(200, 'x');
  c = load_env({}, o);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().message.rfind("option --socket: server.socket must be", 0), 0u);
  o = {};
  o.driver = "./libcuda.so.1";
  c = load_env({}, o);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().message.rfind("option --driver: worker.driver must be", 0), 0u);
}

TEST(ConfigEnvironment, ReadsTheProcessEnvironment) {
  ::setenv("HONE_CONFIG_TEST_VARIABLE", "x=y", 1);
  ::setenv("NOT_HONE_CONFIG_TEST", "1", 1);
  auto env = environment();
  ::unsetenv("HONE_CONFIG_TEST_VARIABLE");
  ::unsetenv("NOT_HONE_CONFIG_TEST");
  EXPECT_EQ(env.at("HONE_CONFIG_TEST_VARIABLE"), "x=y");
  EXPECT_EQ(env.count("NOT_HONE_CONFIG_TEST"), 0u);
  for (const auto& [name, value] : env) EXPECT_EQ(name.rfind("HONE_", 0), 0u) << name;
}

} // namespace

// [store.remote]: a list of URLs (an array in the file, comma-separated in the environment), each
// of a known scheme; require_signature needs the fleet key it checks with.
TEST(ConfigFile, StoreRemoteTakesAListOfUrlsAndItsLimits) {
  Config c = parsed(R"(
[store.remote]
urls = ["redis://cache.internal:6379/2", "https://objects.example.com/hone|sigv4=us-east-1:s3"]
connect_timeout_ms = 500
timeout_ms = 2000
max_object_mb = 16
key_file = "/etc/hone/fleet.key"
require_signature = true
tombstone_interval_s = 5
)");
  EXPECT_EQ(c.store.remote.urls,
            (std::vector<std::string>{"redis://cache.internal:6379/2",
                                      "https://objects.example.com/hone|sigv4=us-east-1:s3"}));
  EXPECT_EQ(c.store.remote.connect_timeout_ms, 500u);
  EXPECT_EQ(c.store.remote.timeout_ms, 2000u);
  EXPECT_EQ(c.store.remote.max_object_mb, 16u);
  EXPECT_EQ(c.store.remote.key_file, "/etc/hone/fleet.key");
  EXPECT_TRUE(c.store.remote.require_signature);
  EXPECT_EQ(c.store.remote.tombstone_interval_s, 5u);
  EXPECT_TRUE(Config{}.store.remote.urls.empty());
  EXPECT_EQ(Config{}.store.remote.tombstone_interval_s, 60u);
  EXPECT_EQ(parsed("[store.remote]\ntombstone_interval_s = 0\n").store.remote.tombstone_interval_s,
            0u);
  std::string too_long = parse_error("[store.remote]\ntombstone_interval_s = 100000\n");
  EXPECT_NE(too_long.find("tombstone_interval_s"), std::string::npos) << too_long;

  auto env = load("/nonexistent/hone.toml", true,
                  {{"HONE_STORE_REMOTE_URLS", "redis://a:1, http://b/x|read-only"}}, {});
  ASSERT_TRUE(env) << env.error().message;
  EXPECT_EQ(env->store.remote.urls,
            (std::vector<std::string>{"redis://a:1", "http://b/x|read-only"}));

  std::string bad = parse_error("[store.remote]\nurls = [\"redis://a:1\", \"ftp://b/x\"]\n");
  EXPECT_NE(bad.find("hone.toml:2:"), std::string::npos) << bad;
  EXPECT_NE(bad.find("store.remote.urls[1]"), std::string::npos) << bad;
  EXPECT_NE(bad.find("redis://, http:// or https://"), std::string::npos) << bad;
  EXPECT_NE(parse_error("[store.remote]\nurls = \"redis://a:1\"\n").find("an array of strings"),
            std::string::npos);
  std::string unsigned_check = parse_error("[store.remote]\nrequire_signature = true\n");
  EXPECT_NE(unsigned_check.find("key_file is empty"), std::string::npos) << unsigned_check;
}
