#include "tools/honectl_doctor.hpp"

#include "store/remote.hpp"
#include "store/remote_object.hpp"

#include "common/version.hpp"
#include "config/config.hpp"
#include "store/store.hpp"
#include "tools/honectl_session.hpp"
#include "tools/honectl_table.hpp"

#include <cuda.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <vector>

#include <dlfcn.h>
#include <fcntl.h>
#include <grp.h>
#include <link.h>
#include <poll.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace hone::ctl {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

enum class Level { ok, warn, fail };

const char* level_name(Level l) {
  switch (l) {
  case Level::ok:
    return "OK";
  case Level::warn:
    return "WARN";
  default:
    return "FAIL";
  }
}

struct Check {
  std::string name;
  Level level = Level::ok;
  std::string message;
  std::string fix; // what to do; empty when nothing
};

// --- driver ---------------------------------------------------------------------------------

// Runs in a child process: a driver that crashes or hangs in cuInit takes only the child down.
// Writes "level\nmessage\nfix" to `out`.
[[noreturn]] void probe_driver_child(const std::string& path, int out) {
  auto finish = [&](Level l, const std::string& message, const std::string& fix) {
    std::string text = std::to_string(int(l)) + "\n" + message + "\n" + fix;
    size_t off = 0;
    while (off < text.size()) {
      ssize_t n = ::write(out, text.data() + off, text.size() - off);
      if (n <= 0) break;
      off += size_t(n);
    }
    ::_exit(0);
  };
  const std::string install_fix =
      "install the NVIDIA driver (it provides libcuda.so.1), or point worker.driver (--driver, "
      "HONE_WORKER_DRIVER) at a driver library, e.g. hone's emulated device "
      "build/lib/emu/libcuda.so.1";
  void* lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* err = ::dlerror();
    finish(Level::fail, "cannot load " + path + ": " + (err ? err : "unknown error"), install_fix);
  }
  std::string resolved = path;
  link_map* lm = nullptr;
  if (::dlinfo(lib, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && *lm->l_name) {
    resolved = lm->l_name;
  }
  auto sym = [&](const char* name) { return ::dlsym(lib, name); };
  auto cu_init = reinterpret_cast<CUresult (*)(unsigned)>(sym("cuInit"));
  auto cu_count = reinterpret_cast<CUresult (*)(int*)>(sym("cuDeviceGetCount"));
  auto cu_get = reinterpret_cast<CUresult (*)(CUdevice*, int)>(sym("cuDeviceGet"));
  auto cu_name = reinterpret_cast<CUresult (*)(char*, int, CUdevice)>(sym("cuDeviceGetName"));
  auto cu_version = reinterpret_cast<CUresult (*)(int*)>(sym("cuDriverGetVersion"));
  auto cu_attr = reinterpret_cast<CUresult (*)(int*, CUdevice_attribute, CUdevice)>(
      sym("cuDeviceGetAttribute"));
  auto cu_error = reinterpret_cast<CUresult (*)(CUresult, const char**)>(sym("cuGetErrorString"));
  if (!cu_init || !cu_count || !cu_get || !cu_name) {
    finish(Level::fail, resolved + " is not a CUDA driver (cuInit or cuDevice* missing)",
           install_fix);
  }
  auto describe = [&](CUresult r) {
    const char* s = nullptr;
    if (cu_error && cu_error(r, &s) == CUDA_SUCCESS && s) {
      return std::string(s) + " (" + std::to_string(int(r)) + ")";
    }
    return "CUresult " + std::to_string(int(r));
  };
  int version = 0;
  std::string version_text;
  if (cu_version && cu_version(&version) == CUDA_SUCCESS && version > 0) {
    version_text = " (driver " + std::to_string(version / 1000) + "." +
                   std::to_string(version % 1000 / 10) + ")";
  }
  if (CUresult r = cu_init(0); r != CUDA_SUCCESS) {
    finish(Level::fail, resolved + version_text + ": cuInit failed: " + describe(r),
           "check the GPU with nvidia-smi; the kernel module and libcuda must match, and a "
           "container needs the GPU passed through");
  }
  int count = 0;
  if (CUresult r = cu_count(&count); r != CUDA_SUCCESS || count <= 0) {
    finish(Level::fail,
           resolved + version_text + ": no CUDA device" +
               (r != CUDA_SUCCESS ? " (" + describe(r) + ")" : std::string()),
           "check the GPU with nvidia-smi (and CUDA_VISIBLE_DEVICES)");
  }
  std::string names;
  for (int i = 0; i < count && i < 8; ++i) {
    CUdevice dev = 0;
    char name[256] = {};
    if (cu_get(&dev, i) != CUDA_SUCCESS || cu_name(name, sizeof name - 1, dev) != CUDA_SUCCESS) {
      continue;
    }
    if (!names.empty()) names += ", ";
    names += name;
    int major = 0, minor = 0;
    if (cu_attr && std::strstr(name, "sm_") == nullptr &&
        cu_attr(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) == CUDA_SUCCESS &&
        cu_attr(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) == CUDA_SUCCESS) {
      names += " (sm_" + std::to_string(major) + std::to_string(minor) + ")";
    }
  }
  if (count > 8) names += ", …";
  finish(Level::ok,
         resolved + version_text + ": " + std::to_string(count) +
             (count == 1 ? " device: " : " devices: ") + names,
         "");
  ::_exit(0);
}

Check check_driver(const std::string& path) {
  Check c{"driver", Level::ok, "", ""};
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return {"driver", Level::fail, std::string("pipe: ") + std::strerror(errno), ""};
  }
  std::cout.flush();
  std::cerr.flush();
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return {"driver", Level::fail, std::string("fork: ") + std::strerror(errno), ""};
  }
  if (pid == 0) {
    ::close(fds[0]);
    probe_driver_child(path, fds[1]);
  }
  ::close(fds[1]);
  std::string text;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  bool timed_out = false;
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int r = ::poll(&p, 1, int(left));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    char buf[4096];
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, size_t(n));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return {
        "driver", Level::fail, path + ": cuInit did not return within 30 s",
        "check the GPU with nvidia-smi; a hung driver needs the GPU reset or the host rebooted"};
  }
  size_t a = text.find('\n');
  size_t b = a == std::string::npos ? a : text.find('\n', a + 1);
  if (b == std::string::npos) {
    std::string how = WIFSIGNALED(status)
                          ? std::string("crashed (") + strsignal(WTERMSIG(status)) + ")"
                          : "exited without an answer";
    return {"driver", Level::fail, "loading " + path + " " + how,
            "check the driver installation (nvidia-smi) or worker.driver"};
  }
  c.level = Level(std::atoi(text.substr(0, a).c_str()));
  c.message = text.substr(a + 1, b - a - 1);
  c.fix = text.substr(b + 1);
  return c;
}

// --- socket -------------------------------------------------------------------------------------

std::string mode_string(mode_t m) {
  std::string s = S_ISSOCK(m) ? "s" : S_ISDIR(m) ? "d" : S_ISREG(m) ? "-" : "?";
  const char* rwx = "rwxrwxrwx";
  for (int i = 0; i < 9; ++i) s += (m & (0400 >> i)) ? rwx[i] : '-';
  return s;
}

std::string user_name(uid_t uid) {
  if (passwd* p = ::getpwuid(uid)) return p->pw_name;
  return std::to_string(uid);
}

std::string group_name(gid_t gid) {
  if (group* g = ::getgrgid(gid)) return g->gr_name;
  return std::to_string(gid);
}

bool in_group(gid_t gid) {
  if (::getegid() == gid) return true;
  int n = ::getgroups(0, nullptr);
  if (n <= 0) return false;
  std::vector<gid_t> list(static_cast<size_t>(n));
  n = ::getgroups(n, list.data());
  for (int i = 0; i < n; ++i) {
    if (list[size_t(i)] == gid) return true;
  }
  return false;
}

Check check_socket(const std::string& path, bool given) {
  const std::string where_fix =
      given ? "start honed (systemctl start hone) or check --socket / HONE_SOCKET"
            : "start honed (systemctl start hone); if it listens elsewhere, pass --socket PATH or "
              "set HONE_SOCKET";
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    int err = errno;
    if (err == ENOENT) return {"socket", Level::fail, path + " does not exist", where_fix};
    return {"socket", Level::fail, "cannot look at " + path + ": " + std::strerror(err),
            err == EACCES
                ? "you may not enter its directory: join the socket's group, or run as root"
                : where_fix};
  }
  if (!S_ISSOCK(st.st_mode)) {
    return {"socket", Level::fail,
            path + " exists but is not a socket (" + mode_string(st.st_mode) + ")",
            "remove it (honed will not listen over it) or set server.socket to another path"};
  }
  std::string owner =
      mode_string(st.st_mode) + " " + user_name(st.st_uid) + ":" + group_name(st.st_gid);
  uid_t me = ::geteuid();
  bool may_write = me == 0 || (st.st_uid == me && (st.st_mode & S_IWUSR)) ||
                   (st.st_uid != me && in_group(st.st_gid) && (st.st_mode & S_IWGRP)) ||
                   (st.st_uid != me && !in_group(st.st_gid) && (st.st_mode & S_IWOTH));
  if (!may_write) {
    return {"socket", Level::fail,
            path + " (" + owner + "): you (" + user_name(me) + ") may not connect to it",
            "join group '" + group_name(st.st_gid) + "' (sudo usermod -aG " +
                group_name(st.st_gid) + " " + user_name(me) +
                ", then log in again), or run honectl as root"};
  }
  auto c = Client::connect_raw(path);
  if (!c) {
    int err = c.error().code;
    return {"socket", Level::fail,
            path + " (" + owner +
                "): connect failed: " + (err ? std::strerror(err) : c.error().message),
            err == ECONNREFUSED ? "nothing listens there: honed is not running (systemctl start "
                                  "hone); it removes a stale socket when it starts"
                                : where_fix};
  }
  return {"socket", Level::ok, path + " (" + owner + "), accepting connections", ""};
}

// --- store --------------------------------------------------------------------------------------

void add_quarantine(std::vector<Check>& out, const std::vector<std::string>& lines) {
  if (lines.empty()) return;
  std::string message = std::to_string(lines.size()) + " quarantined record" +
                        (lines.size() == 1 ? "" : "s") + " (never served):";
  for (size_t i = 0; i < lines.size() && i < 5; ++i) message += "\n" + lines[i];
  if (lines.size() > 5) message += "\n…";
  out.push_back({"store", Level::warn, message,
                 "records fail their checksum when the disk or a copy corrupted them: check the "
                 "disk (dmesg, smartctl); variants can be imported again from another host"});
}

void check_store_via_daemon(const json& status, std::vector<Check>& out) {
  const json& s = status.contains("store") ? status["store"] : json(nullptr);
  if (!s.is_object()) {
    out.push_back({"store", Level::warn, "honed reports no store", "check honed's log"});
    return;
  }
  uint32_t schema = s.value("schema", 0u);
  std::string message =
      s.value("path", std::string("?")) + ": schema " + std::to_string(schema) + ", " +
      human_bytes(s.value("size_bytes", uint64_t(0))) + ", " +
      std::to_string(status.contains("variants") ? status["variants"].size() : 0) +
      " variants (as honed reports it)";
  out.push_back({"store", schema == store::k_schema_version ? Level::ok : Level::warn, message,
                 schema == store::k_schema_version
                     ? ""
                     : "honed and honectl were built for different store schemas: install "
                       "matching versions"});
  std::vector<std::string> lines;
  if (s.contains("quarantined") && s["quarantined"].is_array()) {
    for (const auto& q : s["quarantined"]) {
      lines.push_back(q.value("column_family", std::string()) + " " +
                      q.value("key", std::string()) + ": " + q.value("reason", std::string()));
    }
  }
  add_quarantine(out, lines);
}

void check_store_directly(const fs::path& dir, std::vector<Check>& out) {
  store::OpenOptions opts;
  opts.create_if_missing = false;
  opts.read_only = true;
  auto st = store::Store::open(dir, opts);
  if (!st) {
    out.push_back({"store", Level::fail, dir.string() + ": " + st.error().message,
                   "honed creates the store on its first start; check store.state_dir"});
    return;
  }
  auto& s = **st;
  auto variants = s.variants();
  auto kernels = s.kernels();
  std::string message = dir.string() + " (read directly, honed is down): schema " +
                        std::to_string(s.schema_version()) + ", " + human_bytes(s.size_bytes());
  if (kernels) message += ", " + std::to_string(kernels->size()) + " kernels";
  if (variants) message += ", " + std::to_string(variants->size()) + " variants";
  Level level = Level::ok;
  std::string fix;
  if (!variants || !kernels) {
    level = Level::fail;
    message += ": " + (!variants ? variants.error().message : kernels.error().message);
    fix = "the store cannot be read; move it aside and let honed create a fresh one";
  }
  out.push_back({"store", level, message, fix});
  std::vector<std::string> lines;
  if (auto q = s.quarantined()) {
    for (const auto& r : *q) lines.push_back(r.column_family + " " + r.key_hex + ": " + r.reason);
  }
  add_quarantine(out, lines);
}

} // namespace

int doctor(const DoctorOptions& o) {
  std::vector<Check> checks;

  // The config first: the other checks use what it says.
  std::optional<config::Config> cfg;
  Check config_check{"config", Level::ok, "", ""};
  {
    bool given = !o.config.empty();
    fs::path path = given ? fs::path(o.config) : fs::path(config::k_default_path);
    auto loaded = config::load(path, !given, config::environment(), {});
    if (loaded) {
      cfg = *loaded;
      config_check.message =
          (cfg->source.empty() ? path.string() + " not found, defaults" : cfg->source.string()) +
          ": socket " + cfg->server.socket + ", state dir " + cfg->store.state_dir.string() +
          ", driver " + cfg->worker.driver + ", log level " + cfg->log.level;
      if (!o.socket_given && cfg->server.socket != o.socket) {
        config_check.level = Level::warn;
        config_check.message += "\nhonectl uses " + o.socket +
                                " but the config says honed listens on " + cfg->server.socket;
        config_check.fix = "pass --socket " + cfg->server.socket + " or set HONE_SOCKET";
      }
    } else {
      config_check.level = Level::fail;
      config_check.message = loaded.error().message;
      config_check.fix = "fix the file (config/hone.toml documents every key), then check it with "
                         "honed --check-config";
    }
  }

  std::string driver = o.driver;
  if (driver.empty()) {
    const char* env = std::getenv("HONE_WORKER_DRIVER");
    driver = env && *env ? env : cfg ? cfg->worker.driver : "libcuda.so.1";
  }
  checks.push_back(check_driver(driver));
  checks.push_back(check_socket(o.socket, o.socket_given));
  bool socket_ok = checks.back().level != Level::fail;

  std::optional<json> status;
  {
    auto s = Session::open(o.socket);
    if (!s) {
      checks.push_back({"daemon", Level::fail,
                        socket_ok ? s.error().message : "not reachable (see the socket check)",
                        "start honed (systemctl start hone) and see its log (journalctl -u hone)"});
    } else {
      auto st = s->request(json{{"cmd", "status"}, {"top", 0}});
      Check c{"daemon", Level::ok, "", ""};
      c.message =
          "honed " + s->daemon_version() + ", protocol " + std::to_string(s->protocol_version());
      if (st) {
        status = *st;
        size_t procs = st->contains("processes") ? (*st)["processes"].size() : 0;
        c.message += ", pid " + std::to_string(st->value("pid", 0)) + ", up " +
                     human_uptime(st->value("uptime_s", 0.0)) + ", " + std::to_string(procs) +
                     (procs == 1 ? " process" : " processes") + " attached";
      } else {
        c.level = Level::fail;
        c.message += ": status request failed: " + st.error().message;
        c.fix = "see honed's log (journalctl -u hone)";
      }
      if (c.level == Level::ok && s->daemon_version() != k_version) {
        c.level = Level::warn;
        c.message += "\nhonectl is " + std::string(k_version) + ", honed " + s->daemon_version();
        c.fix = "install matching versions of honectl and honed";
      }
      checks.push_back(c);
    }
  }

  if (status) {
    check_store_via_daemon(*status, checks);
  } else {
    fs::path dir = o.state_dir;
    std::error_code ec;
    if (dir.empty() && cfg && fs::is_directory(cfg->store.state_dir, ec))
      dir = cfg->store.state_dir;
    if (dir.empty()) {
      checks.push_back({"store", Level::warn, "not checked: honed is not running",
                        "pass --state-dir DIR to read the store directly"});
    } else {
      check_store_directly(dir, checks);
    }
  }
  checks.push_back(config_check);
  // The remote tier: each remote asked once, within the configured timeouts.
  if (cfg) {
    store::remote::Limits limits;
    limits.connect_timeout = std::chrono::milliseconds(cfg->store.remote.connect_timeout_ms);
    limits.timeout = std::chrono::milliseconds(cfg->store.remote.timeout_ms);
    for (size_t i = 0; i < cfg->store.remote.urls.size(); ++i) {
      std::string name = "remote " + std::to_string(i);
      auto e = store::remote::parse_url(cfg->store.remote.urls[i]);
      if (!e) {
        checks.push_back({name, Level::fail, "store.remote.urls[" + std::to_string(i) + "]: " +
                                                 e.error().message,
                          "fix the URL in hone.toml"});
        continue;
      }
      auto b = store::remote::connect(*e, limits);
      auto r = b ? (*b)->exists("hone-doctor-probe") : Result<bool>(b.error());
      if (r) {
        checks.push_back({name, Level::ok, e->display + " answers", ""});
      } else {
        checks.push_back({name, Level::warn, e->display + ": " + r.error().message,
                          "honed works without it (nothing is shared until it answers); check "
                          "the server, the network and the credentials"});
      }
    }
    if (!cfg->store.remote.key_file.empty()) {
      auto k = store::remote_object::read_key(cfg->store.remote.key_file.string());
      checks.push_back(k ? Check{"fleet key", Level::ok, cfg->store.remote.key_file.string(), ""}
                         : Check{"fleet key", Level::fail, k.error().message,
                                 "honed refuses to start until the key is readable"});
    }
  }

  size_t failed = 0, warned = 0;
  for (const auto& c : checks) {
    failed += c.level == Level::fail;
    warned += c.level == Level::warn;
  }
  if (o.json) {
    json list = json::array();
    for (const auto& c : checks) {
      list.push_back({{"check", c.name},
                      {"status", level_name(c.level)},
                      {"message", c.message},
                      {"fix", c.fix}});
    }
    std::cout << json{{"schema", "hone.doctor/1"}, {"ok", failed == 0}, {"checks", list}}.dump(2)
              << "\n";
  } else {
    for (const auto& c : checks) {
      std::string head = std::string(level_name(c.level));
      head.resize(6, ' ');
      std::string name = c.name;
      name.resize(8, ' ');
      std::string pad(14, ' ');
      std::string msg = c.message;
      for (size_t p = msg.find('\n'); p != std::string::npos; p = msg.find('\n', p + 1)) {
        msg.insert(p + 1, pad);
      }
      std::cout << head << name << msg << "\n";
      if (!c.fix.empty()) std::cout << pad << "fix: " << c.fix << "\n";
    }
    if (failed == 0 && warned == 0) {
      std::cout << "doctor: all checks passed\n";
    } else {
      std::cout << "doctor: " << failed << " failed, " << warned << " warning"
                << (warned == 1 ? "" : "s") << "\n";
    }
  }
  return failed ? k_exit_doctor : k_exit_ok;
}

} // namespace hone::ctl
