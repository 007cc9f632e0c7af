#include "corpus.hpp"

#include "cuda/nvrtc.hpp"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace hone::test {

namespace {

const std::vector<std::string> k_archs = {"75", "80", "90"};

fs::path kernels_dir() { return fs::path(HONE_SOURCE_DIR) / "tests" / "kernels"; }
fs::path output_dir() { return fs::path(HONE_BINARY_DIR) / "tests" / "corpus"; }

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  return s.substr(i);
}

CompiledModule compile_one(const CorpusBuild& b) {
  CompiledModule m;
  fs::create_directories(output_dir());
  m.path = (output_dir() / (b.id() + ".ptx")).string();
  std::string src = (kernels_dir() / (b.file + ".cu")).string();
  if (b.compiler == "nvcc") {
    auto r = run_command({HONE_NVCC, "-ptx", "-arch=sm_" + b.arch, src, "-o", m.path});
    if (r.status != 0) {
      m.error = "nvcc failed on " + src + ":\n" + r.output;
      return m;
    }
    m.ptx = read_text(m.path);
  } else {
    auto out = cuda::nvrtc_compile(read_text(src), b.file + ".cu",
                                   {"--gpu-architecture=compute_" + b.arch,
                                    std::string("-I") + HONE_CUDA_INCLUDE});
    if (!out) {
      m.error = out.error().message;
      return m;
    }
    m.ptx = out->ptx;
    std::ofstream(m.path) << m.ptx;
  }
  return m;
}

} // namespace

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> corpus_files() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(kernels_dir())) {
    if (e.path().extension() == ".cu") out.push_back(e.path().stem().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

const std::vector<KernelExpectation>& expectations(const std::string& file) {
  static std::mutex mutex;
  static std::map<std::string, std::vector<KernelExpectation>> cache;
  std::lock_guard lock(mutex);
  auto it = cache.find(file);
  if (it != cache.end()) return it->second;
  std::vector<KernelExpectation> out;
  std::istringstream in(read_text((kernels_dir() / (file + ".cu")).string()));
  std::string line;
  const std::string tag = "// hone-expect ";
  while (std::getline(in, line)) {
    auto pos = line.find(tag);
    if (pos == std::string::npos) continue;
    line = line.substr(pos + tag.size());
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    KernelExpectation e;
    e.entry = trim(line.substr(0, colon));
    std::istringstream items(line.substr(colon + 1));
    std::string item;
    while (items >> item) {
      auto eq = item.find('=');
      if (eq == std::string::npos) continue;
      e.params.emplace_back(item.substr(0, eq), item.substr(eq + 1));
    }
    out.push_back(std::move(e));
  }
  return cache.emplace(file, std::move(out)).first->second;
}

std::vector<CorpusBuild> all_builds() {
  std::vector<CorpusBuild> out;
  for (const auto& f : corpus_files()) {
    for (const char* c : {"nvcc", "nvrtc"}) {
      for (const auto& a : k_archs) out.push_back({f, c, a});
    }
  }
  return out;
}

const CompiledModule& compiled(const CorpusBuild& build) {
  static std::once_flag once;
  static std::map<std::string, CompiledModule> modules;
  std::call_once(once, [] {
    auto builds = all_builds();
    std::vector<CompiledModule> results(builds.size());
    std::atomic<size_t> next{0};
    unsigned n = std::max(2u, std::thread::hardware_concurrency());
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < n; ++t) {
      pool.emplace_back([&] {
        for (size_t i; (i = next++) < builds.size();) results[i] = compile_one(builds[i]);
      });
    }
    for (auto& t : pool) t.join();
    for (size_t i = 0; i < builds.size(); ++i) modules[builds[i].id()] = std::move(results[i]);
  });
  return modules.at(build.id());
}

CommandResult run_command(const std::vector<std::string>& argv) {
  CommandResult r;
  int fds[2];
  if (pipe(fds) != 0) return r;
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return r;
  }
  if (pid == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) r.output.append(buf, size_t(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

} // namespace hone::test
