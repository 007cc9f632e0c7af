#include "shim/reporter.hpp"

#include "common/protocol.hpp"
#include "common/version.hpp"
#include "cuda/triton_cache.hpp"
#include "shim/capture.hpp"
#include "shim/graph.hpp"
#include "shim/config.hpp"
#include "shim/cupti.hpp"
#include "shim/log.hpp"
#include "shim/real.hpp"
#include "shim/registry.hpp"
#include "shim/sampler.hpp"
#include "shim/swap.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <span>
#include <string>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

namespace hone::shim {

namespace {

constexpr uint64_t k_handshake_ms = 5000;
constexpr uint64_t k_backoff_min_ms = 1000;
constexpr uint64_t k_backoff_max_ms = 30000;
constexpr uint64_t k_version_backoff_ms = 60000;
constexpr size_t k_out_limit = 1u << 20;     // bytes queued for a daemon that is not reading
constexpr uint64_t k_stall_limit_ms = 30000; // a daemon not reading this long is dropped
constexpr uint64_t k_final_wait_ms = 250;
constexpr uint32_t k_min_interval_ms = 50;
constexpr uint64_t k_collect_ms = 20;   // how soon timed launches are collected between reports
constexpr size_t k_max_pending_fds = 8; // descriptors received ahead of their frames
constexpr uint64_t k_max_variant_bytes = 256ull << 20; // a variant image larger is refused

uint64_t now_ms() {
  return uint64_t(std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}
uint64_t now_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

std::string read_link(const char* path) {
  char buf[4096];
  ssize_t n = ::readlink(path, buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, size_t(n)) : std::string();
}

} // namespace

struct Reporter::Impl {
  // Shared with application threads.
  std::mutex mutex;
  std::condition_variable final_cv;
  std::atomic<bool> running{false};
  std::atomic<bool> ready{false};
  std::atomic<bool> final_requested{false};
  bool final_done = false;
  int wake_fd = -1;
  uint64_t start_ns = now_ns();

  // The thread's own.
  struct Out {
    std::string data;
    size_t off = 0;
    int fd = -1;
  };
  int fd = -1;
  bool handshake = false;
  bool device_known = false; // the daemon has the device (from the hello or a later report)
  bool tried_connect = false; // a connection was attempted at least once
  bool finished = false;
  bool reported_final = false;
  uint64_t next_collect = 0;
  std::string in;
  std::deque<int> in_fds; // descriptors received, for the frames that carry them
  std::deque<Out> out;
  size_t out_bytes = 0;
  uint64_t retry_at = 0;
  uint64_t backoff = k_backoff_min_ms;
  uint64_t ack_deadline = 0;
  uint64_t next_report = 0;
  uint64_t interval = 2000;
  uint64_t last_write_progress = 0;
  uint32_t seq = 0;

  void run();
  void connect_daemon(uint64_t now);
  void disconnect(Once kind, Level level, const char* why, uint64_t retry_ms = 0);
  void queue(std::string frame, int with_fd = -1);
  void flush(uint64_t now);
  void receive(uint64_t now);
  void parse_frames(uint64_t now);
  bool handle(const proto::FrameHeader& h, std::string_view payload, uint64_t now, int fd);
  void report();
  void answer_image(uint32_t seq, const proto::ImageRequest& req);
  void send_captures();
  // Announce the kernels the daemon has not heard of; false while the daemon is not reading.
  bool announce();
  // Free what sent captures held, unless another capture is due (freeing may wait for the
  // device: it would delay it).
  void release_spent_captures();
  void send_status(const proto::VariantStatus& st);
  proto::Hello hello();
  void signal_final_done();
};

Reporter::Impl& Reporter::impl() {
  if (!m_impl) m_impl = new Impl(); // never destroyed: the thread may run during exit
  return *m_impl;
}

Reporter& reporter() {
  static Reporter* r = new Reporter();
  return *r;
}

namespace {
void flush_at_exit() {
  reporter().final_flush();
}
} // namespace

void Reporter::ensure_started() {
  Impl& s = impl();
  if (s.running.load(std::memory_order_acquire)) return;
  std::lock_guard lock(s.mutex);
  if (s.running.load(std::memory_order_relaxed)) return;
  if (s.wake_fd < 0) s.wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  try {
    std::thread([&s] { s.run(); }).detach();
  } catch (const std::exception&) {
    log(Level::warn, "could not start the reporting thread; running without the daemon");
    return;
  }
  static std::atomic<bool> atexit_installed{false};
  if (!atexit_installed.exchange(true)) std::atexit(flush_at_exit);
  s.running.store(true, std::memory_order_release);
}

void Reporter::final_flush() {
  Impl& s = impl();
  if (!s.running.load()) return;
  s.final_requested.store(true);
  uint64_t one = 1;
  ssize_t ignored = ::write(s.wake_fd, &one, sizeof one);
  (void)ignored;
  std::unique_lock lock(s.mutex);
  s.final_cv.wait_for(lock, std::chrono::milliseconds(k_final_wait_ms),
                      [&] { return s.final_done; });
}

void Reporter::wake() {
  Impl& s = impl();
  if (s.wake_fd < 0) return;
  uint64_t one = 1;
  ssize_t ignored = ::write(s.wake_fd, &one, sizeof one);
  (void)ignored;
}

void Reporter::lock_for_fork() {
  impl().mutex.lock();
}
void Reporter::unlock_after_fork() {
  impl().mutex.unlock();
}

void Reporter::reset_in_child() {
  // The parent's thread does not exist here, and its connection is the parent's: start over.
  Impl* old = m_impl;
  m_impl = nullptr;
  if (old) {
    if (old->fd >= 0) ::close(old->fd);
    if (old->wake_fd >= 0) ::close(old->wake_fd);
    for (auto& o : old->out) {
      if (o.fd >= 0) ::close(o.fd);
    }
    // `old` (and its locked mutex) is leaked: its destructor would run on a mutex the parent's
    // threads may have held.
  }
}

void Reporter::Impl::signal_final_done() {
  std::lock_guard lock(mutex);
  final_done = true;
  final_cv.notify_all();
}

// This thread's driver calls (event queries, freeing pinned memory, loading variants) must never
// fail, or invalidate, a stream capture the application runs on another thread in the global
// mode (PyTorch's default): in the relaxed mode, this thread is not prohibited from them. Set
// once the driver is initialized (before, the call fails and is tried again next loop).
static void relax_capture_mode() {
  static thread_local bool relaxed = false;
  if (relaxed) return;
  using Exchange = CUresult (*)(CUstreamCaptureMode*);
  auto exchange = real_as<Exchange>(Fn::cuThreadExchangeStreamCaptureMode);
  if (!exchange) return;
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  relaxed = exchange(&mode) == CUDA_SUCCESS;
}

void Reporter::Impl::run() {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr); // the application's signals are not ours
  if (config().cupti) cupti_start();
  while (true) {
    relax_capture_mode();
    uint64_t now = now_ms();
    bool final_now = final_requested.load();
    if (finished) {
      pollfd p{wake_fd, POLLIN, 0};
      ::poll(&p, 1, 1000);
      continue;
    }
    // At exit, only a process that never tried (it ends before this thread first ran: a short
    // program) tries once more; one whose attempts failed does not wait for the daemon again.
    if (fd < 0 && now >= retry_at && (!final_now || !tried_connect)) connect_daemon(now);
    if (fd >= 0 && handshake && now >= ack_deadline) {
      disconnect(Once::handshake, Level::info, "the daemon did not answer the hello in 5 s");
    }
    if (fd >= 0 && !handshake && (now >= next_report || (final_now && !reported_final))) {
      sample_collect();
      cupti_flush();
      graph_fold();
      report();
      next_report = now + interval;
      if (final_now) {
        queue(proto::frame(proto::MsgType::goodbye, ++seq, wire::Writer{}));
        reported_final = true;
      }
    } else if (fd >= 0 && !handshake && registry().take_added()) {
      // New kernels are announced within a loop (at most a second), not at the next report:
      // the daemon may ask for reports only once a minute.
      announce();
    } else if ((sample_in_flight() || captures_pending()) && now >= next_collect) {
      // Timed launches and captures finish between reports: collect them now.
      sample_collect();
      if (fd >= 0 && !handshake) send_captures();
      next_collect = now + k_collect_ms;
    }
    if (fd >= 0) flush(now);
    // At exit: report once the session is up (a hello still unanswered is waited for, within
    // the exit deadline), then finish when everything is sent; without a connection, at once.
    if (final_now && (fd < 0 || (!handshake && reported_final && out.empty()))) {
      if (fd >= 0) ::close(fd);
      fd = -1;
      finished = true;
      ready.store(false);
      signal_final_done();
      continue;
    }
    if (fd >= 0 && !out.empty() && now - last_write_progress > k_stall_limit_ms) {
      disconnect(Once::stalled, Level::info, "the daemon stopped reading for 30 s");
    }

    pollfd fds[2];
    fds[0] = {wake_fd, POLLIN, 0};
    nfds_t n = 1;
    if (fd >= 0) {
      fds[1] = {fd, short(POLLIN | (out.empty() ? 0 : POLLOUT)), 0};
      n = 2;
    }
    uint64_t wake_at = fd < 0 ? retry_at : handshake ? ack_deadline : next_report;
    if (sample_in_flight() || captures_pending()) wake_at = std::min(wake_at, now + k_collect_ms);
    int timeout = int(std::clamp<int64_t>(int64_t(wake_at) - int64_t(now_ms()), 1, 1000));
    int r = ::poll(fds, n, timeout);
    if (r <= 0) continue;
    if (fds[0].revents & POLLIN) {
      uint64_t v;
      while (::read(wake_fd, &v, sizeof v) > 0) {
      }
    }
    if (n == 2 && fd >= 0) {
      if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) receive(now_ms());
      if (fd >= 0 && (fds[1].revents & POLLOUT)) flush(now_ms());
    }
  }
}

void Reporter::Impl::connect_daemon(uint64_t now) {
  tried_connect = true;
  const char* path = config().socket;
  int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s < 0) {
    retry_at = now + backoff;
    return;
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path, std::min(std::strlen(path), sizeof addr.sun_path - 1));
  if (::connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 && errno != EINPROGRESS) {
    int err = errno;
    ::close(s);
    if (first_time(Once::connect)) {
      log(Level::info,
          "daemon not reachable at %s (%s); the application runs without it, retrying "
          "in the background",
          path, std::strerror(err));
    }
    retry_at = now + backoff;
    backoff = std::min(backoff * 2, k_backoff_max_ms);
    return;
  }
  fd = s;
  handshake = true;
  ack_deadline = now + k_handshake_ms;
  last_write_progress = now;
  in.clear();
  queue(proto::frame_of(proto::MsgType::hello, ++seq, hello()));
}

namespace {

// The process's first device, its architecture and the driver version; false while CUDA is not
// initialized (the driver answers CUDA_ERROR_NOT_INITIALIZED, which the shim never changes).
bool current_device(std::string& name_out, std::string& arch_out, uint32_t& driver_out) {
  using DriverVersion = int (*)(int*);
  using DeviceGet = int (*)(int*, int);
  using DeviceName = int (*)(char*, int, int);
  using DeviceAttr = int (*)(int*, int, int);
  int version = 0, dev = 0;
  if (auto f = real_as<DriverVersion>(Fn::cuDriverGetVersion); f && f(&version) == 0) {
    driver_out = uint32_t(version);
  }
  auto get = real_as<DeviceGet>(Fn::cuDeviceGet);
  if (!get || get(&dev, 0) != 0) return false;
  char name[256] = {};
  if (auto f = real_as<DeviceName>(Fn::cuDeviceGetName); f && f(name, sizeof name - 1, dev) == 0) {
    name_out = name;
  }
  int major = 0, minor = 0;
  auto attr = real_as<DeviceAttr>(Fn::cuDeviceGetAttribute);
  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75, _MINOR = 76
  if (!attr || attr(&major, 75, dev) != 0 || attr(&minor, 76, dev) != 0) return false;
  arch_out = "sm_" + std::to_string(major) + std::to_string(minor);
  return true;
}

} // namespace

proto::Hello Reporter::Impl::hello() {
  proto::Hello h;
  h.kind = proto::ClientKind::shim;
  h.pid = uint32_t(::getpid());
  h.uid = uint32_t(::getuid());
  h.exe = read_link("/proc/self/exe");
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) h.hostname = host;
  h.client_version = k_version;
  device_known = current_device(h.device_name, h.arch, h.driver_version);
  return h;
}

void Reporter::Impl::disconnect(Once kind, Level level, const char* why, uint64_t retry_ms) {
  if (first_time(kind)) log(level, "%s; reporting paused, retrying in the background", why);
  if (fd >= 0) ::close(fd);
  fd = -1;
  handshake = false;
  ready.store(false);
  for (auto& o : out) {
    if (o.fd >= 0) ::close(o.fd);
  }
  out.clear();
  out_bytes = 0;
  in.clear();
  for (int f : in_fds) ::close(f);
  in_fds.clear();
  uint64_t now = now_ms();
  retry_at = now + (retry_ms ? retry_ms : backoff);
  backoff = std::min(backoff * 2, k_backoff_max_ms);
}

void Reporter::Impl::queue(std::string frame, int with_fd) {
  out_bytes += frame.size();
  out.push_back(Out{std::move(frame), 0, with_fd});
}

void Reporter::Impl::flush(uint64_t now) {
  while (!out.empty() && fd >= 0) {
    Out& o = out.front();
    ssize_t n;
    if (o.fd >= 0 && o.off == 0) {
      // the descriptor rides with the frame's first byte
      iovec iov{o.data.data(), o.data.size()};
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(c), &o.fd, sizeof(int));
      n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    } else {
      n = ::send(fd, o.data.data() + o.off, o.data.size() - o.off, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
      disconnect(Once::disconnected, Level::info, "the daemon closed the connection");
      return;
    }
    last_write_progress = now;
    o.off += size_t(n);
    out_bytes -= size_t(n);
    if (o.off < o.data.size()) return;
    if (o.fd >= 0) ::close(o.fd);
    out.pop_front();
  }
}

void Reporter::Impl::receive(uint64_t now) {
  char buf[65536];
  bool eof = false, failed = false;
  while (fd >= 0) {
    iovec iov{buf, sizeof buf};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n = ::recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n > 0) {
      for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; ++i) {
          int got;
          std::memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
          in_fds.push_back(got);
          // A frame carries one descriptor; a daemon that sends more than a few ahead of their
          // frames is not one to keep descriptors open for.
          if (in_fds.size() > k_max_pending_fds) failed = true;
        }
      }
    }
    if (failed) break;
    if (n == 0) {
      eof = true;
      break;
    }
    if (n < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) failed = true;
      break;
    }
    in.append(buf, size_t(n));
    if (in.size() > proto::k_header_size + proto::k_max_payload) break;
  }
  // What arrived before a close is read first: a daemon that refuses says why, then closes.
  parse_frames(now);
  if (fd >= 0 && (eof || failed)) {
    disconnect(Once::disconnected, Level::info,
               eof ? "the daemon closed the connection" : "the connection to the daemon failed");
  }
}

void Reporter::Impl::parse_frames(uint64_t now) {
  while (fd >= 0 && in.size() >= proto::k_header_size) {
    const char* why = "malformed frame";
    auto h = proto::FrameHeader::decode(in.data(), &why);
    if (!h) {
      std::string msg = std::string("the daemon sent garbage (") + why + "); disconnecting";
      disconnect(Once::garbage, Level::warn, msg.c_str());
      return;
    }
    if (in.size() < proto::k_header_size + h->length) return;
    std::string_view payload(in.data() + proto::k_header_size, h->length);
    int frame_fd = -1;
    if (h->flags & proto::k_flag_fd) {
      if (in_fds.empty()) {
        disconnect(Once::garbage, Level::warn, "the daemon sent a frame without its descriptor");
        return;
      }
      frame_fd = in_fds.front();
      in_fds.pop_front();
    }
    bool ok = handle(*h, payload, now, frame_fd);
    if (frame_fd >= 0) ::close(frame_fd);
    if (fd < 0) return;
    if (!ok) {
      std::string msg = std::string("the daemon sent a malformed ") + proto::type_name(h->type) +
                        " message; disconnecting";
      disconnect(Once::garbage, Level::warn, msg.c_str());
      return;
    }
    in.erase(0, proto::k_header_size + h->length);
  }
}

bool Reporter::Impl::handle(const proto::FrameHeader& h, std::string_view payload, uint64_t now,
                            int image_fd) {
  wire::Reader r(payload);
  switch (h.type) {
  case proto::MsgType::hello_ack: {
    proto::HelloAck ack;
    if (!handshake || !proto::decode(r, ack)) return false;
    if (ack.version < proto::k_version_min || ack.version > proto::k_version_max) return false;
    handshake = false;
    backoff = k_backoff_min_ms;
    interval = config().report_ms ? config().report_ms
                                  : std::max<uint32_t>(ack.report_interval_ms, k_min_interval_ms);
    next_report = now;
    // A new session: the daemon knows nothing yet, so announce every kernel and send every
    // counter again, even those the previous daemon already had.
    for (KernelRecord* rec : registry().records()) {
      rec->announced = false;
      rec->reported_launches = 0;
      rec->reported_sampled = 0;
      rec->reported_variant_launches = 0;
    }
    ready.store(true);
    log(Level::debug, "connected to honed %s, reporting every %llu ms", ack.daemon_version.c_str(),
        (unsigned long long)interval);
    return true;
  }
  case proto::MsgType::error: {
    proto::ErrorMsg e;
    if (!proto::decode(r, e)) return false;
    std::string msg = "the daemon refused the connection: " + e.message;
    disconnect(Once::handshake, Level::warn, msg.c_str(),
               e.code == proto::k_err_version ? k_version_backoff_ms : 0);
    return true;
  }
  case proto::MsgType::image_request: {
    proto::ImageRequest req;
    if (handshake || !proto::decode(r, req)) return false;
    answer_image(h.seq, req);
    return true;
  }
  case proto::MsgType::capture_request: {
    proto::CaptureRequest req;
    if (handshake || !proto::decode(r, req)) return false;
    KernelRecord* rec = registry().record_of(req.kernel);
    if (!rec) return true; // a kernel this process never announced: nothing to capture
    {
      std::lock_guard lock(rec->capture_mutex);
      rec->capture_request = req.request;
      rec->capture_max_bytes = req.max_bytes;
      rec->capture_outputs = req.with_outputs || req.shadow;
      rec->capture_whole = req.whole;
    }
    rec->capture_shadow.store(req.shadow, std::memory_order_release);
    rec->set_captures_pending(req.launches);
    // Graph replays look for it too: a node the variant serves takes a shadow check's.
    graph_capture_requested();
    return true;
  }
  case proto::MsgType::install_variant: {
    proto::InstallVariant msg;
    if (handshake || !proto::decode(r, msg) || image_fd < 0) return false;
    // The size is the daemon's word: held against the descriptor before anything is allocated.
    struct stat st {};
    if (::fstat(image_fd, &st) != 0 || !S_ISREG(st.st_mode) || uint64_t(st.st_size) != msg.size ||
        msg.size == 0 || msg.size > k_max_variant_bytes) {
      proto::VariantStatus refused;
      refused.kernel = msg.kernel;
      refused.variant = msg.variant;
      refused.message = "the variant's image does not match the size it was sent with";
      send_status(refused);
      return true;
    }
    try {
      std::string image(msg.size, '\0');
      size_t got = 0;
      while (got < image.size()) {
        ssize_t n = ::pread(image_fd, image.data() + got, image.size() - got, off_t(got));
        if (n <= 0) break;
        got += size_t(n);
      }
      if (got != image.size()) return false;
      send_status(install_variant(msg, std::move(image)));
    } catch (const std::bad_alloc&) {
      proto::VariantStatus refused;
      refused.kernel = msg.kernel;
      refused.variant = msg.variant;
      refused.message = "out of memory for the variant's image";
      send_status(refused);
    }
    return true;
  }
  case proto::MsgType::remove_variant: {
    proto::RemoveVariant msg;
    if (handshake || !proto::decode(r, msg)) return false;
    send_status(remove_variant(msg));
    return true;
  }
  default:
    if (handshake) return false;
    log(Level::debug, "ignoring a %s frame from the daemon", proto::type_name(h.type));
    return true;
  }
}

// The PTX of a SASS image from the application's Triton cache, when the cache holds the cubin
// (Triton loads the cubins it compiled). zstd-compressed fatbin entries are not looked at: the
// shim links no zstd.
static std::optional<proto::Image::Triton> triton_source(proto::ImageFormat format,
                                                         const std::string& bytes) {
  const std::string root = cuda::triton_cache_dir();
  if (root.empty()) return std::nullopt;
  struct stat st {};
  if (::stat(root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return std::nullopt;
  auto cubins = cuda::image_cubins(
      format == proto::ImageFormat::cubin ? cuda::ImageFormat::cubin : cuda::ImageFormat::fatbin,
      std::span(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()), nullptr);
  auto found = cuda::find_triton_ptx(root, cubins);
  if (!found) {
    log(Level::debug, "%s", found.error().message.c_str());
    return std::nullopt;
  }
  if (!*found) return std::nullopt;
  log(Level::info, "image's PTX found in the Triton cache: %s", (*found)->ptx_path.c_str());
  return proto::Image::Triton{std::move((*found)->cubin_path), std::move((*found)->ptx)};
}

// The link's PTX inputs travel in the image message itself: those that would take it over the
// frame's limit (or a string's) go without their text, keeping their size, and the daemon says so.
static void fit_link_inputs(proto::Image& msg) {
  uint64_t used = 64u << 10; // the fixed fields, names and margin
  if (msg.source) {
    used += msg.source->source.size();
    for (const auto& [n, c] : msg.source->headers) used += n.size() + c.size() + 8;
    for (const auto& o : msg.source->options) used += o.size() + 4;
  }
  for (auto& in : msg.linked->inputs) {
    used += in.name.size() + 32;
    if (in.ptx.size() > wire::k_max_string || used + in.ptx.size() > proto::k_max_payload) {
      log(Level::info, "the PTX of link input %s (%zu bytes) is too large to send to honed",
          in.name.c_str(), in.ptx.size());
      in.ptx.clear();
      continue;
    }
    used += in.ptx.size();
  }
}

void Reporter::Impl::answer_image(uint32_t request_seq, const proto::ImageRequest& req) {
  proto::Image msg;
  msg.image = req.image;
  std::shared_ptr<const std::string> bytes;
  int memfd = -1;
  if (registry().image(req.image, &bytes, &msg.format, &msg.source, &msg.linked)) {
    memfd = ::memfd_create("hone-image", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    size_t done = 0;
    while (memfd >= 0 && done < bytes->size()) {
      ssize_t n = ::write(memfd, bytes->data() + done, bytes->size() - done);
      if (n <= 0) break;
      done += size_t(n);
    }
    if (memfd >= 0 && done == bytes->size()) {
      ::fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
      msg.available = true;
      msg.size = bytes->size();
    } else if (memfd >= 0) {
      ::close(memfd);
      memfd = -1;
    }
  }
  if (!msg.available) {
    msg.source.reset();
    msg.linked.reset();
  }
  if (msg.linked) fit_link_inputs(msg);
  if (msg.available && !msg.source && !msg.linked &&
      (msg.format == proto::ImageFormat::cubin || msg.format == proto::ImageFormat::fatbin)) {
    msg.triton = triton_source(msg.format, *bytes);
  }
  queue(proto::frame_of(proto::MsgType::image, request_seq, msg,
                        memfd >= 0 ? uint16_t(proto::k_flag_fd) : uint16_t(0)),
        memfd);
}

void Reporter::Impl::send_status(const proto::VariantStatus& st) {
  queue(proto::frame_of(proto::MsgType::variant_status, ++seq, st));
}

void Reporter::Impl::send_captures() {
  auto ready = capture_collect();
  for (auto& r : ready) {
    queue(proto::frame_of(proto::MsgType::capture, ++seq, r.capture,
                          r.memfd >= 0 ? uint16_t(proto::k_flag_fd) : uint16_t(0)),
          r.memfd);
  }
  if (ready.empty()) return;
  // On their way before the pinned copies are freed, which may wait for the device (and on the
  // emulated one for the application's running kernels): and only once no other capture of the
  // request is still due, so that freeing never delays the next one.
  flush(now_ms());
  release_spent_captures();
}

void Reporter::Impl::release_spent_captures() {
  if (captures_pending() != 0) return;
  for (KernelRecord* rec : registry().records()) {
    if (rec->captures_pending() != 0) return; // more launches due
  }
  capture_release();
}

bool Reporter::Impl::announce() {
  if (out_bytes > k_out_limit) {
    if (first_time(Once::stalled)) {
      log(Level::info, "the daemon is not reading; reports are held back");
    }
    return false;
  }
  proto::Kernels ks;
  std::vector<KernelRecord*> announced;
  for (KernelRecord* rec : registry().records()) {
    if (rec->announced) continue;
    ks.kernels.push_back({rec->id, rec->key, rec->format, rec->image_size, rec->source_known});
    announced.push_back(rec);
  }
  if (!ks.kernels.empty()) {
    // A module loaded means CUDA is initialized: the device can be named now if the hello could
    // not.
    if (!device_known) {
      device_known = current_device(ks.device_name, ks.arch, ks.driver_version);
      if (!device_known) ks.arch.clear();
    }
    queue(proto::frame_of(proto::MsgType::kernels, ++seq, ks));
    for (KernelRecord* rec : announced) rec->announced = true;
  }
  return true;
}

void Reporter::Impl::report() {
  for (const auto& st : install_on_new_handles()) send_status(st);
  send_captures();
  release_spent_captures(); // also when the launches a request waited for never came
  if (!announce()) return;
  auto records = registry().records();
  proto::Stats st;
  st.uptime_ns = now_ns() - start_ns;
  // Graph replays: per kernel, what its graphs hold now, sent when it changed.
  for (auto& [rec, t] : graph_totals()) {
    if (!rec->announced) continue;
    GraphReport now{t.graphs, t.nodes, t.nodes_serving};
    if (now == rec->reported_graph && t.graph_launches == rec->reported_graph_launches) continue;
    rec->reported_graph = now;
    rec->reported_graph_launches = t.graph_launches;
    st.graph_kernels.push_back({rec->id, t.graph_launches, t.graphs, t.nodes, t.nodes_serving});
  }
  st.graph_replays = graph_replays_total();
  st.graph_nodes_patched = graph_nodes_patched_total();
  for (KernelRecord* rec : records) {
    if (!rec->announced) continue;
    uint64_t misses = rec->guard_misses.load(std::memory_order_relaxed);
    if (misses != rec->reported_guard_misses) {
      rec->reported_guard_misses = misses;
      st.guard_misses.emplace_back(rec->id, misses);
    }
    uint64_t launches = launches_total(*rec);
    uint64_t sampled = rec->sampled.load(std::memory_order_relaxed);
    uint64_t served = variant_launches_total(*rec);
    if (launches == rec->reported_launches && sampled == rec->reported_sampled &&
        served == rec->reported_variant_launches) {
      continue;
    }
    rec->reported_variant_launches = served;
    proto::KernelStats k;
    k.id = rec->id;
    k.launches = launches;
    k.sampled = std::min(sampled, launches);
    k.sampled_ns = rec->sampled_ns.load(std::memory_order_relaxed);
    k.variant_launches = std::min(served, launches);
    k.fallbacks = rec->fallbacks.load(std::memory_order_relaxed);
    uint64_t g = rec->grid.load(std::memory_order_relaxed);
    uint64_t b = rec->block.load(std::memory_order_relaxed);
    k.grid = {uint32_t(g), uint32_t(g >> 32), rec->grid_z.load(std::memory_order_relaxed)};
    k.block = {uint32_t(b & 0xffff), uint32_t((b >> 16) & 0xffff), uint32_t((b >> 32) & 0xffff)};
    st.kernels.push_back(k);
    rec->reported_launches = launches;
    rec->reported_sampled = sampled;
  }
  if (!st.kernels.empty() || !st.graph_kernels.empty() || !st.guard_misses.empty()) {
    queue(proto::frame_of(proto::MsgType::stats, ++seq, st));
  }
}

} // namespace hone::shim
