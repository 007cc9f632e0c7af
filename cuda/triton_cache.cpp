#include "cuda/triton_cache.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

namespace hone::cuda {

namespace {

// Read all of `path` (a regular file of at most `limit` bytes) into `out`.
bool read_file(const std::string& path, std::uint64_t limit, std::string& out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW);
  if (fd < 0) return false;
  struct stat st {};
  bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && std::uint64_t(st.st_size) <= limit;
  if (ok) {
    out.resize(std::size_t(st.st_size));
    std::size_t done = 0;
    while (done < out.size()) {
      ssize_t n = ::read(fd, out.data() + done, out.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += std::size_t(n);
    }
    ok = done == out.size();
  }
  ::close(fd);
  return ok;
}

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};
using Dir = std::unique_ptr<DIR, DirCloser>;

bool ends_with(const char* name, const char* suffix) {
  std::size_t n = std::strlen(name), s = std::strlen(suffix);
  return n > s && std::memcmp(name + n - s, suffix, s) == 0;
}

} // namespace

std::string triton_cache_dir() {
  try {
    if (const char* dir = std::getenv("TRITON_CACHE_DIR"); dir && *dir) return dir;
    if (const char* home = std::getenv("HOME"); home && *home) {
      return std::string(home) + "/.triton/cache";
    }
  } catch (...) {
  }
  return {};
}

std::vector<std::vector<std::uint8_t>> image_cubins(ImageFormat format,
                                                    std::span<const std::uint8_t> bytes,
                                                    ZstdDecoder zstd) {
  std::vector<std::vector<std::uint8_t>> out;
  try {
    if (format == ImageFormat::cubin) {
      out.emplace_back(bytes.begin(), bytes.end());
      return out;
    }
    if (format != ImageFormat::fatbin) return out;
    auto fatbin = parse_fatbin(bytes);
    if (!fatbin) return out;
    for (const auto& e : fatbin->entries) {
      if (e.kind != EntryKind::elf) continue;
      if (e.compression == Compression::zstd && zstd == nullptr) continue;
      auto image = entry_image(e, zstd);
      if (image) out.push_back(std::move(*image));
    }
  } catch (...) {
    out.clear();
  }
  return out;
}

Result<std::optional<TritonEntry>>
find_triton_ptx(const std::string& root, const std::vector<std::vector<std::uint8_t>>& cubins) {
  if (cubins.empty()) return std::optional<TritonEntry>();
  try {
    Dir top(::opendir(root.c_str()));
    if (!top) {
      return make_error("cannot read the Triton cache " + root + ": " + std::strerror(errno));
    }
    std::optional<TritonEntry> found;
    std::size_t dirs = 0;
    std::string bytes;
    while (!found && dirs < k_triton_max_dirs) {
      dirent* d = ::readdir(top.get());
      if (d == nullptr) break;
      if (d->d_name[0] == '.') continue;
      ++dirs;
      const std::string dir = root + "/" + d->d_name;
      Dir kernel(::opendir(dir.c_str()));
      if (!kernel) continue;
      while (dirent* f = ::readdir(kernel.get())) {
        if (!ends_with(f->d_name, ".cubin")) continue;
        const std::string cubin = dir + "/" + f->d_name;
        struct stat st {};
        if (::stat(cubin.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
        bool sized = false;
        for (const auto& c : cubins) sized |= c.size() == std::uint64_t(st.st_size);
        if (!sized || !read_file(cubin, k_triton_max_file, bytes)) continue;
        bool same = false;
        for (const auto& c : cubins) {
          same |= c.size() == bytes.size() && std::memcmp(c.data(), bytes.data(), c.size()) == 0;
        }
        if (!same) continue;
        TritonEntry e;
        e.cubin_path = cubin;
        e.ptx_path = cubin.substr(0, cubin.size() - std::strlen(".cubin")) + ".ptx";
        if (read_file(e.ptx_path, k_triton_max_file, e.ptx)) {
          while (!e.ptx.empty() && e.ptx.back() == '\0') e.ptx.pop_back();
          found = std::move(e);
        }
        break;
      }
    }
    return found;
  } catch (const std::bad_alloc&) {
    return make_error("out of memory while searching the Triton cache " + root);
  } catch (...) {
    return make_error("searching the Triton cache " + root + " failed");
  }
}

} // namespace hone::cuda
