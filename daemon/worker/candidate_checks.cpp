#include "daemon/worker/candidate_checks.hpp"

#include <algorithm>
#include <set>
#include <string>

namespace hone::worker {

namespace {

using ptx::Type;

Failure refuse(std::string_view pattern, std::string message) {
  Failure f;
  f.kind = VerdictKind::refused;
  f.message = std::move(message);
  f.pattern = pattern;
  return f;
}

// `st.global.u32 [counter], %r1;` (in f, PTX line 12)
std::string quoted(const std::string& instruction, const std::string& function,
                   ptx::SourceLoc loc) {
  return "`" + instruction + "` (in " + function + ", PTX line " + std::to_string(loc.line) + ")";
}

// A module-scope .global variable is initialized when the module loads and never again: the
// application resets the original's (cudaMemcpyToSymbol, ...), never the candidate's. Writing
// one carries state from a launch to the next, and the validation runs are all first launches.
// An original that writes module-scope variables itself (a self-resetting counter, the "last
// block" pattern) keeps state by design: its candidates meet the dynamic defences instead (the
// outputs checked after the benchmark's launches, and shadow checks once served).
bool writes_module_state(const ptx::EntryInfo& e) {
  return std::any_of(e.writes.begin(), e.writes.end(), [](const auto& w) {
    return std::any_of(w.variables.begin(), w.variables.end(),
                       [](const auto& v) { return v.space == ptx::Space::global; });
  });
}

std::optional<Failure> state_across_launches(const ptx::EntryInfo& original,
                                             const ptx::EntryInfo& candidate) {
  if (writes_module_state(original)) return std::nullopt;
  for (const auto& w : candidate.writes) {
    for (const auto& v : w.variables) {
      if (v.space != ptx::Space::global) continue;
      return refuse("state-across-launches",
                    "the candidate writes its module-scope variable " + v.name +
                        " (.global): " + quoted(w.instruction, w.function, w.loc) +
                        "; nothing resets a candidate's module variables between launches, so "
                        "what it writes there carries over to the next launch");
    }
  }
  return std::nullopt;
}

// The original may write memory the analysis cannot attribute: then any buffer may be one it
// writes.
bool writes_untraced(const ptx::EntryInfo& original) {
  if (original.has_opaque) return true; // an instruction kept as text may store anywhere
  return std::any_of(original.writes.begin(), original.writes.end(),
                     [](const auto& w) { return w.pointers.empty() && w.variables.empty(); });
}

// A buffer the original only reads is compared byte for byte after the run, which cannot see a
// candidate that changes it and puts it back (another kernel reading it meanwhile, on another
// stream, sees it changed). Only writes
// whose address derives from exactly one parameter pointer, and from no variable, count: the
// analysis is sure where they go.
std::optional<Failure> input_modification(const ptx::EntryInfo& original,
                                          const ptx::EntryInfo& candidate) {
  if (writes_untraced(original)) return std::nullopt;
  for (const auto& w : candidate.writes) {
    if (w.pointers.size() != 1 || !w.variables.empty()) continue;
    const ptx::ParamPointer& p = w.pointers.front();
    if (p.param >= original.params.size()) continue;
    const ptx::ParamInfo& op = original.params[p.param];
    if (op.address_taken) continue; // the original reads it through its address: unknown uses
    auto use = std::find_if(op.pointers.begin(), op.pointers.end(),
                            [&](const ptx::PointerUse& u) { return u.offset == p.offset; });
    if (use != op.pointers.end() &&
        (use->access & (ptx::k_access_write | ptx::k_access_atomic)) != 0) {
      continue;
    }
    std::string what = "parameter " + std::to_string(p.param) + " (" + op.name + ")";
    if (op.aggregate || p.offset) what += " field +" + std::to_string(p.offset);
    return refuse("input-modification",
                  "the candidate writes through " + what +
                      ", which the original never writes through: " +
                      quoted(w.instruction, w.function, w.loc) +
                      "; a buffer the original only reads must not change, even when it is "
                      "restored before the kernel ends");
  }
  return std::nullopt;
}

// The narrow floating-point family a type belongs to (f16x2 is f16), or Type::none.
Type narrow_family(Type t) {
  switch (t) {
  case Type::f16:
  case Type::f16x2:
    return Type::f16;
  case Type::bf16:
  case Type::bf16x2:
    return Type::bf16;
  case Type::tf32:
    return Type::tf32;
  case Type::e4m3:
  case Type::e4m3x2:
    return Type::e4m3;
  case Type::e5m2:
  case Type::e5m2x2:
    return Type::e5m2;
  default:
    return Type::none;
  }
}

// Bytes of an element of the narrow family's storage types (tf32 is never stored: 0).
uint32_t storage_bytes(Type family) {
  switch (family) {
  case Type::f16:
  case Type::bf16:
    return 2;
  case Type::e4m3:
  case Type::e5m2:
    return 1;
  default:
    return 0;
  }
}

// An f32 or f64 original computed in f16, bf16, tf32 or fp8 may stay within a loose tolerance on
// the captured values and not on others. Allowed: a narrow type the original names anywhere (it
// converts f16 data to f32, say), and f16, bf16 or fp8 in an original that loads or stores
// elements of their size through its pointers: PTX for targets without bf16 instructions (before
// sm_80) or fp8 conversions keeps such data in integer registers and computes in f32, and a
// candidate compiled for this device does the same with the native instructions.
std::optional<Failure> precision_downgrade(const ptx::EntryInfo& original,
                                           const ptx::EntryInfo& candidate) {
  bool f32 = false, f64 = false;
  std::set<Type> narrow;
  for (const auto& u : original.types_used) {
    f32 = f32 || u.type == Type::f32;
    f64 = f64 || u.type == Type::f64;
    if (Type n = narrow_family(u.type); n != Type::none) narrow.insert(n);
  }
  if (!f32 && !f64) return std::nullopt;
  std::set<uint32_t> element_bytes; // of what the original moves through its pointers
  for (const auto& p : original.params) {
    for (const auto& use : p.pointers) {
      for (Type t : use.types) element_bytes.insert(ptx::type_size(t));
    }
  }
  for (const auto& u : candidate.types_used) {
    Type n = narrow_family(u.type);
    if (n == Type::none || narrow.count(n)) continue;
    if (uint32_t b = storage_bytes(n); b && element_bytes.count(b)) continue;
    std::string code = f32 && f64 ? "f32 and f64" : f32 ? "f32" : "f64";
    return refuse("precision-downgrade",
                  "the candidate computes in " + std::string(ptx::type_name(u.type)) +
                      ", which the original (" + code +
                      " code) never uses: " + quoted(u.instruction, u.function, u.loc));
  }
  return std::nullopt;
}

// "parameter 1 (k_param_1)", with the field's offset in a by-value struct.
std::string param_text(const ptx::EntryInfo& e, const ptx::ParamPointer& p) {
  std::string what = "parameter " + std::to_string(p.param);
  if (p.param >= e.params.size()) return what;
  const ptx::ParamInfo& param = e.params[p.param];
  what += " (" + param.name + ")";
  if (param.aggregate || p.offset) what += " field +" + std::to_string(p.offset);
  return what;
}

std::string_view access_verb(uint8_t access) {
  if (access & ptx::k_access_atomic) return "updates atomically";
  if ((access & ptx::k_access_read) && (access & ptx::k_access_write)) return "may read or write";
  return access & ptx::k_access_write ? "writes" : "reads";
}

// An original that waits for the upstream kernel, the one before it in the stream
// (griddepcontrol.wait, which a programmatic dependent launch relies on), reads what that kernel
// writes only after the wait, and writes only after it what that kernel may still read. A
// candidate must wait too, and before its wait may read only through pointers the original reads
// before its own, and write only through pointers the original writes before its own: the
// original says which buffers the upstream kernel leaves alone. The emulated device runs launches
// one after the other, so no run can show the race; on a GPU the candidate would read stale data
// or clobber what is still being read.
std::optional<Failure> dependent_launch_race(const ptx::EntryInfo& original,
                                             const ptx::EntryInfo& candidate) {
  if (!original.waits_grid_dependency) return std::nullopt;
  const std::string preamble =
      "the original waits for the upstream kernel (griddepcontrol.wait, programmatic dependent "
      "launch) ";
  if (!candidate.waits_grid_dependency) {
    return refuse("dependent-launch-race",
                  preamble + "before it reads what that kernel writes; the candidate never "
                             "executes griddepcontrol.wait, so on a GPU it may read its inputs "
                             "before the upstream kernel has written them");
  }
  std::set<ptx::ParamPointer> reads, writes; // what the original touches before its wait
  for (const auto& a : original.unwaited_accesses) {
    for (const auto& p : a.pointers) {
      if (a.access & (ptx::k_access_read | ptx::k_access_atomic)) reads.insert(p);
      if (a.access & (ptx::k_access_write | ptx::k_access_atomic)) writes.insert(p);
    }
  }
  for (const auto& a : candidate.unwaited_accesses) {
    std::string where = quoted(a.instruction, a.function, a.loc);
    if (a.pointers.empty()) {
      return refuse("dependent-launch-race",
                    preamble + "before it touches memory that kernel may use; the candidate " +
                        std::string(access_verb(a.access)) +
                        " memory at an address the analysis cannot trace to a parameter before "
                        "any griddepcontrol.wait: " +
                        where);
    }
    bool reads_it = a.access & (ptx::k_access_read | ptx::k_access_atomic);
    bool writes_it = a.access & (ptx::k_access_write | ptx::k_access_atomic);
    for (const auto& p : a.pointers) {
      bool read_ok = !reads_it || reads.count(p);
      bool write_ok = !writes_it || writes.count(p);
      if (read_ok && write_ok) continue;
      std::string what = param_text(original, p);
      return refuse("dependent-launch-race",
                    preamble + "before it " + (read_ok ? "writes" : "reads") + " memory through " +
                        what + "; the candidate " + std::string(access_verb(a.access)) +
                        " memory through " + what + " before any griddepcontrol.wait: " + where +
                        "; on a GPU the upstream kernel may still be " +
                        (read_ok ? "reading" : "writing") + " it");
    }
  }
  return std::nullopt;
}

// What a result of a kernel whose stores depend on a register of `kind` can change with.
std::string_view changes_with(ptx::External kind) {
  switch (kind) {
  case ptx::External::clock: return "timing (how many cycles each warp has run when it reads it)";
  case ptx::External::timer: return "the date and time (a time bomb: right until a given day)";
  case ptx::External::counters: return "what the performance counters happen to count";
  case ptx::External::placement:
    return "the SM or warp slot a block happens to land on, or the launch's sequence number";
  case ptx::External::driver: return "what the driver sets up for the launch";
  }
  return "something other than its inputs";
}

// A kernel's results must be a function of its inputs: validation runs the candidate a few times
// and compares, so a result that depends on the time, the clock or where a block runs can pass
// every run and be wrong later, or elsewhere (a time bomb keyed on %globaltimer, a shortcut taken
// on one SM). A candidate whose stores can depend on a kind of special register the original's
// stores cannot depend on is refused; reading one for what never reaches a store (a spin loop
// that only delays, timing that is printed) is allowed.
std::optional<Failure> external_state(const ptx::EntryInfo& original,
                                      const ptx::EntryInfo& candidate) {
  std::set<ptx::External> allowed;
  for (const auto& d : original.external_dependences) allowed.insert(d.kind);
  for (const auto& d : candidate.external_dependences) {
    if (allowed.count(d.kind)) continue;
    using Via = ptx::ExternalDependence::Via;
    std::string how;
    switch (d.via) {
    case Via::value: how = "the value it writes derives from it"; break;
    case Via::address: how = "the address it writes derives from it"; break;
    case Via::guard: how = "its guard predicate derives from it"; break;
    case Via::branch:
      how = d.branch_instruction.empty()
                ? std::string("a branch on a value derived from it decides whether it executes")
                : quoted(d.branch_instruction, d.branch_function, d.branch_loc) +
                      ", a branch on a value derived from it, decides whether it executes";
      break;
    }
    return refuse("external-state",
                  "the candidate's " + quoted(d.instruction, d.function, d.loc) +
                      " can depend on " + d.sreg + " (" +
                      std::string(ptx::external_text(d.kind)) + "), read at " +
                      quoted(d.read_instruction, d.read_function, d.read_loc) + ": " + how +
                      "; the original's stores depend on no register of that kind, so the "
                      "candidate's results could change with " +
                      std::string(changes_with(d.kind)) +
                      " while every validation run passes");
  }
  return std::nullopt;
}

} // namespace

std::optional<Failure> check_candidate_of_unknown(const ptx::EntryInfo& candidate) {
  const std::string preamble =
      "the original has no PTX, so whether it waits for the upstream kernel (griddepcontrol.wait, "
      "programmatic dependent launch) cannot be known; a rewrite of it must execute "
      "griddepcontrol.wait before it touches global memory (a no-op when the launch is not a "
      "dependent one): ";
  if (!candidate.waits_grid_dependency) {
    return refuse("dependent-launch-race", preamble + "the candidate never executes it");
  }
  if (!candidate.unwaited_accesses.empty()) {
    const auto& a = candidate.unwaited_accesses.front();
    return refuse("dependent-launch-race",
                  preamble + "the candidate " + std::string(access_verb(a.access)) +
                      " memory before it: " + quoted(a.instruction, a.function, a.loc));
  }
  return std::nullopt;
}

std::optional<Failure> check_candidate(const ptx::EntryInfo& original,
                                       const ptx::EntryInfo& candidate) {
  if (auto f = state_across_launches(original, candidate)) return f;
  if (auto f = input_modification(original, candidate)) return f;
  if (auto f = external_state(original, candidate)) return f;
  if (auto f = dependent_launch_race(original, candidate)) return f;
  return precision_downgrade(original, candidate);
}

} // namespace hone::worker
