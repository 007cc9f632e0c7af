#include "daemon/capture_files.hpp"

#include "common/wire.hpp"

#include <atomic>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace hone::daemon::capture_files {

namespace {

constexpr char k_magic[4] = {'H', 'C', 'A', 'P'};
constexpr uint32_t k_version = 1;
constexpr uint64_t k_max_meta = 16ull << 20;
constexpr size_t k_header = 4 + 4 + 8;

bool write_all(int fd, const char* p, size_t n) {
  while (n) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= size_t(w);
  }
  return true;
}

// Copy `n` bytes from `in` at `in_off` to `out` (at its current position).
bool copy(int in, off_t in_off, int out, uint64_t n) {
  char buf[1 << 16];
  while (n) {
    ssize_t r = ::pread(in, buf, std::min<uint64_t>(sizeof buf, n), in_off);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    if (!write_all(out, buf, size_t(r))) return false;
    in_off += r;
    n -= uint64_t(r);
  }
  return true;
}

std::string unique_name() {
  static std::atomic<uint64_t> next{0};
  return std::to_string(::getpid()) + "-" + std::to_string(time(nullptr)) + "-" +
         std::to_string(next++);
}

} // namespace

std::filesystem::path directory(const std::filesystem::path& state_dir) {
  return state_dir / "captures";
}

Result<std::filesystem::path> write(const std::filesystem::path& dir, const Capture& meta,
                                    int data) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return make_error("cannot create " + dir.string() + ": " + std::strerror(errno));
  }
  wire::Writer w;
  encode(w, meta);
  std::string header(k_magic, 4);
  uint32_t version = k_version;
  uint64_t meta_len = w.size();
  header.append(reinterpret_cast<const char*>(&version), 4);
  header.append(reinterpret_cast<const char*>(&meta_len), 8);
  std::string name = unique_name();
  auto tmp = dir / ("." + name + ".tmp");
  auto file = dir / (name + ".cap");
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd) return make_error("cannot create " + tmp.string() + ": " + std::strerror(errno));
  bool ok = write_all(fd.get(), header.data(), header.size()) &&
            write_all(fd.get(), w.out().data(), w.size()) &&
            copy(data, 0, fd.get(), meta.data_bytes) && ::fsync(fd.get()) == 0;
  if (!ok || ::rename(tmp.c_str(), file.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return make_error("cannot write " + file.string() + ": " + std::strerror(err));
  }
  return file;
}

std::vector<Loaded> load_all(const std::filesystem::path& dir, std::vector<std::string>* problems) {
  std::vector<Loaded> out;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return out;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const auto& path = entry.path();
    if (path.extension() != ".cap") {
      // leftovers of a write that did not finish
      if (path.filename().string().starts_with(".") && path.extension() == ".tmp") capture_files::remove(path);
      continue;
    }
    auto bad = [&](const std::string& why) {
      problems->push_back(path.filename().string() + ": " + why + "; removed");
      capture_files::remove(path);
    };
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    struct stat st{};
    if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
      bad("not a readable regular file");
      continue;
    }
    char header[k_header];
    if (st.st_size < off_t(k_header) || ::pread(fd.get(), header, k_header, 0) != off_t(k_header) ||
        std::memcmp(header, k_magic, 4) != 0) {
      bad("not a capture file");
      continue;
    }
    uint32_t version;
    uint64_t meta_len;
    std::memcpy(&version, header + 4, 4);
    std::memcpy(&meta_len, header + 8, 8);
    if (version != k_version) {
      bad("capture file version " + std::to_string(version) + " (this honed reads " +
          std::to_string(k_version) + ")");
      continue;
    }
    if (meta_len > k_max_meta || uint64_t(st.st_size) < k_header + meta_len) {
      bad("truncated");
      continue;
    }
    std::string meta_bytes(meta_len, '\0');
    if (::pread(fd.get(), meta_bytes.data(), meta_len, off_t(k_header)) != off_t(meta_len)) {
      bad("unreadable");
      continue;
    }
    Loaded l;
    wire::Reader r(meta_bytes);
    if (!decode(r, l.meta) || l.meta.status != CaptureStatus::ok ||
        uint64_t(st.st_size) != k_header + meta_len + l.meta.data_bytes) {
      bad("corrupt");
      continue;
    }
    l.data = UniqueFd(::memfd_create("hone-capture", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (!l.data || !copy(fd.get(), off_t(k_header + meta_len), l.data.get(), l.meta.data_bytes)) {
      problems->push_back(path.filename().string() + ": cannot read it into memory");
      continue;
    }
    ::fcntl(l.data.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
    l.file = path;
    out.push_back(std::move(l));
  }
  return out;
}

void remove(const std::filesystem::path& file) {
  std::error_code ec;
  std::filesystem::remove(file, ec);
}

} // namespace hone::daemon::capture_files
