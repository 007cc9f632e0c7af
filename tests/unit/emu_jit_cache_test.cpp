// Compiled code kept on disk (emu/README.md, "Execution paths"): a kernel compiled in one process
// is loaded from HONE_EMU_CACHE_DIR by the next; a cached file that was changed or cut afterwards
// is never handed to LLVM — it is removed, the kernel compiled again, and its results are right.
// Each run is a child process (this binary again, running JitCacheChild.Run), since a process
// keeps the code it compiled.
#include <cuda.h>

#include <gtest/gtest.h>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;
namespace fs = std::filesystem;

namespace {

const char* k_ptx = R"(
.version 7.8
.target sm_80
.address_size 64
.visible .entry add_one(.param .u64 out, .param .u32 n)
{
  .reg .pred %p<2>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [n];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mad.lo.s32 %r5, %r2, %r3, %r4;
  setp.ge.u32 %p1, %r5, %r1;
  @%p1 bra DONE;
  cvta.to.global.u64 %rd2, %rd1;
  mul.wide.u32 %rd3, %r5, 4;
  add.s64 %rd4, %rd2, %rd3;
  ld.global.u32 %r6, [%rd4];
  mul.lo.s32 %r7, %r6, 3;
  add.s32 %r7, %r7, 1;
  st.global.u32 [%rd4], %r7;
DONE:
  ret;
}
)";

struct Child {
  int status = -1;
  std::string err;
};

Child run_child(const fs::path& cache) {
  Child c;
  fs::path err = cache.parent_path() / "child.err";
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  env.push_back("HONE_JIT_CACHE_CHILD=1");
  env.push_back("HONE_EMU_CACHE_DIR=" + cache.string());
  env.push_back("HONE_EMU_EXEC=compile");
  env.push_back("HONE_EMU_LOG=debug");
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string self = fs::read_symlink("/proc/self/exe").string();
  std::string filter = "--gtest_filter=JitCacheChild.Run";
  char* argv[] = {self.data(), filter.data(), nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  if (posix_spawn(&pid, self.c_str(), &actions, nullptr, argv, envp.data()) == 0) {
    int st = 0;
    waitpid(pid, &st, 0);
    c.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  posix_spawn_file_actions_destroy(&actions);
  std::ifstream in(err);
  std::stringstream s;
  s << in.rdbuf();
  c.err = s.str();
  return c;
}

std::vector<fs::path> objects(const fs::path& cache) {
  std::vector<fs::path> out;
  if (!fs::is_directory(cache)) return out;
  for (const auto& e : fs::directory_iterator(cache)) {
    if (e.path().extension() == ".o") out.push_back(e.path());
  }
  return out;
}

} // namespace

// The child: compile (or load) add_one, run it over 65536 elements, check every one.
TEST(JitCacheChild, Run) {
  if (!std::getenv("HONE_JIT_CACHE_CHILD")) GTEST_SKIP() << "runs as the parent's child only";
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  CUdevice dev;
  ASSERT_EQ(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
  CUcontext ctx;
  ASSERT_EQ(cuCtxCreate(&ctx, nullptr, 0, dev), CUDA_SUCCESS);
  CUmodule mod;
  ASSERT_EQ(cuModuleLoadData(&mod, k_ptx), CUDA_SUCCESS);
  CUfunction fn;
  ASSERT_EQ(cuModuleGetFunction(&fn, mod, "add_one"), CUDA_SUCCESS);
  unsigned n = 1u << 16;
  std::vector<unsigned> host(n);
  for (unsigned i = 0; i < n; ++i) host[i] = i * 7;
  CUdeviceptr d;
  ASSERT_EQ(cuMemAlloc(&d, n * 4), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyHtoD(d, host.data(), n * 4), CUDA_SUCCESS);
  void* args[] = {&d, &n};
  ASSERT_EQ(cuLaunchKernel(fn, n / 256, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoH(host.data(), d, n * 4), CUDA_SUCCESS);
  for (unsigned i = 0; i < n; ++i) ASSERT_EQ(host[i], i * 7 * 3 + 1) << "element " << i;
}

TEST(JitCache, CodeCompiledOnceIsLoadedAndADamagedFileIsCompiledAgain) {
  fs::path base = fs::temp_directory_path() / ("hone-jit-cache-" + std::to_string(::getpid()));
  fs::remove_all(base);
  fs::create_directories(base);
  fs::path cache = base / "cache";

  Child first = run_child(cache);
  ASSERT_EQ(first.status, 0) << first.err;
  EXPECT_NE(first.err.find("add_one: compiled in"), std::string::npos) << first.err;
  auto files = objects(cache);
  ASSERT_EQ(files.size(), 1u) << first.err;
  const fs::path object = files.front();

  Child second = run_child(cache);
  ASSERT_EQ(second.status, 0) << second.err;
  EXPECT_NE(second.err.find("add_one: loaded compiled code"), std::string::npos) << second.err;

  // Bytes changed in the middle (the code itself, as far as LLVM knows), then the file cut short:
  // each time the kernel is compiled again, runs right, and the file is good again.
  auto damaged_run = [&](auto damage, const char* what) {
    SCOPED_TRACE(what);
    std::string bytes;
    {
      std::ifstream in(object, std::ios::binary);
      std::stringstream s;
      s << in.rdbuf();
      bytes = s.str();
    }
    ASSERT_GT(bytes.size(), 64u);
    damage(bytes);
    std::ofstream(object, std::ios::binary | std::ios::trunc) << bytes;
    Child c = run_child(cache);
    ASSERT_EQ(c.status, 0) << c.err;
    EXPECT_NE(c.err.find("add_one: compiled in"), std::string::npos) << c.err;
    Child after = run_child(cache);
    ASSERT_EQ(after.status, 0) << after.err;
    EXPECT_NE(after.err.find("add_one: loaded compiled code"), std::string::npos) << after.err;
  };
  damaged_run([](std::string& b) { for (size_t i = b.size() / 2; i < b.size() / 2 + 16; ++i) b[i] ^= 0x5a; },
              "changed");
  damaged_run([](std::string& b) { b.resize(b.size() - 5); }, "cut");
  fs::remove_all(base);
}
