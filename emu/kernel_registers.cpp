#include "emu/kernel_registers.hpp"

#include "ptx/retarget.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

extern char** environ;

namespace hone::emu {

namespace {

std::string ptxas_path() {
  if (const char* e = std::getenv("HONE_EMU_PTXAS"); e && *e) return e;
  if (access(HONE_PTXAS_PATH, X_OK) == 0) return HONE_PTXAS_PATH;
  return "ptxas";
}

// ptxas -v reports, per entry:
//   ptxas info    : Compiling entry function 'NAME' for 'sm_90'
//   ...
//   ptxas info    : Used 10 registers, used 0 barriers, ...
void parse(const std::string& report, ModuleRegisters& out) {
  std::istringstream in(report);
  std::string line, pending;
  const std::string entry = "Compiling entry function '";
  while (std::getline(in, line)) {
    if (auto p = line.find(entry); p != std::string::npos) {
      auto start = p + entry.size();
      auto end = line.find('\'', start);
      pending = end == std::string::npos ? std::string() : line.substr(start, end - start);
      continue;
    }
    if (pending.empty()) continue;
    if (auto p = line.find("Used "); p != std::string::npos) {
      char* end = nullptr;
      unsigned long n = std::strtoul(line.c_str() + p + 5, &end, 10);
      if (end && std::string_view(end).starts_with(" registers")) out.by_kernel[pending] = uint32_t(n);
      pending.clear();
    }
  }
}

// --- the report cache ----------------------------------------------------------------------------
// ptxas takes about 3 ms per entry (13 s for a module of 4000), and the same application loads the
// same modules on every run: its reports are kept, one file per (ptxas binary, arguments, PTX), in
// HONE_EMU_CACHE_DIR, else $XDG_CACHE_HOME/hone-emu, else ~/.cache/hone-emu ("off": no cache).
// A report read back gives exactly the counts the run would have: the key covers everything ptxas
// is given and the binary's identity (size, mtime, inode). A file that does not read as a report
// is ignored and rewritten.

constexpr std::string_view k_cache_magic = "hone-emu ptxas report v1\n";

} // namespace

std::string cache_dir() {
  if (const char* e = std::getenv("HONE_EMU_CACHE_DIR"); e && *e)
    return std::string_view(e) == "off" ? std::string() : std::string(e);
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/hone-emu";
  const char* home = std::getenv("HOME");
  if (!home || !*home) {
    const passwd* pw = getpwuid(getuid());
    home = pw ? pw->pw_dir : nullptr;
  }
  if (!home || !*home) return {};
  return std::string(home) + "/.cache/hone-emu";
}

namespace {

// The cache file for this run, or "" when there is no usable cache.
std::string cache_file(const std::string& ptxas, const std::vector<std::string>& args,
                       std::string_view ptx) {
  const std::string dir = cache_dir();
  if (dir.empty()) return {};
  if (ptxas.find('/') == std::string::npos) return {}; // found on PATH: no identity to key on
  struct stat st {};
  if (stat(ptxas.c_str(), &st) != 0) return {};
  XXH3_state_t* h = XXH3_createState();
  if (!h) return {};
  XXH3_128bits_reset(h);
  auto feed = [&](std::string_view v) {
    const uint64_t n = v.size();
    XXH3_128bits_update(h, &n, sizeof n);
    XXH3_128bits_update(h, v.data(), v.size());
  };
  feed(k_cache_magic);
  feed(ptxas);
  const uint64_t id[] = {uint64_t(st.st_size), uint64_t(st.st_mtim.tv_sec),
                         uint64_t(st.st_mtim.tv_nsec), uint64_t(st.st_ino), uint64_t(st.st_dev)};
  XXH3_128bits_update(h, id, sizeof id);
  for (size_t i = 1; i < args.size(); ++i) feed(args[i]);
  feed(ptx);
  const XXH128_hash_t d = XXH3_128bits_digest(h);
  XXH3_freeState(h);
  char name[64];
  std::snprintf(name, sizeof name, "/%016llx%016llx.ptxas", static_cast<unsigned long long>(d.high64),
                static_cast<unsigned long long>(d.low64));
  return dir + name;
}

bool read_cached(const std::string& path, ModuleRegisters& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream s;
  s << in.rdbuf();
  const std::string text = s.str();
  if (!text.starts_with(k_cache_magic)) return false;
  parse(text.substr(k_cache_magic.size()), out);
  return !out.by_kernel.empty();
}

// Best effort: a cache that cannot be written only costs the next run a ptxas run.
void write_cached(const std::string& path, const std::string& report) {
  const std::string dir = path.substr(0, path.rfind('/'));
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    // the parent may be missing too (~/.cache on a fresh account)
    const std::string parent = dir.substr(0, dir.rfind('/'));
    if (mkdir(parent.c_str(), 0700) != 0 && errno != EEXIST) return;
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return;
  }
  std::string tmp = path + ".XXXXXX";
  int fd = mkstemp(tmp.data());
  if (fd < 0) return;
  std::string body = std::string(k_cache_magic) + report;
  bool ok = true;
  for (size_t done = 0; done < body.size();) {
    ssize_t n = write(fd, body.data() + done, body.size() - done);
    if (n <= 0) {
      ok = false;
      break;
    }
    done += size_t(n);
  }
  if (close(fd) != 0) ok = false;
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) unlink(tmp.c_str());
}

struct TempFile {
  std::string path;
  ~TempFile() {
    if (!path.empty()) unlink(path.c_str());
  }
};

} // namespace

namespace {

struct PtxasRun {
  std::string report; // what it wrote to stdout and stderr
  bool exited_ok = false;
  std::string error;  // it could not be run at all
};

// ptxas `args` on a temporary file holding `ptx`.
PtxasRun run_ptxas(const std::string& ptxas, std::vector<std::string> args, std::string_view ptx) {
  PtxasRun out;
  const char* dir = std::getenv("TMPDIR");
  TempFile file;
  std::string tmpl = std::string(dir && *dir ? dir : "/tmp") + "/hone-emu-XXXXXX.ptx";
  int fd = mkstemps(tmpl.data(), 4);
  if (fd < 0) {
    out.error = "cannot create a temporary file for ptxas: " + std::string(std::strerror(errno));
    return out;
  }
  file.path = tmpl;
  for (size_t done = 0; done < ptx.size();) {
    ssize_t n = write(fd, ptx.data() + done, ptx.size() - done);
    if (n <= 0) {
      close(fd);
      out.error = "cannot write the PTX for ptxas: " + std::string(std::strerror(errno));
      return out;
    }
    done += size_t(n);
  }
  close(fd);

  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) {
    out.error = "pipe: " + std::string(std::strerror(errno));
    return out;
  }
  args.push_back(file.path);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipefd[1], 1);
  posix_spawn_file_actions_adddup2(&actions, pipefd[1], 2);
  // The application's environment, but no preloaded library (libhone.so has no business in ptxas).
  std::vector<char*> env;
  for (char** e = environ; e && *e; ++e) {
    if (std::strncmp(*e, "LD_PRELOAD=", 11) != 0) env.push_back(*e);
  }
  env.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, ptxas.c_str(), &actions, nullptr, argv.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  close(pipefd[1]);
  if (rc != 0) {
    close(pipefd[0]);
    out.error = "cannot run " + ptxas + ": " + std::strerror(rc);
    return out;
  }
  char buf[4096];
  while (true) {
    ssize_t n = read(pipefd[0], buf, sizeof buf);
    if (n > 0) out.report.append(buf, size_t(n));
    else if (n < 0 && errno == EINTR) continue;
    else break;
  }
  close(pipefd[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  out.exited_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  return out;
}

// The newest PTX ISA version ptxas said it knows, when it refused the module's `.version` as
// newer: "Unsupported .version 9.1; current version is '9.0'" (CUDA 13.0's ptxas on CUDA 13.1's
// PTX).
std::optional<std::pair<uint32_t, uint32_t>> refused_version(const std::string& report) {
  if (report.find("Unsupported .version") == std::string::npos) return std::nullopt;
  const std::string key = "current version is '";
  const auto at = report.find(key);
  if (at == std::string::npos) return std::nullopt;
  unsigned major = 0, minor = 0;
  if (std::sscanf(report.c_str() + at + key.size(), "%u.%u'", &major, &minor) != 2) return std::nullopt;
  return std::pair(uint32_t(major), uint32_t(minor));
}

} // namespace

ModuleRegisters kernel_registers(std::string_view ptx, const CompileOptions& options) {
  ModuleRegisters out;
  const std::string ptxas = ptxas_path();
  std::vector<std::string> args = {ptxas, "-arch=sm_90", "-v", "-o", "/dev/null"};
  if (options.max_registers) args.push_back("-maxrregcount=" + std::to_string(options.max_registers));
  if (options.threads_per_block) args.push_back("-maxntid=" + std::to_string(options.threads_per_block));
  const std::string cached = cache_file(ptxas, args, ptx);
  if (!cached.empty() && read_cached(cached, out)) return out;
  out = {};
  PtxasRun run = run_ptxas(ptxas, args, ptx);
  if (!run.error.empty()) {
    out.error = run.error;
    return out;
  }
  // PTX newer than this ptxas (`.version` 9.1 from CUDA 13.1 for CUDA 13.0's ptxas): the same text
  // declaring the newest version it knows, as ptx::retarget lowers it. When the module uses
  // nothing newer, that is the register allocation the newer ptxas would make too, within what
  // two toolkits' allocators differ by; when it does, ptxas refuses the line and the count stays
  // assumed.
  if (auto known = refused_version(run.report)) {
    if (auto lowered = ptx::lower_version(ptx, known->first, known->second)) {
      PtxasRun again = run_ptxas(ptxas, args, *lowered);
      if (again.error.empty()) {
        out.lowered_version = std::to_string(known->first) + "." + std::to_string(known->second);
        run = std::move(again);
      }
    }
  }
  parse(run.report, out);
  if (!out.by_kernel.empty() && run.exited_ok && !cached.empty()) write_cached(cached, run.report);
  if (out.by_kernel.empty()) {
    std::string first = run.report.substr(0, run.report.find('\n'));
    if (!out.lowered_version.empty()) first += " (with .version lowered to " + out.lowered_version + ")";
    out.error = ptxas + " reported no registers" + (first.empty() ? "" : ": " + first);
  }
  return out;
}

} // namespace hone::emu
