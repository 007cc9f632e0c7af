#include "emu/exec_pool.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>

#include <pthread.h>
#include <thread>
#include <vector>

namespace hone::emu {

namespace {

class Pool {
public:
  Pool() {
    unsigned n = std::max(1u, std::thread::hardware_concurrency());
    if (const char* e = std::getenv("HONE_EMU_THREADS")) {
      long v = std::strtol(e, nullptr, 10);
      if (v >= 1 && v <= 256) n = unsigned(v);
    }
    m_workers = n;
    for (unsigned i = 1; i < n; ++i) {
      std::thread t([this, i] { loop(i); });
      t.detach(); // the pool lives as long as the process
    }
  }

  unsigned workers() const { return m_workers; }

  void run(uint64_t n, const std::function<void(unsigned, uint64_t)>& fn) {
    std::lock_guard launch(m_launch);
    if (n == 0) return;
    if (m_workers == 1 || n == 1) {
      for (uint64_t i = 0; i < n; ++i) fn(0, i);
      return;
    }
    {
      std::lock_guard lock(m_mutex);
      m_fn = &fn;
      m_n = n;
      m_next.store(0);
      m_busy = m_workers - 1;
      ++m_generation;
    }
    m_cv.notify_all();
    work(0);
    std::unique_lock lock(m_mutex);
    m_done.wait(lock, [&] { return m_busy == 0; });
    m_fn = nullptr;
  }

private:
  void work(unsigned worker) {
    for (uint64_t i; (i = m_next.fetch_add(1)) < m_n;) (*m_fn)(worker, i);
  }

  void loop(unsigned worker) {
    uint64_t seen = 0;
    while (true) {
      {
        std::unique_lock lock(m_mutex);
        m_cv.wait(lock, [&] { return m_generation != seen; });
        seen = m_generation;
      }
      work(worker);
      std::lock_guard lock(m_mutex);
      if (--m_busy == 0) m_done.notify_one();
    }
  }

  unsigned m_workers = 1;
  std::mutex m_launch;
  std::mutex m_mutex;
  std::condition_variable m_cv;
  std::condition_variable m_done;
  const std::function<void(unsigned, uint64_t)>* m_fn = nullptr;
  uint64_t m_n = 0;
  std::atomic<uint64_t> m_next{0};
  unsigned m_busy = 0;
  uint64_t m_generation = 0;
};

// Never destroyed: detached workers use it until exit. A forked child has none of the parent's
// threads, so it starts a pool of its own on first use.
std::atomic<Pool*> g_pool{nullptr};
std::mutex g_pool_mutex;

Pool& pool() {
  Pool* p = g_pool.load(std::memory_order_acquire);
  if (p) return *p;
  std::lock_guard lock(g_pool_mutex);
  p = g_pool.load(std::memory_order_relaxed);
  if (!p) {
    static std::once_flag atfork;
    std::call_once(atfork, [] {
      pthread_atfork(nullptr, nullptr, [] { g_pool.store(nullptr, std::memory_order_relaxed); });
    });
    p = new Pool();
    g_pool.store(p, std::memory_order_release);
  }
  return *p;
}

} // namespace

void parallel_for(uint64_t n, const std::function<void(unsigned, uint64_t)>& fn) {
  pool().run(n, fn);
}

unsigned pool_workers() { return pool().workers(); }

} // namespace hone::emu
