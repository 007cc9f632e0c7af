// Little-endian binary encoding for hone's socket protocol (docs/protocol.md).
//
// The Reader never reads past its input and never throws: a short or malformed input sets a
// sticky failure that the caller checks once at the end, so every decoder is bounds-checked by
// construction. Limits on string and array sizes keep a hostile length from allocating much.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hone::wire {

constexpr uint32_t k_max_string = 1u << 20; // 1 MiB
constexpr uint32_t k_max_array = 1u << 20;

class Writer {
public:
  void u8(uint8_t v) { m_out.push_back(char(v)); }
  void u16(uint16_t v) { put(&v, 2); }
  void u32(uint32_t v) { put(&v, 4); }
  void u64(uint64_t v) { put(&v, 8); }
  void i64(int64_t v) { put(&v, 8); }
  void boolean(bool v) { u8(v ? 1 : 0); }
  void str(std::string_view s) {
    u32(uint32_t(s.size()));
    m_out.append(s);
  }
  void bytes(std::span<const uint8_t> b) {
    u32(uint32_t(b.size()));
    m_out.append(reinterpret_cast<const char*>(b.data()), b.size());
  }
  void raw(const void* p, size_t n) { m_out.append(static_cast<const char*>(p), n); }

  std::string& out() { return m_out; }
  const std::string& out() const { return m_out; }
  size_t size() const { return m_out.size(); }

private:
  void put(const void* p, size_t n) {
    // x86-64 and aarch64 are little-endian, which is the wire order
    m_out.append(static_cast<const char*>(p), n);
  }
  std::string m_out;
};

class Reader {
public:
  explicit Reader(std::string_view in) : m_in(in) {}

  uint8_t u8() {
    uint8_t v = 0;
    get(&v, 1);
    return v;
  }
  uint16_t u16() {
    uint16_t v = 0;
    get(&v, 2);
    return v;
  }
  uint32_t u32() {
    uint32_t v = 0;
    get(&v, 4);
    return v;
  }
  uint64_t u64() {
    uint64_t v = 0;
    get(&v, 8);
    return v;
  }
  int64_t i64() {
    int64_t v = 0;
    get(&v, 8);
    return v;
  }
  bool boolean() {
    uint8_t v = u8();
    if (v > 1) fail("boolean out of range");
    return v == 1;
  }
  std::string str(uint32_t max = k_max_string) {
    uint32_t n = u32();
    if (n > max) {
      fail("string too long");
      return {};
    }
    if (!have(n)) return {};
    std::string s(m_in.substr(m_pos, n));
    m_pos += n;
    return s;
  }
  std::vector<uint8_t> bytes(uint32_t max = k_max_string) {
    uint32_t n = u32();
    if (n > max) {
      fail("byte string too long");
      return {};
    }
    if (!have(n)) return {};
    std::vector<uint8_t> b(m_in.begin() + long(m_pos), m_in.begin() + long(m_pos + n));
    m_pos += n;
    return b;
  }
  void raw(void* p, size_t n) { get(p, n); }
  // An array length, checked against `max` and against what could possibly remain
  // (each element takes at least `min_element_bytes`).
  uint32_t count(uint32_t max = k_max_array, uint32_t min_element_bytes = 1) {
    uint32_t n = u32();
    if (n > max || uint64_t(n) * min_element_bytes > remaining()) {
      fail("array length out of range");
      return 0;
    }
    return n;
  }

  bool ok() const { return m_error == nullptr; }
  const char* error() const { return m_error ? m_error : ""; }
  size_t remaining() const { return m_pos <= m_in.size() ? m_in.size() - m_pos : 0; }
  void fail(const char* why) {
    if (!m_error) m_error = why;
    m_pos = m_in.size();
  }

private:
  bool have(size_t n) {
    if (m_error) return false;
    if (n > remaining()) {
      fail("truncated message");
      return false;
    }
    return true;
  }
  void get(void* p, size_t n) {
    if (!have(n)) {
      std::memset(p, 0, n);
      return;
    }
    std::memcpy(p, m_in.data() + m_pos, n);
    m_pos += n;
  }

  std::string_view m_in;
  size_t m_pos = 0;
  const char* m_error = nullptr;
};

} // namespace hone::wire
