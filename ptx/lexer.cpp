#include "ptx/lexer.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace hone::ptx {

std::string describe_char(char c) {
  if (c == '\0') return "end of input";
  if (c == '\n') return "end of line";
  if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "byte 0x%02x", static_cast<unsigned char>(c));
    return buf;
  }
  return std::string("'") + c + "'";
}

void Cursor::skip_space() {
  while (m_pos < m_text.size()) {
    char c = m_text[m_pos];
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v') {
      advance();
    } else if (c == '/' && peek(1) == '/') {
      while (m_pos < m_text.size() && m_text[m_pos] != '\n') ++m_pos;
    } else if (c == '/' && peek(1) == '*') {
      SourceLoc start = loc();
      m_pos += 2;
      while (true) {
        if (m_pos + 1 >= m_text.size()) fail_at(start, "unterminated block comment");
        if (m_text[m_pos] == '*' && m_text[m_pos + 1] == '/') {
          m_pos += 2;
          break;
        }
        advance();
      }
    } else {
      break;
    }
  }
}

bool Cursor::skip_space_in_line() {
  while (m_pos < m_text.size()) {
    char c = m_text[m_pos];
    if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
      ++m_pos;
    } else if (c == '/' && peek(1) == '/') {
      while (m_pos < m_text.size() && m_text[m_pos] != '\n') ++m_pos;
    } else if (c == '/' && peek(1) == '*') {
      // A block comment that spans lines ends the line; one within it is space.
      size_t end = m_text.find("*/", m_pos + 2);
      if (end == std::string_view::npos) fail("unterminated block comment");
      if (m_text.substr(m_pos, end - m_pos).find('\n') != std::string_view::npos) return true;
      m_pos = end + 2;
    } else {
      return c == '\n';
    }
  }
  return true;
}

bool Cursor::accept(char c) {
  skip_space();
  if (peek() == c) {
    advance();
    return true;
  }
  return false;
}

void Cursor::expect(char c, std::string_view what) {
  skip_space();
  if (peek() != c) fail("expected " + std::string(what) + ", found " + describe_char(peek()));
  advance();
}

std::string_view Cursor::identifier() {
  size_t start = m_pos;
  if (m_pos < m_text.size() && is_ident_start(m_text[m_pos])) {
    ++m_pos;
    while (m_pos < m_text.size() && is_ident_char(m_text[m_pos])) ++m_pos;
  }
  return m_text.substr(start, m_pos - start);
}

std::string_view Cursor::dotted() {
  size_t start = m_pos;
  if (identifier().empty()) return {};
  while (m_pos < m_text.size()) {
    char c = m_text[m_pos];
    if (c == '.' && m_pos + 1 < m_text.size() &&
        (is_ident_char(m_text[m_pos + 1]))) {
      ++m_pos;
      while (m_pos < m_text.size() && is_ident_char(m_text[m_pos])) ++m_pos;
    } else if (c == ':' && peek(1) == ':' && m_pos + 2 < m_text.size() &&
               is_ident_char(m_text[m_pos + 2])) {
      m_pos += 2;
      while (m_pos < m_text.size() && is_ident_char(m_text[m_pos])) ++m_pos;
    } else {
      break;
    }
  }
  return m_text.substr(start, m_pos - start);
}

std::string_view Cursor::directive_name() {
  skip_space();
  if (peek() != '.') fail("expected a directive, found " + describe_char(peek()));
  ++m_pos;
  size_t start = m_pos;
  while (m_pos < m_text.size() && is_ident_char(m_text[m_pos])) ++m_pos;
  // `.shared::cta` and similar qualified spaces
  while (m_pos + 2 < m_text.size() && m_text[m_pos] == ':' && m_text[m_pos + 1] == ':' &&
         is_ident_char(m_text[m_pos + 2])) {
    m_pos += 2;
    while (m_pos < m_text.size() && is_ident_char(m_text[m_pos])) ++m_pos;
  }
  if (m_pos == start) fail("expected a directive name after '.'");
  return m_text.substr(start, m_pos - start);
}

bool Cursor::number_starts() const {
  char c = peek();
  if (c == '-' || c == '+') c = peek(1);
  if (is_digit(c)) return true;
  // .5 style decimal
  return c == '.' && is_digit(peek(peek() == '-' || peek() == '+' ? 2 : 1));
}

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

} // namespace

Number Cursor::number() {
  Number n;
  size_t start = m_pos;
  SourceLoc at = loc();
  bool negative = false;
  if (peek() == '-' || peek() == '+') {
    negative = peek() == '-';
    ++m_pos;
  }
  auto digits_end = [&](auto pred) {
    size_t s = m_pos;
    while (m_pos < m_text.size() && pred(m_text[m_pos])) ++m_pos;
    return m_pos - s;
  };
  char c0 = peek(), c1 = peek(1);
  if (c0 == '0' && (c1 == 'f' || c1 == 'F' || c1 == 'd' || c1 == 'D') && hex_value(peek(2)) >= 0) {
    bool is_f32 = c1 == 'f' || c1 == 'F';
    m_pos += 2;
    size_t s = m_pos;
    size_t count = digits_end([](char c) { return hex_value(c) >= 0; });
    if (count != (is_f32 ? 8u : 16u)) {
      fail_at(at, is_f32 ? "a 0f float literal needs exactly 8 hex digits"
                         : "a 0d double literal needs exactly 16 hex digits");
    }
    uint64_t bits = 0;
    for (size_t i = s; i < m_pos; ++i) bits = (bits << 4) | uint64_t(hex_value(m_text[i]));
    if (negative) bits ^= is_f32 ? 0x80000000ull : 0x8000000000000000ull;
    n.kind = is_f32 ? Number::Kind::f32 : Number::Kind::f64;
    n.bits = bits;
  } else if (c0 == '0' && (c1 == 'x' || c1 == 'X')) {
    m_pos += 2;
    size_t s = m_pos;
    size_t count = digits_end([](char c) { return hex_value(c) >= 0; });
    if (count == 0) fail_at(at, "hex literal without digits");
    while (s < m_pos && m_text[s] == '0') ++s;
    if (m_pos - s > 16) fail_at(at, "integer literal does not fit in 64 bits");
    uint64_t v = 0;
    for (size_t i = s; i < m_pos; ++i) v = (v << 4) | uint64_t(hex_value(m_text[i]));
    n.bits = negative ? ~v + 1 : v;
  } else if (c0 == '0' && (c1 == 'b' || c1 == 'B') && (peek(2) == '0' || peek(2) == '1')) {
    m_pos += 2;
    size_t s = m_pos;
    digits_end([](char c) { return c == '0' || c == '1'; });
    while (s < m_pos && m_text[s] == '0') ++s;
    if (m_pos - s > 64) fail_at(at, "integer literal does not fit in 64 bits");
    uint64_t v = 0;
    for (size_t i = s; i < m_pos; ++i) v = (v << 1) | uint64_t(m_text[i] - '0');
    n.bits = negative ? ~v + 1 : v;
  } else if (is_digit(c0) || c0 == '.') {
    size_t s = m_pos;
    digits_end(is_digit);
    bool is_decimal_float = false;
    if (peek() == '.' && is_digit(peek(1))) {
      is_decimal_float = true;
      ++m_pos;
      digits_end(is_digit);
    }
    if ((peek() == 'e' || peek() == 'E') &&
        (is_digit(peek(1)) || ((peek(1) == '-' || peek(1) == '+') && is_digit(peek(2))))) {
      is_decimal_float = true;
      m_pos += 2;
      digits_end(is_digit);
    }
    if (is_decimal_float) {
      char buf[128];
      size_t len = m_pos - start;
      if (len >= sizeof buf) fail_at(at, "floating literal too long");
      std::memcpy(buf, m_text.data() + start, len);
      buf[len] = '\0';
      double d = std::strtod(buf, nullptr);
      std::memcpy(&n.bits, &d, sizeof d);
      n.kind = Number::Kind::decimal;
    } else if (m_text[s] == '0' && m_pos - s > 1) {
      // octal: a leading 0 (PTX ISA 4.5.1)
      uint64_t v = 0;
      for (size_t i = s + 1; i < m_pos; ++i) {
        if (m_text[i] > '7') fail_at(at, "digit out of range in octal literal");
        if (v >> 61) fail_at(at, "integer literal does not fit in 64 bits");
        v = (v << 3) | uint64_t(m_text[i] - '0');
      }
      n.bits = negative ? ~v + 1 : v;
    } else {
      uint64_t v = 0;
      for (size_t i = s; i < m_pos; ++i) {
        uint64_t d = uint64_t(m_text[i] - '0');
        if (v > (UINT64_MAX - d) / 10) fail_at(at, "integer literal does not fit in 64 bits");
        v = v * 10 + d;
      }
      n.bits = negative ? ~v + 1 : v;
    }
  } else {
    fail_at(at, "expected a number, found " + describe_char(c0));
  }
  if (n.kind == Number::Kind::integer && peek() == 'U') {
    n.unsigned_suffix = true;
    ++m_pos;
  }
  if (is_ident_char(peek())) fail("malformed number: unexpected " + describe_char(peek()));
  n.text = m_text.substr(start, m_pos - start);
  return n;
}

std::string_view Cursor::string_literal() {
  skip_space();
  if (peek() != '"') fail("expected a string, found " + describe_char(peek()));
  size_t start = m_pos;
  SourceLoc at = loc();
  ++m_pos;
  while (true) {
    if (m_pos >= m_text.size() || m_text[m_pos] == '\n') fail_at(at, "unterminated string");
    if (m_text[m_pos] == '\\' && m_pos + 1 < m_text.size()) {
      m_pos += 2;
      continue;
    }
    if (m_text[m_pos] == '"') break;
    ++m_pos;
  }
  ++m_pos;
  return m_text.substr(start, m_pos - start);
}

std::string_view Cursor::raw_statement() {
  size_t start = m_pos;
  SourceLoc at = loc();
  int depth = 0;
  while (true) {
    if (m_pos >= m_text.size()) fail_at(at, "statement without ';' before the end of input");
    char c = m_text[m_pos];
    if (c == '"') {
      string_literal();
      continue;
    }
    if (c == '/' && (peek(1) == '/' || peek(1) == '*')) {
      skip_space();
      continue;
    }
    if (c == '{') ++depth;
    if (c == '}') {
      if (depth == 0) fail("unexpected '}' inside a statement");
      --depth;
    }
    advance();
    if (c == ';' && depth == 0) break;
  }
  return m_text.substr(start, m_pos - start);
}

std::string_view Cursor::raw_line() {
  size_t start = m_pos;
  size_t end = m_pos;
  while (m_pos < m_text.size() && m_text[m_pos] != '\n') {
    if (m_text[m_pos] == '/' && (peek(1) == '/' || peek(1) == '*')) {
      if (skip_space_in_line()) break;
      continue;
    }
    if (m_text[m_pos] == '"') {
      string_literal();
      end = m_pos;
      continue;
    }
    ++m_pos;
    if (m_text[m_pos - 1] != ' ' && m_text[m_pos - 1] != '\t' && m_text[m_pos - 1] != '\r') {
      end = m_pos;
    }
  }
  return m_text.substr(start, end - start);
}

std::string_view Cursor::raw_braces() {
  size_t start = m_pos;
  SourceLoc at = loc();
  if (peek() != '{') fail("expected '{'");
  int depth = 0;
  while (true) {
    if (m_pos >= m_text.size()) fail_at(at, "unbalanced '{' before the end of input");
    char c = m_text[m_pos];
    if (c == '"') {
      string_literal();
      continue;
    }
    if (c == '/' && (peek(1) == '/' || peek(1) == '*')) {
      skip_space();
      continue;
    }
    advance();
    if (c == '{') ++depth;
    if (c == '}' && --depth == 0) break;
  }
  return m_text.substr(start, m_pos - start);
}

} // namespace hone::ptx
