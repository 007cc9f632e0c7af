// Loading and validating honed's configuration.
//
// Every key is one entry of k_keys below: its section, name, type, range, documentation and
// environment variables. Reading the file, reading the environment, the error messages,
// environment_keys() and the documented hone.toml are all driven by that table, so adding a key is
// adding its field to config.hpp and one entry here (then regenerating config/hone.toml, which
// config_test compares with documented_toml()).
#include "config/config.hpp"

#include "common/protocol.hpp"

// Header-only: Debian 12's libtomlplusplus3 is built with exceptions only (its noex entry points
// do not link), and one translation unit is all that parses TOML, so the header-only build costs
// one compile and spares honed a run-time library.
#define TOML_HEADER_ONLY 1
#define TOML_EXCEPTIONS 0
#if __has_include(<toml++/toml.hpp>)
#include <toml++/toml.hpp>
#else
#include <toml++/toml.h>
#endif
#if TOML_LIB_MAJOR < 3
#error "hone needs toml++ 3 or later (Debian: libtomlplusplus-dev)"
#endif

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <netinet/in.h>
#include <sstream>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <variant>

extern char** environ;

namespace hone::config {
namespace {

namespace fs = std::filesystem;

// A unix socket address holds 108 bytes including the terminating NUL.
constexpr size_t k_max_socket_path = sizeof(sockaddr_un{}.sun_path) - 1;
// A configuration file larger than this is not one.
constexpr size_t k_max_file_bytes = 1u << 20;
// Quoted values in messages are cut to this many bytes.
constexpr size_t k_max_quoted = 160;

enum class Kind : uint8_t {
  integer, // uint32_t in [min, max]
  mode,    // uint32_t permission bits, written as a string of octal digits ("0660")
  string,  // std::string accepted by `check`
  path,    // std::filesystem::path accepted by `check`
  id_list, // std::vector<uint32_t>, each in [min, max]; in the environment, comma-separated
  boolean, // bool: TOML true/false; in the environment and flags also 1/0, yes/no, on/off
  number,  // double in [number_min, number_max]: a TOML float or integer; never NaN or infinite
  string_list, // std::vector<std::string>, each accepted by `check`; in the environment,
               // comma-separated
};

using StringField = std::string& (*)(Config&);
using PathField = fs::path& (*)(Config&);
using U32Field = uint32_t& (*)(Config&);
using ListField = std::vector<uint32_t>& (*)(Config&);
using BoolField = bool& (*)(Config&);
using DoubleField = double& (*)(Config&);
using StringListField = std::vector<std::string>& (*)(Config&);
using Field = std::variant<StringField, PathField, U32Field, ListField, BoolField, DoubleField,
                           StringListField>;

// True when a string value is acceptable; may say why not in `note` (shown after the value).
using Check = bool (*)(std::string_view value, std::string& note);

// One configuration key: all that the loader, the error messages and hone.toml need to know.
struct Key {
  std::string_view section; // "server"; a nested section is dotted: "agent.llm"
  std::string_view name;    // "max_connections"
  Kind kind;
  bool secret = false; // a wrong value may be the secret itself: errors do not show it
  Field field;
  uint64_t min = 0; // integer, id_list
  uint64_t max = 0;
  double number_min = 0; // number
  double number_max = 0;
  Check check = nullptr;     // string, path
  std::string_view expect{}; // string, path: what is accepted, after "must be"
  std::string_view why{};    // appended to the expectation in errors: the reason for a limit
  std::string_view alias{};  // a short environment variable that also sets it ("HONE_SOCKET")
  std::string_view doc{};    // the comment above the key in hone.toml, lines split by '\n'
};

struct Section {
  std::string_view name;
  std::string_view doc;
};

// The reference to a field of Config, as a plain function pointer the table can hold.
#define HONE_FIELD(member) (+[](Config& c) -> decltype(auto) { return (c.member); })

bool check_socket(std::string_view v, std::string& note) {
  if (v.empty() || v.front() != '/') return false;
  if (v.size() > k_max_socket_path) {
    note = std::to_string(v.size()) + " bytes";
    return false;
  }
  return true;
}

bool check_absolute(std::string_view v, std::string&) {
  return !v.empty() && v.front() == '/';
}

bool check_group(std::string_view v, std::string&) {
  if (v.empty()) return true;
  if (v.size() > 32) return false;
  bool digits = v.find_first_not_of("0123456789") == std::string_view::npos;
  if (digits) return true;
  auto head = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (!head(v.front())) return false;
  for (char c : v.substr(1)) {
    if (!head(c) && !(c >= '0' && c <= '9') && c != '-' && c != '.') return false;
  }
  return true;
}

bool check_driver(std::string_view v, std::string&) {
  if (v.empty()) return false;
  return v.find('/') == std::string_view::npos || v.front() == '/';
}

constexpr std::string_view k_levels[] = {"trace", "debug", "info", "warn", "error", "off"};

bool check_level(std::string_view v, std::string&) {
  for (auto l : k_levels) {
    if (v == l) return true;
  }
  return false;
}

// "" (off), "127.x.y.z:port" or "[::1]:port".
bool check_listen(std::string_view v, std::string& note) {
  if (v.empty()) return true;
  auto colon = v.rfind(':');
  if (colon == std::string_view::npos) {
    note = "no port";
    return false;
  }
  std::string host(v.substr(0, colon));
  std::string_view port = v.substr(colon + 1);
  unsigned p = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || p == 0 ||
      p > 65535) {
    note = "the port must be 1 to 65535";
    return false;
  }
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    in6_addr a6{};
    if (::inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), &a6) != 1) {
      note = "not an IPv6 address";
      return false;
    }
    if (!IN6_IS_ADDR_LOOPBACK(&a6)) {
      note = "not the loopback address";
      return false;
    }
    return true;
  }
  in_addr a4{};
  if (::inet_pton(AF_INET, host.c_str(), &a4) != 1) {
    in6_addr a6{};
    note = ::inet_pton(AF_INET6, host.c_str(), &a6) == 1
               ? "write an IPv6 address in brackets"
               : "not an IP address; host names are not resolved";
    return false;
  }
  if ((ntohl(a4.s_addr) >> 24) != 127) {
    note = "not a loopback address";
    return false;
  }
  return true;
}

// "" or an http:// or https:// URL that requests can be appended to and that holds no secret.
bool check_base_url(std::string_view v, std::string& note) {
  if (v.empty()) return true;
  std::string_view rest;
  if (v.substr(0, 7) == "http://") {
    rest = v.substr(7);
  } else if (v.substr(0, 8) == "https://") {
    rest = v.substr(8);
  } else {
    note = "not an http:// or https:// URL";
    return false;
  }
  for (char c : v) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) {
      note = "it contains spaces or control characters";
      return false;
    }
  }
  std::string_view authority = rest.substr(0, rest.find('/'));
  if (authority.empty()) {
    note = "no host";
    return false;
  }
  if (authority.find('@') != std::string_view::npos) {
    note = "credentials in the URL would show in logs: use api_key_env or api_key_file";
    return false;
  }
  if (v.find_first_of("?#") != std::string_view::npos) {
    note = "no query or fragment: requests go to <base_url>/chat/completions";
    return false;
  }
  return true;
}

bool check_model(std::string_view v, std::string&) {
  return v.size() <= 256 && std::none_of(v.begin(), v.end(), [](char c) {
           return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
         });
}

bool check_variable_name(std::string_view v, std::string&) {
  if (v.empty()) return true;
  auto head = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (!head(v.front())) return false;
  return std::all_of(v.begin() + 1, v.end(),
                     [&](char c) { return head(c) || (c >= '0' && c <= '9'); });
}

bool check_empty_or_absolute(std::string_view v, std::string&) {
  return v.empty() || v.front() == '/';
}

// A remote URL's form (store/README.md, "Remote tier"); honed parses each fully when it starts.
bool check_remote_url(std::string_view v, std::string& note) {
  for (std::string_view scheme : {"redis://", "rediss://", "http://", "https://"}) {
    if (v.substr(0, scheme.size()) == scheme && v.size() > scheme.size()) {
      if (v.find_first_of(" \t\n") != std::string_view::npos) {
        note = "it contains white space";
        return false;
      }
      return true;
    }
  }
  return false;
}

bool check_strategy(std::string_view v, std::string&) {
  return std::any_of(std::begin(k_strategy_names), std::end(k_strategy_names),
                     [&](const char* n) { return v == n; });
}

constexpr Section k_sections[] = {
    {"server",
     "The unix socket that shims (libhone.so) and honectl connect to, and its limits.\n"
     "Who may connect: the socket file's mode and group decide who can open it; then honed\n"
     "checks each peer's credentials: root, honed's own user, members of the socket's group\n"
     "(primary or supplementary: hone under systemd, which `honectl attach-service` gives a\n"
     "service), and allowed_uids and allowed_gids pass."},
    {"store", "Where honed keeps what it learns: kernels, verified variants and their evidence."},
    {"store.remote",
     "The remote tier: verified variants shared between hosts of a fleet through Redis (or\n"
     "Valkey) or an HTTP object store (a WebDAV server, an S3-compatible store). A kernel that\n"
     "turns hot is looked up there first; what is found is validated on this host's own\n"
     "captures before it serves anything, and a variant verified here is published. A remote\n"
     "that is down or slow delays nothing: requests run in the background, within the\n"
     "timeouts, and a failing remote is left alone for a while (docs/security.md).\n"
     "Read when honed starts: a change takes a restart."},
    {"worker",
     "The worker processes that compile, validate and benchmark on the GPU (one per GPU)."},
    {"log", "Messages on standard error (the journal under systemd)."},
    {"metrics", "Prometheus metrics. `honectl status` shows the same figures over the socket."},
    {"optimizer",
     "Which kernels honed works on by itself, and when. Shims report how often each kernel\n"
     "runs; a kernel launched at least hot_min_launches times (all processes together) and\n"
     "among the hot_top kernels by estimated GPU time is captured and given to the built-in\n"
     "strategies in the background. No variant reaches an application before it has passed\n"
     "[validation]."},
    {"capture",
     "Shadow inputs: copies of the parameters and device buffers of real launches, which the\n"
     "workers replay to prove a candidate equal to the original. They are production data:\n"
     "honed keeps them in memory, within max_mb each and total_mb in all, never logs their\n"
     "contents, and writes them to disk only with persist = true (files of mode 0600 under\n"
     "the state directory). A buffer range of 64 KiB or more that several captures hold\n"
     "with the same bytes (the weights many launches read) is held once. A kernel's captures\n"
     "leave memory once no process runs it, no job waits on them and no enabled strategy is\n"
     "left to try on it: the strategies of a short-lived application's kernels run on them\n"
     "after it exits, and the variants they verify serve its next run."},
    {"validation",
     "How a candidate proves itself before it is used. It must produce the same outputs as\n"
     "the original on every captured launch (bit for bit, unless its strategy's candidates\n"
     "change floating-point results and need the tolerances below), twice, so that a race\n"
     "shows up as two runs that differ. Then the original and the candidate are benchmarked\n"
     "interleaved on the same input, and the candidate is kept only when clearly faster."},
    {"agent",
     "The agent: the strategies that turn hot kernels into candidates (agent/README.md)."},
    {"agent.llm",
     "The LLM strategy: a model behind an OpenAI-compatible chat-completions endpoint (vLLM,\n"
     "llama.cpp's server, a hosted API) rewrites hot kernels as CUDA C++, over a few turns\n"
     "fed with the compiler's errors, the validation's mismatches and the measured times.\n"
     "Its candidates go through [validation] like every other. It sends the endpoint the\n"
     "kernel's source (or PTX), its launch shapes and scalar argument values, never the\n"
     "contents of buffers. Off unless enabled; see docs/llm.md."},
};

// clang-format off
const Key k_keys[] = {
    {.section = "server", .name = "socket", .kind = Kind::string,
     .field = HONE_FIELD(server.socket),
     .check = check_socket,
     .expect = "an absolute path of at most 107 bytes",
     .why = "(the size of a unix socket address)",
     .alias = "HONE_SOCKET",
     .doc = "The unix socket honed listens on. Shims and honectl find it through $HONE_SOCKET\n"
            "(the same default), so a different path must be given to them too. Changed only\n"
            "by a restart. systemd creates /run/hone for honed (RuntimeDirectory=hone)."},
    {.section = "server", .name = "socket_mode", .kind = Kind::mode,
     .field = HONE_FIELD(server.socket_mode),
     .doc = "Permissions of the socket file, as a string of octal digits (0660: honed and the\n"
            "socket's group). A process needs write permission on it to connect: give the\n"
            "users of GPU services the socket's group rather than making it world-writable."},
    {.section = "server", .name = "socket_group", .kind = Kind::string,
     .field = HONE_FIELD(server.socket_group),
     .check = check_group,
     .expect = "empty or a group name or number",
     .doc = "Group that owns the socket file; empty: honed's own group (hone under systemd)."},
    {.section = "server", .name = "allowed_uids", .kind = Kind::id_list,
     .field = HONE_FIELD(server.allowed_uids),
     .min = 0, .max = 4294967294,
     .doc = "Besides root and honed's own user, the user ids whose processes may use honed,\n"
            "checked with the peer credentials of each connection (SO_PEERCRED). List the\n"
            "users your GPU services run as, e.g. [1001, 1002]. In the environment:\n"
            "comma-separated, \"1001,1002\"."},
    {.section = "server", .name = "allowed_gids", .kind = Kind::id_list,
     .field = HONE_FIELD(server.allowed_gids),
     .min = 0, .max = 4294967294,
     .doc = "Processes with one of these as their primary or a supplementary group may use\n"
            "honed too."},
    {.section = "server", .name = "max_connections", .kind = Kind::integer,
     .field = HONE_FIELD(server.max_connections),
     .min = 1, .max = 1000000,
     .doc = "Connections served at once (one per attached process, plus honectl); more are\n"
            "refused with an error. hone.service allows honed 65536 open files (LimitNOFILE)."},
    {.section = "server", .name = "max_frame_bytes", .kind = Kind::integer,
     .field = HONE_FIELD(server.max_frame_bytes),
     .min = 64u << 10, .max = proto::k_max_payload,
     .why = "(4 MiB is the protocol's largest frame)",
     .doc = "Largest message accepted from a peer, in bytes; a larger one closes the\n"
            "connection. Images and captures do not count: they travel as file descriptors."},
    {.section = "server", .name = "max_queued_bytes", .kind = Kind::integer,
     .field = HONE_FIELD(server.max_queued_bytes),
     .min = 64u << 10, .max = 1u << 30,
     .doc = "Output queued for one peer that does not read, in bytes, before honed drops it.\n"
            "At least max_frame_bytes."},
    {.section = "server", .name = "handshake_timeout_ms", .kind = Kind::integer,
     .field = HONE_FIELD(server.handshake_timeout_ms),
     .min = 100, .max = 300000,
     .doc = "A connection that has not said hello within this many milliseconds is closed."},
    {.section = "server", .name = "report_interval_ms", .kind = Kind::integer,
     .field = HONE_FIELD(server.report_interval_ms),
     .min = 100, .max = 3600000,
     .doc = "How often shims report their launch counters, in milliseconds (a shim's own\n"
            "HONE_REPORT_MS wins)."},
    {.section = "store", .name = "state_dir", .kind = Kind::path,
     .field = HONE_FIELD(store.state_dir),
     .check = check_absolute,
     .expect = "an absolute path",
     .alias = "HONE_STATE_DIR",
     .doc = "Directory of the store (RocksDB). Changed only by a restart. systemd creates\n"
            "/var/lib/hone for honed (StateDirectory=hone); another directory must be made\n"
            "writable for the service with ReadWritePaths= in a drop-in (ProtectSystem=strict)."},
    {.section = "store.remote", .name = "urls", .kind = Kind::string_list,
     .field = HONE_FIELD(store.remote.urls),
     .check = check_remote_url,
     .expect = "a URL starting redis://, http:// or https://",
     .doc = "Remotes, each a URL: redis://[user:password@]host[:port][/db] or\n"
            "http(s)://host[:port]/prefix, with attributes after '|': read-only (never\n"
            "written), sigv4=REGION:SERVICE (sign requests for an S3-compatible store, with\n"
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY from the environment or from\n"
            "credentials=PATH, a 0600 file). Empty: no remote tier."},
    {.section = "store.remote", .name = "connect_timeout_ms", .kind = Kind::integer,
     .field = HONE_FIELD(store.remote.connect_timeout_ms),
     .min = 10, .max = 60000,
     .doc = "How long a connection to a remote may take, in milliseconds."},
    {.section = "store.remote", .name = "timeout_ms", .kind = Kind::integer,
     .field = HONE_FIELD(store.remote.timeout_ms),
     .min = 10, .max = 600000,
     .doc = "How long one request may take in all, in milliseconds."},
    {.section = "store.remote", .name = "max_object_mb", .kind = Kind::integer,
     .field = HONE_FIELD(store.remote.max_object_mb),
     .min = 1, .max = 4096,
     .doc = "Larger objects are neither fetched nor published."},
    {.section = "store.remote", .name = "key_file", .kind = Kind::path,
     .field = HONE_FIELD(store.remote.key_file),
     .check = check_empty_or_absolute,
     .expect = "empty or an absolute path",
     .doc = "The fleet key (at least 32 bytes, a file of mode 0600): what this host publishes is\n"
            "signed with it (HMAC-SHA256), and what it fetches is checked with it."},
    {.section = "store.remote", .name = "require_signature", .kind = Kind::boolean,
     .field = HONE_FIELD(store.remote.require_signature),
     .doc = "Drop fetched objects and tombstones that are unsigned or not signed with\n"
            "key_file before validating them (a tombstone: before it withdraws anything)."},
    {.section = "store.remote", .name = "tombstone_interval_s", .kind = Kind::integer,
     .field = HONE_FIELD(store.remote.tombstone_interval_s),
     .min = 0, .max = 86400,
     .doc = "How often, in seconds, honed looks up the tombstones of the variants it serves,\n"
            "adopted or verified: a variant withdrawn from the fleet by another host (its\n"
            "shadow check failed, or honectl disable --fleet there) is withdrawn here within\n"
            "this interval, from every process at once, and never published again. The\n"
            "lookups run in the background, one request per variant and remote, each within\n"
            "timeout_ms. 0: never (tombstones are still looked up before a candidate from the\n"
            "fleet is adopted, before a variant verified here serves, and before a publish)."},
    {.section = "worker", .name = "driver", .kind = Kind::string,
     .field = HONE_FIELD(worker.driver),
     .check = check_driver,
     .expect = "a library name such as \"libcuda.so.1\" or an absolute path",
     .doc = "The CUDA driver library workers load: a name the dynamic loader looks up, or an\n"
            "absolute path (e.g. the emulated device's build/lib/emu/libcuda.so.1)."},
    {.section = "worker", .name = "start_timeout_s", .kind = Kind::integer,
     .field = HONE_FIELD(worker.start_timeout_s),
     .min = 1, .max = 600,
     .doc = "Seconds a new worker has to load the driver, create its context and say hello;\n"
            "past them honed kills it and starts another. Raise it where the first context\n"
            "on a GPU takes long (persistence mode off, a loaded host)."},
    {.section = "log", .name = "level", .kind = Kind::string,
     .field = HONE_FIELD(log.level),
     .check = check_level,
     .expect = "one of trace, debug, info, warn, error, off",
     .doc = "Least severe message logged: trace, debug, info, warn, error or off."},
    {.section = "metrics", .name = "listen", .kind = Kind::string,
     .field = HONE_FIELD(metrics.listen),
     .check = check_listen,
     .expect = "empty (off) or a loopback address and port such as \"127.0.0.1:9464\" or "
               "\"[::1]:9464\"",
     .why = "(only 127.0.0.0/8 and ::1: /metrics has no authentication and names the processes "
            "and kernels on this host; scrape it locally or through an authenticating proxy)",
     .doc = "Address and port to serve /metrics on over HTTP, loopback only (127.0.0.0/8 or\n"
            "[::1]): it has no authentication. Empty: not served."},
    {.section = "optimizer", .name = "enabled", .kind = Kind::boolean,
     .field = HONE_FIELD(optimizer.enabled),
     .doc = "Optimize hot kernels automatically with the built-in strategies. false: kernels\n"
            "are still observed, but honed starts no optimization work by itself."},
    {.section = "optimizer", .name = "hot_min_launches", .kind = Kind::integer,
     .field = HONE_FIELD(optimizer.hot_min_launches),
     .min = 1, .max = 1000000000,
     .doc = "Launches of a kernel, counted over all processes, before it is worth optimizing.\n"
            "Lower it for kernels of short jobs; raise it to leave rarely run kernels alone."},
    {.section = "optimizer", .name = "hot_top", .kind = Kind::integer,
     .field = HONE_FIELD(optimizer.hot_top),
     .min = 1, .max = 1000,
     .doc = "Only this many kernels are optimized: those with the most estimated GPU time\n"
            "(launches times sampled duration). More spreads the GPU time that validation\n"
            "takes over more kernels of smaller weight."},
    {.section = "optimizer", .name = "gpu_share", .kind = Kind::number,
     .field = HONE_FIELD(optimizer.gpu_share),
     .number_min = 0.01, .number_max = 1.0,
     .doc = "Most of the GPU's time that validation and benchmarks may take, as a fraction:\n"
            "after a job that kept the worker busy for T seconds, the next one waits so that\n"
            "the worker is busy at most this share of the time. 1: back to back."},
    {.section = "optimizer", .name = "pause_load", .kind = Kind::number,
     .field = HONE_FIELD(optimizer.pause_load),
     .number_min = 0.0, .number_max = 1000.0,
     .doc = "Validation waits while the applications keep the GPU at least this busy: their\n"
            "kernels' estimated device time per second of wall time, summed over processes\n"
            "(0.9: 90% of the time). Concurrent streams can add up past 1; above 1 this only\n"
            "pauses under such overlap. 0: never pause."},
    {.section = "capture", .name = "captures_per_kernel", .kind = Kind::integer,
     .field = HONE_FIELD(capture.captures_per_kernel),
     .min = 1, .max = 64,
     .doc = "Launches captured per kernel; a candidate must match the original on each. More\n"
            "cover more of the inputs a kernel sees (sizes, data), at the cost of memory and\n"
            "validation time."},
    {.section = "capture", .name = "max_mb", .kind = Kind::integer,
     .field = HONE_FIELD(capture.max_mb),
     .min = 1, .max = 65536,
     .doc = "Largest capture, in MiB: the device buffers one launch uses. A launch that uses\n"
            "more is not captured."},
    {.section = "capture", .name = "total_mb", .kind = Kind::integer,
     .field = HONE_FIELD(capture.total_mb),
     .min = 1, .max = 1048576,
     .doc = "Memory that all captures held at once may take together, over all kernels, in\n"
            "MiB; at least max_mb. Raise it along with captures_per_kernel or hot_top on a host\n"
            "with memory to spare."},
    {.section = "capture", .name = "with_outputs", .kind = Kind::boolean,
     .field = HONE_FIELD(capture.with_outputs),
     .doc = "Also copy the buffers right after the captured launch, so that a replay of the\n"
            "original can be checked against what it computed in the application (catching\n"
            "inputs the capture missed). Doubles the size of a capture."},
    {.section = "capture", .name = "persist", .kind = Kind::boolean,
     .field = HONE_FIELD(capture.persist),
     .doc = "Keep captures on disk, as files of mode 0600 under <state_dir>/captures, so that\n"
            "they survive a restart. They hold the applications' data: leave this false unless\n"
            "the state directory is protected like that data."},
    {.section = "capture", .name = "timeout_s", .kind = Kind::integer,
     .field = HONE_FIELD(capture.timeout_s),
     .min = 1, .max = 3600,
     .doc = "Seconds a job waits for a launch of its kernel to capture, counted while a\n"
            "process runs the kernel; with none running (a short-lived application between\n"
            "two runs) it waits for the next one, up to 60 times this in all."},
    {.section = "validation", .name = "min_speedup", .kind = Kind::number,
     .field = HONE_FIELD(validation.min_speedup),
     .number_min = 1.0, .number_max = 100,
     .doc = "A candidate is kept only when the original's median time divided by its own is\n"
            "at least this: 1.05 is 5% faster. Raise it to swap kernels only for larger gains."},
    {.section = "validation", .name = "noise_factor", .kind = Kind::number,
     .field = HONE_FIELD(validation.noise_factor),
     .number_min = 0, .number_max = 100,
     .doc = "The gain must also exceed the measured noise (the relative spread of the runs)\n"
            "this many times over: with 1% noise and 3, at least 3% faster. Raise it on a\n"
            "shared or busy GPU; 0: only min_speedup counts."},
    {.section = "validation", .name = "warmup", .kind = Kind::integer,
     .field = HONE_FIELD(validation.warmup),
     .min = 0, .max = 1000,
     .doc = "Runs of the original and of the candidate before measuring (caches, clocks)."},
    {.section = "validation", .name = "runs", .kind = Kind::integer,
     .field = HONE_FIELD(validation.runs),
     .min = 3, .max = 10000,
     .doc = "Measured runs of each, interleaved original and candidate so that changes of clock\n"
            "and load hit both alike; their medians are compared. More: steadier figures,\n"
            "longer jobs. The most that are made: see min_runs."},
    {.section = "validation", .name = "min_runs", .kind = Kind::integer,
     .field = HONE_FIELD(validation.min_runs),
     .min = 3, .max = 10000,
     .doc = "Measured runs of each before the benchmark may stop early: past this many, it\n"
            "stops as soon as the verdict cannot change (the gain, or its absence, is clear\n"
            "beyond the measured noise), and goes on up to `runs` while it could. Runs used are\n"
            "in each verdict's evidence. Taken as `runs` when larger."},
    {.section = "validation", .name = "suspicious_speedup", .kind = Kind::number,
     .field = HONE_FIELD(validation.suspicious_speedup),
     .number_min = 1.5, .number_max = 1e6,
     .doc = "A speedup above this is not taken on trust (a kernel that skips work looks very\n"
            "fast): the candidate is validated and measured again before it is accepted."},
    {.section = "validation", .name = "job_timeout_s", .kind = Kind::integer,
     .field = HONE_FIELD(validation.job_timeout_s),
     .min = 5, .max = 86400,
     .doc = "Seconds one job (compile, replay every capture twice, benchmark) may take; past\n"
            "it the worker is killed and the candidate rejected with a timeout verdict. Raise\n"
            "it for long kernels or many runs."},
    {.section = "validation", .name = "f32_rel", .kind = Kind::number,
     .field = HONE_FIELD(validation.f32_rel),
     .number_min = 0, .number_max = 1,
     .doc = "Tolerances, used only for candidates of strategies that may change floating-point\n"
            "results (reassociation, fused operations); all else is compared bit for bit. An\n"
            "element passes when |got - want| <= abs + rel * |want|.\n"
            "f32_rel: relative tolerance for float (32-bit) elements."},
    {.section = "validation", .name = "f32_abs", .kind = Kind::number,
     .field = HONE_FIELD(validation.f32_abs),
     .number_min = 0, .number_max = 1,
     .doc = "Absolute tolerance for float (32-bit) elements, for results near zero."},
    {.section = "validation", .name = "f64_rel", .kind = Kind::number,
     .field = HONE_FIELD(validation.f64_rel),
     .number_min = 0, .number_max = 1,
     .doc = "Relative tolerance for double (64-bit) elements."},
    {.section = "validation", .name = "f64_abs", .kind = Kind::number,
     .field = HONE_FIELD(validation.f64_abs),
     .number_min = 0, .number_max = 1,
     .doc = "Absolute tolerance for double (64-bit) elements."},
    {.section = "validation", .name = "f16_rel", .kind = Kind::number,
     .field = HONE_FIELD(validation.f16_rel),
     .number_min = 0, .number_max = 1,
     .doc = "Relative tolerance for half and bfloat16 (16-bit) elements."},
    {.section = "validation", .name = "f16_abs", .kind = Kind::number,
     .field = HONE_FIELD(validation.f16_abs),
     .number_min = 0, .number_max = 1,
     .doc = "Absolute tolerance for half and bfloat16 (16-bit) elements."},
    {.section = "validation", .name = "shadow_every", .kind = Kind::integer,
     .field = HONE_FIELD(validation.shadow_every),
     .min = 0, .max = 1000000000,
     .doc = "Shadow checks of served variants: after this many launches a variant served in a\n"
            "process, its next served launch there is captured (inputs, and outputs after the\n"
            "variant ran) and the worker runs the original on the same inputs. A CUDA graph\n"
            "replay counts one launch of each kernel node the variant serves in it, and a\n"
            "check due there runs one replay as an instrumented copy of the graph. Different\n"
            "outputs withdraw the variant from every process at once and record why. Each\n"
            "check copies the launch's buffers twice in the application. 0: off."},
    {.section = "validation", .name = "static_checks", .kind = Kind::boolean,
     .field = HONE_FIELD(validation.static_checks),
     .doc = "Refuse, from its code and before it runs, a candidate that writes module-scope\n"
            "device memory or declares __device__ variables where the original declares none\n"
            "(state kept across launches), computes in a narrower floating-point\n"
            "type than the original, or writes through a pointer the original only reads.\n"
            "Off only to test the defences behind them (the shadow checks)."},
    {.section = "validation", .name = "gpu_scrub", .kind = Kind::boolean,
     .field = HONE_FIELD(validation.gpu_scrub),
     .doc = "On a GPU, before each validation run, fill every SM's shared memory and the\n"
            "local-memory window with seeded garbage, different between the runs, so that a\n"
            "candidate reading memory it never wrote gives different results (a\n"
            "nondeterministic verdict) instead of what the previous kernel left there. The\n"
            "emulated device does this itself at every launch. Off only to test the defence."},
    {.section = "agent", .name = "strategies", .kind = Kind::string_list,
     .field = HONE_FIELD(agent.strategies),
     .check = check_strategy,
     .expect = "one of \"specialize\", \"launch_bounds\", \"launch_shape\", \"readonly\", "
               "\"rejit\", \"llm\"",
     .doc = "The strategies that run on hot kernels, by name: specialize (scalar arguments and\n"
            "shapes as constants), launch_bounds (registers for the launch shape), launch_shape\n"
            "(another block size, where the PTX proves the results cannot depend on it), readonly\n"
            "(read-only loads through the non-coherent cache), rejit (the PTX compiled again\n"
            "for this GPU), llm (a model rewrites the kernel; also needs agent.llm.enabled).\n"
            "Leaving one out stops new candidates from it; variants it already verified keep\n"
            "serving (honectl disable turns those off). Candidates submitted with honectl are\n"
            "validated whatever this says."},
    {.section = "agent.llm", .name = "enabled", .kind = Kind::boolean,
     .field = HONE_FIELD(agent.llm.enabled),
     .doc = "Ask the model for faster versions of hot kernels. Needs model (and base_url)."},
    {.section = "agent.llm", .name = "base_url", .kind = Kind::string,
     .field = HONE_FIELD(agent.llm.base_url),
     .check = check_base_url,
     .expect = "empty or an http:// or https:// URL such as \"http://127.0.0.1:8000/v1\"",
     .doc = "The endpoint's base URL: requests go to <base_url>/chat/completions. Use https://\n"
            "for anything beyond this host: the prompt holds your kernels' code and the key\n"
            "travels with every request."},
    {.section = "agent.llm", .name = "model", .kind = Kind::string,
     .field = HONE_FIELD(agent.llm.model),
     .check = check_model,
     .expect = "a model name of at most 256 printable characters",
     .doc = "The model to ask, as the endpoint names it (the request's \"model\")."},
    {.section = "agent.llm", .name = "api_key_env", .kind = Kind::string, .secret = true,
     .field = HONE_FIELD(agent.llm.api_key_env),
     .check = check_variable_name,
     .expect = "empty or the name of an environment variable, such as \"OPENAI_API_KEY\"",
     .doc = "The environment variable that holds the API key (sent as \"Authorization: Bearer\").\n"
            "Under systemd, set it with Environment= or EnvironmentFile= in a drop-in. Empty,\n"
            "and api_key_file empty too: no key is sent (a local server). Never put the key\n"
            "itself in this file."},
    {.section = "agent.llm", .name = "api_key_file", .kind = Kind::path, .secret = true,
     .field = HONE_FIELD(agent.llm.api_key_file),
     .check = check_empty_or_absolute,
     .expect = "empty or an absolute path",
     .doc = "Or a file that holds the API key: a regular file owned by honed's user, of mode\n"
            "0600 or stricter (honed refuses it otherwise). At most one of api_key_env and\n"
            "api_key_file."},
    {.section = "agent.llm", .name = "connect_timeout_s", .kind = Kind::number,
     .field = HONE_FIELD(agent.llm.connect_timeout_s),
     .number_min = 0.1, .number_max = 300,
     .doc = "Seconds to wait for a connection to the endpoint."},
    {.section = "agent.llm", .name = "request_timeout_s", .kind = Kind::number,
     .field = HONE_FIELD(agent.llm.request_timeout_s),
     .number_min = 1, .number_max = 3600,
     .doc = "Seconds one request may take, the model's whole answer included. Two requests in a\n"
            "row that fail this way (or with HTTP 5xx, or no connection) end the kernel's turns."},
    {.section = "agent.llm", .name = "max_turns", .kind = Kind::integer,
     .field = HONE_FIELD(agent.llm.max_turns),
     .min = 1, .max = 100,
     .doc = "Requests per kernel, failed ones included. Each answer that holds a kernel is one\n"
            "candidate, validated on the GPU before the next turn."},
    {.section = "agent.llm", .name = "max_reply_tokens", .kind = Kind::integer,
     .field = HONE_FIELD(agent.llm.max_reply_tokens),
     .min = 16, .max = 1000000,
     .doc = "The most tokens the model may answer with, per request (max_tokens)."},
    {.section = "agent.llm", .name = "token_budget_per_kernel", .kind = Kind::integer,
     .field = HONE_FIELD(agent.llm.token_budget_per_kernel),
     .min = 1000, .max = 4000000000,
     .doc = "Tokens (prompt and answer, as the endpoint reports them) a kernel may use over all\n"
            "its turns; no turn starts past it. A kernel whose first prompt and one answer\n"
            "would not fit is not tried."},
    {.section = "agent.llm", .name = "wall_budget_s_per_kernel", .kind = Kind::number,
     .field = HONE_FIELD(agent.llm.wall_budget_s_per_kernel),
     .number_min = 10, .number_max = 604800,
     .doc = "Seconds a kernel's turns may take in all, waiting for validation included."},
    {.section = "agent.llm", .name = "concurrency", .kind = Kind::integer,
     .field = HONE_FIELD(agent.llm.concurrency),
     .min = 1, .max = 64,
     .doc = "Requests in flight at once, over all kernels."},
    {.section = "agent.llm", .name = "max_reply_bytes", .kind = Kind::integer,
     .field = HONE_FIELD(agent.llm.max_reply_bytes),
     .min = 4096, .max = 256u << 20,
     .doc = "Largest HTTP reply accepted, in bytes; a larger one is refused (and counts a turn)."},
    {.section = "agent.llm", .name = "temperature", .kind = Kind::number,
     .field = HONE_FIELD(agent.llm.temperature),
     .number_min = 0, .number_max = 2,
     .doc = "Sampling temperature of the requests: low for code that compiles."},
    {.section = "agent.llm", .name = "samples_per_turn", .kind = Kind::integer,
     .field = HONE_FIELD(agent.llm.samples_per_turn),
     .min = 1, .max = 8,
     .doc = "Answers asked for per turn (the request's n; endpoints without it are asked again).\n"
            "Each usable one is validated; the conversation goes on from the best. More: more\n"
            "tokens and validation per turn, and more chances of a fast kernel. With several,\n"
            "raise temperature so the answers differ."},
    {.section = "agent.llm", .name = "examples", .kind = Kind::integer,
     .field = HONE_FIELD(agent.llm.examples),
     .min = 0, .max = 8,
     .doc = "Verified rewrites of other kernels on this host shown to the model as examples in\n"
            "its first prompt: their CUDA source and speedup, never their inputs. 0: none. The\n"
            "endpoint then also sees those kernels' rewritten code."},
    {.section = "agent.llm", .name = "tool_calls_per_turn", .kind = Kind::integer,
     .field = HONE_FIELD(agent.llm.tool_calls_per_turn),
     .min = 0, .max = 16,
     .doc = "Calls of the tools compile (NVRTC's log) and check (one validation on a capture)\n"
            "the model may make within a turn, where the endpoint supports tool calls; one that\n"
            "refuses them is asked without. Each check is a validation job. 0: no tools. Not\n"
            "offered with samples_per_turn above 1."},
    {.section = "agent.llm", .name = "sass_kernels", .kind = Kind::boolean,
     .field = HONE_FIELD(agent.llm.sass_kernels),
     .doc = "Also work on kernels shipped as SASS only (no PTX, no source), from their name,\n"
            "parameter layout, captured launches and, where cuobjdump is installed, their SASS.\n"
            "Candidates are rewrites from behaviour, not transformations of the code: each is\n"
            "validated on the captured launches and serves only launches with the captured\n"
            "block shape and scalar values."},
};
// clang-format on
#undef HONE_FIELD

std::string qualified(const Key& k) {
  return std::string(k.section) + "." + std::string(k.name);
}

std::string upper_env(std::string_view s) {
  std::string out;
  for (char c : s) out += c == '.' ? '_' : char(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
  return out;
}

std::string env_prefix(std::string_view section) {
  return "HONE_" + upper_env(section) + "_";
}

std::string env_name(const Key& k) {
  return env_prefix(k.section) + upper_env(k.name);
}

bool is_section(std::string_view name) {
  for (const auto& s : k_sections) {
    if (s.name == name) return true;
  }
  return false;
}

// A table that only holds sections ("agent" when only [agent.llm] were a section).
bool is_namespace(std::string_view name) {
  for (const auto& s : k_sections) {
    if (s.name.size() > name.size() && s.name.substr(0, name.size()) == name &&
        s.name[name.size()] == '.') {
      return true;
    }
  }
  return false;
}

const Key* find_key(std::string_view section, std::string_view name) {
  for (const auto& k : k_keys) {
    if (k.section == section && k.name == name) return &k;
  }
  return nullptr;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The candidate closest to `name`, when it is close enough to be a typo.
std::string_view closest(std::string_view name, const std::vector<std::string_view>& candidates) {
  std::string_view best;
  size_t best_d = std::max<size_t>(2, name.size() / 4) + 1;
  for (auto c : candidates) {
    size_t d = edit_distance(name, c);
    if (d < best_d) {
      best = c;
      best_d = d;
    }
  }
  return best;
}

std::string join(const std::vector<std::string_view>& items) {
  std::string out;
  for (auto i : items) out += (out.empty() ? "" : ", ") + std::string(i);
  return out;
}

std::vector<std::string_view> section_names() {
  std::vector<std::string_view> out;
  for (const auto& s : k_sections) out.push_back(s.name);
  return out;
}

std::vector<std::string_view> key_names(std::string_view section) {
  std::vector<std::string_view> out;
  for (const auto& k : k_keys) {
    if (k.section == section) out.push_back(k.name);
  }
  return out;
}

// A value from a file or the environment, quoted for a message: escaped and cut short.
std::string shown(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i == k_max_quoted) {
      out += "...";
      break;
    }
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

// A TOML basic string holding `s` exactly.
std::string toml_string(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

std::string octal(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04llo", static_cast<unsigned long long>(v));
  return buf;
}

// The shortest text that reads back as `v`, with a plain exponent: 1.05, 3, 1e-5, 1e6, nan.
std::string number_text(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  std::string out = ec == std::errc() ? std::string(buf, end) : std::string("?");
  if (auto e = out.find('e'); e != std::string::npos) {
    size_t digits = e + 1;
    if (digits < out.size() && out[digits] == '+') out.erase(digits, 1);
    if (digits < out.size() && out[digits] == '-') ++digits;
    while (digits + 1 < out.size() && out[digits] == '0') out.erase(digits, 1);
  }
  return out;
}

// `v` as a TOML float: 3.0 rather than 3, which would read as an integer.
std::string toml_float(double v) {
  std::string out = number_text(v);
  if (out.find_first_of(".en") == std::string::npos) out += ".0";
  return out;
}

// What a TOML value is, for "got ..." in a message.
std::string describe(const toml::node& n) {
  switch (n.type()) {
  case toml::node_type::string:
    return shown(n.as_string()->get());
  case toml::node_type::integer: {
    const auto* i = n.as_integer();
    if (!!(i->flags() & toml::value_flags::format_as_octal) && i->get() >= 0)
      return "0o" + octal(uint64_t(i->get()));
    return std::to_string(i->get());
  }
  case toml::node_type::floating_point: {
    std::ostringstream o;
    o << n.as_floating_point()->get();
    return o.str();
  }
  case toml::node_type::boolean:
    return n.as_boolean()->get() ? "true" : "false";
  case toml::node_type::array:
    return "an array";
  case toml::node_type::table:
    return "a table";
  case toml::node_type::date:
    return "a date";
  case toml::node_type::time:
    return "a time";
  case toml::node_type::date_time:
    return "a date-time";
  default:
    return "a value";
  }
}

std::string position(const std::string& file, const toml::source_region& r) {
  return file + ":" + std::to_string(r.begin.line) + ":" + std::to_string(r.begin.column);
}

enum class Form { toml, text }; // a value from the file, or from the environment or a flag

std::string expectation(const Key& k, Form form, bool element) {
  std::string e;
  std::string range = "integers between " + std::to_string(k.min) + " and " + std::to_string(k.max);
  switch (k.kind) {
  case Kind::integer:
    e = "an integer between " + std::to_string(k.min) + " and " + std::to_string(k.max);
    break;
  case Kind::mode:
    e = form == Form::toml ? "a string of octal digits from \"0000\" to \"0777\", such as \"0660\""
                           : "octal digits from 0000 to 0777, such as 0660";
    break;
  case Kind::string:
  case Kind::path:
    e = std::string(k.expect);
    break;
  case Kind::id_list:
    if (element) {
      e = "an integer between " + std::to_string(k.min) + " and " + std::to_string(k.max);
    } else {
      e = form == Form::toml ? "an array of " + range : "a comma-separated list of " + range;
    }
    break;
  case Kind::boolean:
    e = form == Form::toml ? "true or false" : "true or false (or 1/0, yes/no, on/off)";
    break;
  case Kind::string_list:
    if (element) {
      e = std::string(k.expect);
    } else {
      e = form == Form::toml ? "an array of strings, each " + std::string(k.expect)
                             : "a comma-separated list, each " + std::string(k.expect);
    }
    break;
  case Kind::number:
    e = "a number between " + number_text(k.number_min) + " and " + number_text(k.number_max);
    break;
  }
  if (!k.why.empty()) e += " " + std::string(k.why);
  return e;
}

// "WHERE: server.max_connections must be an integer between 1 and 1000000, got "many""
Error bad_value(const std::string& where, const Key& k, Form form, const std::string& got,
                const std::string& note = {}, std::string_view element = {}) {
  std::string msg = where + ": " + qualified(k) + std::string(element) + " must be " +
                    expectation(k, form, !element.empty()) + ", got " +
                    (k.secret ? "a value not shown here, in case it is the key itself" : got);
  if (!note.empty()) msg += " (" + note + ")";
  return make_error(std::move(msg));
}

std::optional<uint64_t> parse_decimal(std::string_view s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// true/false, 1/0, yes/no, on/off in any case, as in the environment and on the command line.
std::optional<bool> parse_bool(std::string_view s) {
  auto is = [&](std::string_view word) {
    return s.size() == word.size() &&
           std::equal(s.begin(), s.end(), word.begin(), [](char a, char b) {
             return (a >= 'A' && a <= 'Z' ? char(a - 'A' + 'a') : a) == b;
           });
  };
  for (auto word : {"true", "1", "yes", "on"}) {
    if (is(word)) return true;
  }
  for (auto word : {"false", "0", "no", "off"}) {
    if (is(word)) return false;
  }
  return std::nullopt;
}

// A decimal or scientific literal ("1.2", "5", "1e-6"), finite; from_chars takes no sign '+',
// no spaces and no hexadecimal, but does take "nan" and "inf", hence the check.
std::optional<double> parse_number(std::string_view s) {
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v))
    return std::nullopt;
  return v;
}

bool in_range(const Key& k, double v) {
  return std::isfinite(v) && v >= k.number_min && v <= k.number_max;
}

// -0.0 reads as 0.
double positive_zero(double v) {
  return v == 0 ? 0.0 : v;
}

std::optional<uint32_t> parse_mode(std::string_view s) {
  if (s.empty() || s.size() > 4 || s.find_first_not_of("01234567") != std::string_view::npos)
    return std::nullopt;
  uint32_t v = 0;
  for (char c : s) v = v * 8 + uint32_t(c - '0');
  if (v > 0777) return std::nullopt;
  return v;
}

// Which layer set each key, for messages that involve two keys.
using Origins = std::map<const Key*, std::string>;

Result<void> assign_string(const Key& k, std::string value, Form form, const std::string& where,
                           Config& c) {
  std::string note;
  if (value.find('\0') != std::string::npos) {
    return bad_value(where, k, form, shown(value), "it contains a NUL byte");
  }
  if (k.check && !k.check(value, note)) return bad_value(where, k, form, shown(value), note);
  if (auto* f = std::get_if<StringField>(&k.field)) {
    (*f)(c) = std::move(value);
  } else {
    (*std::get<PathField>(k.field))(c) = fs::path(std::move(value));
  }
  return ok();
}

// Set `k` from a TOML value at `file`.
Result<void> set_from_node(const Key& k, const toml::node& n, const std::string& file, Config& c,
                           Origins& origins) {
  std::string where = position(file, n.source());
  origins[&k] = where;
  switch (k.kind) {
  case Kind::integer: {
    const auto* i = n.as_integer();
    if (!i || i->get() < 0 || uint64_t(i->get()) < k.min || uint64_t(i->get()) > k.max) {
      return bad_value(where, k, Form::toml, describe(n));
    }
    (*std::get<U32Field>(k.field))(c) = uint32_t(i->get());
    return ok();
  }
  case Kind::mode: {
    std::optional<uint32_t> mode;
    std::string note;
    if (const auto* s = n.as_string()) {
      mode = parse_mode(s->get());
    } else if (const auto* i = n.as_integer()) {
      // 0o660 says what it means; a decimal 660 is the classic mistake (it is 01224).
      if (!!(i->flags() & toml::value_flags::format_as_octal) && i->get() >= 0 &&
          i->get() <= 0777) {
        mode = uint32_t(i->get());
      } else if (!(i->flags() & toml::value_flags::format_as_octal)) {
        note = "a decimal number: quote the octal digits";
      }
    }
    if (!mode) return bad_value(where, k, Form::toml, describe(n), note);
    (*std::get<U32Field>(k.field))(c) = *mode;
    return ok();
  }
  case Kind::string:
  case Kind::path: {
    const auto* s = n.as_string();
    if (!s) return bad_value(where, k, Form::toml, describe(n));
    return assign_string(k, s->get(), Form::toml, where, c);
  }
  case Kind::id_list: {
    const auto* a = n.as_array();
    if (!a) return bad_value(where, k, Form::toml, describe(n));
    std::vector<uint32_t> ids;
    for (size_t i = 0; i < a->size(); ++i) {
      const toml::node& e = *a->get(i);
      const auto* v = e.as_integer();
      if (!v || v->get() < 0 || uint64_t(v->get()) < k.min || uint64_t(v->get()) > k.max) {
        return bad_value(position(file, e.source()), k, Form::toml, describe(e), {},
                         "[" + std::to_string(i) + "]");
      }
      ids.push_back(uint32_t(v->get()));
    }
    (*std::get<ListField>(k.field))(c) = std::move(ids);
    return ok();
  }
  case Kind::string_list: {
    const auto* a = n.as_array();
    if (!a) return bad_value(where, k, Form::toml, describe(n));
    std::vector<std::string> items;
    for (size_t i = 0; i < a->size(); ++i) {
      const toml::node& e = *a->get(i);
      const auto* v = e.as_string();
      std::string note;
      if (!v || v->get().find('\0') != std::string::npos || (k.check && !k.check(v->get(), note))) {
        return bad_value(position(file, e.source()), k, Form::toml, describe(e), note,
                         "[" + std::to_string(i) + "]");
      }
      items.push_back(v->get());
    }
    (*std::get<StringListField>(k.field))(c) = std::move(items);
    return ok();
  }
  case Kind::boolean: {
    const auto* b = n.as_boolean();
    if (!b) {
      const auto* s = n.as_string();
      return bad_value(where, k, Form::toml, describe(n),
                       s && parse_bool(s->get()) ? "a string: write true or false unquoted" : "");
    }
    (*std::get<BoolField>(k.field))(c) = b->get();
    return ok();
  }
  case Kind::number: {
    std::optional<double> v;
    if (const auto* f = n.as_floating_point()) {
      v = f->get();
    } else if (const auto* i = n.as_integer()) {
      v = double(i->get());
    }
    if (!v || !in_range(k, *v)) {
      const auto* s = n.as_string();
      // describe() rounds floats to 6 digits: 100.0000001 would read as 100.
      return bad_value(where, k, Form::toml, n.is_floating_point() ? number_text(*v) : describe(n),
                       s && parse_number(s->get()) ? "a string: write the number unquoted" : "");
    }
    (*std::get<DoubleField>(k.field))(c) = positive_zero(*v);
    return ok();
  }
  }
  return ok();
}

// Set `k` from an environment variable or a flag; `where` names it.
Result<void> set_from_text(const Key& k, std::string_view text, const std::string& where, Config& c,
                           Origins& origins) {
  origins[&k] = where;
  switch (k.kind) {
  case Kind::integer: {
    auto v = parse_decimal(text);
    if (!v || *v < k.min || *v > k.max) return bad_value(where, k, Form::text, shown(text));
    (*std::get<U32Field>(k.field))(c) = uint32_t(*v);
    return ok();
  }
  case Kind::mode: {
    auto v = parse_mode(text);
    if (!v) return bad_value(where, k, Form::text, shown(text));
    (*std::get<U32Field>(k.field))(c) = *v;
    return ok();
  }
  case Kind::string:
  case Kind::path:
    return assign_string(k, std::string(text), Form::text, where, c);
  case Kind::id_list: {
    std::vector<uint32_t> ids;
    size_t start = 0;
    while (start <= text.size()) {
      size_t comma = text.find(',', start);
      std::string_view item = text.substr(
          start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
      while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
      while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
      auto v = parse_decimal(item);
      if (!v || *v < k.min || *v > k.max) return bad_value(where, k, Form::text, shown(text));
      ids.push_back(uint32_t(*v));
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    (*std::get<ListField>(k.field))(c) = std::move(ids);
    return ok();
  }
  case Kind::string_list: {
    std::vector<std::string> items;
    size_t start = 0;
    while (!text.empty() && start <= text.size()) {
      size_t comma = text.find(',', start);
      std::string_view item = text.substr(
          start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
      while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
      while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
      std::string note;
      if (k.check && !k.check(item, note)) return bad_value(where, k, Form::text, shown(text), note);
      items.emplace_back(item);
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    (*std::get<StringListField>(k.field))(c) = std::move(items);
    return ok();
  }
  case Kind::boolean: {
    auto v = parse_bool(text);
    if (!v) return bad_value(where, k, Form::text, shown(text));
    (*std::get<BoolField>(k.field))(c) = *v;
    return ok();
  }
  case Kind::number: {
    auto v = parse_number(text);
    if (!v || !in_range(k, *v)) return bad_value(where, k, Form::text, shown(text));
    (*std::get<DoubleField>(k.field))(c) = positive_zero(*v);
    return ok();
  }
  }
  return ok();
}

// What a table entry that is neither a known key nor a known section is, in words.
Error unknown_entry(const std::string& at, const std::string& prefix, const std::string& name,
                    bool is_table) {
  std::string msg = at;
  if (is_section(prefix) && !is_table) {
    auto known = key_names(prefix);
    msg += ": unknown key '" + name + "' in [" + prefix + "]";
    const Key* inner = nullptr; // a key of that name in a section inside this one
    for (const auto& k : k_keys) {
      if (k.name == name && k.section.substr(0, prefix.size() + 1) == prefix + ".") inner = &k;
    }
    if (inner) {
      msg += " (it belongs in [" + std::string(inner->section) + "])";
    } else if (auto guess = closest(name, known); !guess.empty()) {
      msg += " (did you mean '" + std::string(guess) + "'?)";
    }
    msg += "; known keys: " + join(known);
    return make_error(std::move(msg));
  }
  if (is_namespace(prefix) && !is_table) {
    std::vector<std::string_view> inside;
    for (auto s : section_names()) {
      if (s.substr(0, prefix.size() + 1) == prefix + ".") inside.push_back(s);
    }
    msg += ": key '" + name + "' in [" + prefix + "] is not a setting; [" + prefix +
           "] holds only the sections " + join(inside);
    return make_error(std::move(msg));
  }
  if (prefix.empty() && !is_table) {
    msg += ": key '" + name + "' is outside any section";
    for (const auto& k : k_keys) {
      if (k.name == name) {
        msg += " (it belongs in [" + std::string(k.section) + "])";
        break;
      }
    }
    msg += "; sections: " + join(section_names());
    return make_error(std::move(msg));
  }
  std::string full = prefix.empty() ? name : prefix + "." + name;
  std::vector<std::string_view> names = section_names();
  msg += ": unknown section [" + full + "]";
  if (auto guess = closest(full, names); !guess.empty()) {
    msg += " (did you mean [" + std::string(guess) + "]?)";
  }
  msg += "; known sections: " + join(names);
  return make_error(std::move(msg));
}

// Apply the keys of `table`, the table named `prefix` ("" at the top, "server", "agent.llm").
Result<void> apply_table(const toml::table& table, const std::string& prefix,
                         const std::string& file, Config& c, Origins& origins) {
  const bool has_keys = is_section(prefix);
  for (auto&& [key, value] : table) {
    std::string name(key.str());
    if (has_keys) {
      if (const Key* k = find_key(prefix, name)) {
        if (auto r = set_from_node(*k, value, file, c, origins); !r) return r;
        continue;
      }
    }
    std::string full = prefix.empty() ? name : prefix;
    if (!prefix.empty()) full.append(".").append(name);
    if (!is_section(full) && !is_namespace(full)) {
      return unknown_entry(position(file, key.source()), prefix, name, value.is_table());
    }
    const auto* sub = value.as_table();
    if (!sub) {
      std::string msg = position(file, key.source());
      msg.append(": [").append(full).append("] must be a table of keys, got ");
      return make_error(msg.append(describe(value)));
    }
    if (auto r = apply_table(*sub, full, file, c, origins); !r) return r;
  }
  return ok();
}

// The file's values over the defaults; no checks that involve several keys yet.
Result<Config> parse_layer(std::string_view text, const std::string& name, Origins& origins) {
  Config c;
  c.source = name;
  toml::parse_result parsed = toml::parse(text, std::string_view(name));
  if (!parsed) {
    const auto& e = parsed.error();
    return make_error(position(name, e.source()) +
                      ": not valid TOML: " + std::string(e.description()));
  }
  if (auto r = apply_table(parsed.table(), "", name, c, origins); !r) return r.error();
  return c;
}

// A HONE_* variable in a section's namespace that names no key can only be a typo. Other parts
// of hone read HONE_* variables of their own (the shim's HONE_LOG, the emulated device's
// HONE_EMU_*): those are outside every section's namespace and ignored.
Result<void> check_unknown_variable(const std::string& name) {
  const auto& known = environment_keys();
  for (const auto& [var, key] : known) {
    if (var == name) return ok();
  }
  // the innermost section whose variables the name starts like ([agent.llm] before [agent])
  const Section* section = nullptr;
  for (const auto& s : k_sections) {
    if (name.rfind(env_prefix(s.name), 0) == 0 &&
        (!section || env_prefix(s.name).size() > env_prefix(section->name).size()))
      section = &s;
  }
  for (const Section* sp = section; sp; sp = nullptr) {
    const Section& s = *sp;
    std::string prefix = env_prefix(s.name);
    std::vector<std::string_view> vars;
    for (const auto& [var, key] : known) {
      if (var.rfind(prefix, 0) == 0) vars.push_back(var);
    }
    std::string msg = "environment variable " + name + " is not a hone setting";
    if (auto guess = closest(name, vars); !guess.empty()) {
      msg += " (did you mean " + std::string(guess) + "?)";
    }
    msg += "; the [" + std::string(s.name) + "] variables are " + join(vars);
    return make_error(std::move(msg));
  }
  return ok();
}

Error aliases_disagree(const Key& k, const std::string& alias, const std::string& alias_value,
                       const std::string& var, const std::string& value) {
  return make_error("environment variables " + alias + "=" + shown(alias_value) + " and " + var +
                    "=" + shown(value) + " disagree about " + qualified(k) + "; unset one of them");
}

Result<void> apply_environment(const std::map<std::string, std::string>& env, Config& c,
                               Origins& origins) {
  for (const auto& [name, value] : env) {
    if (name.rfind("HONE_", 0) != 0) continue;
    if (auto r = check_unknown_variable(name); !r) return r;
  }
  // An empty variable counts as unset, as the shim reads HONE_SOCKET.
  auto lookup = [&](const std::string& var) -> const std::string* {
    auto it = env.find(var);
    return it == env.end() || it->second.empty() ? nullptr : &it->second;
  };
  for (const auto& k : k_keys) {
    std::string var = env_name(k);
    const std::string* value = lookup(var);
    if (!k.alias.empty()) {
      std::string alias(k.alias);
      const std::string* short_value = lookup(alias);
      if (value && short_value && *value != *short_value) {
        return aliases_disagree(k, alias, *short_value, var, *value);
      }
      if (!value && short_value) {
        value = short_value;
        var = alias;
      }
    }
    if (value) {
      var.insert(0, "environment variable ");
      if (auto r = set_from_text(k, *value, var, c, origins); !r) return r;
    }
  }
  return ok();
}

Result<void> apply_overrides(const Overrides& o, Config& c, Origins& origins) {
  auto apply = [&](const std::optional<std::string>& value, std::string_view section,
                   std::string_view name, const char* flag) -> Result<void> {
    if (!value) return ok();
    return set_from_text(*find_key(section, name), *value, std::string("option ") + flag, c,
                         origins);
  };
  if (auto r = apply(o.socket, "server", "socket", "--socket"); !r) return r;
  std::optional<std::string> state_dir;
  if (o.state_dir) state_dir = o.state_dir->string();
  if (auto r = apply(state_dir, "store", "state_dir", "--state-dir"); !r) return r;
  if (auto r = apply(o.driver, "worker", "driver", "--driver"); !r) return r;
  if (auto r = apply(o.log_level, "log", "level", "--log-level"); !r) return r;
  return ok();
}

// "WHERE: S.KEY must be at least S.FLOOR (N, ORIGIN) WHY, got M", WHERE being where KEY was set.
Error below_floor(const Origins& origins, std::string_view section, std::string_view key,
                  uint64_t value, std::string_view floor, uint64_t floor_value,
                  std::string_view why) {
  const Key* k = find_key(section, key);
  const Key* f = find_key(section, floor);
  auto it = origins.find(k);
  std::string where = it == origins.end() ? std::string("defaults") : it->second;
  it = origins.find(f);
  std::string floor_origin =
      it == origins.end() ? std::string("the default") : "from " + it->second;
  return make_error(where + ": " + qualified(*k) + " must be at least " + qualified(*f) + " (" +
                    std::to_string(floor_value) + ", " + floor_origin + ") " + std::string(why) +
                    ", got " + std::to_string(value));
}

// Where `name` of [agent.llm] was set, for messages: a file position, a variable, or "defaults".
std::string llm_origin(const Origins& origins, std::string_view name) {
  auto it = origins.find(find_key("agent.llm", name));
  return it == origins.end() ? std::string("defaults") : it->second;
}

// An enabled LLM strategy needs an endpoint and a model; the key comes from one place.
Result<void> check_llm(const LlmConfig& llm, const Origins& origins) {
  if (llm.enabled && (llm.model.empty() || llm.base_url.empty())) {
    return make_error(llm_origin(origins, "enabled") + ": agent.llm.enabled is true but " +
                      (llm.model.empty()
                           ? "agent.llm.model is empty: name the model the endpoint serves"
                           : "agent.llm.base_url is empty: give the endpoint's URL"));
  }
  if (!llm.api_key_env.empty() && !llm.api_key_file.empty()) {
    return make_error(llm_origin(origins, "api_key_file") +
                      ": agent.llm.api_key_file and agent.llm.api_key_env (set at " +
                      llm_origin(origins, "api_key_env") +
                      ") are both set; the key must come from one of them");
  }
  return ok();
}

// Checks that involve several keys, once every layer is applied.
Result<void> check_whole(const Config& c, const Origins& origins) {
  if (c.server.max_queued_bytes < c.server.max_frame_bytes) {
    return below_floor(origins, "server", "max_queued_bytes", c.server.max_queued_bytes,
                       "max_frame_bytes", c.server.max_frame_bytes,
                       "so that one whole frame can wait for a slow peer");
  }
  if (c.capture.total_mb < c.capture.max_mb) {
    return below_floor(origins, "capture", "total_mb", c.capture.total_mb, "max_mb",
                       c.capture.max_mb, "so that the largest capture fits");
  }
  if (c.store.remote.require_signature && c.store.remote.key_file.empty()) {
    auto it = origins.find(find_key("store.remote", "require_signature"));
    return make_error((it == origins.end() ? std::string("defaults") : it->second) +
                      ": store.remote.require_signature is true but store.remote.key_file is "
                      "empty: signatures are checked with the fleet key");
  }
  return check_llm(c.agent.llm, origins);
}

Result<std::string> read_file(const fs::path& path, bool& missing) {
  missing = false;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    int e = errno;
    missing = e == ENOENT;
    return make_error("cannot read " + path.string() + ": " + std::strerror(e));
  }
  struct stat st {};
  std::string text;
  std::string problem;
  if (::fstat(fd, &st) != 0) {
    problem = std::strerror(errno);
  } else if (S_ISDIR(st.st_mode)) {
    problem = "it is a directory";
  } else if (!S_ISREG(st.st_mode)) {
    problem = "it is not a regular file";
  } else if (uint64_t(st.st_size) > k_max_file_bytes) {
    problem = "it is larger than 1 MiB, which no configuration is";
  } else {
    char buf[16384];
    for (;;) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        problem = std::strerror(errno);
        break;
      }
      if (n == 0) break;
      text.append(buf, size_t(n));
      if (text.size() > k_max_file_bytes) {
        problem = "it is larger than 1 MiB, which no configuration is";
        break;
      }
    }
  }
  ::close(fd);
  if (!problem.empty()) return make_error("cannot read " + path.string() + ": " + problem);
  return text;
}

// The value of `k` in `c`, as hone.toml writes it.
std::string value_text(const Key& k, const Config& c) {
  Config& d = const_cast<Config&>(c); // the fields are reached through non-const accessors
  return std::visit(
      [&](auto field) -> std::string {
        const auto& v = field(d);
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return toml_string(v);
        } else if constexpr (std::is_same_v<T, fs::path>) {
          return toml_string(v.string());
        } else if constexpr (std::is_same_v<T, uint32_t>) {
          return k.kind == Kind::mode ? "\"" + octal(v) + "\"" : std::to_string(v);
        } else if constexpr (std::is_same_v<T, bool>) {
          return v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, double>) {
          return toml_float(v);
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          std::string out = "[";
          for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + toml_string(v[i]);
          return out + "]";
        } else {
          std::string out = "[";
          for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
          return out + "]";
        }
      },
      k.field);
}

std::string default_value(const Key& k) { return value_text(k, Config{}); }

void comment(std::string& out, std::string_view text) {
  size_t start = 0;
  while (start <= text.size()) {
    size_t nl = text.find('\n', start);
    std::string_view line =
        text.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start);
    out += line.empty() ? "#\n" : "# " + std::string(line) + "\n";
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
}

} // namespace

Result<Config> parse(std::string_view toml, const std::string& name) {
  Origins origins;
  auto c = parse_layer(toml, name, origins);
  if (!c) return c;
  if (auto r = check_whole(*c, origins); !r) return r.error();
  return c;
}

Result<Config> load(const std::filesystem::path& path, bool optional_file,
                    const std::map<std::string, std::string>& env, const Overrides& overrides,
                    Provenance* provenance) {
  Origins origins;
  Config c;
  bool missing = false;
  auto text = read_file(path, missing);
  if (text) {
    auto parsed = parse_layer(*text, path.string(), origins);
    if (!parsed) return parsed;
    c = std::move(*parsed);
  } else if (!(missing && optional_file)) {
    return text.error();
  }
  if (auto r = apply_environment(env, c, origins); !r) return r.error();
  if (auto r = apply_overrides(overrides, c, origins); !r) return r.error();
  if (auto r = check_whole(c, origins); !r) return r.error();
  if (provenance) {
    provenance->clear();
    for (const auto& [key, where] : origins) (*provenance)[qualified(*key)] = where;
  }
  return c;
}

std::vector<Setting> settings(const Config& c, const Provenance& provenance) {
  std::vector<Setting> out;
  for (const auto& s : k_sections) {
    for (const auto& k : k_keys) {
      if (k.section != s.name) continue;
      Setting st;
      st.section = std::string(k.section);
      st.name = std::string(k.name);
      st.secret = k.secret;
      st.value = value_text(k, c);
      if (k.secret && st.value != default_value(k)) st.value = "(set, not shown)";
      auto it = provenance.find(qualified(k));
      st.origin = it == provenance.end() ? "default" : it->second;
      out.push_back(std::move(st));
    }
  }
  return out;
}

std::map<std::string, std::string> environment() {
  std::map<std::string, std::string> out;
  for (char** e = environ; e && *e; ++e) {
    std::string_view entry(*e);
    if (entry.rfind("HONE_", 0) != 0) continue;
    auto eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    out.emplace(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
  return out;
}

const std::vector<std::pair<std::string, std::string>>& environment_keys() {
  static const std::vector<std::pair<std::string, std::string>> keys = [] {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& k : k_keys) out.emplace_back(env_name(k), qualified(k));
    for (const auto& k : k_keys) {
      if (!k.alias.empty()) out.emplace_back(std::string(k.alias), qualified(k));
    }
    return out;
  }();
  return keys;
}

std::string documented_toml() {
  std::string out;
  comment(
      out,
      "hone.toml: the configuration of honed, the hone daemon.\n"
      "\n"
      "Every key is listed with its default value, commented out: a key that is not set keeps\n"
      "its default, so this file changes nothing until a line is uncommented. honed reads\n"
      "  1. this file (/etc/hone/hone.toml, or the file given with --config),\n"
      "  2. then HONE_* environment variables (each key's is named above it),\n"
      "  3. then the flags --socket, --state-dir, --driver and --log-level;\n"
      "each overrides the one before. Unknown sections, unknown keys and bad values are errors\n"
      "that name the file and line: honed does not start, and `systemctl reload hone` keeps the\n"
      "running configuration. Check a file with: honed --config FILE --check-config\n"
      "\n"
      "This file is generated from the key table in config/config.cpp (documented_toml());\n"
      "config_test fails when the two differ.");
  for (const auto& s : k_sections) {
    out += "\n[" + std::string(s.name) + "]\n";
    comment(out, s.doc);
    for (const auto& k : k_keys) {
      if (k.section != s.name) continue;
      out += "\n";
      comment(out, k.doc);
      std::string env = "Environment: " + env_name(k);
      if (!k.alias.empty()) env += " or " + std::string(k.alias);
      if (k.kind == Kind::boolean) env += " (true/false, 1/0, yes/no, on/off)";
      comment(out, env);
      out += "#" + std::string(k.name) + " = " + default_value(k) + "\n";
    }
  }
  return out;
}

} // namespace hone::config
