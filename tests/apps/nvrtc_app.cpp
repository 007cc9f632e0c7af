// hone-testapp-nvrtc: the workload compiled at run time with NVRTC (source, one header by name,
// options), then run through the linked cu* symbols: the module a shim must be able to hand back
// with its source (ImageRequest -> Image with SourceInfo).
//
// Usage: hone-testapp-nvrtc [--dump-ptx PATH] [--pause-before-launch] [--wait-stdin]
//   --dump-ptx PATH  write the PTX NVRTC produced (without its NUL) to PATH
//   --pause-before-launch  after the kernel lookups, wait for a line on stdin
//   --wait-stdin     after printing the results, read stdin to EOF before tearing down
#include "linked_api.hpp"
#include "nvrtc_options.hpp"

#include <nvrtc.h>

#include <cstring>
#include <string>

extern const unsigned char k_workload_source[];
extern const unsigned char k_workload_params_source[];

namespace {

bool nvrtc_ok(nvrtcResult r, const char* call) {
  if (r == NVRTC_SUCCESS) return true;
  std::printf("error: %s: %s\n", call, nvrtcGetErrorString(r));
  return false;
}

} // namespace

int main(int argc, char** argv) {
  testapp::Options opt;
  const char* dump = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--wait-stdin") == 0) {
      opt.wait_stdin = true;
    } else if (std::strcmp(argv[i], "--pause-before-launch") == 0) {
      opt.pause_before_launch = true;
    } else if (std::strcmp(argv[i], "--dump-ptx") == 0 && i + 1 < argc) {
      dump = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--dump-ptx PATH] [--pause-before-launch] [--wait-stdin]\n", argv[0]);
      return 64;
    }
  }
  nvrtcProgram prog = nullptr;
  const char* headers[] = {reinterpret_cast<const char*>(k_workload_params_source)};
  const char* header_names[] = {testapp::k_nvrtc_header_name};
  if (!nvrtc_ok(nvrtcCreateProgram(&prog, reinterpret_cast<const char*>(k_workload_source), testapp::k_nvrtc_program_name, 1,
                                   headers, header_names),
                "nvrtcCreateProgram"))
    return 2;
  nvrtcResult compiled = nvrtcCompileProgram(prog, testapp::k_nvrtc_option_count, testapp::k_nvrtc_options);
  if (compiled != NVRTC_SUCCESS) {
    size_t log_size = 0;
    nvrtcGetProgramLogSize(prog, &log_size);
    std::string log(log_size, '\0');
    nvrtcGetProgramLog(prog, log.data());
    std::printf("error: nvrtcCompileProgram: %s\n%s\n", nvrtcGetErrorString(compiled), log.c_str());
    return 2;
  }
  size_t size = 0;
  if (!nvrtc_ok(nvrtcGetPTXSize(prog, &size), "nvrtcGetPTXSize")) return 2;
  std::string ptx(size, '\0'); // size counts the NUL
  if (!nvrtc_ok(nvrtcGetPTX(prog, ptx.data()), "nvrtcGetPTX")) return 2;
  nvrtcDestroyProgram(&prog);
  if (dump != nullptr) {
    FILE* f = std::fopen(dump, "wb");
    if (f == nullptr || std::fwrite(ptx.data(), 1, std::strlen(ptx.c_str()), f) != std::strlen(ptx.c_str())) {
      std::printf("error: cannot write %s\n", dump);
      return 2;
    }
    std::fclose(f);
  }
  opt.image = ptx.c_str();
  return testapp::run_workload(testapp::LinkedApi{}, opt);
}
