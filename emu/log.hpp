// The emulated driver's stderr log: `hone-emu: ` lines, filtered by HONE_EMU_LOG.
//
// HONE_EMU_LOG=debug|info|warn|off (default warn) is read once, on first use. The log is for the
// person running a program on the emulated device: a kernel fault, a module that cannot load, an
// entry point that is not implemented. It never says anything at warn level on the success path.
#pragma once

#include <string_view>

namespace hone::emu {

enum class LogLevel { debug = 0, info = 1, warn = 2, off = 3 };

// The level HONE_EMU_LOG selects.
LogLevel log_level();
inline bool log_enabled(LogLevel level) {
  return level >= log_level() && level != LogLevel::off;
}

// Write `hone-emu: <message>\n` to stderr in one write, if `level` is enabled.
void log(LogLevel level, std::string_view message);

} // namespace hone::emu
