#include "store/export_file.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace hone::store::export_file {

namespace {

constexpr size_t k_header = 8 + 4 + 4; // magic, format, count
constexpr size_t k_trailer = 16;       // xxh3-128: low half, high half, little-endian

std::string errno_text(int e) {
  return std::strerror(e);
}

Result<void> write_fully(int fd, const char* p, size_t n, const std::string& what) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return make_error("writing " + what + ": " + errno_text(errno));
    }
    p += w;
    n -= size_t(w);
  }
  return ok();
}

// Writes through to a file descriptor and hashes what it wrote.
class HashedOut {
public:
  HashedOut(int fd, std::string what) : m_fd(fd), m_what(std::move(what)) {
    XXH3_128bits_reset(&m_state);
  }
  Result<void> put(const void* p, size_t n) {
    XXH3_128bits_update(&m_state, p, n);
    m_buf.append(static_cast<const char*>(p), n);
    if (m_buf.size() >= (1u << 20)) return drain();
    return ok();
  }
  Result<void> drain() {
    auto r = write_fully(m_fd, m_buf.data(), m_buf.size(), m_what);
    m_buf.clear();
    return r;
  }
  Result<void> finish() {
    XXH128_hash_t h = XXH3_128bits_digest(&m_state);
    m_buf.append(reinterpret_cast<const char*>(&h.low64), 8);
    m_buf.append(reinterpret_cast<const char*>(&h.high64), 8);
    return drain();
  }

private:
  int m_fd;
  std::string m_what;
  std::string m_buf;
  XXH3_state_t m_state;
};

} // namespace

std::string encode(const std::vector<std::string>& records) {
  std::string out(k_magic);
  uint32_t format = k_format;
  uint32_t count = uint32_t(records.size());
  out.append(reinterpret_cast<const char*>(&format), 4);
  out.append(reinterpret_cast<const char*>(&count), 4);
  for (const auto& rec : records) {
    uint64_t len = rec.size();
    out.append(reinterpret_cast<const char*>(&len), 8);
    out += rec;
  }
  XXH128_hash_t h = XXH3_128bits(out.data(), out.size());
  out.append(reinterpret_cast<const char*>(&h.low64), 8);
  out.append(reinterpret_cast<const char*>(&h.high64), 8);
  return out;
}

namespace {

Result<void> write_body(int fd, const std::string& what, const std::vector<std::string>& records) {
  HashedOut out(fd, what);
  uint32_t format = k_format;
  uint32_t count = uint32_t(records.size());
  if (auto r = out.put(k_magic.data(), k_magic.size()); !r) return r;
  if (auto r = out.put(&format, 4); !r) return r;
  if (auto r = out.put(&count, 4); !r) return r;
  for (const auto& rec : records) {
    uint64_t len = rec.size();
    if (auto r = out.put(&len, 8); !r) return r;
    if (auto r = out.put(rec.data(), rec.size()); !r) return r;
  }
  return out.finish();
}

} // namespace

Result<void> write(const std::filesystem::path& file, const std::vector<std::string>& records) {
  if (records.size() > UINT32_MAX) return make_error("too many variants for one export file");
  std::filesystem::path dir = file.parent_path().empty() ? "." : file.parent_path();
  std::string tmpl = (dir / ("." + file.filename().string() + ".tmp.XXXXXX")).string();
  int fd = ::mkstemp(tmpl.data());
  if (fd < 0)
    return make_error("cannot create a temporary file in " + dir.string() + ": " +
                      errno_text(errno) + " (is the folder there and writable?)");
  ::fchmod(fd, 0644);
  auto fail = [&](Error e) -> Result<void> {
    if (fd >= 0) ::close(fd);
    ::unlink(tmpl.c_str());
    return e;
  };
  if (auto r = write_body(fd, tmpl, records); !r) return fail(r.error());
  if (::fsync(fd) != 0) return fail(make_error("fsync of " + tmpl + ": " + errno_text(errno)));
  int rc = ::close(fd);
  fd = -1;
  if (rc != 0) return fail(make_error("closing " + tmpl + ": " + errno_text(errno)));
  if (::rename(tmpl.c_str(), file.c_str()) != 0)
    return fail(make_error("renaming " + tmpl + " to " + file.string() + ": " + errno_text(errno)));
  // The rename itself is durable only once the folder is synced.
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return ok();
}

Result<std::vector<std::string_view>> parse(std::string_view bytes) {
  if (bytes.empty()) return make_error("the file is empty: not a hone export file");
  if (bytes.size() < k_magic.size() || bytes.substr(0, k_magic.size()) != k_magic)
    return make_error("not a hone export file (it does not start with \"HONEVARS\")");
  if (bytes.size() < k_magic.size() + 4)
    return make_error("the file is truncated (" + std::to_string(bytes.size()) +
                      " bytes, shorter than its header): export it again");
  uint32_t format = 0;
  std::memcpy(&format, bytes.data() + 8, 4);
  if (format > k_format)
    return make_error("the file has export format version " + std::to_string(format) +
                      ", newer than this hone reads (" + std::to_string(k_format) +
                      "): upgrade hone on this host, or export with the same hone version");
  if (format == 0) return make_error("the file has export format version 0, which never existed");
  if (bytes.size() < k_header + k_trailer)
    return make_error("the file is truncated (" + std::to_string(bytes.size()) +
                      " bytes, shorter than header and checksum): export it again");

  std::string_view body = bytes.substr(0, bytes.size() - k_trailer);
  XXH128_hash_t want{};
  std::memcpy(&want.low64, bytes.data() + body.size(), 8);
  std::memcpy(&want.high64, bytes.data() + body.size() + 8, 8);
  XXH128_hash_t got = XXH3_128bits(body.data(), body.size());
  if (!XXH128_isEqual(want, got))
    return make_error("the file's checksum does not match its contents (it is truncated or "
                      "damaged): export it again");

  uint32_t count = 0;
  std::memcpy(&count, bytes.data() + 12, 4);
  if (uint64_t(count) * 8 > body.size() - k_header)
    return make_error("the file claims " + std::to_string(count) +
                      " records, more than it can hold");
  std::vector<std::string_view> records;
  records.reserve(count);
  size_t pos = k_header;
  for (uint32_t i = 0; i < count; ++i) {
    if (body.size() - pos < 8)
      return make_error("record " + std::to_string(i) + " of " + std::to_string(count) +
                        " is missing (the file ends early)");
    uint64_t len = 0;
    std::memcpy(&len, body.data() + pos, 8);
    pos += 8;
    if (len > body.size() - pos)
      return make_error("record " + std::to_string(i) + " claims " + std::to_string(len) +
                        " bytes, more than the file holds");
    records.push_back(body.substr(pos, size_t(len)));
    pos += size_t(len);
  }
  if (pos != body.size())
    return make_error("the file has " + std::to_string(body.size() - pos) +
                      " bytes after its last record");
  return records;
}

Result<std::string> read_all(const std::filesystem::path& file) {
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error("cannot open " + file.string() + ": " + errno_text(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(file.string() + " is not a regular file");
  }
  if (uint64_t(st.st_size) > k_max_file) {
    ::close(fd);
    return make_error(file.string() + " is " + std::to_string(st.st_size) +
                      " bytes, larger than any export hone writes (" + std::to_string(k_max_file) +
                      ")");
  }
  std::string data;
  data.resize(size_t(st.st_size));
  size_t got = 0;
  while (got < data.size()) {
    ssize_t n = ::read(fd, data.data() + got, data.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      return make_error("reading " + file.string() + ": " + errno_text(e));
    }
    if (n == 0) break; // shrank while reading: what we have is checked like any other bytes
    got += size_t(n);
  }
  data.resize(got);
  ::close(fd);
  return data;
}

} // namespace hone::store::export_file
