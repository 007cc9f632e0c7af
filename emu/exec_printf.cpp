#include "emu/exec_printf.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace hone::emu {

namespace {

// The Programming Guide, "Formatted Output": "printf() command can accept at most 32 arguments in
// addition to the format string. Additional arguments beyond this will be ignored, and the format
// specifier output as-is."
constexpr int k_max_args = 32;

bool is_conversion(char c) { return c && std::strchr("cdiouxXpeEfFgGaAs", c) != nullptr; }
bool is_float_conversion(char c) { return std::strchr("eEfFgGaA", c) != nullptr; }

// One conversion's text is cut at this many bytes: a width or precision a kernel computes
// (`%*d` with 2^30) must not make the driver allocate gigabytes inside someone's process.
constexpr size_t k_max_conversion = 1u << 16;

// snprintf into a string of the length it needs, at most k_max_conversion.
template <class T> std::string host_format(const std::string& spec, T value) {
  char small[256];
  const int n = std::snprintf(small, sizeof small, spec.c_str(), value);
  if (n < 0) return {};
  if (size_t(n) < sizeof small) return std::string(small, size_t(n));
  std::string out(std::min(size_t(n), k_max_conversion) + 1, '\0');
  std::snprintf(out.data(), out.size(), spec.c_str(), value);
  out.pop_back();
  return out;
}

} // namespace

DevicePrintResult format_device_printf(
    std::string_view format, std::span<const uint8_t> args,
    const std::function<std::optional<std::string>(uint64_t)>& read_string) {
  DevicePrintResult result;
  std::string& out = result.record.text;
  size_t cursor = 0;      // the next argument's offset in `args`
  int used = 0;           // arguments consumed
  uint64_t strings = 0;   // FIFO bytes of %s strings
  bool exhausted = false; // an argument lay past the buffer: the rest is printed as written
  // The next argument of `size` bytes (4 or 8) at its natural alignment, or nullopt past the
  // buffer or past the 32nd.
  auto next = [&](uint32_t size) -> std::optional<uint64_t> {
    if (used >= k_max_args) return std::nullopt;
    const size_t at = (cursor + size - 1) / size * size;
    if (at + size > args.size()) {
      exhausted = true;
      return std::nullopt;
    }
    uint64_t v = 0;
    std::memcpy(&v, args.data() + at, size);
    cursor = at + size;
    ++used;
    return v;
  };
  size_t i = 0;
  while (i < format.size()) {
    const char c = format[i];
    if (c != '%' || exhausted) {
      out += c;
      ++i;
      continue;
    }
    const size_t start = i++;
    if (i < format.size() && format[i] == '%') {
      out += '%';
      ++i;
      continue;
    }
    std::string spec = "%";
    while (i < format.size() && std::strchr("#0- +", format[i])) spec += format[i++];
    // width and precision: digits, or `*` (an int argument)
    bool missing = false;
    auto number = [&] {
      if (i < format.size() && format[i] == '*') {
        ++i;
        if (auto v = next(4)) spec += std::to_string(int32_t(uint32_t(*v)));
        else missing = true;
        return;
      }
      while (i < format.size() && format[i] >= '0' && format[i] <= '9') spec += format[i++];
    };
    number();
    if (i < format.size() && format[i] == '.') {
      spec += format[i++];
      number();
    }
    std::string length;
    while (i < format.size() && std::strchr("hlLzjt", format[i])) length += format[i++];
    const char conv = i < format.size() ? format[i] : '\0';
    if (!is_conversion(conv) || missing) {
      // not a conversion CUDA knows (or its `*` argument is missing): printed as written
      out.append(format.substr(start, i - start));
      continue;
    }
    ++i;
    const std::string_view written = format.substr(start, i - start);
    const bool wide = length == "l" || length == "ll" || length == "z" || length == "j" ||
                      length == "t" || length == "L";
    const bool eight = wide || is_float_conversion(conv) || conv == 's' || conv == 'p';
    const auto value = next(eight ? 8 : 4);
    if (!value) {
      out.append(written);
      continue;
    }
    if (is_float_conversion(conv)) {
      double d;
      std::memcpy(&d, &*value, 8);
      out += host_format(spec + conv, d);
    } else if (conv == 's') {
      std::optional<std::string> s;
      if (*value != 0) s = read_string(*value);
      if (s) strings += (s->size() + 1 + 7) / 8 * 8;
      out += host_format(spec + conv, s ? s->c_str() : "(null)");
    } else if (conv == 'p') {
      out += host_format(spec + conv, reinterpret_cast<const void*>(uintptr_t(*value)));
    } else if (conv == 'c') {
      out += host_format(spec + conv, int(uint32_t(*value)));
    } else if (conv == 'd' || conv == 'i') {
      if (eight) out += host_format(spec + "ll" + conv, (long long)(int64_t(*value)));
      else out += host_format(spec + (length == "h" || length == "hh" ? length : "") + conv,
                              int(int32_t(uint32_t(*value))));
    } else {
      if (eight) out += host_format(spec + "ll" + conv, (unsigned long long)(*value));
      else out += host_format(spec + (length == "h" || length == "hh" ? length : "") + conv,
                              unsigned(uint32_t(*value)));
    }
  }
  result.value = used;
  const uint64_t bytes = k_printf_record_header + (cursor + 7) / 8 * 8 + strings;
  result.record.fifo_bytes = uint32_t(std::min<uint64_t>(bytes, UINT32_MAX));
  return result;
}

} // namespace hone::emu
