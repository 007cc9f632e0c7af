// The remote tier's transport (store/remote.hpp) against real servers, each started by the test on
// loopback and stopped with it: Debian's redis-server, and nginx with its WebDAV module (PUT and
// DELETE enabled). Objects go in and come back byte for byte; a read-only remote refuses writes; a
// remote that is down, or that accepts connections and never answers, gives a clear error within
// its timeout; oversized objects are refused both ways. What no real server does on purpose — a
// 200 with an HTML page, a body that never ends — comes from the scripted server on loopback that
// the LLM tests use (support/llm_server.*).
#include "llm_server.hpp"
#include "remote_servers.hpp"
#include "store/remote.hpp"
#include "store/sigv4.hpp"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

using namespace hone;
using namespace hone::store::remote;
using namespace std::chrono_literals;
using namespace hone::test;
namespace fs = std::filesystem;

namespace {

std::string random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = char(rng());
  return s;
}

std::unique_ptr<Backend> backend(const std::string& url, Limits limits = {}) {
  auto e = parse_url(url);
  EXPECT_TRUE(e) << url << ": " << (e ? "" : e.error().message);
  if (!e) return nullptr;
  auto b = connect(*e, limits);
  EXPECT_TRUE(b) << (b ? "" : b.error().message);
  return b ? std::move(*b) : nullptr;
}

Limits short_limits() {
  Limits l;
  l.connect_timeout = 500ms;
  l.timeout = 800ms;
  return l;
}

} // namespace

TEST(RemoteUrl, ParsesEveryFormAndNeverShowsThePassword) {
  auto r = parse_url("redis://hone:s3cret@cache.internal:6380/2|read-only");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->scheme, Scheme::redis);
  EXPECT_EQ(r->host, "cache.internal");
  EXPECT_EQ(r->port, 6380);
  EXPECT_EQ(r->user, "hone");
  EXPECT_EQ(r->password, "s3cret");
  EXPECT_EQ(r->db, 2u);
  EXPECT_TRUE(r->read_only);
  EXPECT_EQ(r->display.find("s3cret"), std::string::npos) << r->display;
  EXPECT_EQ(r->display, "redis://hone:***@cache.internal:6380/2|read-only");

  auto d = parse_url("redis://localhost");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->port, 6379);
  EXPECT_EQ(d->db, 0u);

  auto h = parse_url("https://objects.example.com/fleet/hone/|sigv4=us-east-1:s3");
  ASSERT_TRUE(h) << h.error().message;
  EXPECT_EQ(h->scheme, Scheme::https);
  EXPECT_EQ(h->port, 443);
  EXPECT_EQ(h->prefix, "/fleet/hone");
  EXPECT_EQ(h->sigv4, "us-east-1:s3");

  auto v6 = parse_url("http://[::1]:8080/x");
  ASSERT_TRUE(v6) << v6.error().message;
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 8080);

  auto pct = parse_url("redis://:p%40ss@h:1");
  ASSERT_TRUE(pct) << pct.error().message;
  EXPECT_EQ(pct->password, "p@ss");
  EXPECT_EQ(pct->display, "redis://***@h:1/0");

  // Wrong forms say what is wrong.
  auto says = [](const std::string& url, const std::string& what) {
    auto e = parse_url(url);
    ASSERT_FALSE(e) << url;
    EXPECT_NE(e.error().message.find(what), std::string::npos) << url << ": " << e.error().message;
    EXPECT_EQ(e.error().message.find("s3cret"), std::string::npos) << e.error().message;
  };
  says("cache:6379", "needs a scheme");
  says("ftp://h/x", "unknown remote scheme");
  says("rediss://u:s3cret@h:6379", "TLS");
  says("redis://h:0", "bad port");
  says("redis://h:99999", "bad port");
  says("redis://h:63a9", "bad port");
  says("redis://h/x", "database number");
  says("redis://:6379", "needs a host");
  says("http://user:s3cret@h/x", "credentials in an http(s) URL");
  says("http://h/x|sigv4=us-east-1", "REGION:SERVICE");
  says("redis://h|sigv4=a:b", "http(s) remotes only");
  says("http://h/x|writable", "unknown remote attribute");
  says("http://h/x|credentials=/k", "is for sigv4");
  says("http://h/x?a=1", "no query");
}

TEST(RemoteUrl, Sigv4KeysComeFromTheEnvironmentOrAPrivateFile) {
  ::unsetenv("AWS_ACCESS_KEY_ID");
  ::unsetenv("AWS_SECRET_ACCESS_KEY");
  auto e = parse_url("http://127.0.0.1:9/b|sigv4=us-east-1:s3");
  ASSERT_TRUE(e);
  auto none = connect(*e);
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("AWS_ACCESS_KEY_ID"), std::string::npos);

  Dir dir;
  fs::path keys = dir.path() / "keys";
  std::ofstream(keys) << "AWS_ACCESS_KEY_ID = AKIDEXAMPLE\nAWS_SECRET_ACCESS_KEY = secret-key\n";
  ::chmod(keys.c_str(), 0644);
  auto f = parse_url("http://127.0.0.1:9/b|sigv4=us-east-1:s3|credentials=" + keys.string());
  ASSERT_TRUE(f) << f.error().message;
  auto open = connect(*f);
  ASSERT_FALSE(open);
  EXPECT_NE(open.error().message.find("chmod 600"), std::string::npos) << open.error().message;
  ::chmod(keys.c_str(), 0600);
  auto good = connect(*f);
  EXPECT_TRUE(good) << good.error().message;
}

TEST(RemoteRedis, ObjectsRoundTripAndAReadOnlyRemoteRefusesWrites) {
  Dir dir;
  auto redis = start_redis(dir, "fleet-pass");
  ASSERT_TRUE(redis) << "redis-server (Debian package redis-server) did not start";
  std::string url = "redis://:fleet-pass@127.0.0.1:" + std::to_string(redis->port()) + "/3";
  auto b = backend(url);
  ASSERT_TRUE(b);
  std::string object = random_bytes(300000, 1);
  object[17] = '\0'; // binary-safe
  auto miss = b->get("k1");
  ASSERT_TRUE(miss) << miss.error().message;
  EXPECT_FALSE(miss->has_value());
  ASSERT_TRUE(b->put("k1", object));
  auto hit = b->get("k1");
  ASSERT_TRUE(hit) << hit.error().message;
  ASSERT_TRUE(hit->has_value());
  EXPECT_EQ(**hit, object);
  auto there = b->exists("k1");
  ASSERT_TRUE(there);
  EXPECT_TRUE(*there);
  // An empty object is an object.
  ASSERT_TRUE(b->put("empty", ""));
  auto empty = b->get("empty");
  ASSERT_TRUE(empty && empty->has_value());
  EXPECT_TRUE((*empty)->empty());

  // Another database does not see it; a read-only client reads but never writes.
  auto other = backend("redis://:fleet-pass@127.0.0.1:" + std::to_string(redis->port()) + "/4");
  auto not_there = other->get("k1");
  ASSERT_TRUE(not_there);
  EXPECT_FALSE(not_there->has_value());
  auto ro = backend(url + "|read-only");
  auto read = ro->get("k1");
  ASSERT_TRUE(read && read->has_value());
  auto refused = ro->put("k2", "x");
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("read-only"), std::string::npos);

  // A wrong password is an error that does not show it.
  auto wrong = backend("redis://:not-it@127.0.0.1:" + std::to_string(redis->port()));
  auto denied = wrong->get("k1");
  ASSERT_FALSE(denied);
  EXPECT_NE(denied.error().message.find("AUTH"), std::string::npos) << denied.error().message;
  EXPECT_EQ(denied.error().message.find("not-it"), std::string::npos) << denied.error().message;

  // Oversized objects are refused both ways, and the limit is named.
  Limits small;
  small.max_object_bytes = 1000;
  auto tight = backend(url, small);
  auto big = tight->get("k1");
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().message.find("over the limit"), std::string::npos) << big.error().message;
  EXPECT_FALSE(tight->put("k3", std::string(1001, 'x')));

  // Keys are names, not paths or commands.
  EXPECT_FALSE(b->get("a/b"));
  EXPECT_FALSE(b->put("a b", "x"));

  // create() writes once (SET NX): a second writer leaves the first one's bytes; read-only refuses.
  auto made = b->create("t1", "first");
  ASSERT_TRUE(made) << made.error().message;
  EXPECT_TRUE(*made);
  auto again = b->create("t1", "second");
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_FALSE(*again);
  EXPECT_EQ(**b->get("t1"), "first");
  auto ro_create = ro->create("t2", "x");
  ASSERT_FALSE(ro_create);
  EXPECT_NE(ro_create.error().message.find("read-only"), std::string::npos);
  EXPECT_FALSE(*b->exists("t2"));
}

TEST(RemoteRedis, ADownOrSilentServerIsAnErrorWithinTheTimeoutAndARestartIsReconnected) {
  Dir dir;
  auto redis = start_redis(dir);
  ASSERT_TRUE(redis);
  uint16_t port = redis->port();
  auto b = backend("redis://127.0.0.1:" + std::to_string(port), short_limits());
  ASSERT_TRUE(b->put("k", "v"));
  redis->stop();
  auto down = b->get("k");
  ASSERT_FALSE(down);
  EXPECT_NE(down.error().message.find("127.0.0.1:" + std::to_string(port)), std::string::npos)
      << down.error().message;
  // Back on the same port (empty: nothing was saved): the backend reconnects by itself.
  std::vector<std::string> argv{"/usr/bin/redis-server", "--port", std::to_string(port), "--bind",
                                "127.0.0.1", "--save", "", "--appendonly", "no", "--dir",
                                dir.path().string()};
  Server again(argv, port);
  ASSERT_TRUE(again.up());
  auto back = b->get("k");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_FALSE(back->has_value());

  Silent silent;
  auto hung = backend("redis://127.0.0.1:" + std::to_string(silent.port()), short_limits());
  auto r = hung->get("k");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("STRLEN failed"), std::string::npos) << r.error().message;
}

TEST(RemoteHttp, ObjectsRoundTripThroughNginxWebDav) {
  Dir dir;
  auto nginx = start_nginx(dir);
  ASSERT_TRUE(nginx) << "nginx (Debian package nginx-light) did not start";
  std::string base = "http://127.0.0.1:" + std::to_string(nginx->port());
  auto b = backend(base + "/hone/fleet/");
  ASSERT_TRUE(b);
  std::string object = random_bytes(500000, 2);
  auto miss = b->get("k1");
  ASSERT_TRUE(miss) << miss.error().message;
  EXPECT_FALSE(miss->has_value());
  auto absent = b->exists("k1");
  ASSERT_TRUE(absent) << absent.error().message;
  EXPECT_FALSE(*absent);
  auto put = b->put("k1", object);
  ASSERT_TRUE(put) << put.error().message;
  auto hit = b->get("k1");
  ASSERT_TRUE(hit) << hit.error().message;
  ASSERT_TRUE(hit->has_value());
  EXPECT_EQ(**hit, object);
  auto there = b->exists("k1");
  ASSERT_TRUE(there);
  EXPECT_TRUE(*there);
  // Written where the URL says, as a plain file.
  EXPECT_TRUE(fs::exists(dir.path() / "www/hone/fleet/k1"));
  // Overwritten in place.
  ASSERT_TRUE(b->put("k1", "second"));
  EXPECT_EQ(**b->get("k1"), "second");
  // ... but never by create(): it writes only where nothing is.
  auto kept = b->create("k1", "third");
  ASSERT_TRUE(kept) << kept.error().message;
  EXPECT_FALSE(*kept);
  EXPECT_EQ(**b->get("k1"), "second");
  auto made = b->create("t1", "first");
  ASSERT_TRUE(made) << made.error().message;
  EXPECT_TRUE(*made);
  EXPECT_EQ(**b->get("t1"), "first");

  // A read-only URL never writes; a path the server does not let us write is an error with the
  // status.
  auto ro = backend(base + "/hone/fleet|read-only");
  EXPECT_EQ(**ro->get("k1"), "second");
  auto refused = ro->put("k2", "x");
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("read-only"), std::string::npos);
  auto nodav = backend(base + "/elsewhere");
  auto r405 = nodav->put("k", "x");
  ASSERT_FALSE(r405);
  EXPECT_NE(r405.error().message.find("HTTP 405"), std::string::npos) << r405.error().message;

  // An HTML page where an object should be is not an object.
  auto page = backend(base);
  auto html = page->get("page.html");
  ASSERT_FALSE(html);
  EXPECT_NE(html.error().message.find("Content-Type 'text/html'"), std::string::npos)
      << html.error().message;

  // Size limits, both ways.
  Limits small;
  small.max_object_bytes = 1000;
  auto tight = backend(base + "/hone/fleet", small);
  ASSERT_TRUE(b->put("big", std::string(5000, 'x')));
  auto big = tight->get("big");
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().message.find("over the limit"), std::string::npos) << big.error().message;
  EXPECT_FALSE(tight->put("k3", std::string(1001, 'x')));

  // nginx stopped: a connection error naming the remote.
  nginx->stop();
  auto down = b->get("k1");
  ASSERT_FALSE(down);
  EXPECT_NE(down.error().message.find("127.0.0.1"), std::string::npos) << down.error().message;
}

TEST(RemoteHttp, SlowHungAndEndlessRepliesEndAtTheLimits) {
  Silent silent;
  auto hung = backend("http://127.0.0.1:" + std::to_string(silent.port()) + "/x", short_limits());
  auto r = hung->get("k");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("GET k failed"), std::string::npos) << r.error().message;

  // A body that never ends, without a length: cut at the size limit.
  test::LlmServer server;
  test::LlmResponse endless;
  endless.oversize_bytes = 1 << 20;
  server.push(endless);
  Limits small;
  small.max_object_bytes = 4096;
  auto b = backend("http://127.0.0.1:" + std::to_string(server.port()) + "/x", small);
  auto big = b->get("k");
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().message.find("over the limit"), std::string::npos) << big.error().message;

  // An error status is an error, never an object.
  test::LlmResponse error;
  error.status = 503;
  error.body = "busy";
  server.push(error);
  auto busy = b->get("k");
  ASSERT_FALSE(busy);
  EXPECT_NE(busy.error().message.find("HTTP 503"), std::string::npos) << busy.error().message;
}

// An S3-compatible remote: every request carries a Signature Version 4 over what was really sent
// (the server recomputes it from the request it received), and the keys never appear in the URL or
// in errors.
TEST(RemoteHttp, Sigv4SignsWhatIsSent) {
  Dir dir;
  fs::path keys = dir.path() / "keys";
  std::ofstream(keys) << "AWS_ACCESS_KEY_ID=AKIDTEST\nAWS_SECRET_ACCESS_KEY=test-secret-key\n";
  ::chmod(keys.c_str(), 0600);
  test::LlmServer server;
  test::LlmResponse created;
  created.status = 201;
  server.push(created);
  test::LlmResponse missing;
  missing.status = 404;
  server.push(missing);
  auto b = backend("http://127.0.0.1:" + std::to_string(server.port()) +
                   "/bucket/hone|sigv4=eu-west-1:s3|credentials=" + keys.string());
  ASSERT_TRUE(b);
  EXPECT_EQ(b->endpoint().display.find("test-secret-key"), std::string::npos);
  ASSERT_TRUE(b->put("k1", "object bytes"));
  auto absent = b->exists("k2");
  ASSERT_TRUE(absent) << absent.error().message;
  EXPECT_FALSE(*absent);

  auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  for (const auto& req : requests) {
    SCOPED_TRACE(req.method + " " + req.path);
    const auto& h = req.headers;
    ASSERT_TRUE(h.count("authorization") && h.count("x-amz-date") && h.count("host") &&
                h.count("x-amz-content-sha256"));
    EXPECT_EQ(h.at("x-amz-content-sha256"), store::sigv4::sha256_hex(req.body));
    // The signature, recomputed from the request as it arrived.
    store::sigv4::Request r;
    r.method = req.method;
    r.path = req.path;
    r.payload_sha256 = store::sigv4::sha256_hex(req.body);
    r.headers = {{"host", h.at("host")},
                 {"x-amz-content-sha256", h.at("x-amz-content-sha256")},
                 {"x-amz-date", h.at("x-amz-date")}};
    store::sigv4::Scope scope{h.at("x-amz-date"), "eu-west-1", "s3"};
    EXPECT_EQ(h.at("authorization"),
              store::sigv4::authorization("AKIDTEST", "test-secret-key", scope, r));
    EXPECT_NE(h.at("authorization").find("Credential=AKIDTEST/"), std::string::npos);
  }
  EXPECT_EQ(requests[0].method, "PUT");
  EXPECT_EQ(requests[0].path, "/bucket/hone/k1");
  EXPECT_EQ(requests[0].body, "object bytes");
  EXPECT_EQ(requests[1].method, "HEAD");
}
