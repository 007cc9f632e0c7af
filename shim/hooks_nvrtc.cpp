// NVRTC hooks: remember the source, headers and options of every program, so a module loaded
// from its output is linked to them (the agent specializes at source level when it has source).
#include "shim/real.hpp"
#include "shim/registry.hpp"
#include "shim/shim.hpp"

#include <nvrtc.h>

#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <unistd.h>

using namespace hone::shim;

namespace {

struct Programs {
  std::mutex mutex;
  std::unordered_map<nvrtcProgram, hone::proto::SourceInfo> map;
};

Programs& programs() {
  static Programs* p = new Programs(); // never destroyed: hooks may run during exit
  return *p;
}

// `dir` as an absolute path: relative include directories are the application's working
// directory's (hashcat passes `-I OpenCL` from its install folder), which honed does not know.
std::string absolute_dir(const char* dir) {
  if (!dir || !*dir || dir[0] == '/') return dir ? dir : "";
  char cwd[4096];
  if (!::getcwd(cwd, sizeof cwd)) return dir;
  return std::string(cwd) + "/" + dir;
}

// The options as recorded: as given, but with include directories made absolute.
std::vector<std::string> recorded_options(int n, const char* const* options) {
  std::vector<std::string> out;
  for (int i = 0; i < n && options; ++i) {
    const char* o = options[i];
    if (!o) continue;
    const std::string_view v(o);
    if ((v == "-I" || v == "--include-path") && i + 1 < n && options[i + 1]) {
      out.emplace_back(o);
      out.push_back(absolute_dir(options[++i]));
    } else if (v.starts_with("--include-path=")) {
      out.push_back("--include-path=" + absolute_dir(o + 15));
    } else if (v.starts_with("-I") && v.size() > 2) {
      out.push_back("-I" + absolute_dir(o + 2));
    } else {
      out.emplace_back(o);
    }
  }
  return out;
}

void output(nvrtcProgram prog, const char* data, Fn size_fn) {
  using SizeFn = nvrtcResult (*)(nvrtcProgram, size_t*);
  auto get_size = real_as<SizeFn>(size_fn);
  size_t size = 0;
  if (!get_size || get_size(prog, &size) != NVRTC_SUCCESS || !size) return;
  hone::proto::SourceInfo info;
  {
    std::lock_guard lock(programs().mutex);
    auto it = programs().map.find(prog);
    if (it == programs().map.end()) return;
    info = it->second;
  }
  registry().nvrtc_output(info, data, size);
}

} // namespace

extern "C" {

__attribute__((visibility("default"))) nvrtcResult
nvrtcCreateProgram(nvrtcProgram* prog, const char* src, const char* name, int num_headers,
                   const char* const* headers, const char* const* include_names) {
  auto real = real_as<decltype(&::nvrtcCreateProgram)>(Fn::nvrtcCreateProgram);
  if (!real) return NVRTC_ERROR_INTERNAL_ERROR;
  nvrtcResult r = real(prog, src, name, num_headers, headers, include_names);
  if (r != NVRTC_SUCCESS || !prog || !enabled()) return r;
  hone::proto::SourceInfo info;
  info.name = name ? name : "default_program";
  info.source = src ? src : "";
  for (int i = 0; i < num_headers && headers && include_names; ++i) {
    info.headers.emplace_back(include_names[i] ? include_names[i] : "",
                              headers[i] ? headers[i] : "");
  }
  std::lock_guard lock(programs().mutex);
  programs().map[*prog] = std::move(info);
  return r;
}

__attribute__((visibility("default"))) nvrtcResult
nvrtcCompileProgram(nvrtcProgram prog, int num_options, const char* const* options) {
  auto real = real_as<decltype(&::nvrtcCompileProgram)>(Fn::nvrtcCompileProgram);
  if (!real) return NVRTC_ERROR_INTERNAL_ERROR;
  if (enabled()) {
    std::lock_guard lock(programs().mutex);
    auto it = programs().map.find(prog);
    if (it != programs().map.end()) it->second.options = recorded_options(num_options, options);
  }
  return real(prog, num_options, options);
}

__attribute__((visibility("default"))) nvrtcResult nvrtcGetPTX(nvrtcProgram prog, char* ptx) {
  auto real = real_as<decltype(&::nvrtcGetPTX)>(Fn::nvrtcGetPTX);
  if (!real) return NVRTC_ERROR_INTERNAL_ERROR;
  nvrtcResult r = real(prog, ptx);
  if (r == NVRTC_SUCCESS && ptx && enabled()) output(prog, ptx, Fn::nvrtcGetPTXSize);
  return r;
}

__attribute__((visibility("default"))) nvrtcResult nvrtcGetCUBIN(nvrtcProgram prog, char* cubin) {
  auto real = real_as<decltype(&::nvrtcGetCUBIN)>(Fn::nvrtcGetCUBIN);
  if (!real) return NVRTC_ERROR_INTERNAL_ERROR;
  nvrtcResult r = real(prog, cubin);
  if (r == NVRTC_SUCCESS && cubin && enabled()) output(prog, cubin, Fn::nvrtcGetCUBINSize);
  return r;
}

__attribute__((visibility("default"))) nvrtcResult nvrtcDestroyProgram(nvrtcProgram* prog) {
  auto real = real_as<decltype(&::nvrtcDestroyProgram)>(Fn::nvrtcDestroyProgram);
  if (!real) return NVRTC_ERROR_INTERNAL_ERROR;
  if (prog && enabled()) {
    std::lock_guard lock(programs().mutex);
    programs().map.erase(*prog);
  }
  return real(prog);
}

} // extern "C"
