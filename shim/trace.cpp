#include "shim/trace.hpp"

#include "shim/log.hpp"

#include <cuda.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include <dlfcn.h>
#include <unistd.h>

// The trampolines, x86-64 SysV: thunk i is 16 bytes at hone_trace_thunks + 16 * i. It puts i in
// r11 (r10 and r11 carry no arguments) and jumps to the common part, which jumps straight to the
// target once its first call was logged, and otherwise saves every argument register (rdi, rsi,
// rdx, rcx, r8, r9, rax: the vector-register count of a variadic call, xmm0-7), calls
// hone_trace_first_call(i) with the stack 16-byte aligned, restores them and jumps to the target
// it returned. Stack arguments are untouched: the return address is still the caller's.
#define HONE_TRACE_SLOTS 2048

extern "C" {
__attribute__((visibility("hidden"))) void* hone_trace_targets[HONE_TRACE_SLOTS];
__attribute__((visibility("hidden"))) unsigned char hone_trace_logged[HONE_TRACE_SLOTS];
__attribute__((visibility("hidden"))) void* hone_trace_first_call(unsigned index);
__attribute__((visibility("hidden"))) extern const unsigned char hone_trace_thunks[];
}

#if defined(__x86_64__)
#define HONE_TRACE_THUNKS 1
#define HONE_STR2(x) #x
#define HONE_STR(x) HONE_STR2(x)
asm(R"(
    .text
    .p2align 4
    .globl hone_trace_thunks
    .hidden hone_trace_thunks
    .type hone_trace_thunks, @function
hone_trace_thunks:
    .set hone_trace_i, 0
    .rept )" HONE_STR(HONE_TRACE_SLOTS) R"(
    .p2align 4
    movl $hone_trace_i, %r11d
    jmp hone_trace_common
    .set hone_trace_i, hone_trace_i + 1
    .endr
    .size hone_trace_thunks, . - hone_trace_thunks

    .p2align 4
    .type hone_trace_common, @function
hone_trace_common:
    leaq hone_trace_logged(%rip), %r10
    cmpb $0, (%r10,%r11)
    je 1f
    leaq hone_trace_targets(%rip), %r10
    jmp *(%r10,%r11,8)
1:
    pushq %rdi
    pushq %rsi
    pushq %rdx
    pushq %rcx
    pushq %r8
    pushq %r9
    pushq %rax
    subq $128, %rsp
    movdqu %xmm0, 0(%rsp)
    movdqu %xmm1, 16(%rsp)
    movdqu %xmm2, 32(%rsp)
    movdqu %xmm3, 48(%rsp)
    movdqu %xmm4, 64(%rsp)
    movdqu %xmm5, 80(%rsp)
    movdqu %xmm6, 96(%rsp)
    movdqu %xmm7, 112(%rsp)
    movl %r11d, %edi
    call hone_trace_first_call
    movq %rax, %r11
    movdqu 0(%rsp), %xmm0
    movdqu 16(%rsp), %xmm1
    movdqu 32(%rsp), %xmm2
    movdqu 48(%rsp), %xmm3
    movdqu 64(%rsp), %xmm4
    movdqu 80(%rsp), %xmm5
    movdqu 96(%rsp), %xmm6
    movdqu 112(%rsp), %xmm7
    addq $128, %rsp
    popq %rax
    popq %r9
    popq %r8
    popq %rcx
    popq %rdx
    popq %rsi
    popq %rdi
    jmp *%r11
    .size hone_trace_common, . - hone_trace_common
)");
#else
#define HONE_TRACE_THUNKS 0
#endif

namespace hone::shim {

bool detail::g_trace = false;

namespace {

struct Slot {
  void* target = nullptr;
  std::string symbol;
  int version = 0;
  uint64_t flags = 0;
  Found how = Found::dlsym;
  std::string line; // what its first call logs
};

// Slots in use, guarded by g_mutex (never held around the dynamic linker or the driver: dladdr
// runs before it is taken).
std::mutex g_mutex;
std::vector<Slot>* g_slots = nullptr; // never freed: thunks may be called during exit
std::atomic<bool> g_pool_full_logged{false};
std::atomic<bool> g_handed_out[unsigned(Fn::count)];
std::atomic<bool> g_linked_logged[unsigned(Fn::count)];

// One trace line on stderr, whatever HONE_LOG says: tracing was asked for.
void trace_write(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void trace_write(const char* fmt, ...) {
  char buf[512];
  int n = std::snprintf(buf, sizeof buf, "hone: trace: ");
  va_list ap;
  va_start(ap, fmt);
  int m = std::vsnprintf(buf + n, sizeof buf - size_t(n) - 1, fmt, ap);
  va_end(ap);
  size_t len = size_t(n) + (m < 0 ? 0 : std::min<size_t>(size_t(m), sizeof buf - size_t(n) - 2));
  buf[len++] = '\n';
  ssize_t ignored = ::write(2, buf, len);
  (void)ignored;
}

const char* how_name(Found how) {
  switch (how) {
  case Found::proc_address: return "cuGetProcAddress";
  case Found::proc_address_v2: return "cuGetProcAddress_v2";
  case Found::dlsym: return "dlsym";
  }
  return "?";
}

const char* stream_mode(uint64_t flags) {
  if (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) return "per-thread default stream";
  if (flags & CU_GET_PROC_ADDRESS_LEGACY_STREAM) return "legacy stream";
  return "default stream";
}

// The ABI name of the function at `p` (cuMemAlloc_v2 for a lookup of cuMemAlloc), when the
// library exporting it says; else `fallback`.
std::string abi_name(void* p, const char* fallback) {
  Dl_info info{};
  if (dladdr(p, &info) != 0 && info.dli_sname != nullptr && info.dli_saddr == p) {
    return info.dli_sname;
  }
  return fallback ? fallback : "?";
}

} // namespace

void trace_init() {
  const char* v = std::getenv("HONE_TRACE");
  detail::g_trace = v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
  if (detail::g_trace && !HONE_TRACE_THUNKS) {
    trace_write("only lookups are traced on this architecture (no thunks)");
  }
}

void* trace_pointer(void* target, const char* symbol, int version, uint64_t flags, Found how) {
  if (!detail::g_trace || target == nullptr) return target;
  // Hooks handed out here are the application's calls; their own linked-call report stays quiet.
  for (unsigned i = 0; i < unsigned(Fn::count); ++i) {
    if (is_hooked(Fn(i)) && hook_of(Fn(i)) == target) g_handed_out[i].store(true);
  }
  std::string abi = abi_name(target, symbol);
  char line[400];
  if (how == Found::dlsym) {
    std::snprintf(line, sizeof line, "%s (dlsym)", abi.c_str());
  } else {
    std::snprintf(line, sizeof line, "%s (%s \"%s\" version %d, %s)", abi.c_str(), how_name(how),
                  symbol ? symbol : "?", version, stream_mode(flags));
  }
#if HONE_TRACE_THUNKS
  try {
    std::lock_guard lock(g_mutex);
    if (g_slots == nullptr) g_slots = new std::vector<Slot>;
    for (size_t i = 0; i < g_slots->size(); ++i) {
      const Slot& s = (*g_slots)[i];
      if (s.target == target && s.version == version && s.flags == flags && s.how == how &&
          s.symbol == (symbol ? symbol : "")) {
        return const_cast<unsigned char*>(hone_trace_thunks) + 16 * i;
      }
    }
    if (g_slots->size() >= HONE_TRACE_SLOTS) {
      if (!g_pool_full_logged.exchange(true)) {
        trace_write("more than %d entry points: later ones are not traced", HONE_TRACE_SLOTS);
      }
      return target;
    }
    const size_t i = g_slots->size();
    g_slots->push_back(Slot{target, symbol ? symbol : "", version, flags, how, line});
    __atomic_store_n(&hone_trace_targets[i], target, __ATOMIC_RELEASE);
    return const_cast<unsigned char*>(hone_trace_thunks) + 16 * i;
  } catch (...) {
    return target; // out of memory: untraced, never broken
  }
#else
  trace_write("%s", line); // no thunk: the lookup stands for the call
  return target;
#endif
}

void trace_lookup(const char* symbol, int version, uint64_t flags, Found how, int result,
                  int status) {
  if (!detail::g_trace) return;
  if (result == CUDA_SUCCESS) {
    log(Level::debug, "lookup %s \"%s\" version %d (%s)", how_name(how), symbol ? symbol : "?",
        version, stream_mode(flags));
    return;
  }
  const char* why = status == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND       ? "symbol not found"
                    : status == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT ? "version not sufficient"
                                                                           : "failed";
  log(Level::debug, "lookup %s \"%s\" version %d (%s): %s (CUresult %d)", how_name(how),
      symbol ? symbol : "?", version, stream_mode(flags), why, result);
}

void trace_linked(Fn f) {
  const unsigned i = unsigned(f);
  if (g_handed_out[i].load(std::memory_order_relaxed)) return;
  if (g_linked_logged[i].exchange(true)) return;
  trace_write("%s (linked)", fn_name(f));
}

} // namespace hone::shim

extern "C" void* hone_trace_first_call(unsigned index) {
  using namespace hone::shim;
  void* target = __atomic_load_n(&hone_trace_targets[index], __ATOMIC_ACQUIRE);
  if (!__atomic_exchange_n(&hone_trace_logged[index], 1, __ATOMIC_ACQ_REL)) {
    std::string line;
    {
      std::lock_guard lock(g_mutex);
      if (g_slots && index < g_slots->size()) line = (*g_slots)[index].line;
    }
    if (!line.empty()) trace_write("%s", line.c_str());
  }
  return target;
}
