// A folder of the fuzz target's own for the files it has the code under test read, removed when
// the process exits. On tmpfs (/dev/shm) where there is one: a file written and read back per
// execution on a disk file system costs more than the parser does.
#pragma once

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace hone::fuzz {

inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path path = [] {
    struct stat st {};
    std::string tmpl = ::stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp";
    tmpl += "/hone-fuzz-XXXXXX";
    if (!::mkdtemp(tmpl.data())) {
      std::perror("hone fuzz: mkdtemp");
      std::abort();
    }
    return std::filesystem::path(tmpl);
  }();
  // Registered once `path` is constructed, so that it runs before `path` is destroyed.
  static const bool cleanup = std::atexit([] {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }) == 0;
  (void)cleanup;
  return path;
}

} // namespace hone::fuzz
