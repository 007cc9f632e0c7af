#include "emu/kernel_registers.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
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

struct TempFile {
  std::string path;
  ~TempFile() {
    if (!path.empty()) unlink(path.c_str());
  }
};

} // namespace

ModuleRegisters kernel_registers(std::string_view ptx, const CompileOptions& options) {
  ModuleRegisters out;
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
  const std::string ptxas = ptxas_path();
  std::vector<std::string> args = {ptxas, "-arch=sm_90", "-v", "-o", "/dev/null"};
  if (options.max_registers) args.push_back("-maxrregcount=" + std::to_string(options.max_registers));
  if (options.threads_per_block) args.push_back("-maxntid=" + std::to_string(options.threads_per_block));
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
  std::string report;
  char buf[4096];
  while (true) {
    ssize_t n = read(pipefd[0], buf, sizeof buf);
    if (n > 0) report.append(buf, size_t(n));
    else if (n < 0 && errno == EINTR) continue;
    else break;
  }
  close(pipefd[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  parse(report, out);
  if (out.by_kernel.empty()) {
    std::string first = report.substr(0, report.find('\n'));
    out.error = ptxas + " reported no registers" + (first.empty() ? "" : ": " + first);
  }
  return out;
}

} // namespace hone::emu
