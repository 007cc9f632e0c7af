// A real honed for tests and benchmarks: started as a child process in a temporary directory
// (its socket, its state, its config, its log), ready once its socket accepts a connection, and
// stopped with SIGTERM. Also runs other programs of the build (honectl) and captures their output.
#pragma once

#include "common/client.hpp"
#include "common/protocol.hpp"
#include "common/result.hpp"

#include <nlohmann/json.hpp>

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace hone::test {

// build/bin/honed and build/bin/honectl of this build.
std::string honed_path();
std::string honectl_path();

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it when destroyed.
class TempDir {
public:
  explicit TempDir(const std::string& prefix = "hone-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return m_path; }

private:
  std::filesystem::path m_path;
};

struct DaemonOptions {
  // The text of hone.toml, written into the directory and passed with --config; nullopt: no
  // --config (honed then reads /etc/hone/hone.toml if it exists, else defaults).
  std::optional<std::string> config;
  // Passed as --log-level unless empty (the flag overrides the file: leave it empty to test
  // log.level).
  std::string log_level = "debug";
  std::vector<std::string> extra_args;
  // Environment added to the daemon's.
  std::map<std::string, std::string> env;
  // The directory to run in (kept when the daemon stops, so a second daemon can take over its
  // state); empty: a fresh TempDir owned by the DaemonProcess.
  std::filesystem::path dir;
  std::chrono::milliseconds ready_timeout{15000};
};

// hone.toml for a test of the whole loop on the emulated device: reports every 200 ms, the
// optimizer on with a low hot threshold, the worker on `emu_dir`'s libcuda.so.1, two captures per
// kernel, and a short benchmark (no warmup, three runs settle a verdict: modeled times do not vary);
// `extra` is appended.
std::string emu_agent_config(const std::string& emu_dir, const std::string& extra = "");

class DaemonProcess {
public:
  // Start honed and wait until its socket accepts a connection. The error carries the log when
  // honed exited or did not come up within ready_timeout.
  static Result<std::unique_ptr<DaemonProcess>> start(DaemonOptions options = {});
  ~DaemonProcess(); // SIGKILL when still running

  pid_t pid() const { return m_pid; }
  const std::filesystem::path& dir() const { return m_dir; }
  std::string socket() const { return (m_dir / "hone.sock").string(); }
  std::filesystem::path state_dir() const { return m_dir / "state"; }
  std::filesystem::path config_path() const { return m_dir / "hone.toml"; }
  std::filesystem::path log_path() const { return m_dir / "honed.log"; }

  // Everything honed wrote to stdout and stderr so far.
  std::string log() const;
  // Wait until the log contains `text` (counting from byte `from` of the log).
  bool wait_for_log(const std::string& text, std::chrono::milliseconds timeout,
                    size_t from = 0) const;
  // Replace hone.toml (before a SIGHUP).
  void write_config(const std::string& toml) const;
  void signal(int sig) const;
  bool running();
  // SIGTERM, then wait for the exit. Returns the exit status, or 128 + signal when it was
  // killed; an error when it did not exit within `timeout` (it is then killed).
  Result<int> stop(std::chrono::milliseconds timeout = std::chrono::seconds(15));
  // Resident memory of the daemon (VmRSS of /proc/<pid>/status), in KiB.
  std::optional<uint64_t> rss_kib() const;

private:
  DaemonProcess() = default;
  std::unique_ptr<TempDir> m_owned;
  std::filesystem::path m_dir;
  pid_t m_pid = -1;
  std::optional<int> m_status; // exit status once reaped
};

struct RunOptions {
  std::chrono::milliseconds timeout{30000};
  std::optional<uid_t> uid;               // run as this uid (and its gid = uid) — needs root
  std::map<std::string, std::string> env; // added to the environment ("" value: removed)
};

struct RunResult {
  int exit_code = -1; // 128 + signal when killed by one
  std::string out;
  std::string err;
  bool timed_out = false;
};

// Run `argv` (argv[0] is the program's path) and capture its output.
RunResult run_program(const std::vector<std::string>& argv, const RunOptions& options = {});

// Run honectl with `args`.
RunResult run_honectl(const std::vector<std::string>& args, const RunOptions& options = {});

// The hello a client of `kind` sends, as this process.
proto::Hello test_hello(proto::ClientKind kind);

// Connect to `socket` and say hello as `kind`.
Result<Client> connect_as(const std::string& socket, proto::ClientKind kind);

// A control request and its whole reply ({"ok": ..., "result" | "error": ...}).
Result<nlohmann::json> control(Client& c, const nlohmann::json& request);

// Evaluate `condition` until it holds or `timeout` passes; whether it held.
bool wait_for(const std::function<bool()>& condition, std::chrono::milliseconds timeout);

// A control client for tests: requests as JSON, the usual lookups.
class Ctl {
public:
  // Connects to `socket` as honectl would; throws std::runtime_error when it cannot.
  explicit Ctl(const std::string& socket);
  // The whole reply ({"ok": ..., "result" | "error": ...}); {"ok": false, ...} on a transport
  // error. `fd` travels with the request (submit).
  nlohmann::json request(const nlohmann::json& request, int fd = -1);
  // Submits `code` (in a memfd, as honectl submit sends it) with the fields of `request` (target,
  // kind, comparison, ...): the whole reply, whose result names the job; {"ok": false, ...} when
  // the memfd cannot be made.
  nlohmann::json submit(nlohmann::json request, const std::string& code);
  // The kernel named `name` as `kernels` lists it; null until a shim reported it.
  nlohmann::json kernel(const std::string& name);
  // The verified variant of `kernel` (a name or key) that `strategy` made; null until there is one.
  nlohmann::json verified_variant(const std::string& kernel, const std::string& strategy);
  // Wait until job `id` is done; its JSON (null on timeout).
  nlohmann::json wait_job(uint64_t id,
                          std::chrono::milliseconds timeout = std::chrono::seconds(180));

private:
  std::unique_ptr<Client> m_client;
};

// A test application under libhone.so, attached to `socket`, running in the background: it gets
// `--stop-file PATH` after its own arguments and runs until finish() creates that file.
struct AppOptions {
  std::string program;
  std::vector<std::string> args;
  std::string socket;
  std::string shim;       // libhone.so; empty: no LD_PRELOAD
  std::string driver_dir; // put first on LD_LIBRARY_PATH (the emulated device)
  std::map<std::string, std::string> env;
  std::chrono::milliseconds timeout{330000};
};

class BackgroundApp {
public:
  explicit BackgroundApp(AppOptions options);
  ~BackgroundApp(); // finishes it when the test did not
  BackgroundApp(const BackgroundApp&) = delete;
  BackgroundApp& operator=(const BackgroundApp&) = delete;

  // Stop the application and wait for it.
  RunResult finish();

private:
  TempDir m_dir{"hone-app"};
  std::string m_stop;
  std::future<RunResult> m_result;
};

// Raise this process's RLIMIT_NOFILE soft limit to at least `n` (up to the hard limit). Returns
// the limit in force afterwards.
uint64_t raise_fd_limit(uint64_t n);

} // namespace hone::test
