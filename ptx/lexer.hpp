// A character cursor over PTX text: whitespace and comments, identifiers, numbers, positions.
//
// The parser drives it directly (no token list), which keeps parsing allocation-free except for
// the IR it builds. Positions are 1-based lines and columns in bytes.
#pragma once

#include "ptx/ir.hpp"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace hone::ptx {

// Thrown inside the parser only; parse() turns it into a Result error.
struct ParseError : std::runtime_error {
  ParseError(SourceLoc at, const std::string& what) : std::runtime_error(what), loc(at) {}
  SourceLoc loc;
};

inline bool is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$' || c == '%';
}
inline bool is_ident_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '$';
}
inline bool is_digit(char c) { return c >= '0' && c <= '9'; }

struct Number {
  enum class Kind : uint8_t { integer, f32, f64, decimal } kind = Kind::integer;
  uint64_t bits = 0;       // integer value (two's complement) or float bits
  bool unsigned_suffix = false;
  std::string_view text;   // the literal as written
};

class Cursor {
public:
  explicit Cursor(std::string_view text) : m_text(text) {}

  bool at_end() const { return m_pos >= m_text.size(); }
  char peek(size_t ahead = 0) const {
    return m_pos + ahead < m_text.size() ? m_text[m_pos + ahead] : '\0';
  }
  size_t pos() const { return m_pos; }
  SourceLoc loc() const { return {m_line, uint32_t(m_pos - m_line_start + 1)}; }
  std::string_view text() const { return m_text; }

  // A saved position, to retry a production another way.
  struct State {
    size_t pos;
    uint32_t line;
    size_t line_start;
  };
  State save() const { return {m_pos, m_line, m_line_start}; }
  void restore(State s) {
    m_pos = s.pos;
    m_line = s.line;
    m_line_start = s.line_start;
  }
  std::string_view slice(size_t from, size_t to) const { return m_text.substr(from, to - from); }

  void advance() {
    if (m_text[m_pos] == '\n') {
      ++m_line;
      m_line_start = m_pos + 1;
    }
    ++m_pos;
  }

  // Skip spaces, newlines and comments. An unterminated block comment is an error.
  void skip_space();
  // Skip spaces and comments but stop at a newline; true when a newline (or the end) follows.
  bool skip_space_in_line();

  // Consume `c` if it is next (after space); true if it was.
  bool accept(char c);
  // Consume `c` (after space) or fail with "expected <what>".
  void expect(char c, std::string_view what);

  // An identifier: [A-Za-z_$%][A-Za-z0-9_$]* (a lone % or _ counts; the caller judges).
  std::string_view identifier();
  // An identifier with dotted and `::` continuations: `ld.global.nc.f32`, `%tid.x`,
  // `shared::cta`. Empty if no identifier starts here.
  std::string_view dotted();
  // A directive name after a '.': `.maxntid` returns "maxntid". Requires the '.'.
  std::string_view directive_name();

  // A numeric literal (optionally negative) in any PTX form. Fails when none starts here.
  Number number();
  bool number_starts() const;

  // A string literal, returned with its quotes.
  std::string_view string_literal();

  // Raw text from here up to and including the next `;` outside braces and strings.
  std::string_view raw_statement();
  // Raw text from here to the end of the line (comments excluded).
  std::string_view raw_line();
  // Raw text of a balanced `{ ... }` group starting here (at '{').
  std::string_view raw_braces();

  [[noreturn]] void fail(const std::string& message) const { throw ParseError(loc(), message); }
  [[noreturn]] void fail_at(SourceLoc at, const std::string& message) const {
    throw ParseError(at, message);
  }

private:
  std::string_view m_text;
  size_t m_pos = 0;
  uint32_t m_line = 1;
  size_t m_line_start = 0;
};

// A printable rendering of the character at the cursor, for messages.
std::string describe_char(char c);

} // namespace hone::ptx
