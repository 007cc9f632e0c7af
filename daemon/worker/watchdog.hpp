// A candidate that hangs on a real GPU never returns from the driver: the watchdog notices and
// runs its expiry action (send the timeout verdict, exit) from its own thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace hone::worker {

class Watchdog {
public:
  // `on_expire` runs on the watchdog's thread when an armed deadline passes; it should not return.
  explicit Watchdog(std::function<void()> on_expire);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void arm(std::chrono::milliseconds timeout);
  void disarm();

private:
  void loop();
  std::function<void()> m_on_expire;
  std::mutex m_mutex;
  std::condition_variable m_cv;
  bool m_armed = false;
  bool m_stop = false;
  std::chrono::steady_clock::time_point m_deadline;
  std::thread m_thread;
};

} // namespace hone::worker
