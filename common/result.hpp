// Result<T>: the value of an operation that can fail in an expected way.
//
// Expected failures are values, not exceptions (CONVENTIONS.md, "Errors"). An Error says what
// happened, to what, and what to do about it, in one human-readable message.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace hone {

struct Error {
  std::string message;
  int code = 0; // a domain code where one exists (a CUresult, an exit status); 0 otherwise
};

// Build an Error from any string-like message.
inline Error make_error(std::string message, int code = 0) {
  return Error{std::move(message), code};
}

template <class T> class [[nodiscard]] Result {
public:
  Result(T value) : m_v(std::in_place_index<0>, std::move(value)) {}
  Result(Error error) : m_v(std::in_place_index<1>, std::move(error)) {}

  bool has_value() const { return m_v.index() == 0; }
  explicit operator bool() const { return has_value(); }

  T& value() & {
    assert(has_value());
    return std::get<0>(m_v);
  }
  const T& value() const& {
    assert(has_value());
    return std::get<0>(m_v);
  }
  T&& value() && {
    assert(has_value());
    return std::get<0>(std::move(m_v));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const {
    assert(!has_value());
    return std::get<1>(m_v);
  }

private:
  std::variant<T, Error> m_v;
};

template <> class [[nodiscard]] Result<void> {
public:
  Result() = default;
  Result(Error error) : m_error(std::move(error)), m_failed(true) {}

  bool has_value() const { return !m_failed; }
  explicit operator bool() const { return has_value(); }
  const Error& error() const {
    assert(m_failed);
    return m_error;
  }

private:
  Error m_error;
  bool m_failed = false;
};

// The success value of Result<void>.
inline Result<void> ok() { return {}; }

} // namespace hone
