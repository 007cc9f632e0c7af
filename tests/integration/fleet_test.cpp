// The remote tier between hosts (issues 15 and 33): honeds with state directories of their own
// share one remote that the test starts on loopback, a redis-server or nginx with its WebDAV
// module. Host A finds and verifies a variant and publishes it, signed with the fleet key; host B
// finds it in the remote, validates it on its own captures without running any strategy, and
// serves it while A serves it too. Tombstones for it that are unsigned or tampered with change
// nothing on B; then an operator withdraws it from the fleet on A, A writes its tombstone, and B
// withdraws it within tombstone_interval_s, saying why. Host E does not adopt it; a record tampered
// with in the remote is refused (the signature), host C searches by itself, verifies the very
// variant, and neither serves nor publishes it (the tombstone); with the remote down (and another
// one that hangs), host D works on its own, serves and publishes once the remote is back (empty);
// host B, started again, writes the tombstone it knows again, and D withdraws the variant.
#include "daemon_process.hpp"
#include "remote_servers.hpp"
#include "store/records.hpp"
#include "store/remote.hpp"
#include "store/remote_object.hpp"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <thread>

using namespace hone;
using namespace hone::test;
using namespace std::chrono_literals;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// `dir`: where honed keeps its state, to start another honed on it later (empty: its own).
std::unique_ptr<DaemonProcess> start_daemon(const std::string& extra,
                                            const fs::path& dir = {}) {
  DaemonOptions o;
  o.config = emu_agent_config(HONE_EMU_LIBRARY_DIR, extra);
  o.dir = dir;
  o.env.emplace("HONE_EMU_INSTRUCTION_BUDGET", "400000000");
  auto d = DaemonProcess::start(std::move(o));
  if (!d) {
    ADD_FAILURE() << d.error().message;
    return nullptr;
  }
  return std::move(*d);
}

AppOptions spec_app(const std::string& socket) {
  AppOptions o;
  o.program = std::string(HONE_TESTAPP_DIR) + "/hone-testapp-spec";
  o.args = {"--seconds", "300", "--n", "1048576", "--rounds", "2"};
  o.socket = socket;
  o.shim = HONE_SHIM_LIBRARY;
  o.driver_dir = HONE_EMU_LIBRARY_DIR;
  o.env["HONE_LOG"] = "info";
  o.env["HONE_EMU_THREADS"] = "1";
  return o;
}

void expect_correct(BackgroundApp& app) {
  RunResult r = app.finish();
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("mismatches 0"), std::string::npos) << r.out << r.err;
}

json remote_status(Ctl& ctl, size_t i = 0) {
  json r = ctl.request({{"cmd", "fleet"}})["result"]["remotes"];
  return i < r.size() ? r[i] : json::object();
}

uint64_t field(const json& j, const char* name) {
  return j.is_null() ? 0 : j.value(name, uint64_t(0));
}

std::string remote_section(const std::vector<std::string>& urls, const fs::path& key,
                           const std::string& more = "") {
  std::string s = "[store.remote]\nurls = [";
  for (size_t i = 0; i < urls.size(); ++i) s += (i ? ", \"" : "\"") + urls[i] + "\"";
  s += "]\nkey_file = \"" + key.string() + "\"\nrequire_signature = true\n" + more;
  return s;
}

json variant_on(Ctl& ctl, const std::string& kernel, const std::string& id) {
  json r = ctl.request({{"cmd", "variants"}, {"target", kernel}});
  for (const auto& v : r["result"]["variants"]) {
    if (v.value("id", "") == id) return v;
  }
  return nullptr;
}

// A tombstone for the variant `v` (as honectl lists it) that names it exactly.
store::remote_object::Tombstone tombstone_for(const json& v, const std::string& reason) {
  store::remote_object::Tombstone t;
  t.variant = *VariantId::from_hex(v.value("id", ""));
  t.kernel = *KernelKey::parse(v.value("kernel", ""));
  t.arch = v.value("arch", "");
  t.driver_major = v.value("driver_major", 0u);
  t.when = std::time(nullptr);
  t.reason = reason;
  t.host = "nobody";
  return t;
}

std::string metric_line(const std::string& socket, const std::string& name) {
  RunResult m = run_honectl({"metrics", "--socket", socket});
  size_t at = m.out.find("\n" + name + " ");
  return at == std::string::npos ? "" : m.out.substr(at + 1, m.out.find('\n', at + 1) - at - 1);
}

std::string host_name() {
  char h[256] = {};
  ::gethostname(h, sizeof h - 1);
  return h;
}

} // namespace

// The object's key, from the log line of the host that published it.
std::string published_key(const std::string& log) {
  size_t at = log.find("fleet: published ");
  if (at == std::string::npos) return {};
  at += std::string("fleet: published ").size();
  return log.substr(at, log.find(' ', at) - at);
}

bool searched_itself(Ctl& ctl) {
  json jobs = ctl.request({{"cmd", "jobs"}})["result"]["jobs"];
  for (const auto& j : jobs) {
    if (j.value("strategy", "") == "specialize" && j.value("verdict", "") == "verified" &&
        j.value("description", "").find("imported") == std::string::npos) {
      return true;
    }
  }
  return false;
}

// The remote: a redis-server, or nginx with WebDAV (PUT enabled), started here.
struct Backend {
  const char* name;
  bool redis;
  std::unique_ptr<Server> start(const Dir& dir, uint16_t port = 0) const {
    return redis ? start_redis(dir, {}, port) : start_nginx(dir, port);
  }
  std::string url(uint16_t port) const {
    return redis ? "redis://127.0.0.1:" + std::to_string(port)
                 : "http://127.0.0.1:" + std::to_string(port) + "/hone/fleet";
  }
};

void PrintTo(const Backend& b, std::ostream* os) {
  *os << b.name;
}

class Fleet : public ::testing::TestWithParam<Backend> {};

TEST_P(Fleet, VerifiedOnOneHostAdoptedByAnotherAfterItsOwnValidation) {
  Dir dir;
  auto server = GetParam().start(dir);
  ASSERT_TRUE(server) << GetParam().name
                      << " did not start (Debian packages redis-server, nginx-light)";
  const uint16_t port = server->port();
  const std::string url = GetParam().url(port);
  fs::path key = dir.path() / "fleet.key";
  std::ofstream(key) << "a fleet key of the test, 32 bytes or more\n";
  ::chmod(key.c_str(), 0600);
  // Tombstones are looked up every second here (60 s by default).
  const std::string config = remote_section({url}, key, "tombstone_interval_s = 1\n");
  std::string object_key, withdrawn_id;
  auto remote = store::remote::connect(*store::remote::parse_url(url));
  ASSERT_TRUE(remote);
  auto fleet_key = store::remote_object::read_key(key.string());
  ASSERT_TRUE(fleet_key);

  // Host A: the strategies find the specialized kernel; it is verified and published. A keeps
  // serving it while host B adopts it.
  auto a = start_daemon(config);
  ASSERT_TRUE(a);
  auto app_a = std::make_unique<BackgroundApp>(spec_app(a->socket()));
  Ctl ctl_a(a->socket());
  ASSERT_TRUE(wait_for(
      [&] { return !ctl_a.verified_variant("mix_rounds", "specialize").is_null(); }, 240s))
      << ctl_a.request({{"cmd", "jobs"}}).dump(2) << a->log();
  ASSERT_TRUE(wait_for([&] { return field(remote_status(ctl_a), "published") > 0; }, 60s))
      << ctl_a.request({{"cmd", "fleet"}}).dump(2) << a->log();
  // Its own lookup came first, and missed.
  EXPECT_GE(field(remote_status(ctl_a), "misses"), 1u) << remote_status(ctl_a).dump(2);
  object_key = published_key(a->log());
  ASSERT_FALSE(object_key.empty()) << a->log();
  {
    RunResult shown = run_honectl({"fleet", "--socket", a->socket()});
    EXPECT_EQ(shown.exit_code, 0) << shown.err;
    EXPECT_NE(shown.out.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << shown.out;
    EXPECT_NE(shown.out.find("reachable"), std::string::npos) << shown.out;
  }
  const json variant = ctl_a.verified_variant("mix_rounds", "specialize");
  withdrawn_id = variant.value("id", "");
  const std::string tomb_key = object_key + ".withdrawn." + withdrawn_id;
  ASSERT_TRUE(wait_for([&] { return !ctl_a.kernel("mix_rounds").value("serving", "").empty(); },
                       60s))
      << ctl_a.kernel("mix_rounds").dump(2);

  // Host B: the remote has it; B validates it here, runs no strategy, and serves it.
  TempDir b_dir("hone-fleet-b");
  {
    auto b = start_daemon(config, b_dir.path());
    ASSERT_TRUE(b);
    BackgroundApp app(spec_app(b->socket()));
    Ctl ctl(b->socket());
    json k;
    ASSERT_TRUE(wait_for(
        [&] {
          k = ctl.kernel("mix_rounds");
          return field(k, "variant_launches") > 5;
        },
        240s))
        << k.dump(2) << ctl.request({{"cmd", "jobs"}}).dump(2) << b->log();
    EXPECT_GE(field(remote_status(ctl), "hits"), 1u) << remote_status(ctl).dump(2);
    json jobs = ctl.request({{"cmd", "jobs"}})["result"]["jobs"];
    ASSERT_FALSE(jobs.empty());
    for (const auto& j : jobs) {
      EXPECT_NE(j.value("description", "").find("imported from another host"), std::string::npos)
          << "host B ran a search of its own: " << jobs.dump(2);
    }
    EXPECT_NE(b->log().find("adopted from the fleet"), std::string::npos) << b->log();
    std::this_thread::sleep_for(1s); // report intervals: strategies would have started by now
    EXPECT_EQ(ctl.request({{"cmd", "jobs"}})["result"]["jobs"].size(), jobs.size());
    json adopted = ctl.verified_variant("mix_rounds", "specialize");
    ASSERT_FALSE(adopted.is_null()) << ctl.kernel("mix_rounds").dump(2);
    EXPECT_EQ(adopted.value("id", ""), withdrawn_id);
    EXPECT_EQ(ctl.kernel("mix_rounds").value("serving", ""), withdrawn_id);

    // Someone who can write the remote but has no fleet key writes tombstones for it: unsigned,
    // then signed and changed by one byte. B refuses each, says why, and keeps serving it.
    auto forged = tombstone_for(variant, "withdrawn by nobody");
    ASSERT_TRUE((*remote)->put(tomb_key, store::remote_object::encode_tombstone(forged, nullptr)));
    ASSERT_TRUE(wait_for([&] { return b->log().find("an unsigned tombstone, refused") !=
                                      std::string::npos; },
                         30s))
        << b->log();
    std::string tampered = store::remote_object::encode_tombstone(forged, &*fleet_key);
    tampered[tampered.find("nobody")] ^= 0x20;
    ASSERT_TRUE((*remote)->put(tomb_key, tampered));
    ASSERT_TRUE(wait_for([&] { return b->log().find("tombstone's signature does not verify") !=
                                      std::string::npos; },
                         30s))
        << b->log();
    EXPECT_GE(field(remote_status(ctl), "tombstones_rejected"), 2u) << remote_status(ctl).dump(2);
    const uint64_t served = field(ctl.kernel("mix_rounds"), "variant_launches");
    ASSERT_TRUE(wait_for(
        [&] { return field(ctl.kernel("mix_rounds"), "variant_launches") > served + 5; }, 60s))
        << ctl.kernel("mix_rounds").dump(2);
    EXPECT_EQ(ctl.kernel("mix_rounds").value("serving", ""), withdrawn_id);
    EXPECT_EQ(variant_on(ctl, "mix_rounds", withdrawn_id).value("state", ""), "verified");
    EXPECT_EQ(metric_line(b->socket(), "hone_remote_withdrawals_total"),
              "hone_remote_withdrawals_total 0");

    // An operator withdraws the variant from the whole fleet, on host A: A writes its tombstone
    // (over the forged one, which fails its checks), and B, which verified the variant itself,
    // withdraws it from its processes within the interval and records why.
    RunResult off =
        run_honectl({"disable", withdrawn_id, "--fleet", "--socket", a->socket()});
    EXPECT_EQ(off.exit_code, 0) << off.out << off.err;
    EXPECT_NE(off.out.find("withdrawn from the fleet"), std::string::npos) << off.out;
    auto t0 = std::chrono::steady_clock::now();
    json withdrawn;
    ASSERT_TRUE(wait_for(
        [&] {
          withdrawn = variant_on(ctl, "mix_rounds", withdrawn_id);
          return withdrawn.value("state", "") == "rejected" &&
                 ctl.kernel("mix_rounds").value("serving", "").empty();
        },
        60s))
        << withdrawn.dump(2) << ctl.kernel("mix_rounds").dump(2) << b->log() << a->log();
    std::cout << "host B withdrew the variant "
              << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()
              << " s after the operator's command on host A\n";
    const std::string why = "withdrawn in the fleet: disabled by an operator on host " + host_name();
    EXPECT_EQ(withdrawn.value("verdict", "").rfind(why, 0), 0u) << withdrawn.dump(2);
    EXPECT_NE(b->log().find("withdrawn from every process: a tombstone in"), std::string::npos)
        << b->log();
    json shown = ctl.request({{"cmd", "show"}, {"target", withdrawn_id}})["result"];
    EXPECT_NE(shown.dump().find("fleet_tombstone"), std::string::npos) << shown.dump(2);
    EXPECT_EQ(metric_line(b->socket(), "hone_remote_withdrawals_total"),
              "hone_remote_withdrawals_total 1");
    EXPECT_GE(field(remote_status(ctl), "tombstones_found"), 1u) << remote_status(ctl).dump(2);
    EXPECT_NE(a->log().find("over what was there, which failed its checks"), std::string::npos)
        << a->log();
    expect_correct(app);
  }
  // The tombstone in the remote is A's, signed with the fleet key.
  auto tomb = (*remote)->get(tomb_key);
  ASSERT_TRUE(tomb && tomb->has_value()) << tomb_key;
  const std::string tombstone_bytes = **tomb;
  {
    auto expected = tombstone_for(variant, "");
    auto d = store::remote_object::decode_tombstone(tombstone_bytes, &*fleet_key, true, expected);
    ASSERT_TRUE(d) << d.error().message;
    EXPECT_TRUE(d->signed_by_fleet);
    EXPECT_EQ(d->tombstone.host, host_name());
    EXPECT_NE(d->tombstone.reason.find("disabled by an operator"), std::string::npos);
  }
  expect_correct(*app_a);
  app_a.reset();
  a.reset();

  // Host E: the remote says the variant was withdrawn; E does not adopt it, searches by itself,
  // and keeps the operator's decision even when its own search finds the same variant.
  {
    auto e = start_daemon(config);
    ASSERT_TRUE(e);
    BackgroundApp app(spec_app(e->socket()));
    Ctl ctl(e->socket());
    ASSERT_TRUE(wait_for([&] { return e->log().find("job 6: ") != std::string::npos ||
                                      e->log().find("stays disabled") != std::string::npos; },
                         240s))
        << ctl.request({{"cmd", "jobs"}}).dump(2) << e->log();
    EXPECT_NE(e->log().find("withdrawn from the fleet by an operator: not adopted"),
              std::string::npos)
        << e->log();
    EXPECT_EQ(field(remote_status(ctl), "hits"), 0u) << remote_status(ctl).dump(2);
    ASSERT_TRUE(wait_for([&] { return e->log().find("stays disabled") != std::string::npos; }, 120s))
        << e->log();
    EXPECT_EQ(field(ctl.kernel("mix_rounds"), "variant_launches"), 0u);
    expect_correct(app);
  }

  // Someone who can write the remote changes one byte of the variant's record: the signature no
  // longer verifies, host C refuses the object unvalidated, says so, and searches by itself.
  std::string tampered_object;
  {
    auto got = (*remote)->get(object_key);
    ASSERT_TRUE(got && got->has_value()) << object_key;
    tampered_object = **got;
    size_t at = tampered_object.find("mix_rounds", 100);
    ASSERT_NE(at, std::string::npos);
    tampered_object[at] ^= 0x20;
    ASSERT_TRUE((*remote)->put(object_key, tampered_object));
  }
  // Host C thus never saw the withdrawal, and its own search verifies the very variant: the
  // tombstone keeps it from serving there and from being published again.
  {
    auto c = start_daemon(config);
    ASSERT_TRUE(c);
    BackgroundApp app(spec_app(c->socket()));
    Ctl ctl(c->socket());
    ASSERT_TRUE(wait_for([&] { return searched_itself(ctl); }, 240s))
        << ctl.request({{"cmd", "jobs"}}).dump(2) << c->log();
    EXPECT_GE(field(remote_status(ctl), "rejected"), 1u) << remote_status(ctl).dump(2);
    EXPECT_NE(c->log().find("signature does not verify"), std::string::npos) << c->log();
    json mine;
    ASSERT_TRUE(wait_for(
        [&] {
          mine = variant_on(ctl, "mix_rounds", withdrawn_id);
          return mine.value("state", "") == "rejected";
        },
        60s))
        << mine.dump(2) << c->log();
    EXPECT_NE(mine.value("verdict", "").find("disabled by an operator"), std::string::npos)
        << mine.dump(2);
    EXPECT_NE(c->log().find("verified here, never serves: a tombstone"), std::string::npos)
        << c->log();
    EXPECT_NE(ctl.kernel("mix_rounds").value("serving", ""), withdrawn_id);
    expect_correct(app);
    EXPECT_EQ(c->log().find("variant " + withdrawn_id + " of mix_rounds pushed"),
              std::string::npos)
        << c->log();
  }
  // The tombstone is as A wrote it, and whatever C published (if another of its variants was
  // verified) does not carry the withdrawn one as verified.
  EXPECT_EQ(**(*remote)->get(tomb_key), tombstone_bytes);
  {
    auto now = (*remote)->get(object_key);
    ASSERT_TRUE(now && now->has_value());
    if (**now != tampered_object) {
      auto d = store::remote_object::decode(**now, &*fleet_key, true, 64 << 20);
      ASSERT_TRUE(d) << d.error().message;
      for (const auto& r : d->records) {
        auto v = store::records::decode_variant(r);
        ASSERT_TRUE(v);
        EXPECT_FALSE(v->id.hex() == withdrawn_id && v->state == store::VariantState::verified);
      }
    }
  }

  // The remote down, and another that accepts connections and never answers: host D works on its
  // own, and publishes once the remote is back.
  server->stop();
  Silent hung;
  {
    auto d = start_daemon(remote_section({GetParam().url(hung.port()), url}, key,
                                         "timeout_ms = 300\ntombstone_interval_s = 1\n"));
    ASSERT_TRUE(d);
    BackgroundApp app(spec_app(d->socket()));
    Ctl ctl(d->socket());
    ASSERT_TRUE(wait_for([&] { return searched_itself(ctl); }, 240s))
        << ctl.request({{"cmd", "jobs"}}).dump(2) << d->log();
    EXPECT_GE(field(remote_status(ctl, 0), "errors"), 1u) << remote_status(ctl, 0).dump(2);
    EXPECT_GE(field(remote_status(ctl, 1), "errors"), 1u) << remote_status(ctl, 1).dump(2);
    Dir again_dir;
    auto again = GetParam().start(again_dir, port);
    ASSERT_TRUE(again);
    ASSERT_TRUE(wait_for([&] { return field(remote_status(ctl, 1), "published") > 0; }, 120s))
        << ctl.request({{"cmd", "fleet"}}).dump(2) << d->log();
    // The remote came back empty, so D, which never saw the withdrawal, published the variant.
    // Host B starts again on its state: it writes the tombstones it knows again, the very one
    // A wrote, and D withdraws the variant within the interval.
    EXPECT_EQ(ctl.kernel("mix_rounds").value("serving", ""), withdrawn_id);
    auto b_again = start_daemon(config, b_dir.path());
    ASSERT_TRUE(b_again);
    ASSERT_TRUE(wait_for(
        [&] {
          auto t = (*remote)->get(tomb_key);
          return t && t->has_value() && **t == tombstone_bytes;
        },
        30s))
        << b_again->log();
    json gone;
    ASSERT_TRUE(wait_for(
        [&] {
          gone = variant_on(ctl, "mix_rounds", withdrawn_id);
          return gone.value("state", "") == "rejected" &&
                 ctl.kernel("mix_rounds").value("serving", "") != withdrawn_id;
        },
        60s))
        << gone.dump(2) << d->log();
    EXPECT_NE(gone.value("verdict", "").find("disabled by an operator"), std::string::npos)
        << gone.dump(2);
    expect_correct(app);
  }
}

INSTANTIATE_TEST_SUITE_P(Remotes, Fleet,
                         ::testing::Values(Backend{"redis", true}, Backend{"webdav", false}),
                         [](const ::testing::TestParamInfo<Backend>& i) {
                           return std::string(i.param.name);
                         });
