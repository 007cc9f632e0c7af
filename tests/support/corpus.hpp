// The CUDA test corpus (tests/kernels): its files, their `hone-expect` annotations, and the PTX
// nvcc and NVRTC produce for them, compiled once per test process, in parallel.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace hone::test {

// Stems of tests/kernels/*.cu, sorted ("bits", "elementwise", ...).
std::vector<std::string> corpus_files();

struct KernelExpectation {
  std::string entry;
  std::vector<std::pair<std::string, std::string>> params; // name, access ("-", "r", "struct(...)")
};
// The `// hone-expect` lines of one corpus file.
const std::vector<KernelExpectation>& expectations(const std::string& file);

struct CorpusBuild {
  std::string file;     // stem
  std::string compiler; // "nvcc" or "nvrtc"
  std::string arch;     // "75", "80", "90"
  std::string id() const { return file + "_" + compiler + "_sm" + arch; }
};
// Every file with both compilers for sm_75, sm_80 and sm_90.
std::vector<CorpusBuild> all_builds();

struct CompiledModule {
  std::string path;  // where the PTX was written (under the build directory)
  std::string ptx;
  std::string error; // empty on success
};
// The PTX of one build; the first call compiles all of them.
const CompiledModule& compiled(const CorpusBuild& build);

struct CommandResult {
  int status = -1;     // exit status, or -1 when it could not run
  std::string output;  // stdout and stderr together
};
CommandResult run_command(const std::vector<std::string>& argv);

std::string read_text(const std::string& path);

} // namespace hone::test
