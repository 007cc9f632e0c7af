// The module-scope symbols of PTX text, from a light scan (no parse): which entries and functions
// it defines, and which functions and variables it declares `.extern` (PTX ISA, "Linking
// Directives": an `.extern` symbol is defined in another module the JIT linker resolves it from).
// Enough to tell which of a JIT link's PTX inputs holds a kernel and whether that input loads on
// its own; cheap on the megabytes of PTX real applications link.
#pragma once

#include <set>
#include <string>
#include <string_view>

namespace hone::ptx {

struct ModuleSymbols {
  std::set<std::string> entries;      // .entry with a body
  std::set<std::string> functions;    // .func with a body
  std::set<std::string> variables;    // module-scope variables defined here (not .extern)
  std::set<std::string> extern_funcs; // .extern .func declarations
  std::set<std::string> extern_vars;  // .extern variables (.global, .const; not .shared: dynamic
                                      // shared memory is the launch's, never another module's)
};

// Never fails: text it cannot make sense of contributes nothing.
ModuleSymbols module_symbols(std::string_view text);

} // namespace hone::ptx
