// libFuzzer target: the capture files honed persists with [capture] persist = true and reads back
// when it starts (daemon/capture_files.*): a file in <state_dir>/captures is whatever is on disk
// after a crash, a full disk or someone with access to the state directory. Each input is written
// as one .cap file in a folder of its own and loaded with capture_files::load_all, as
// Optimizer::load_persisted_captures does.
//
// Nothing may crash, over-read or allocate without bound. A file that loads must be exactly its
// header, its metadata and data_bytes of data, every buffer inside the data, and the memfd must
// hold those bytes, sealed; a file that does not load must be removed and named in the problems.
#include "daemon/capture_files.hpp"
#include "scratch_dir.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

using namespace hone;
namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "capture_file_fuzz: %s\n", what);
  std::abort();
}

std::string read_fd(int fd, size_t n) {
  std::string out(n, '\0');
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd, out.data() + done, n - done, off_t(done));
    if (r <= 0) break;
    done += size_t(r);
  }
  out.resize(done);
  return out;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const fs::path file = hone::fuzz::scratch_dir() / "fuzz.cap";
  {
    int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) fail("cannot write the capture file");
    const bool written = ::write(fd, in.data(), in.size()) == ssize_t(in.size());
    if (::close(fd) != 0 || !written) fail("cannot write the capture file");
  }
  std::vector<std::string> problems;
  auto loaded = daemon::capture_files::load_all(hone::fuzz::scratch_dir(), &problems);
  if (loaded.size() + problems.size() != 1) fail("one file, not one result");
  if (loaded.empty()) {
    if (fs::exists(file)) fail("a file that did not load was kept");
    return 0;
  }
  const auto& l = loaded[0];
  if (l.file != file) fail("the loaded capture names another file");
  if (l.meta.status != CaptureStatus::ok) fail("a capture that is not ok was loaded");
  if (size < 16) fail("a file shorter than its header was loaded");
  uint64_t meta_len = 0;
  std::memcpy(&meta_len, data + 8, 8);
  if (meta_len > size - 16 || size - 16 - meta_len != l.meta.data_bytes) {
    fail("the file's length is not header + metadata + data");
  }
  for (const CaptureBuffer& b : l.meta.buffers) {
    auto within = [&](uint64_t off) {
      return off <= l.meta.data_bytes && b.size <= l.meta.data_bytes - off;
    };
    if (!within(b.before) || (b.after != ~0ull && !within(b.after))) {
      fail("a buffer outside the capture's data");
    }
  }
  struct stat st {};
  if (::fstat(l.data.get(), &st) != 0 || uint64_t(st.st_size) != l.meta.data_bytes) {
    fail("the memfd is not data_bytes long");
  }
  if (read_fd(l.data.get(), l.meta.data_bytes) != in.substr(size_t(16 + meta_len))) {
    fail("the memfd does not hold the file's data");
  }
  const int seals = ::fcntl(l.data.get(), F_GET_SEALS);
  if (seals < 0 || !(seals & F_SEAL_WRITE) || !(seals & F_SEAL_GROW)) fail("the memfd is not sealed");
  daemon::capture_files::remove(file);
  return 0;
}
