// The remote tier between hosts (issue 15): honeds with state directories of their own share one
// remote that the test starts on loopback, a redis-server or nginx with its WebDAV module. Host A
// finds and verifies a variant and publishes it, signed with the fleet key; host B finds it in the
// remote, validates it on its own captures without running any strategy, and serves it; an
// operator withdraws it from the fleet on B, and host E does not adopt it; a record tampered with
// in the remote is refused (the signature) and host C searches by itself; with the remote down
// (and another one that hangs), host D works on its own and publishes once the remote is back.
#include "daemon_process.hpp"
#include "remote_servers.hpp"
#include "store/remote.hpp"
#include "store/remote_object.hpp"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <fstream>
#include <thread>

using namespace hone;
using namespace hone::test;
using namespace std::chrono_literals;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::unique_ptr<DaemonProcess> start_daemon(const std::string& extra) {
  DaemonOptions o;
  o.config = emu_agent_config(HONE_EMU_LIBRARY_DIR, extra);
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
  const std::string config = remote_section({url}, key);
  std::string object_key, withdrawn_id;

  // Host A: the strategies find the specialized kernel; it is verified and published.
  {
    auto a = start_daemon(config);
    ASSERT_TRUE(a);
    BackgroundApp app(spec_app(a->socket()));
    Ctl ctl(a->socket());
    ASSERT_TRUE(wait_for(
        [&] { return !ctl.verified_variant("mix_rounds", "specialize").is_null(); }, 240s))
        << ctl.request({{"cmd", "jobs"}}).dump(2) << a->log();
    ASSERT_TRUE(wait_for([&] { return field(remote_status(ctl), "published") > 0; }, 60s))
        << ctl.request({{"cmd", "fleet"}}).dump(2) << a->log();
    // Its own lookup came first, and missed.
    EXPECT_GE(field(remote_status(ctl), "misses"), 1u) << remote_status(ctl).dump(2);
    object_key = published_key(a->log());
    ASSERT_FALSE(object_key.empty()) << a->log();
    RunResult shown = run_honectl({"fleet", "--socket", a->socket()});
    EXPECT_EQ(shown.exit_code, 0) << shown.err;
    EXPECT_NE(shown.out.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << shown.out;
    EXPECT_NE(shown.out.find("reachable"), std::string::npos) << shown.out;
    expect_correct(app);
  }

  // Host B: the remote has it; B validates it here, runs no strategy, and serves it.
  {
    auto b = start_daemon(config);
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

    // An operator withdraws the variant from the whole fleet, from host B.
    json adopted = ctl.verified_variant("mix_rounds", "specialize");
    ASSERT_FALSE(adopted.is_null()) << ctl.kernel("mix_rounds").dump(2);
    withdrawn_id = adopted.value("id", "");
    RunResult off =
        run_honectl({"disable", withdrawn_id, "--fleet", "--socket", b->socket()});
    EXPECT_EQ(off.exit_code, 0) << off.out << off.err;
    EXPECT_NE(off.out.find("withdrawn from the fleet"), std::string::npos) << off.out;
    ASSERT_TRUE(wait_for([&] { return field(remote_status(ctl), "published") > 0; }, 60s))
        << ctl.request({{"cmd", "fleet"}}).dump(2) << b->log();
    expect_correct(app);
  }

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
  {
    auto e = store::remote::parse_url(url);
    ASSERT_TRUE(e);
    auto backend = store::remote::connect(*e);
    ASSERT_TRUE(backend);
    auto got = (*backend)->get(object_key);
    ASSERT_TRUE(got && got->has_value()) << object_key;
    std::string object = **got;
    size_t at = object.find("mix_rounds", 100);
    ASSERT_NE(at, std::string::npos);
    object[at] ^= 0x20;
    ASSERT_TRUE((*backend)->put(object_key, object));
  }
  {
    auto c = start_daemon(config);
    ASSERT_TRUE(c);
    BackgroundApp app(spec_app(c->socket()));
    Ctl ctl(c->socket());
    ASSERT_TRUE(wait_for([&] { return searched_itself(ctl); }, 240s))
        << ctl.request({{"cmd", "jobs"}}).dump(2) << c->log();
    EXPECT_GE(field(remote_status(ctl), "rejected"), 1u) << remote_status(ctl).dump(2);
    EXPECT_NE(c->log().find("signature does not verify"), std::string::npos) << c->log();
    expect_correct(app);
  }

  // The remote down, and another that accepts connections and never answers: host D works on its
  // own, and publishes once the remote is back.
  server->stop();
  Silent hung;
  {
    auto d = start_daemon(remote_section({GetParam().url(hung.port()), url}, key,
                                         "timeout_ms = 300\n"));
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
    expect_correct(app);
  }
}

INSTANTIATE_TEST_SUITE_P(Remotes, Fleet,
                         ::testing::Values(Backend{"redis", true}, Backend{"webdav", false}),
                         [](const ::testing::TestParamInfo<Backend>& i) {
                           return std::string(i.param.name);
                         });
