// The launch entry points on x86-64: fast() (shim/fast_path.hpp) written out in assembly, then a
// jump to the driver, so that a launch on the fast path leaves the application's arguments where
// they are and the driver returns to the application itself.
//
// A C++ hook cannot do that: it passes the 11 arguments of cuLaunchKernel on to the driver, 5 of
// them on the stack, and GCC reloads and stores those back even for a tail call, inside a frame
// that saves six registers (shim/README.md, "Launch path cost"). A stub uses only the registers a
// call may clobber and that carry no argument (rax, r10, r11), touches no stack, and makes the
// same checks as fast(), in the same order, on the same words:
//
//   the driver's entry point resolved               detail::g_real[fn]
//   nothing diverts every launch                    g_launch_divert (off, tracing, stream capture)
//   the handle's slot in the function table         g_function_table, first probe only
//   its record, and nothing diverts it              KernelRecord::divert (capture due, variant)
//   this thread's counters hold the kernel          counts::t_thread (initial-exec TLS)
//   no timed launch due                             Pair::launches + 1 < Pair::next_sample
//
// then counts the launch and jumps to the driver. Anything else jumps to the hook's full path
// (hooks_launch.cpp) with the arguments untouched. The launch is counted as it goes to the driver,
// since the driver's answer does not come back through the stub: a launch the driver refuses is
// counted too, once the kernel was launched on the thread before (a first launch, a timed one and
// everything else the full path takes are counted only when the driver accepts them).
//
// The layouts the stubs read are fixed by the static_asserts below; a change to one fails the
// build. Built only for x86-64 outside sanitizer builds (shim/CMakeLists.txt); elsewhere the
// portable hooks in hooks_launch.cpp serve, with the same fast() and the same counting.
#include "shim/fast_path.hpp"
#include "shim/real.hpp"

#include <cstddef>

#if !defined(__x86_64__)
#error "launch_stubs_x86_64.cpp is for x86-64 only"
#endif

// The hooked entry points' places in Fn (shim/real.hpp), as the stubs spell them (checked below).
#define HONE_FN_cuLaunchKernel 12
#define HONE_FN_cuLaunchKernel_ptsz 13
#define HONE_FN_cuLaunchKernelEx 14
#define HONE_FN_cuLaunchKernelEx_ptsz 15
#define HONE_FN_cuLaunchCooperativeKernel 16
#define HONE_FN_cuLaunchCooperativeKernel_ptsz 17

namespace hone::shim {

static_assert(sizeof(std::atomic<void*>) == 8 && sizeof(std::atomic<uintptr_t>) == 8);
static_assert(sizeof(std::atomic<uint32_t>) == 4);
static_assert(sizeof(FunctionTable::Slot) == 24 && offsetof(FunctionTable::Slot, key) == 0 &&
              offsetof(FunctionTable::Slot, record) == 8);
static_assert(FunctionTable::k_capacity == 1u << 16); // the slot: hash >> 48
static_assert(sizeof(counts::Pair) == 24 && offsetof(counts::Pair, launches) == 0 &&
              offsetof(counts::Pair, next_sample) == 16);
static_assert(offsetof(counts::ThreadState, pairs) == 0 &&
              offsetof(counts::ThreadState, capacity) == 8);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"
static_assert(offsetof(KernelRecord, index) == 0 && offsetof(KernelRecord, divert) == 4);
#pragma GCC diagnostic pop

static_assert(unsigned(Fn::cuLaunchKernel) == HONE_FN_cuLaunchKernel);
static_assert(unsigned(Fn::cuLaunchKernel_ptsz) == HONE_FN_cuLaunchKernel_ptsz);
static_assert(unsigned(Fn::cuLaunchKernelEx) == HONE_FN_cuLaunchKernelEx);
static_assert(unsigned(Fn::cuLaunchKernelEx_ptsz) == HONE_FN_cuLaunchKernelEx_ptsz);
static_assert(unsigned(Fn::cuLaunchCooperativeKernel) == HONE_FN_cuLaunchCooperativeKernel);
static_assert(unsigned(Fn::cuLaunchCooperativeKernel_ptsz) ==
              HONE_FN_cuLaunchCooperativeKernel_ptsz);

} // namespace hone::shim

#define HONE_STR_(x) #x
#define HONE_STR(x) HONE_STR_(x)

#if defined(__CET__) && (__CET__ & 1)
#define HONE_ENDBR "endbr64\n\t"
#else
#define HONE_ENDBR ""
#endif

// An exported entry point NAME whose function handle is in register F; NULL_CHECK refuses a
// null first argument (cuLaunchKernelEx's launch config: the full path's to answer).
#define HONE_LAUNCH_STUB(NAME, F, NULL_CHECK)                                                      \
  asm(".text\n\t"                                                                                  \
      ".globl " #NAME "\n\t"                                                                       \
      ".type " #NAME ", @function\n\t"                                                             \
      ".p2align 4\n" #NAME ":\n\t"                                                                 \
      ".cfi_startproc\n\t" HONE_ENDBR                                                              \
      "movq hone_shim_real+8*" HONE_STR(HONE_FN_##NAME) "(%rip), %rax\n\t"                         \
      "testq %rax, %rax\n\t"                                                                       \
      "jz 9f\n\t"                                                                                  \
      "cmpl $0, hone_shim_launch_divert(%rip)\n\t"                                                 \
      "jne 9f\n\t" NULL_CHECK                                                                      \
      "movq " F ", %r10\n\t"                                                                       \
      "shrq $4, %r10\n\t"                                                                          \
      "movabsq $0x9E3779B97F4A7C15, %r11\n\t"                                                      \
      "imulq %r11, %r10\n\t"                                                                       \
      "shrq $48, %r10\n\t"                                                                         \
      "leaq (%r10,%r10,2), %r10\n\t"                                                               \
      "leaq hone_shim_function_table(%rip), %r11\n\t"                                              \
      "leaq (%r11,%r10,8), %r10\n\t"                                                               \
      "cmpq " F ", (%r10)\n\t"                                                                     \
      "jne 9f\n\t"                                                                                 \
      "movq 8(%r10), %r10\n\t"                                                                     \
      "testq %r10, %r10\n\t"                                                                       \
      "jz 9f\n\t"                                                                                  \
      "cmpl $0, 4(%r10)\n\t"                                                                       \
      "jne 9f\n\t"                                                                                 \
      "movl (%r10), %r10d\n\t"                                                                     \
      "movq hone_shim_thread_counts@gottpoff(%rip), %r11\n\t"                                      \
      "cmpl %fs:8(%r11), %r10d\n\t"                                                                \
      "jae 9f\n\t"                                                                                 \
      "movq %fs:(%r11), %r11\n\t"                                                                  \
      "leaq (%r10,%r10,2), %r10\n\t"                                                               \
      "leaq (%r11,%r10,8), %r10\n\t"                                                               \
      "movq (%r10), %r11\n\t"                                                                      \
      "addq $1, %r11\n\t"                                                                          \
      "cmpq 16(%r10), %r11\n\t"                                                                    \
      "jae 9f\n\t"                                                                                 \
      "movq %r11, (%r10)\n\t"                                                                      \
      "jmp *%rax\n"                                                                                \
      "9:\n\t"                                                                                     \
      "jmp hone_full_" #NAME "\n\t"                                                                \
      ".cfi_endproc\n\t"                                                                           \
      ".size " #NAME ", .-" #NAME "\n\t");

#define HONE_ARG1 "%rdi"
#define HONE_ARG2 "%rsi"
#define HONE_CONFIG_CHECK "testq %rdi, %rdi\n\tjz 9f\n\t"

HONE_LAUNCH_STUB(cuLaunchKernel, HONE_ARG1, "")
HONE_LAUNCH_STUB(cuLaunchKernel_ptsz, HONE_ARG1, "")
HONE_LAUNCH_STUB(cuLaunchKernelEx, HONE_ARG2, HONE_CONFIG_CHECK)
HONE_LAUNCH_STUB(cuLaunchKernelEx_ptsz, HONE_ARG2, HONE_CONFIG_CHECK)
HONE_LAUNCH_STUB(cuLaunchCooperativeKernel, HONE_ARG1, "")
HONE_LAUNCH_STUB(cuLaunchCooperativeKernel_ptsz, HONE_ARG1, "")
