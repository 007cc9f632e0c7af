// hone's version, as the build knows it (CMake's project version).
#pragma once

namespace hone {

#ifndef HONE_VERSION
#define HONE_VERSION "0.0.0-unknown"
#endif
inline constexpr const char* k_version = HONE_VERSION;

} // namespace hone
