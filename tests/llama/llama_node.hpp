// What the llama.cpp tests share: the `node` that runs run_llama.mjs.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>

namespace hone::test {

// The first `node` on PATH; empty when there is none.
inline std::string find_node() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    std::filesystem::path p = std::filesystem::path(dir) / "node";
    if (!dir.empty() && std::filesystem::exists(p)) return p.string();
  }
  return "";
}

} // namespace hone::test
