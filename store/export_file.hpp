// The export file of verified variants (store/README.md, "Export file"): a magic header, a format
// version, a count, length-prefixed records in the store's own record encoding, and an xxh3-128
// over everything before it. Internal to store/ and its tests.
#pragma once

#include "common/result.hpp"

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace hone::store::export_file {

inline constexpr std::string_view k_magic = "HONEVARS";
// The format this build writes and the newest it reads.
constexpr uint32_t k_format = 1;
// A larger file is refused before it is read into memory.
constexpr uint64_t k_max_file = uint64_t(4) << 30;

// Writes `records` (already encoded) to `file` atomically: a temporary file in the same folder,
// fsync, rename over `file`, fsync of the folder. On failure `file` is untouched.
Result<void> write(const std::filesystem::path& file, const std::vector<std::string>& records);

// The same bytes in memory (the remote tier's objects carry them).
std::string encode(const std::vector<std::string>& records);

// Checks the magic, the version and the checksum of a whole file's bytes, then splits it into its
// records (still encoded). Nothing is returned unless the whole file is sound.
Result<std::vector<std::string_view>> parse(std::string_view bytes);

// Reads a whole file (refusing one over k_max_file).
Result<std::string> read_all(const std::filesystem::path& file);

} // namespace hone::store::export_file
