#include "daemon/worker/worker.hpp"

#include "common/job.hpp"
#include "common/version.hpp"
#include "daemon/worker/channel.hpp"
#include "daemon/worker/job_run.hpp"
#include "daemon/worker/original_memo.hpp"
#include "daemon/worker/watchdog.hpp"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <memory>

#include <sys/stat.h>
#include <unistd.h>

namespace hone::worker {

namespace {

// A verdict is one frame: evidence is dropped before the verdict would not fit, and a compiled
// candidate too large to hand back cannot serve (honed stores what it is sent).
void fit_in_frame(Verdict& v) {
  auto size = [&] {
    wire::Writer w;
    encode(w, v);
    return w.size();
  };
  constexpr size_t k_limit = proto::k_max_payload - 4096;
  if (size() <= k_limit) return;
  v.evidence_json = R"({"schema":"hone.evidence/1","dropped":"over the size of one frame"})";
  if (size() <= k_limit) return;
  if (v.kind == VerdictKind::verified) {
    v.kind = VerdictKind::unsupported;
    v.message = "the candidate verified, but its compiled PTX (" +
                std::to_string(v.compiled_ptx.size() >> 10) +
                " KiB) is over what one verdict can carry back to honed";
  }
  v.compiled_ptx.clear();
  if (v.message.size() > 4096) v.message.resize(4096);
}

// A bundle larger than this is refused before reading it (captures are capped far below).
constexpr uint64_t k_max_bundle = 64ull << 30;

Result<std::string> read_memfd(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    return make_error(std::string("fstat of the job's memfd: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return make_error("the job's descriptor is not a memfd or file");
  if (uint64_t(st.st_size) > k_max_bundle) {
    return make_error("the job bundle is " + std::to_string(st.st_size) + " bytes, over the limit");
  }
  std::string bytes(size_t(st.st_size), '\0');
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::pread(fd, bytes.data() + off, bytes.size() - off, off_t(off));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return make_error(std::string("reading the job bundle: ") + std::strerror(errno));
    if (n == 0) return make_error("the job bundle shrank while being read");
    off += size_t(n);
  }
  return bytes;
}

std::string self_exe() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, size_t(n)) : std::string();
}

void log(const std::string& line) {
  std::cerr << "honed worker[" << ::getpid() << "]: " << line << "\n";
}

// The session: hello, then jobs until honed closes the socket.
int serve(int fd, const std::string& driver) {
  Channel channel(fd);

  // The device first, so that the hello says what this worker runs on.
  std::unique_ptr<Device> device;
  std::string unusable;
  if (auto api = cuda::DriverApi::open(driver); !api) {
    unusable = api.error().message;
  } else if (auto d = Device::open(*api, 0); !d) {
    unusable = "no usable CUDA device through " + (*api)->path() + ": " + d.error().message;
  } else {
    device = std::move(*d);
  }
  if (!unusable.empty()) log(unusable + " (every job will be answered with an internal verdict)");

  proto::Hello hello;
  hello.kind = proto::ClientKind::worker;
  hello.pid = uint32_t(::getpid());
  hello.uid = uint32_t(::getuid());
  hello.exe = self_exe();
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  hello.hostname = host;
  if (device) {
    hello.device_name = device->name();
    hello.arch = device->arch();
    hello.driver_version = uint32_t(device->driver_version());
  }
  hello.client_version = k_version;
  if (auto r = channel.send(proto::frame_of(proto::MsgType::hello, 1, hello)); !r) {
    log(r.error().message);
    return k_exit_protocol;
  }
  {
    auto f = channel.receive();
    if (!f || !*f) {
      log(f ? "honed closed the connection before acknowledging the hello" : f.error().message);
      return k_exit_protocol;
    }
    Frame& ack = **f;
    if (ack.fd >= 0) ::close(ack.fd);
    wire::Reader r(ack.payload);
    proto::HelloAck m;
    if (ack.header.type != proto::MsgType::hello_ack || !proto::decode(r, m)) {
      log(std::string("honed answered the hello with ") + proto::type_name(ack.header.type));
      return k_exit_protocol;
    }
  }

  // A hung candidate: answer for it and leave; the context cannot be recovered.
  std::atomic<uint32_t> current_seq{0};
  std::atomic<uint64_t> current_job{0};
  // The original's runs on each capture, for the next candidate of the same kernel: two results
  // per capture (its buffers and their guard zones), the least recently used dropped first.
  constexpr uint64_t k_original_memo_bytes = 256ull << 20;
  OriginalMemo memo(k_original_memo_bytes);

  Watchdog watchdog([&] {
    Verdict v;
    v.job = current_job.load();
    v.kind = VerdictKind::timeout;
    v.message = "the candidate ran past the worker's watchdog and was abandoned";
    v.worker_exits = true;
    (void)channel.send(proto::frame_of(proto::MsgType::verdict, current_seq.load(), v));
    ::_exit(k_exit_context_lost);
  });

  while (true) {
    auto f = channel.receive();
    if (!f) {
      log(f.error().message);
      return k_exit_protocol;
    }
    if (!*f) return k_exit_ok;
    Frame frame = std::move(**f);
    if (frame.header.type != proto::MsgType::job) {
      if (frame.fd >= 0) ::close(frame.fd);
      log(std::string("ignoring a ") + proto::type_name(frame.header.type) + " frame");
      continue;
    }
    Verdict verdict;
    verdict.kind = VerdictKind::internal;
    {
      // honed puts the job's id in the frame: the verdict names it even when the bundle is bad.
      wire::Reader r(frame.payload);
      uint64_t id = r.u64();
      if (r.ok()) verdict.job = id;
    }
    bool context_lost = false;
    if (frame.fd < 0) {
      verdict.message = "the job frame came without its bundle (memfd)";
    } else {
      try {
        auto bytes = read_memfd(frame.fd);
        if (!bytes) {
          verdict.message = bytes.error().message;
        } else if (auto bundle = decode_bundle(std::move(*bytes)); !bundle) {
          verdict.message = "bad job bundle: " + bundle.error().message;
        } else if (!device) {
          verdict.job = bundle->job.id;
          verdict.message = unusable;
        } else {
          verdict.job = bundle->job.id;
          current_seq = frame.header.seq;
          current_job = bundle->job.id;
          JobOutcome out = run_job(*device, *bundle, &watchdog, &memo);
          verdict = std::move(out.verdict);
          context_lost = out.context_lost;
        }
      } catch (const std::exception& e) {
        // Out of memory for a huge bundle, most likely: the job fails, the worker goes on.
        verdict.kind = VerdictKind::internal;
        verdict.message = std::string("the worker failed: ") + e.what();
        context_lost = device && !device->healthy();
      }
      ::close(frame.fd);
    }
    verdict.worker_exits = context_lost;
    fit_in_frame(verdict);
    if (auto r = channel.send(proto::frame_of(proto::MsgType::verdict, frame.header.seq, verdict));
        !r) {
      log(r.error().message);
      return k_exit_protocol;
    }
    if (context_lost) {
      log("job " + std::to_string(verdict.job) + ": " + to_string(verdict.kind) +
          "; the context is unusable, exiting for a fresh worker");
      // Leave without tearing down a context the driver may still be faulting in.
      std::cerr.flush();
      ::_exit(k_exit_context_lost);
    }
  }
}

} // namespace

int main(int fd, const std::string& driver) {
  try {
    return serve(fd, driver);
  } catch (const std::exception& e) {
    log(std::string("the worker failed: ") + e.what());
  } catch (...) {
    log("the worker failed with an unknown exception");
  }
  return k_exit_protocol;
}

} // namespace hone::worker
