// Per-thread launch counters: what the launch path adds to a kernel's counts without writing a
// cache line another thread writes too (shim/README.md, "Launch path cost").
//
// Each thread that launches owns a Block of counters indexed by KernelRecord::index, which only
// it writes (a relaxed load and store, no locked instruction); the reporter adds up every block.
// A block is never freed: when it grows, the thread copies its counts into a larger one and
// publishes it, so a reader sees one or the other and totals never go backwards. When a thread
// exits, its counters go on a free list and the next new thread continues them: a kernel's total
// is the sum over counters, whichever thread counted into them, and memory stays bounded by the
// most threads that launched at once.
#pragma once

#include <atomic>
#include <cstdint>

namespace hone::shim {

struct KernelRecord;

namespace counts {

// Counters of one kernel in one block.
struct Pair {
  std::atomic<uint64_t> launches{0};
  std::atomic<uint64_t> variant_launches{0}; // of those, served by a variant
  // This thread's launch number (launches + 1) of the kernel's next timed launch; 0 until the
  // kernel's first launch on this thread (which takes the full path and sets it). Only this
  // thread reads it.
  uint64_t next_sample = 0;
};

struct Block {
  uint32_t capacity = 0; // kernels (KernelRecord::index < capacity)
  Pair pairs[1];         // `capacity` of them (allocated with the block)
};

struct Counters {
  std::atomic<Block*> block{nullptr};
  Counters* next = nullptr;      // every Counters ever made (never removed)
  Counters* next_free = nullptr; // the free list (guarded by its mutex)
};

// What the launch path reads of its thread, in one initial-exec TLS object (one address to find,
// no initializer to run): its block's pairs and capacity (0 until its first launch).
struct ThreadState {
  Pair* pairs = nullptr;
  uint32_t capacity = 0;
};
extern __thread ThreadState t_thread __asm__("hone_shim_thread_counts")
    __attribute__((tls_model("initial-exec")));
extern __thread Counters* t_mine __attribute__((tls_model("initial-exec")));

// Out of line: a thread's first launch, or a kernel beyond its block.
Pair& grow(uint32_t index);

inline Pair& of(uint32_t index) {
  ThreadState& t = t_thread;
  if (__builtin_expect(index < t.capacity, 1)) return t.pairs[index];
  return grow(index);
}

// One more: a relaxed load and store (this thread is the counter's only writer).
inline void bump(std::atomic<uint64_t>& c) {
  c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

// Totals of a kernel over every thread's counters (the reporter).
uint64_t launches(uint32_t index);
uint64_t variant_launches(uint32_t index);

// A forked child: every counter zero; the parent's other threads' counters free for reuse.
void reset_after_fork();

} // namespace counts
} // namespace hone::shim
