#include "cuda/nvrtc.hpp"

#include <nvrtc.h>

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <memory>

namespace hone::cuda {

namespace {

Error nvrtc_error(std::string_view what, std::string_view name, nvrtcResult r,
                  const std::string& log = {}) {
  std::string msg = "nvrtc: " + std::string(what) + " " + std::string(name) + " failed: " +
                    nvrtcGetErrorString(r);
  if (!log.empty()) msg += "\n" + log;
  return make_error(std::move(msg));
}

} // namespace

Result<NvrtcOutput> nvrtc_compile(std::string_view source, std::string_view name,
                                  const std::vector<std::string>& options,
                                  const std::vector<NvrtcHeader>& headers) {
  std::string src(source);
  std::string nm(name);
  std::vector<const char*> header_sources, header_names;
  for (const auto& h : headers) {
    header_sources.push_back(h.source.c_str());
    header_names.push_back(h.name.c_str());
  }
  nvrtcProgram prog = nullptr;
  nvrtcResult r = nvrtcCreateProgram(&prog, src.c_str(), nm.c_str(), int(headers.size()),
                                     header_sources.data(), header_names.data());
  if (r != NVRTC_SUCCESS) return nvrtc_error("creating a program for", name, r);
  auto destroy = [](nvrtcProgram* p) { nvrtcDestroyProgram(p); };
  std::unique_ptr<nvrtcProgram, decltype(destroy)> guard(&prog, destroy);

  std::vector<const char*> opts;
  for (const auto& o : options) opts.push_back(o.c_str());
  nvrtcResult compiled = nvrtcCompileProgram(prog, int(opts.size()), opts.data());

  NvrtcOutput out;
  size_t log_size = 0;
  if (nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    out.log.resize(log_size);
    nvrtcGetProgramLog(prog, out.log.data());
    out.log.resize(log_size - 1);
  }
  if (compiled != NVRTC_SUCCESS) return nvrtc_error("compiling", name, compiled, out.log);

  size_t ptx_size = 0;
  r = nvrtcGetPTXSize(prog, &ptx_size);
  if (r != NVRTC_SUCCESS) return nvrtc_error("getting the PTX of", name, r);
  out.ptx.resize(ptx_size);
  r = nvrtcGetPTX(prog, out.ptx.data());
  if (r != NVRTC_SUCCESS) return nvrtc_error("getting the PTX of", name, r);
  while (!out.ptx.empty() && out.ptx.back() == '\0') out.ptx.pop_back();
  return out;
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "unknown";
  return std::to_string(major) + "." + std::to_string(minor);
}

std::string cuda_include_dir() {
  namespace fs = std::filesystem;
  std::vector<fs::path> tries;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&nvrtcVersion), &info) && info.dli_fname) {
    fs::path lib = fs::path(info.dli_fname).parent_path();
    tries.push_back(lib.parent_path() / "include");               // <cuda>/lib64 -> include
    tries.push_back(lib.parent_path().parent_path() / "include"); // targets/<arch>/lib
  }
  if (const char* home = std::getenv("CUDA_HOME"); home && *home)
    tries.push_back(fs::path(home) / "include");
  tries.emplace_back("/usr/local/cuda/include");
  for (const auto& dir : tries) {
    std::error_code ec;
    if (fs::is_regular_file(dir / "cuda_fp16.h", ec)) return fs::weakly_canonical(dir, ec).string();
  }
  return {};
}

} // namespace hone::cuda
