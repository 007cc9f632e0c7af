// Fuzz the PTX parser: any input parses or gives an error; whatever parses prints back to text
// that parses to the same IR, and analyzes without failing.
#include "ptx/analysis.hpp"
#include "ptx/parser.hpp"
#include "ptx/printer.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto module = hone::ptx::parse(text, "fuzz.ptx");
  if (!module) {
    if (module.error().message.rfind("fuzz.ptx:", 0) != 0) std::abort();
    return 0;
  }
  auto printed = hone::ptx::print(*module);
  auto again = hone::ptx::parse(printed, "printed.ptx");
  if (!again) {
    std::fprintf(stderr, "printed module does not parse: %s\n%s\n", again.error().message.c_str(),
                 printed.c_str());
    std::abort();
  }
  if (!(*again == *module)) {
    std::fprintf(stderr, "printed module parses to a different IR:\n%s\n", printed.c_str());
    std::abort();
  }
  (void)hone::ptx::analyze(*module);
  return 0;
}
