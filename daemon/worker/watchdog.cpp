#include "daemon/worker/watchdog.hpp"

namespace hone::worker {

Watchdog::Watchdog(std::function<void()> on_expire)
    : m_on_expire(std::move(on_expire)), m_thread([this] { loop(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(m_mutex);
    m_stop = true;
  }
  m_cv.notify_all();
  m_thread.join();
}

void Watchdog::arm(std::chrono::milliseconds timeout) {
  {
    std::lock_guard lock(m_mutex);
    m_armed = true;
    m_deadline = std::chrono::steady_clock::now() + timeout;
  }
  m_cv.notify_all();
}

void Watchdog::disarm() {
  std::lock_guard lock(m_mutex);
  m_armed = false;
}

void Watchdog::loop() {
  std::unique_lock lock(m_mutex);
  while (!m_stop) {
    if (!m_armed) {
      m_cv.wait(lock);
      continue;
    }
    if (m_cv.wait_until(lock, m_deadline) == std::cv_status::timeout && m_armed && !m_stop &&
        std::chrono::steady_clock::now() >= m_deadline) {
      m_armed = false;
      lock.unlock();
      m_on_expire();
      lock.lock();
    }
  }
}

} // namespace hone::worker
