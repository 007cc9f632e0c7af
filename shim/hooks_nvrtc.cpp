// NVRTC hooks: remember the source, headers and options of every program, so a module loaded
// from its output is linked to them (the agent specializes at source level when it has source).
#include "shim/real.hpp"
#include "shim/registry.hpp"
#include "shim/shim.hpp"

#include <nvrtc.h>

#include <mutex>
#include <unordered_map>

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
    if (it != programs().map.end()) {
      it->second.options.clear();
      for (int i = 0; i < num_options && options; ++i) {
        if (options[i]) it->second.options.emplace_back(options[i]);
      }
    }
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
