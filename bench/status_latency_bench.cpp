// hone-bench-status [CLIENTS] [SECONDS]: how long `honectl status` waits for honed while
// CLIENTS shims (default 1000) report to it every second.
//
// A real honed runs in a temporary directory. One thread drives every fake shim over
// non-blocking sockets with epoll: hello, 5 kernels announced, then stats with growing counters
// once a second, spread evenly over the second. The main thread meanwhile sends honectl's status
// request (through common/client, as honectl does) every 40 ms for SECONDS seconds (default 20)
// and records each round trip. Prints percentiles, idle and under load; asserts nothing.
#include "common/client.hpp"
#include "daemon_process.hpp"

#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

using namespace hone;
using namespace hone::test;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t k_kernels_per_shim = 5;
constexpr size_t k_distinct_kernels = 50; // processes of a fleet share their kernels
const std::string k_status_request = R"({"cmd":"status","top":10})"; // what `honectl status` asks

struct Shim {
  int fd = -1;
  uint64_t reports = 0;
  Clock::time_point due;
};

struct LoadStats {
  std::atomic<uint64_t> reports{0};
  std::atomic<uint64_t> dropped{0}; // socket full: skipped, as a real shim would
  std::atomic<uint64_t> disconnected{0};
  std::atomic<bool> error_reported{false};
};

proto::KernelInfo kernel(size_t k) {
  proto::KernelInfo info;
  info.id = k + 1;
  std::string image = "bench image " + std::to_string(k % 10);
  info.key = KernelKey{ImageHash::of(image.data(), image.size()),
                       "_Z" + std::to_string(7 + std::to_string(k).size()) + "kernel_" +
                           std::to_string(k) + "Pf"};
  info.format = proto::ImageFormat::ptx;
  info.image_size = 65536;
  return info;
}

std::string stats_frame(size_t shim, uint64_t report) {
  proto::Stats s;
  s.uptime_ns = report * 1'000'000'000ull;
  for (size_t i = 0; i < k_kernels_per_shim; ++i) {
    size_t k = (shim * k_kernels_per_shim + i) % k_distinct_kernels;
    proto::KernelStats ks;
    ks.id = k + 1;
    ks.launches = report * (100 + 10 * k);
    ks.sampled = report * 2;
    ks.sampled_ns = report * 2 * (1000 + 500 * k);
    ks.grid = {uint32_t(64 + k), 1, 1};
    ks.block = {256, 1, 1};
    s.kernels.push_back(ks);
  }
  return proto::frame_of(proto::MsgType::stats, uint32_t(report + 2), s);
}

// Connect every shim (blocking, one after the other), then drive them all from this thread.
void run_shims(const std::string& socket, size_t count, std::atomic<bool>& stop,
               std::atomic<size_t>& attached, LoadStats& stats) {
  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  std::vector<Shim> shims(count);
  auto start = Clock::now();
  for (size_t i = 0; i < count && !stop; ++i) {
    auto c = Client::connect_raw(socket);
    if (!c) {
      std::fprintf(stderr, "shim %zu: %s\n", i, c.error().message.c_str());
      continue;
    }
    proto::Kernels ks;
    for (size_t k = 0; k < k_kernels_per_shim; ++k) {
      ks.kernels.push_back(kernel((i * k_kernels_per_shim + k) % k_distinct_kernels));
    }
    proto::Hello hello = test_hello(proto::ClientKind::shim);
    hello.pid = uint32_t(100000 + i);
    std::string first = proto::frame_of(proto::MsgType::hello, 1, hello) +
                        proto::frame_of(proto::MsgType::kernels, 2, ks);
    if (!c->send(first)) continue;
    Shim& s = shims[i];
    s.fd = ::dup(c->fd()); // the Client closes its own descriptor
    int flags = 1;
    ::ioctl(s.fd, FIONBIO, &flags);
    s.due = start + std::chrono::milliseconds(1000 * i / count) + 1s;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = i;
    ::epoll_ctl(ep, EPOLL_CTL_ADD, s.fd, &ev);
    attached = i + 1;
  }
  std::vector<epoll_event> events(256);
  char sink[65536];
  while (!stop) {
    auto now = Clock::now();
    auto next = now + 100ms;
    for (size_t i = 0; i < count; ++i) {
      Shim& s = shims[i];
      if (s.fd < 0) continue;
      if (s.due <= now) {
        std::string f = stats_frame(i, ++s.reports);
        ssize_t n = ::send(s.fd, f.data(), f.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n == ssize_t(f.size())) {
          ++stats.reports;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
          --s.reports; // the counters stay cumulative: send them next time
          ++stats.dropped;
        } else {
          // A partial frame cannot be finished later without a queue; a real shim keeps one.
          // Here it means the daemon is far behind: drop the shim and say so.
          ::close(s.fd);
          s.fd = -1;
          ++stats.disconnected;
          continue;
        }
        s.due += 1s;
      }
      next = std::min(next, s.due);
    }
    int timeout = int(std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count()));
    int n = ::epoll_wait(ep, events.data(), int(events.size()), timeout);
    for (int e = 0; e < n; ++e) {
      Shim& s = shims[events[size_t(e)].data.u64];
      if (s.fd < 0) continue;
      ssize_t got = ::recv(s.fd, sink, sizeof sink, MSG_DONTWAIT); // hello_ack; nothing else
      // An error from honed (its frames are small and arrive whole): say why, once.
      for (size_t off = 0; got > 0 && off + proto::k_header_size <= size_t(got);) {
        auto h = proto::FrameHeader::decode(sink + off, nullptr);
        if (!h || off + proto::k_header_size + h->length > size_t(got)) break;
        if (h->type == proto::MsgType::error && !stats.error_reported.exchange(true)) {
          wire::Reader r(std::string_view(sink + off + proto::k_header_size, h->length));
          proto::ErrorMsg e;
          proto::decode(r, e);
          std::fprintf(stderr, "hone-bench-status: honed answered a shim with error %u: %s\n",
                       e.code, e.message.c_str());
        }
        off += proto::k_header_size + h->length;
      }
      if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        ::epoll_ctl(ep, EPOLL_CTL_DEL, s.fd, nullptr);
        ::close(s.fd);
        s.fd = -1;
        ++stats.disconnected;
      }
    }
  }
  for (auto& s : shims) {
    if (s.fd >= 0) ::close(s.fd);
  }
  ::close(ep);
}

struct Percentiles {
  double p50, p90, p99, max;
  size_t n;
};

Percentiles percentiles(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[std::min(v.size() - 1, size_t(q * double(v.size())))]; };
  return {at(0.50), at(0.90), at(0.99), v.back(), v.size()};
}

// Status round trips every `period` for `duration`; milliseconds each. `bytes` gets the size of
// the last reply.
std::vector<double> measure(Client& ctl, std::chrono::milliseconds duration,
                            std::chrono::milliseconds period, size_t* bytes, size_t* failures) {
  std::vector<double> ms;
  auto end = Clock::now() + duration;
  auto next = Clock::now();
  while (Clock::now() < end) {
    std::this_thread::sleep_until(next);
    next += period;
    auto t0 = Clock::now();
    auto f = ctl.control(k_status_request);
    auto t1 = Clock::now();
    if (!f) {
      ++*failures;
      continue;
    }
    *bytes = f->payload.size();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  return ms;
}

void print(const char* what, const Percentiles& p) {
  std::printf("  %-22s n=%-4zu p50 %7.3f ms  p90 %7.3f ms  p99 %7.3f ms  max %7.3f ms\n", what, p.n,
              p.p50, p.p90, p.p99, p.max);
}

} // namespace

int main(int argc, char** argv) {
  size_t clients = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 1000;
  int seconds = argc > 2 ? std::atoi(argv[2]) : 20;
  if (clients == 0 || seconds <= 0) {
    std::fprintf(stderr, "usage: hone-bench-status [CLIENTS] [SECONDS]\n");
    return 2;
  }
  raise_fd_limit(clients * 2 + 256);
  DaemonOptions o;
  o.config = "[server]\nreport_interval_ms = 1000\n";
  o.log_level = "warn";
  auto d = DaemonProcess::start(o);
  if (!d) {
    std::fprintf(stderr, "hone-bench-status: %s\n", d.error().message.c_str());
    return 1;
  }
  auto& honed = **d;
  auto ctl = connect_as(honed.socket(), proto::ClientKind::ctl);
  if (!ctl) {
    std::fprintf(stderr, "hone-bench-status: %s\n", ctl.error().message.c_str());
    return 1;
  }
  std::printf(
      "hone-bench-status: honed pid %d, %zu shims x %zu kernels (%zu distinct), stats every "
      "1 s each; status every 40 ms for %d s\n",
      honed.pid(), clients, k_kernels_per_shim, k_distinct_kernels, seconds);

  size_t bytes = 0, failures = 0;
  auto idle = measure(*ctl, 3s, 15ms, &bytes, &failures);
  size_t idle_bytes = bytes;

  std::atomic<bool> stop{false};
  std::atomic<size_t> attached{0};
  LoadStats load;
  auto rss_before = honed.rss_kib().value_or(0);
  std::thread shims(run_shims, honed.socket(), clients, std::ref(stop), std::ref(attached),
                    std::ref(load));
  // Steady state: every shim attached and reporting.
  auto t0 = Clock::now();
  bool ready = wait_for(
      [&] {
        auto r = control(*ctl, {{"cmd", "status"}, {"top", 0}});
        return r && (*r)["result"]["processes"].size() >= clients;
      },
      60s);
  double attach_s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!ready) std::fprintf(stderr, "hone-bench-status: not every shim attached within 60 s\n");
  std::this_thread::sleep_for(1500ms); // a full round of reports from everyone
  uint64_t reports_before = load.reports;
  auto t_load = Clock::now();
  auto loaded = measure(*ctl, std::chrono::seconds(seconds), 40ms, &bytes, &failures);
  double load_s = std::chrono::duration<double>(Clock::now() - t_load).count();
  uint64_t reports = load.reports - reports_before;
  auto rss_after = honed.rss_kib().value_or(0);
  auto kernels = control(*ctl, {{"cmd", "kernels"}});
  stop = true;
  shims.join();

  std::printf("  %zu shims attached in %.2f s; %.0f stats reports/s during the measurement "
              "(%llu deferred on a full socket, %llu shims lost)\n",
              attached.load(), attach_s, double(reports) / load_s,
              static_cast<unsigned long long>(load.dropped.load()),
              static_cast<unsigned long long>(load.disconnected.load()));
  if (kernels && (*kernels)["ok"].get<bool>()) {
    uint64_t launches = 0;
    for (const auto& k : (*kernels)["result"]["kernels"]) launches += k["launches"].get<uint64_t>();
    std::printf("  honed knows %zu kernels, %llu launches; VmRSS %.1f MiB -> %.1f MiB\n",
                (*kernels)["result"]["kernels"].size(), static_cast<unsigned long long>(launches),
                double(rss_before) / 1024, double(rss_after) / 1024);
  }
  if (idle.empty() || loaded.empty()) {
    std::fprintf(stderr, "hone-bench-status: no measurements (%zu failures)\n", failures);
    return 1;
  }
  auto pi = percentiles(idle);
  auto pl = percentiles(loaded);
  std::printf("status round trip (request %s):\n", k_status_request.c_str());
  print(("idle, reply " + std::to_string(idle_bytes / 1024) + " KiB").c_str(), pi);
  print(("loaded, reply " + std::to_string(bytes / 1024) + " KiB").c_str(), pl);
  std::printf("  loaded / idle: p50 %.1fx, p99 %.1fx; %zu requests failed\n", pl.p50 / pi.p50,
              pl.p99 / pi.p99, failures);
  std::printf("target p99 < 5 ms: %s (%.3f ms)\n", pl.p99 < 5.0 ? "met" : "not met", pl.p99);
  auto status = honed.stop();
  if (!status || *status != 0)
    std::fprintf(stderr, "hone-bench-status: honed did not stop cleanly\n");
  return 0;
}
