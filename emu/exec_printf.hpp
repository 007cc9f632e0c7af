// Device-side printf: the formatting of one `vprintf(format, args)` call as CUDA's printf does it.
//
// nvcc lowers `printf(format, ...)` in device code to `vprintf(format, args)`, an extern .func of
// the device runtime: `format` is the generic address of the format string, `args` that of a
// buffer in the thread's local memory where the arguments lie packed, each at its natural
// alignment after the C default promotions (char and short as int, float as double; CUDA C++
// Programming Guide, "Formatted Output"). The host formats the records it finds in the printf
// FIFO with its own C library at the next synchronization; here a record is formatted when the
// thread executes the call (the strings it names are read then, as the device copies them into the
// FIFO), and buffered per launch until the driver flushes it (emu/driver_printf.cpp).
#pragma once

#include "emu/program.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace hone::emu {

// The result of one call: its record, and vprintf's return value (the Programming Guide: "the
// number of arguments parsed"; -1 for a null format).
struct DevicePrintResult {
  DevicePrint record;
  int32_t value = 0;
};

// Formats `format` with the arguments packed in `args` (bytes the buffer may hold: reading past
// them ends the formatting, the rest of the format printed as it stands). `read_string` returns
// the NUL-terminated string at a device address for %s (std::nullopt for a null pointer, printed
// "(null)" as glibc does); it may throw, which ends the call (a fault). The supported subset is
// the Programming Guide's: flags `#` ` ` `0` `+` `-`, width and precision (digits or `*`), length
// `h` `hh` `l` `ll` (and `z` `j` `t`, 8 bytes), conversions `c d i o u x X p e E f F g G a A s %`;
// at most 32 arguments are consumed, a conversion beyond them is printed as it stands.
DevicePrintResult format_device_printf(
    std::string_view format, std::span<const uint8_t> args,
    const std::function<std::optional<std::string>(uint64_t)>& read_string);

// The FIFO bytes a record takes (hone's accounting; NVIDIA does not document its record layout):
// a 16-byte header, the argument buffer as packed, and each %s string with its NUL, rounded up to
// 8 bytes.
constexpr uint32_t k_printf_record_header = 16;

} // namespace hone::emu
