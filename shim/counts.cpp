#include "shim/counts.hpp"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <new>

namespace hone::shim::counts {

__thread Counters* t_mine __attribute__((tls_model("initial-exec"))) = nullptr;
__thread ThreadState t_thread __attribute__((tls_model("initial-exec")));

namespace {

std::atomic<Counters*> g_all{nullptr}; // every Counters, newest first
std::mutex g_free_mutex;
Counters* g_free = nullptr;

Block* new_block(uint32_t capacity) {
  void* p = std::calloc(1, sizeof(Block) + sizeof(Pair) * (capacity - 1));
  if (!p) return nullptr;
  auto* b = static_cast<Block*>(p); // zero bytes are zero counters
  b->capacity = capacity;
  return b;
}

// Gives the thread's counters back when it exits (registered on its first launch).
struct Release {
  bool armed = false;
  ~Release() {
    if (!armed || !t_mine) return;
    std::lock_guard lock(g_free_mutex);
    t_mine->next_free = g_free;
    g_free = t_mine;
    t_mine = nullptr;
    t_thread.pairs = nullptr;
    t_thread.capacity = 0;
  }
};
thread_local Release t_release;

// Where a thread counts that could not get counters (out of memory): its counts are lost, its
// launches go on.
thread_local Pair t_lost;

} // namespace

Pair& grow(uint32_t index) {
  Counters* c = t_mine;
  if (!c) {
    {
      std::lock_guard lock(g_free_mutex);
      if (g_free) {
        c = g_free;
        g_free = c->next_free;
        c->next_free = nullptr;
      }
    }
    if (!c) {
      c = new (std::nothrow) Counters();
      if (!c) return t_lost;
      c->block.store(new_block(64), std::memory_order_release);
      if (!c->block.load(std::memory_order_relaxed)) {
        delete c;
        return t_lost;
      }
      Counters* head = g_all.load(std::memory_order_relaxed);
      do {
        c->next = head;
      } while (!g_all.compare_exchange_weak(head, c, std::memory_order_release,
                                            std::memory_order_relaxed));
    }
    t_mine = c;
    t_release.armed = true;
  }
  Block* b = c->block.load(std::memory_order_relaxed);
  t_thread.pairs = b->pairs;
  t_thread.capacity = b->capacity;
  if (index < b->capacity) return b->pairs[index];
  uint32_t capacity = b->capacity;
  while (capacity <= index) capacity *= 2;
  Block* bigger = new_block(capacity);
  if (!bigger) return t_lost;
  for (uint32_t i = 0; i < b->capacity; ++i) {
    bigger->pairs[i].launches.store(b->pairs[i].launches.load(std::memory_order_relaxed),
                                    std::memory_order_relaxed);
    bigger->pairs[i].variant_launches.store(
        b->pairs[i].variant_launches.load(std::memory_order_relaxed), std::memory_order_relaxed);
    bigger->pairs[i].next_sample = b->pairs[i].next_sample;
  }
  // The old block stays readable (and frozen) for a reporter that is adding it up right now.
  c->block.store(bigger, std::memory_order_release);
  t_thread.pairs = bigger->pairs;
  t_thread.capacity = bigger->capacity;
  return bigger->pairs[index];
}

namespace {

template <class Field> uint64_t total(uint32_t index, Field field) {
  uint64_t n = 0;
  for (Counters* c = g_all.load(std::memory_order_acquire); c; c = c->next) {
    Block* b = c->block.load(std::memory_order_acquire);
    if (index < b->capacity) n += (b->pairs[index].*field).load(std::memory_order_relaxed);
  }
  return n;
}

} // namespace

uint64_t launches(uint32_t index) { return total(index, &Pair::launches); }
uint64_t variant_launches(uint32_t index) { return total(index, &Pair::variant_launches); }

void reset_after_fork() {
  // The child runs only the thread that forked: the others' counters are free to reuse. Another
  // thread may have held the free list's mutex at the fork: the child's is a new one.
  new (&g_free_mutex) std::mutex();
  g_free = nullptr;
  for (Counters* c = g_all.load(std::memory_order_acquire); c; c = c->next) {
    Block* b = c->block.load(std::memory_order_relaxed);
    for (uint32_t i = 0; i < b->capacity; ++i) {
      b->pairs[i].launches.store(0, std::memory_order_relaxed);
      b->pairs[i].variant_launches.store(0, std::memory_order_relaxed);
      b->pairs[i].next_sample = 0;
    }
    if (c != t_mine) {
      c->next_free = g_free;
      g_free = c;
    }
  }
}

} // namespace hone::shim::counts
