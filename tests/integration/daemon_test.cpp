// honed as a real process over its real socket: the handshake, status and metrics, fake shims,
// config errors and reloads, permissions, many connections, and hostile peers.
#include "common/version.hpp"
#include "daemon_process.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <grp.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

using namespace hone;
using namespace hone::test;
using namespace std::chrono_literals;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr const char* k_config = "[server]\nreport_interval_ms = 1500\n";

std::unique_ptr<DaemonProcess> start_daemon(DaemonOptions o = {}) {
  if (!o.config) o.config = k_config;
  auto d = DaemonProcess::start(std::move(o));
  if (!d) {
    ADD_FAILURE() << d.error().message;
    return nullptr;
  }
  return std::move(*d);
}

// SIGTERM: honed exits 0 and removes its socket.
void expect_clean_stop(DaemonProcess& d) {
  auto status = d.stop();
  ASSERT_TRUE(status) << status.error().message;
  EXPECT_EQ(*status, 0) << d.log();
  EXPECT_FALSE(fs::exists(fs::symlink_status(d.socket()))) << "socket left behind";
}

std::string header(proto::MsgType type, uint32_t length, uint32_t magic = proto::k_magic,
                   uint16_t flags = 0, uint32_t seq = 1) {
  proto::FrameHeader h;
  h.magic = magic;
  h.type = type;
  h.flags = flags;
  h.length = length;
  h.seq = seq;
  std::string out(proto::k_header_size, '\0');
  h.encode(out.data());
  return out;
}

// The next frame must be an error with `code`.
void expect_error(Client& c, uint32_t code) {
  auto f = c.receive(5s);
  ASSERT_TRUE(f) << f.error().message;
  ASSERT_EQ(f->header.type, proto::MsgType::error);
  wire::Reader r(f->payload);
  proto::ErrorMsg e;
  ASSERT_TRUE(proto::decode(r, e));
  EXPECT_EQ(e.code, code) << e.message;
}

// The daemon closes the connection (and sends nothing more).
void expect_closed(Client& c) {
  auto f = c.receive(5s);
  ASSERT_FALSE(f) << "got a frame of type " << proto::type_name(f->header.type);
  EXPECT_NE(f.error().message.find("closed"), std::string::npos) << f.error().message;
}

proto::KernelInfo kernel_info(uint64_t id, ImageHash image, const std::string& entry) {
  proto::KernelInfo k;
  k.id = id;
  k.key = KernelKey{image, entry};
  k.format = proto::ImageFormat::ptx;
  k.image_size = 4096;
  return k;
}

proto::KernelStats kernel_stats(uint64_t id, uint64_t launches, uint64_t sampled, uint64_t ns) {
  proto::KernelStats s;
  s.id = id;
  s.launches = launches;
  s.sampled = sampled;
  s.sampled_ns = ns;
  s.grid = {128, 1, 1};
  s.block = {256, 1, 1};
  return s;
}

void send_kernels(Client& c, std::vector<proto::KernelInfo> list) {
  proto::Kernels m;
  m.kernels = std::move(list);
  ASSERT_TRUE(c.send(proto::frame_of(proto::MsgType::kernels, 2, m)));
}

void send_stats(Client& c, std::vector<proto::KernelStats> list) {
  proto::Stats m;
  m.uptime_ns = 1'000'000;
  m.kernels = std::move(list);
  ASSERT_TRUE(c.send(proto::frame_of(proto::MsgType::stats, 3, m)));
}

// The kernels honed reports (hone.kernels/1), through a control connection.
json kernels_now(Client& ctl) {
  auto r = control(ctl, {{"cmd", "kernels"}});
  if (!r || !(*r)["ok"].get<bool>()) return json::array();
  return (*r)["result"]["kernels"];
}

// The kernel with `key` in a kernels[] list (a copy), or null.
json find_kernel(const json& kernels, const std::string& key) {
  for (const auto& k : kernels) {
    if (k["key"] == key) return k;
  }
  return nullptr;
}

uint16_t free_tcp_port() {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(s);
  return ntohs(a.sin_port);
}

// One HTTP/1.1 request to 127.0.0.1:port; the whole response.
std::string http_get(uint16_t port, const std::string& path) {
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(s);
    return "connect failed: " + std::string(std::strerror(errno));
  }
  timeval tv{5, 0};
  ::setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string req = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  ::send(s, req.data(), req.size(), MSG_NOSIGNAL);
  std::string out;
  char buf[8192];
  ssize_t n;
  while ((n = ::recv(s, buf, sizeof buf, 0)) > 0) out.append(buf, size_t(n));
  ::close(s);
  return out;
}

// Connect, write `bytes`, close without reading.
void hit_and_run(const std::string& socket, const std::string& bytes) {
  auto c = Client::connect_raw(socket);
  ASSERT_TRUE(c) << c.error().message;
  if (!bytes.empty()) (void)c->send(bytes);
}

std::string hello_frame(proto::ClientKind kind) {
  return proto::frame_of(proto::MsgType::hello, 1, test_hello(kind));
}

} // namespace

TEST(Daemon, HandshakeAcksVersionAndReportInterval) {
  auto d = start_daemon();
  ASSERT_TRUE(d);
  auto c = connect_as(d->socket(), proto::ClientKind::shim);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->ack().version, 1u);
  EXPECT_EQ(c->ack().report_interval_ms, 1500u);
  EXPECT_EQ(c->ack().daemon_version, k_version);

  // No common version: error 2, then closed.
  {
    auto raw = Client::connect_raw(d->socket());
    ASSERT_TRUE(raw);
    proto::Hello h = test_hello(proto::ClientKind::shim);
    h.version_min = 2;
    h.version_max = 5;
    ASSERT_TRUE(raw->send(proto::frame_of(proto::MsgType::hello, 1, h)));
    expect_error(*raw, proto::k_err_version);
    expect_closed(*raw);
  }
  // A hello that does not decode: error 1, then closed.
  {
    auto raw = Client::connect_raw(d->socket());
    ASSERT_TRUE(raw);
    ASSERT_TRUE(raw->send(header(proto::MsgType::hello, 3) + "abc"));
    expect_error(*raw, proto::k_err_protocol);
    expect_closed(*raw);
  }
  // Anything but hello first: error 1, then closed.
  {
    auto raw = Client::connect_raw(d->socket());
    ASSERT_TRUE(raw);
    ASSERT_TRUE(raw->send(proto::frame_of(proto::MsgType::stats, 1, proto::Stats{})));
    expect_error(*raw, proto::k_err_protocol);
    expect_closed(*raw);
  }
  // The first connection was not disturbed by any of it.
  ASSERT_TRUE(c->send(proto::frame_of(proto::MsgType::kernels, 2, proto::Kernels{})));
  expect_clean_stop(*d);
}

TEST(Daemon, StatusThroughHonectlAndRawControl) {
  auto d = start_daemon();
  ASSERT_TRUE(d);
  auto table = run_honectl({"status", "--socket", d->socket()});
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find(std::string("honed ") + k_version), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(d->socket()), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("Top kernels"), std::string::npos) << table.out;

  auto js = run_honectl({"status", "--json", "--socket", d->socket()});
  ASSERT_EQ(js.exit_code, 0) << js.err;
  json j = json::parse(js.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << js.out;
  EXPECT_EQ(j["schema"], "hone.status/1");
  EXPECT_EQ(j["socket"], d->socket());
  EXPECT_EQ(j["pid"], d->pid());
  EXPECT_TRUE(j["store"].is_object());

  auto ctl = connect_as(d->socket(), proto::ClientKind::ctl);
  ASSERT_TRUE(ctl) << ctl.error().message;
  auto r = control(*ctl, {{"cmd", "status"}, {"top", 5}});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE((*r)["ok"].get<bool>()) << r->dump();
  EXPECT_EQ((*r)["result"]["schema"], "hone.status/1");
  EXPECT_GE((*r)["result"]["connections"].get<int>(), 1);

  // Bad requests are answered, not fatal.
  auto bad = control(*ctl, {{"nocmd", 1}});
  ASSERT_TRUE(bad);
  EXPECT_FALSE((*bad)["ok"].get<bool>());
  auto unknown = control(*ctl, {{"cmd", "frobnicate"}});
  ASSERT_TRUE(unknown);
  EXPECT_FALSE((*unknown)["ok"].get<bool>());
  EXPECT_NE((*unknown)["error"].get<std::string>().find("frobnicate"), std::string::npos);
  wire::Writer w;
  w.raw("{not json", 9);
  ASSERT_TRUE(ctl->send(proto::frame(proto::MsgType::control, 77, w)));
  auto f = ctl->receive(5s);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->header.seq, 77u);
  EXPECT_FALSE(json::parse(f->payload)["ok"].get<bool>());

  // A shim may not send control requests.
  auto shim = connect_as(d->socket(), proto::ClientKind::shim);
  ASSERT_TRUE(shim);
  ASSERT_TRUE(shim->send(proto::frame(proto::MsgType::control, 5, w)));
  expect_error(*shim, proto::k_err_protocol);
  expect_closed(*shim);
  expect_clean_stop(*d);
}

TEST(Daemon, MetricsThroughHonectlAndHttp) {
  uint16_t port = free_tcp_port();
  DaemonOptions o;
  o.config =
      std::string(k_config) + "[metrics]\nlisten = \"127.0.0.1:" + std::to_string(port) + "\"\n";
  auto d = start_daemon(o);
  ASSERT_TRUE(d);
  ASSERT_TRUE(d->wait_for_log("serving metrics", 5s)) << d->log();

  auto m = run_honectl({"metrics", "--socket", d->socket()});
  ASSERT_EQ(m.exit_code, 0) << m.err;
  EXPECT_NE(m.out.find("# HELP hone_"), std::string::npos) << m.out;
  EXPECT_NE(m.out.find("# TYPE hone_connections_accepted_total counter"), std::string::npos)
      << m.out;

  std::string resp = http_get(port, "/metrics");
  ASSERT_EQ(resp.rfind("HTTP/1.1 200", 0), 0u) << resp;
  std::string body = resp.substr(resp.find("\r\n\r\n") + 4);
  EXPECT_NE(resp.find("Content-Type: text/plain"), std::string::npos) << resp;
  size_t helps = 0, types = 0, totals = 0;
  std::istringstream lines(body);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("# HELP hone_", 0) == 0) ++helps;
    if (line.rfind("# TYPE hone_", 0) == 0) ++types;
    if (line.rfind("hone_", 0) == 0 && line.find("_total") != std::string::npos) ++totals;
    if (line.empty() || line[0] == '#') continue;
    // Every sample is "name[{labels}] value" with a hone_ name.
    EXPECT_EQ(line.rfind("hone_", 0), 0u) << line;
    EXPECT_NE(line.find(' '), std::string::npos) << line;
  }
  EXPECT_GE(helps, 5u) << body;
  EXPECT_EQ(helps, types) << body;
  EXPECT_GE(totals, 3u) << body;

  std::string root = http_get(port, "/");
  EXPECT_EQ(root.rfind("HTTP/1.1 404", 0), 0u) << root;
  expect_clean_stop(*d);
}

TEST(Daemon, FakeShimsRankKernelsAcrossProcesses) {
  auto d = start_daemon();
  ASSERT_TRUE(d);
  ImageHash a = ImageHash::of("image a", 7);
  ImageHash b = ImageHash::of("image b", 7);
  const std::string axpy = "_Z4axpyfPKfPf", reduce = "_Z6reducePKfPfi";
  KernelKey axpy_a{a, axpy}, axpy_b{b, axpy}, reduce_a{a, reduce};

  auto p1 = connect_as(d->socket(), proto::ClientKind::shim);
  auto p2 = connect_as(d->socket(), proto::ClientKind::shim);
  ASSERT_TRUE(p1 && p2);
  send_kernels(*p1, {kernel_info(1, a, axpy), kernel_info(2, a, reduce)});
  send_kernels(*p2, {kernel_info(7, a, axpy), kernel_info(8, b, axpy)});
  // p1: axpy 100 launches at 1 µs each (sampled), reduce 10 at 50 µs.
  send_stats(*p1, {kernel_stats(1, 100, 10, 10'000), kernel_stats(2, 10, 10, 500'000)});
  // p2: axpy 50 at 1 µs; the other image's axpy 1000 launches, none timed.
  send_stats(*p2, {kernel_stats(7, 50, 5, 5'000), kernel_stats(8, 1000, 0, 0)});
  // p1 again, cumulative: 100 more axpy launches, these at 1.5 µs on average (30 µs / 20).
  send_stats(*p1, {kernel_stats(1, 200, 20, 30'000)});

  auto ctl = connect_as(d->socket(), proto::ClientKind::ctl);
  ASSERT_TRUE(ctl);
  json kernels;
  ASSERT_TRUE(wait_for(
      [&] {
        kernels = kernels_now(*ctl);
        json k = find_kernel(kernels, axpy_a.str());
        json k8 = find_kernel(kernels, axpy_b.str());
        return !k.is_null() && k["launches"] == 250 && !k8.is_null() && k8["launches"] == 1000;
      },
      10s))
      << kernels.dump(2);
  ASSERT_EQ(kernels.size(), 3u);
  // Ranked by estimated time: reduce (500 µs) > axpy in a (100·1 + 50·1 + 100·1.5 = 300 µs) >
  // axpy in b (1000 launches, but no timing: 0).
  EXPECT_EQ(kernels[0]["key"], reduce_a.str());
  EXPECT_EQ(kernels[0]["est_gpu_ns"], 500'000);
  EXPECT_EQ(kernels[1]["key"], axpy_a.str());
  EXPECT_EQ(kernels[1]["launches"], 250);
  EXPECT_EQ(kernels[1]["est_gpu_ns"], 300'000);
  EXPECT_EQ(kernels[1]["processes"], 2);
  EXPECT_DOUBLE_EQ(kernels[1]["mean_ns"].get<double>(), 35'000.0 / 25.0);
  EXPECT_EQ(kernels[2]["key"], axpy_b.str());
  EXPECT_EQ(kernels[2]["est_gpu_ns"], 0);

  // The same through honectl, for people and as JSON.
  auto table = run_honectl({"kernels", "--socket", d->socket()});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  size_t r = table.out.find("reduce("), x = table.out.find("axpy(");
  ASSERT_NE(r, std::string::npos) << table.out;
  ASSERT_NE(x, std::string::npos) << table.out;
  EXPECT_LT(r, x) << table.out;
  EXPECT_NE(table.out.find("250"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("1,000"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("300 µs"), std::string::npos) << table.out;
  auto js = run_honectl({"kernels", "--json", "--socket", d->socket()});
  ASSERT_EQ(js.exit_code, 0) << js.err;
  EXPECT_EQ(json::parse(js.out)["schema"], "hone.kernels/1");

  auto status = run_honectl({"status", "--socket", d->socket()});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_NE(status.out.find("2 attached"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("hone emulated device"), std::string::npos) << status.out;

  // show: a unique name, a full key; an ambiguous name is an error naming the problem.
  auto show = run_honectl({"show", "reduce", "--socket", d->socket()});
  EXPECT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find(reduce_a.str()), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("grid 128x1x1, block 256x1x1"), std::string::npos) << show.out;
  auto by_key = run_honectl({"show", axpy_b.str(), "--json", "--socket", d->socket()});
  EXPECT_EQ(by_key.exit_code, 0) << by_key.err;
  EXPECT_EQ(json::parse(by_key.out)["launches"], 1000);
  auto ambiguous = run_honectl({"show", "axpy", "--socket", d->socket()});
  EXPECT_EQ(ambiguous.exit_code, 1) << ambiguous.out;
  EXPECT_NE(ambiguous.err.find("names 2 kernels"), std::string::npos) << ambiguous.err;

  // A process that leaves is no longer counted.
  p2->close();
  ASSERT_TRUE(wait_for(
      [&] {
        json k = find_kernel(kernels_now(*ctl), axpy_a.str());
        return !k.is_null() && k["processes"] == 1;
      },
      5s));
  expect_clean_stop(*d);
}

// What served launches, fallbacks and guard misses add up to in /metrics, per kernel for the
// misses; reports are cumulative per process, and the metrics add the processes up.
TEST(Daemon, MetricsCountServedLaunchesFallbacksAndGuardMisses) {
  auto d = start_daemon();
  ASSERT_TRUE(d);
  ImageHash a = ImageHash::of("image a", 7);
  const std::string axpy = "_Z4axpyfPKfPf", reduce = "_Z6reducePKfPfi";
  auto p1 = connect_as(d->socket(), proto::ClientKind::shim);
  auto p2 = connect_as(d->socket(), proto::ClientKind::shim);
  ASSERT_TRUE(p1 && p2);
  send_kernels(*p1, {kernel_info(1, a, axpy), kernel_info(2, a, reduce)});
  send_kernels(*p2, {kernel_info(5, a, axpy)});
  auto stats = [](uint64_t id, uint64_t launches, uint64_t served, uint64_t fallbacks) {
    proto::KernelStats s = kernel_stats(id, launches, 0, 0);
    s.variant_launches = served;
    s.fallbacks = fallbacks;
    return s;
  };
  proto::Stats m;
  m.kernels = {stats(1, 100, 60, 2), stats(2, 10, 0, 0)};
  m.guard_misses = {{1, 30}};
  ASSERT_TRUE(p1->send(proto::frame_of(proto::MsgType::stats, 3, m)));
  m.kernels = {stats(1, 150, 80, 3)}; // cumulative: 20 more served, 1 more fallback
  m.guard_misses = {{1, 45}, {2, 4}};
  ASSERT_TRUE(p1->send(proto::frame_of(proto::MsgType::stats, 4, m)));
  m.kernels = {stats(5, 10, 5, 0)};
  m.guard_misses = {{5, 5}};
  ASSERT_TRUE(p2->send(proto::frame_of(proto::MsgType::stats, 3, m)));

  std::string text;
  ASSERT_TRUE(wait_for(
      [&] {
        auto r = run_honectl({"metrics", "--socket", d->socket()});
        text = r.out;
        return text.find("hone_guard_misses_total{kernel=\"" + axpy + "\"} 50\n") != std::string::npos;
      },
      10s))
      << text;
  EXPECT_NE(text.find("hone_guard_misses_total{kernel=\"" + reduce + "\"} 4\n"), std::string::npos) << text;
  EXPECT_NE(text.find("hone_variant_launches_total 85\n"), std::string::npos) << text;
  EXPECT_NE(text.find("hone_variant_fallbacks_total 3\n"), std::string::npos) << text;
  // every verdict kind is exported, at 0 before any job
  EXPECT_NE(text.find("hone_verdicts_total{kind=\"verified\"} 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("hone_verdicts_total{kind=\"not_faster\"} 0\n"), std::string::npos) << text;
  // The last kind, and the one HoneInternalVerdicts (contrib/prometheus/alerts.yml) watches.
  EXPECT_NE(text.find("hone_verdicts_total{kind=\"not_applicable\"} 0\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("hone_verdicts_total{kind=\"internal\"} 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE hone_gpu_time_saved_seconds_total counter"), std::string::npos) << text;
  EXPECT_NE(text.find("hone_capture_budget_bytes "), std::string::npos) << text;
  EXPECT_NE(text.find("hone_worker_crashes_total 0\n"), std::string::npos) << text;

  // A miss counter that goes backwards is a protocol error: the connection is dropped.
  m.kernels.clear();
  m.guard_misses = {{5, 1}};
  ASSERT_TRUE(p2->send(proto::frame_of(proto::MsgType::stats, 4, m)));
  ASSERT_TRUE(wait_for(
      [&] {
        auto r = run_honectl({"metrics", "--socket", d->socket()});
        return r.out.find("hone_protocol_errors_total 1\n") != std::string::npos;
      },
      10s));
  expect_clean_stop(*d);
}

// A peer that sends its last frames and closes at once (a shim's final report at exit, a worker's
// verdict before it exits) is heard out: the frames count even though the end came with them.
TEST(Daemon, FramesJustBeforeCloseAreHandled) {
  auto d = start_daemon();
  ASSERT_TRUE(d);
  ImageHash a = ImageHash::of("image last words", 16);
  const std::string entry = "_Z4lastPf";
  {
    auto shim = connect_as(d->socket(), proto::ClientKind::shim);
    ASSERT_TRUE(shim) << shim.error().message;
    proto::Kernels k;
    k.kernels = {kernel_info(1, a, entry)};
    proto::Stats st;
    st.uptime_ns = 1'000'000;
    st.kernels = {kernel_stats(1, 4242, 0, 0)};
    ASSERT_TRUE(shim->send(proto::frame_of(proto::MsgType::kernels, 2, k) +
                           proto::frame_of(proto::MsgType::stats, 3, st)));
  } // closed right behind the frames
  auto ctl = connect_as(d->socket(), proto::ClientKind::ctl);
  ASSERT_TRUE(ctl);
  json kernels;
  EXPECT_TRUE(wait_for(
      [&] {
        kernels = kernels_now(*ctl);
        json k = find_kernel(kernels, KernelKey{a, entry}.str());
        return !k.is_null() && k["launches"] == 4242;
      },
      10s))
      << kernels.dump(2) << d->log();
}

TEST(Daemon, DisableSurvivesRestart) {
  TempDir dir("honed-restart");
  DaemonOptions o;
  o.dir = dir.path();
  auto d = start_daemon(o);
  ASSERT_TRUE(d);
  ImageHash img = ImageHash::of("persist", 7);
  KernelKey key{img, "_Z6reducePKfPfi"};
  {
    auto shim = connect_as(d->socket(), proto::ClientKind::shim);
    ASSERT_TRUE(shim);
    send_kernels(*shim, {kernel_info(1, img, key.entry)});
    send_stats(*shim, {kernel_stats(1, 42, 2, 2'000)});
    auto ctl = connect_as(d->socket(), proto::ClientKind::ctl);
    ASSERT_TRUE(ctl);
    ASSERT_TRUE(wait_for(
        [&] {
          json k = find_kernel(kernels_now(*ctl), key.str());
          return !k.is_null() && k["launches"] == 42;
        },
        5s));
  }
  auto off = run_honectl({"disable", "reduce", "--socket", d->socket()});
  ASSERT_EQ(off.exit_code, 0) << off.err;
  EXPECT_NE(off.out.find("disabled"), std::string::npos) << off.out;
  expect_clean_stop(*d);

  d = start_daemon(o);
  ASSERT_TRUE(d);
  auto js = run_honectl({"kernels", "--json", "--socket", d->socket()});
  ASSERT_EQ(js.exit_code, 0) << js.err;
  json k = find_kernel(json::parse(js.out)["kernels"], key.str());
  ASSERT_FALSE(k.is_null()) << js.out;
  EXPECT_EQ(k["disabled"], true);
  EXPECT_EQ(k["state"], "disabled");
  EXPECT_EQ(k["launches"], 42);

  auto on = run_honectl({"enable", key.str(), "--socket", d->socket()});
  ASSERT_EQ(on.exit_code, 0) << on.err;
  expect_clean_stop(*d);
  d = start_daemon(o);
  ASSERT_TRUE(d);
  js = run_honectl({"kernels", "--json", "--socket", d->socket()});
  k = find_kernel(json::parse(js.out)["kernels"], key.str());
  ASSERT_FALSE(k.is_null()) << js.out;
  EXPECT_EQ(k["disabled"], false);
  expect_clean_stop(*d);
}

TEST(Daemon, ConfigErrorsStopHonedWithKeyFileAndLine) {
  TempDir dir("honed-config");
  DaemonOptions o;
  o.dir = dir.path();
  o.config = "[server]\nreport_interval_ms = 1000\nmax_conections = 10\n";
  auto d = DaemonProcess::start(o);
  ASSERT_FALSE(d) << "honed started with an unknown key";
  EXPECT_NE(d.error().code, 0);
  const std::string& msg = d.error().message;
  EXPECT_NE(msg.find("max_conections"), std::string::npos) << msg;
  EXPECT_NE(msg.find((dir.path() / "hone.toml").string()), std::string::npos) << msg;
  EXPECT_NE(msg.find(":3"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(dir.path() / "hone.sock"));

  // --check-config says the same and exits non-zero; a good file passes.
  std::string path = (dir.path() / "hone.toml").string();
  auto bad = run_program({honed_path(), "--config", path, "--check-config"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("max_conections"), std::string::npos) << bad.err;
  { std::ofstream(path, std::ios::trunc) << k_config; }
  auto good = run_program({honed_path(), "--config", path, "--check-config"});
  EXPECT_EQ(good.exit_code, 0) << good.err;
  EXPECT_NE(good.out.find("configuration OK"), std::string::npos) << good.out;
  // A bad value is as fatal as a bad key.
  { std::ofstream(path, std::ios::trunc) << "[log]\nlevel = \"loud\"\n"; }
  auto value = run_program({honed_path(), "--config", path, "--check-config"});
  EXPECT_NE(value.exit_code, 0);
  EXPECT_NE(value.err.find("level"), std::string::npos) << value.err;
}

TEST(Daemon, RefusesUidsNotAllowed) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "needs root to connect as another uid (setuid); honed always allows its own "
                    "uid, so a disallowed peer cannot be made otherwise";
  }
  DaemonOptions o;
  o.config = std::string(k_config) + "socket_mode = \"0666\"\n";
  auto d = start_daemon(o);
  ASSERT_TRUE(d);
  // nobody must be able to reach the socket for honed's own check to be what refuses it.
  ASSERT_EQ(::chmod(d->dir().c_str(), 0711), 0);

  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(10);
    // honed refuses at once, maybe before the hello arrives (which then fails with EPIPE): what
    // counts is the error waiting to be read.
    auto c = Client::connect_raw(d->socket());
    if (!c) ::_exit(13);
    (void)c->send(hello_frame(proto::ClientKind::shim));
    auto f = c->receive(5s);
    if (!f) ::_exit(12);
    wire::Reader r(f->payload);
    proto::ErrorMsg e;
    if (f->header.type != proto::MsgType::error || !proto::decode(r, e)) ::_exit(11);
    ::_exit(e.code == proto::k_err_permission ? 0 : 14);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "10: setuid failed, 11: not refused, 12: no answer, 13: cannot connect, 14: other error";

  RunOptions nobody;
  nobody.uid = 65534;
  if (run_honectl({"--version"}, nobody).exit_code != 0) {
    GTEST_SKIP() << "uid 65534 cannot run " << honectl_path() << " (a folder above it is closed)";
  }
  auto refused = run_honectl({"status", "--socket", d->socket()}, nobody);
  EXPECT_EQ(refused.exit_code, 3) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("refused"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("allowed_uids"), std::string::npos) << refused.err;
  EXPECT_TRUE(d->wait_for_log("not allowed", 5s));

  // A member of the socket's group (here honed's own, as a supplementary group) gets in.
  struct stat st {};
  ASSERT_EQ(::stat(d->socket().c_str(), &st), 0);
  pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const gid_t member = st.st_gid;
    if (::setgroups(1, &member) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(10);
    auto c = Client::connect_raw(d->socket());
    if (!c) ::_exit(13);
    (void)c->send(hello_frame(proto::ClientKind::ctl));
    auto f = c->receive(5s);
    if (!f) ::_exit(12);
    ::_exit(f->header.type == proto::MsgType::hello_ack ? 0 : 11);
  }
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "10: setgroups failed, 11: refused, 12: no answer, 13: cannot connect";

  // With the default mode, the socket itself keeps nobody out.
  ASSERT_EQ(::chmod(d->socket().c_str(), 0660), 0);
  auto denied = run_honectl({"status", "--socket", d->socket()}, nobody);
  EXPECT_EQ(denied.exit_code, 3) << denied.out << denied.err;
  EXPECT_NE(denied.err.find("ermission denied"), std::string::npos) << denied.err;

  // Root still gets in, and the refusals were counted.
  auto m = run_honectl({"metrics", "--socket", d->socket()});
  ASSERT_EQ(m.exit_code, 0);
  EXPECT_NE(m.out.find("hone_connections_refused_total{reason=\"permission\"} 2"),
            std::string::npos)
      << m.out;
  expect_clean_stop(*d);
}

TEST(Daemon, ThousandConcurrentConnections) {
  constexpr size_t k_clients = 1000;
  ASSERT_GE(raise_fd_limit(k_clients + 200), k_clients + 100);
  auto d = start_daemon();
  ASSERT_TRUE(d);
  std::vector<Client> clients;
  clients.reserve(k_clients);
  for (size_t i = 0; i < k_clients; ++i) {
    auto c = connect_as(d->socket(), proto::ClientKind::ctl);
    ASSERT_TRUE(c) << "client " << i << ": " << c.error().message;
    clients.push_back(std::move(*c));
  }
  // Every client asks at once, then every one reads its answer.
  wire::Writer w;
  std::string req = R"({"cmd":"status","top":1})";
  w.raw(req.data(), req.size());
  for (size_t i = 0; i < k_clients; ++i) {
    ASSERT_TRUE(clients[i].send(proto::frame(proto::MsgType::control, uint32_t(100 + i), w)));
  }
  for (size_t i = 0; i < k_clients; ++i) {
    auto f = clients[i].receive(10s);
    ASSERT_TRUE(f) << "client " << i << ": " << f.error().message;
    ASSERT_EQ(f->header.type, proto::MsgType::control);
    EXPECT_EQ(f->header.seq, uint32_t(100 + i));
    json j = json::parse(f->payload);
    ASSERT_TRUE(j["ok"].get<bool>());
    EXPECT_GE(j["result"]["connections"].get<size_t>(), k_clients);
  }
  // Still responsive to a newcomer while all of them are connected.
  auto t0 = std::chrono::steady_clock::now();
  auto s = run_honectl({"status", "--json", "--socket", d->socket()});
  auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_GE(json::parse(s.out)["connections"].get<size_t>(), k_clients + 1);
  EXPECT_LT(took, 5s);

  clients.clear();
  auto ctl = connect_as(d->socket(), proto::ClientKind::ctl);
  ASSERT_TRUE(ctl);
  EXPECT_TRUE(wait_for(
      [&] {
        auto r = control(*ctl, {{"cmd", "status"}, {"top", 0}});
        return r && (*r)["result"]["connections"] == 1;
      },
      10s));
  expect_clean_stop(*d);
}

TEST(Daemon, MalformedFramesAreRefused) {
  DaemonOptions o;
  o.config = std::string(k_config) + "max_frame_bytes = 65536\n";
  auto d = start_daemon(o);
  ASSERT_TRUE(d);
  auto fresh = [&](proto::ClientKind kind) {
    auto c = connect_as(d->socket(), kind);
    EXPECT_TRUE(c) << c.error().message;
    return std::move(*c);
  };
  {
    SCOPED_TRACE("bad magic");
    auto c = Client::connect_raw(d->socket());
    ASSERT_TRUE(c);
    ASSERT_TRUE(c->send(header(proto::MsgType::hello, 0, 0x12345678)));
    expect_error(*c, proto::k_err_protocol);
    expect_closed(*c);
  }
  {
    SCOPED_TRACE("length over the protocol's 4 MiB");
    Client c = fresh(proto::ClientKind::shim);
    ASSERT_TRUE(c.send(header(proto::MsgType::stats, proto::k_max_payload + 1)));
    expect_error(c, proto::k_err_protocol);
    expect_closed(c);
  }
  {
    SCOPED_TRACE("length over server.max_frame_bytes");
    Client c = fresh(proto::ClientKind::shim);
    ASSERT_TRUE(c.send(header(proto::MsgType::stats, 65537)));
    expect_error(c, proto::k_err_protocol);
    expect_closed(c);
  }
  {
    SCOPED_TRACE("unknown flags");
    Client c = fresh(proto::ClientKind::shim);
    ASSERT_TRUE(c.send(header(proto::MsgType::stats, 0, proto::k_magic, 0x8)));
    expect_error(c, proto::k_err_protocol);
    expect_closed(c);
  }
  {
    SCOPED_TRACE("a descriptor promised, none attached");
    Client c = fresh(proto::ClientKind::ctl);
    ASSERT_TRUE(
        c.send(header(proto::MsgType::control, 2, proto::k_magic, proto::k_flag_fd) + "{}"));
    expect_error(c, proto::k_err_protocol);
    expect_closed(c);
  }
  {
    SCOPED_TRACE("truncated payload: three kernels announced, one sent");
    Client c = fresh(proto::ClientKind::shim);
    proto::Kernels k;
    k.kernels = {kernel_info(1, ImageHash::of("x", 1), "_Z1kv")};
    wire::Writer w;
    proto::encode(w, k);
    std::string payload = w.out();
    uint32_t three = 3;
    std::memcpy(payload.data(), &three, 4);
    ASSERT_TRUE(c.send(header(proto::MsgType::kernels, uint32_t(payload.size())) + payload));
    expect_error(c, proto::k_err_protocol);
    expect_closed(c);
  }
  {
    SCOPED_TRACE("unknown message type: error 5, the connection stays open");
    Client c = fresh(proto::ClientKind::ctl);
    ASSERT_TRUE(c.send(header(proto::MsgType(99), 4, proto::k_magic, 0, 9) + "abcd"));
    expect_error(c, proto::k_err_unknown);
    auto r = control(c, {{"cmd", "status"}, {"top", 0}});
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_TRUE((*r)["ok"].get<bool>());
  }
  {
    SCOPED_TRACE("stats for a kernel never announced");
    Client c = fresh(proto::ClientKind::shim);
    send_stats(c, {kernel_stats(12345, 1, 0, 0)});
    expect_error(c, proto::k_err_protocol);
    expect_closed(c);
  }
  {
    SCOPED_TRACE("counters going backwards");
    Client c = fresh(proto::ClientKind::shim);
    send_kernels(c, {kernel_info(1, ImageHash::of("y", 1), "_Z1kv")});
    send_stats(c, {kernel_stats(1, 10, 0, 0)});
    send_stats(c, {kernel_stats(1, 5, 0, 0)});
    expect_error(c, proto::k_err_protocol);
    expect_closed(c);
  }
  {
    SCOPED_TRACE("a second hello");
    Client c = fresh(proto::ClientKind::shim);
    ASSERT_TRUE(c.send(hello_frame(proto::ClientKind::shim)));
    expect_error(c, proto::k_err_protocol);
    expect_closed(c);
  }
  auto s = run_honectl({"status", "--socket", d->socket()});
  EXPECT_EQ(s.exit_code, 0) << s.err;
  expect_clean_stop(*d);
}

// A shim sends its captures back to back, each frame with a descriptor; however many are queued
// when honed reads, each frame takes its own and the connection stays up.
TEST(Daemon, ManyFramesWithDescriptorsInABurst) {
  auto d = start_daemon();
  ASSERT_TRUE(d);
  auto c = connect_as(d->socket(), proto::ClientKind::ctl);
  ASSERT_TRUE(c) << c.error().message;
  constexpr int k_frames = 64;
  std::string request = R"({"cmd":"status","top":0})";
  for (int i = 0; i < k_frames; ++i) {
    int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    wire::Writer w;
    w.raw(request.data(), request.size());
    auto sent = c->send(proto::frame(proto::MsgType::control, uint32_t(100 + i), w,
                                     proto::k_flag_fd),
                        fd);
    ::close(fd);
    ASSERT_TRUE(sent) << "frame " << i << ": " << sent.error().message;
  }
  for (int i = 0; i < k_frames; ++i) {
    auto f = c->receive(10s);
    ASSERT_TRUE(f) << "reply " << i << ": " << f.error().message;
    EXPECT_EQ(f->header.type, proto::MsgType::control);
    EXPECT_EQ(f->header.seq, uint32_t(100 + i));
    auto reply = json::parse(f->payload);
    EXPECT_TRUE(reply["ok"].get<bool>()) << reply.dump();
  }
  auto r = control(*c, {{"cmd", "status"}, {"top", 0}});
  ASSERT_TRUE(r) << r.error().message;
  expect_clean_stop(*d);
}

TEST(Daemon, ImportRefusesDescriptorsThatAreNotFiles) {
  auto d = start_daemon();
  ASSERT_TRUE(d);
  auto ctl = connect_as(d->socket(), proto::ClientKind::ctl);
  ASSERT_TRUE(ctl);
  // A FIFO nobody writes to: reopening it would block honed until a writer came.
  fs::path fifo = d->dir() / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  int fifo_fd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(fifo_fd, 0);
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  for (int fd : {fifo_fd, pipe_fds[0]}) {
    auto f = ctl->control(R"({"cmd":"import"})", fd, 5s);
    ASSERT_TRUE(f) << f.error().message;
    json j = json::parse(f->payload);
    EXPECT_FALSE(j["ok"].get<bool>()) << j.dump();
    EXPECT_NE(j["error"].get<std::string>().find("regular file"), std::string::npos) << j.dump();
  }
  ::close(fifo_fd);
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  auto s = run_honectl({"status", "--socket", d->socket()});
  EXPECT_EQ(s.exit_code, 0) << s.err;
  expect_clean_stop(*d);
}

TEST(Daemon, LimitsOnConnectionsHandshakesAndSlowReaders) {
  DaemonOptions o;
  o.config = std::string(k_config) +
             "max_connections = 4\nhandshake_timeout_ms = 300\nmax_frame_bytes = 65536\n"
             "max_queued_bytes = 65536\n";
  auto d = start_daemon(o);
  ASSERT_TRUE(d);
  {
    SCOPED_TRACE("a peer that never says hello is dropped");
    auto c = Client::connect_raw(d->socket());
    ASSERT_TRUE(c);
    auto t0 = std::chrono::steady_clock::now();
    expect_closed(*c);
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 250ms);
  }
  // Wait until the daemon has forgotten the dropped peer (and the start-up probe) before filling
  // its slots.
  auto ctl = connect_as(d->socket(), proto::ClientKind::ctl);
  ASSERT_TRUE(ctl);
  ASSERT_TRUE(wait_for(
      [&] {
        auto r = control(*ctl, {{"cmd", "status"}, {"top", 0}});
        return r && (*r)["result"]["connections"] == 1;
      },
      5s));
  {
    SCOPED_TRACE("over max_connections: error 4, then closed");
    std::vector<Client> held;
    for (int i = 0; i < 3; ++i) {
      auto c = connect_as(d->socket(), proto::ClientKind::shim);
      ASSERT_TRUE(c) << c.error().message;
      held.push_back(std::move(*c));
    }
    auto extra = Client::connect_raw(d->socket());
    ASSERT_TRUE(extra);
    expect_error(*extra, proto::k_err_limit);
    expect_closed(*extra);
    auto refused = run_honectl({"status", "--socket", d->socket()});
    EXPECT_EQ(refused.exit_code, 3) << refused.out;
    EXPECT_NE(refused.err.find("max_connections"), std::string::npos) << refused.err;
  }
  {
    SCOPED_TRACE("a client that asks and never reads is dropped");
    auto slow = connect_as(d->socket(), proto::ClientKind::ctl);
    ASSERT_TRUE(slow);
    wire::Writer w;
    std::string req = R"({"cmd":"metrics"})";
    w.raw(req.data(), req.size());
    std::string frame = proto::frame(proto::MsgType::control, 1, w);
    size_t mark = d->log().size();
    // Replies are ~2 KiB; a few thousand overflow the socket's buffer and the 64 KiB queue.
    for (int i = 0; i < 4000 && slow->send(frame); ++i) {
    }
    EXPECT_TRUE(d->wait_for_log("not reading", 5s, mark)) << d->log().substr(mark);
  }
  auto r = control(*ctl, {{"cmd", "status"}, {"top", 0}});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE((*r)["ok"].get<bool>());
  expect_clean_stop(*d);
}

TEST(Daemon, HostileClientsLeaveMemoryBounded) {
  DaemonOptions o;
  o.log_level = "info";
#if defined(__SANITIZE_ADDRESS__)
  // ASan holds freed memory in a quarantine (256 MiB by default): without one, RSS measures
  // what honed keeps.
  const char* asan = std::getenv("ASAN_OPTIONS");
  o.env["ASAN_OPTIONS"] = std::string(asan ? asan : "") + ":quarantine_size_mb=0";
#endif
  auto d = start_daemon(o);
  ASSERT_TRUE(d);
  const std::string sock = d->socket();
  proto::Stats big;
  for (uint64_t i = 0; i < 100; ++i) big.kernels.push_back(kernel_stats(i, 1, 0, 0));
  const std::string stats_frame = proto::frame_of(proto::MsgType::stats, 2, big);
  const std::string hello = hello_frame(proto::ClientKind::shim);
  // Each kind of misbehaviour, as the bytes a client sends before it vanishes.
  const std::vector<std::string> attacks = {
      hello.substr(0, 7),                                      // half a header
      hello.substr(0, hello.size() / 2),                       // half a payload
      hello + stats_frame.substr(0, 9),                        // hello, then half a header
      hello + stats_frame.substr(0, stats_frame.size() / 2),   // hello, then half a payload
      header(proto::MsgType::hello, 0, 0xdeadbeef),            // bad magic
      header(proto::MsgType::hello, proto::k_max_payload + 1), // oversized
      hello + header(proto::MsgType::kernels, 1u << 20) + std::string(60000, 'k'), // big, cut
      hello + proto::frame_of(proto::MsgType::stats, 3, big), // stats for unknown kernels
      "",                                                     // connect and leave
  };
  auto storm = [&](size_t n) {
    for (size_t i = 0; i < n; ++i) hit_and_run(sock, attacks[i % attacks.size()]);
  };
  auto ctl = connect_as(sock, proto::ClientKind::ctl);
  ASSERT_TRUE(ctl);
  auto settled = [&] {
    return wait_for(
        [&] {
          auto r = control(*ctl, {{"cmd", "status"}, {"top", 0}});
          return r && (*r)["result"]["connections"] == 1;
        },
        15s);
  };
  storm(500);
  ASSERT_TRUE(settled());
  auto before = d->rss_kib();
  ASSERT_TRUE(before);
  // 500 vanishing mid-frame (half header, half payload, alternating), then 5000 of every kind.
  for (size_t i = 0; i < 500; ++i) hit_and_run(sock, attacks[i % 2 == 0 ? 2 : 3]);
  storm(5000);
  ASSERT_TRUE(settled());
  auto after = d->rss_kib();
  ASSERT_TRUE(after);
  EXPECT_LT(int64_t(*after) - int64_t(*before), 20 * 1024)
      << "VmRSS grew from " << *before << " KiB to " << *after << " KiB";
  // Every one of them was accepted and seen through to its end.
  auto m = control(*ctl, {{"cmd", "metrics"}});
  ASSERT_TRUE(m);
  std::string text = (*m)["result"]["text"];
  std::string name = "\nhone_connections_accepted_total ";
  size_t at = text.find(name);
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_GE(std::stoull(text.substr(at + name.size())), 6000u) << text;
  expect_clean_stop(*d);
}

// honectl config: honed's running configuration, each value with where it came from: the file
// and line, an environment variable, a flag, or the default; after a reload, the new file's.
TEST(Daemon, ConfigShowsWhereEachValueCameFrom) {
  DaemonOptions o;
  o.config = std::string(k_config) + "[agent]\nstrategies = [\"specialize\", \"rejit\"]\n";
  o.env["HONE_CAPTURE_MAX_MB"] = "64";
  o.env["HONE_AGENT_LLM_API_KEY_ENV"] = "SOME_KEY_VARIABLE";
  auto d = start_daemon(o); // with --log-level debug
  ASSERT_TRUE(d);
  auto origin_of = [&](const json& r, const std::string& section, const std::string& key) {
    for (const auto& s : r["settings"])
      if (s["section"] == section && s["key"] == key) return s;
    return json();
  };
  auto r = run_honectl({"config", "--json", "--socket", d->socket()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json c = json::parse(r.out);
  EXPECT_EQ(c["schema"], "hone.config/1");
  const std::string file = c["file"].get<std::string>();
  json interval = origin_of(c, "server", "report_interval_ms");
  EXPECT_EQ(interval["value"], "1500");
  EXPECT_EQ(interval["origin"], file + ":2:22") << interval.dump();
  EXPECT_EQ(origin_of(c, "agent", "strategies")["value"], "[\"specialize\", \"rejit\"]");
  EXPECT_EQ(origin_of(c, "capture", "max_mb")["origin"], "environment variable HONE_CAPTURE_MAX_MB");
  EXPECT_EQ(origin_of(c, "log", "level")["origin"], "option --log-level");
  EXPECT_EQ(origin_of(c, "validation", "runs")["origin"], "default");
  EXPECT_EQ(origin_of(c, "validation", "runs")["value"], "21");
  // a secret key shows only that it is set
  json key = origin_of(c, "agent.llm", "api_key_env");
  EXPECT_EQ(key["value"], "(set, not shown)");
  EXPECT_EQ(r.out.find("SOME_KEY_VARIABLE"), std::string::npos) << r.out;
  // the table for people: TOML with the origin after each value
  auto t = run_honectl({"config", "--socket", d->socket()});
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("[validation]\n"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("# from environment variable HONE_CAPTURE_MAX_MB\n"), std::string::npos) << t.out;
  // the agent's status says which strategies are off
  auto st = run_honectl({"status", "--socket", d->socket()});
  EXPECT_NE(st.out.find("readonly (off: agent.strategies)"), std::string::npos) << st.out;

  // After a reload the values and their origins are the new file's.
  size_t mark = d->log().size();
  d->write_config(std::string(k_config) + "\n[validation]\nruns = 9\n");
  d->signal(SIGHUP);
  ASSERT_TRUE(d->wait_for_log("configuration reloaded", 5s, mark)) << d->log();
  c = json::parse(run_honectl({"config", "--json", "--socket", d->socket()}).out);
  EXPECT_EQ(origin_of(c, "validation", "runs")["value"], "9");
  EXPECT_EQ(origin_of(c, "validation", "runs")["origin"], file + ":5:8");
  EXPECT_EQ(origin_of(c, "agent", "strategies")["origin"], "default");
  expect_clean_stop(*d);
}

TEST(Daemon, SighupReloadsLogLevelAndRefusesBadConfig) {
  DaemonOptions o;
  o.log_level.clear(); // the flag would override the file
  o.config = std::string(k_config) + "[log]\nlevel = \"info\"\n";
  auto d = start_daemon(o);
  ASSERT_TRUE(d);
  auto poke = [&] {
    auto c = connect_as(d->socket(), proto::ClientKind::ctl);
    ASSERT_TRUE(c);
    ASSERT_TRUE(control(*c, {{"cmd", "status"}, {"top", 0}}));
  };
  poke();
  size_t mark = d->log().size();
  d->write_config(std::string(k_config) + "[log]\nlevel = \"debug\"\n");
  d->signal(SIGHUP);
  ASSERT_TRUE(d->wait_for_log("configuration reloaded", 5s, mark)) << d->log();
  // At info, nothing at debug was logged; at debug, a closed connection is.
  EXPECT_EQ(d->log().substr(0, mark).find("debug"), std::string::npos) << d->log();
  poke();
  EXPECT_TRUE(d->wait_for_log("debug", 5s, mark)) << d->log();

  // A bad file on reload is refused; honed keeps running with what it had.
  mark = d->log().size();
  d->write_config(std::string(k_config) + "[log]\nlevel = \"debug\"\nverbosity = 3\n");
  d->signal(SIGHUP);
  ASSERT_TRUE(d->wait_for_log("reload refused", 5s, mark)) << d->log();
  EXPECT_NE(d->log().find("verbosity", mark), std::string::npos);
  EXPECT_TRUE(d->running());
  auto s = run_honectl({"metrics", "--socket", d->socket()});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_NE(s.out.find("hone_config_reloads_total 1\n"), std::string::npos) << s.out;
  expect_clean_stop(*d);
}
