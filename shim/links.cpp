#include "shim/links.hpp"

#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace hone::shim {

void Links::created(const void* state) {
  std::lock_guard lock(m_mutex);
  m_states[state] = proto::Image::Linked{};
}

void Links::added(const void* state, uint32_t type, const char* name, const void* data,
                  size_t size) {
  proto::Image::LinkInput in;
  in.type = uint8_t(type);
  in.name = name ? name : "";
  if (type == k_jit_input_ptx && data) {
    // PTX is text: the driver stops at its NUL whatever size it is given.
    const char* text = static_cast<const char*>(data);
    in.ptx.assign(text, ::strnlen(text, size));
    in.ptx_size = in.ptx.size();
  }
  std::lock_guard lock(m_mutex);
  m_states[state].inputs.push_back(std::move(in));
}

std::optional<proto::Image::Linked> Links::inputs(const void* state) const {
  std::lock_guard lock(m_mutex);
  auto it = m_states.find(state);
  if (it == m_states.end() || it->second.inputs.empty()) return std::nullopt;
  return it->second;
}

void Links::destroyed(const void* state) {
  std::lock_guard lock(m_mutex);
  m_states.erase(state);
}

size_t Links::size() const {
  std::lock_guard lock(m_mutex);
  return m_states.size();
}

std::string read_small_file(const char* path, size_t max) {
  std::string out;
  if (!path) return out;
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0 && uint64_t(st.st_size) <= max) {
    out.resize(size_t(st.st_size));
    size_t got = 0;
    while (got < out.size()) {
      ssize_t n = ::read(fd, out.data() + got, out.size() - got);
      if (n <= 0) break;
      got += size_t(n);
    }
    out.resize(got);
  }
  ::close(fd);
  return out;
}

} // namespace hone::shim
