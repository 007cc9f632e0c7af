// Captures on disk, for operators who opt in ([capture] persist = true): each captured launch is
// one file of mode 0600 in <state_dir>/captures, so that validation can go on after a restart
// without waiting for the application to launch the kernel again. The files hold the
// application's data: nothing else in honed writes capture bytes anywhere.
//
// A file: "HCAP", u32 format version (1), u64 length of the encoded Capture, the Capture
// (common/capture.hpp), then its data_bytes of data.
#pragma once

#include "common/capture.hpp"
#include "common/result.hpp"
#include "daemon/unique_fd.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace hone::daemon::capture_files {

std::filesystem::path directory(const std::filesystem::path& state_dir);

// Write `meta` and the first meta.data_bytes of `data` (a memfd) to a new file in `dir`
// (created 0700 if missing), atomically. Returns the file's path.
Result<std::filesystem::path> write(const std::filesystem::path& dir, const Capture& meta,
                                    int data);

struct Loaded {
  Capture meta;
  UniqueFd data; // a sealed memfd holding the capture's data
  std::filesystem::path file;
};

// Every capture file in `dir`. A file that is not one (truncated, corrupt, another version) is
// removed and named in `problems`; it is never trusted.
std::vector<Loaded> load_all(const std::filesystem::path& dir, std::vector<std::string>* problems);

// Remove a capture file; quiet when it is already gone.
void remove(const std::filesystem::path& file);

} // namespace hone::daemon::capture_files
