#include "store/remote.hpp"

#include "store/sigv4.hpp"

#include <curl/curl.h>
#include <hiredis/hiredis.h>
#include <sys/stat.h>

#include <cctype>
#include <cerrno>
#include <ctime>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <vector>

namespace hone::store::remote {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// %XX escapes in the user-information part of a URL.
Result<std::string> unescape(std::string_view s, const char* what) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size() || !std::isxdigit(static_cast<unsigned char>(s[i + 1])) ||
        !std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      return make_error(std::string("a bad %-escape in the ") + what);
    }
    out += char(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
    i += 2;
  }
  return out;
}

bool valid_key(const std::string& key) {
  if (key.empty() || key.size() > 512) return false;
  for (char c : key) {
    if (c <= ' ' || c > '~' || c == '/') return false;
  }
  return true;
}

Result<void> check_key(const std::string& key) {
  if (!valid_key(key)) return make_error("a remote key must be 1-512 printable characters without '/'");
  return ok();
}

std::string size_text(uint64_t n) {
  return std::to_string(n) + " bytes";
}

// The host as a URL writes it: an IPv6 address in brackets.
std::string url_host(const std::string& host) {
  return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

} // namespace

Result<Endpoint> parse_url(std::string_view text) {
  Endpoint e;
  std::string_view url = text;
  std::string_view attrs;
  if (size_t bar = text.find('|'); bar != std::string_view::npos) {
    url = text.substr(0, bar);
    attrs = text.substr(bar + 1);
  }
  size_t colon = url.find("://");
  if (colon == std::string_view::npos) {
    return make_error("a remote URL needs a scheme (redis://, http:// or https://)");
  }
  std::string scheme = lower(url.substr(0, colon));
  std::string_view rest = url.substr(colon + 3);
  if (scheme == "redis") {
    e.scheme = Scheme::redis;
    e.port = 6379;
  } else if (scheme == "rediss") {
    return make_error("rediss:// (Redis over TLS) needs hiredis 1.0 or later with TLS; this build "
                      "has hiredis " +
                      std::to_string(HIREDIS_MAJOR) + "." + std::to_string(HIREDIS_MINOR) +
                      ": use redis:// on a trusted network, or an https:// object store");
  } else if (scheme == "http") {
    e.scheme = Scheme::http;
    e.port = 80;
  } else if (scheme == "https") {
    e.scheme = Scheme::https;
    e.port = 443;
  } else {
    return make_error("unknown remote scheme '" + scheme +
                      "://' (redis://, http:// or https:// are supported)");
  }
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  if (size_t at = authority.rfind('@'); at != std::string_view::npos) {
    if (e.scheme != Scheme::redis) {
      return make_error("credentials in an http(s) URL are not accepted (they would be logged "
                        "and sent unsigned): use |sigv4= with the keys in the environment or a "
                        "0600 file");
    }
    std::string_view userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    size_t c = userinfo.find(':');
    if (c == std::string_view::npos) {
      auto p = unescape(userinfo, "password");
      if (!p) return p.error();
      e.password = *p;
    } else {
      auto u = unescape(userinfo.substr(0, c), "user name");
      if (!u) return u.error();
      auto p = unescape(userinfo.substr(c + 1), "password");
      if (!p) return p.error();
      e.user = *u;
      e.password = *p;
    }
  }
  std::string_view host = authority, port;
  bool has_port = false;
  if (!authority.empty() && authority.front() == '[') {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return make_error("an IPv6 host without its ']'");
    host = authority.substr(1, close - 1);
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return make_error("unexpected text after the IPv6 host");
      port = after.substr(1);
      has_port = true;
    }
  } else if (size_t c = authority.rfind(':'); c != std::string_view::npos) {
    host = authority.substr(0, c);
    port = authority.substr(c + 1);
    has_port = true;
  }
  if (has_port) {
    uint32_t p = 0;
    bool good = !port.empty() && port.size() <= 5;
    for (char ch : port) {
      good = good && std::isdigit(static_cast<unsigned char>(ch));
      if (good) p = p * 10 + uint32_t(ch - '0');
    }
    if (!good || p == 0 || p > 65535) return make_error("a bad port in the remote URL");
    e.port = uint16_t(p);
  }
  if (host.empty()) return make_error("a remote URL needs a host");
  e.host = std::string(host);
  if (e.scheme == Scheme::redis) {
    if (!path.empty() && path != "/") {
      std::string_view db = path.substr(1);
      uint32_t n = 0;
      if (db.empty() || db.size() > 5) return make_error("a redis URL's path is its database number");
      for (char ch : db) {
        if (!std::isdigit(static_cast<unsigned char>(ch))) {
          return make_error("a redis URL's path is its database number");
        }
        n = n * 10 + uint32_t(ch - '0');
      }
      e.db = n;
    }
  } else {
    std::string p(path);
    while (!p.empty() && p.back() == '/') p.pop_back();
    for (char ch : p) {
      if (ch <= ' ' || ch > '~' || ch == '?' || ch == '#') {
        return make_error("an http(s) URL's path may hold printable characters only, no query");
      }
    }
    e.prefix = p;
  }
  // Attributes, as ccache writes them: |read-only|sigv4=region:service|credentials=/path
  while (!attrs.empty()) {
    size_t bar = attrs.find('|');
    std::string_view a = attrs.substr(0, bar);
    attrs = bar == std::string_view::npos ? std::string_view() : attrs.substr(bar + 1);
    if (a.empty()) continue;
    if (a == "read-only") {
      e.read_only = true;
    } else if (a.substr(0, 6) == "sigv4=") {
      if (e.scheme == Scheme::redis) return make_error("sigv4 applies to http(s) remotes only");
      std::string v(a.substr(6));
      size_t c = v.find(':');
      if (c == std::string::npos || c == 0 || c + 1 == v.size()) {
        return make_error("sigv4 wants REGION:SERVICE (for example us-east-1:s3)");
      }
      e.sigv4 = v;
    } else if (a.substr(0, 12) == "credentials=") {
      e.credentials_file = std::string(a.substr(12));
      if (e.credentials_file.empty() || e.credentials_file.front() != '/') {
        return make_error("credentials= wants an absolute path");
      }
    } else {
      return make_error("unknown remote attribute '" + std::string(a) +
                        "' (read-only, sigv4=REGION:SERVICE, credentials=PATH)");
    }
  }
  if (!e.credentials_file.empty() && e.sigv4.empty()) {
    return make_error("credentials= is for sigv4 signing: add |sigv4=REGION:SERVICE");
  }
  // What may be shown: the URL without its password.
  std::string shown = scheme + "://";
  if (!e.user.empty()) shown += e.user + ":***@";
  else if (!e.password.empty()) shown += "***@";
  shown += url_host(e.host) + ":" + std::to_string(e.port);
  if (e.scheme == Scheme::redis) shown += "/" + std::to_string(e.db);
  else shown += e.prefix;
  if (e.read_only) shown += "|read-only";
  if (!e.sigv4.empty()) shown += "|sigv4=" + e.sigv4;
  e.display = shown;
  return e;
}

namespace {

// --- Redis ----------------------------------------------------------------------------------

class RedisBackend final : public Backend {
public:
  RedisBackend(Endpoint e, Limits l) : Backend(std::move(e), l) {}
  ~RedisBackend() override { drop(); }

  Result<std::optional<std::string>> get(const std::string& key) override {
    if (auto k = check_key(key); !k) return k.error();
    // The size first, so that an oversized object is refused without reading it.
    auto len = command({"STRLEN", key});
    if (!len) return len.error();
    if ((*len)->type != REDIS_REPLY_INTEGER) return unexpected("STRLEN", **len);
    long long n = (*len)->integer;
    if (n == 0) {
      auto there = exists(key);
      if (!there) return there.error();
      if (!*there) return std::optional<std::string>();
    }
    if (uint64_t(n) > m_limits.max_object_bytes) {
      return make_error(where() + ": object " + key + " has " + size_text(uint64_t(n)) +
                        ", over the limit of " + size_text(m_limits.max_object_bytes));
    }
    auto r = command({"GET", key});
    if (!r) return r.error();
    if ((*r)->type == REDIS_REPLY_NIL) return std::optional<std::string>();
    if ((*r)->type != REDIS_REPLY_STRING) return unexpected("GET", **r);
    if (uint64_t((*r)->len) > m_limits.max_object_bytes) {
      return make_error(where() + ": object " + key + " is over the size limit");
    }
    return std::optional<std::string>(std::string((*r)->str, (*r)->len));
  }

  Result<void> put(const std::string& key, std::string_view bytes) override {
    if (auto k = check_key(key); !k) return k.error();
    if (m_endpoint.read_only) return make_error(where() + " is read-only");
    if (bytes.size() > m_limits.max_object_bytes) {
      return make_error("an object of " + size_text(bytes.size()) + " is over the limit of " +
                        size_text(m_limits.max_object_bytes));
    }
    auto r = command({"SET", key, bytes});
    if (!r) return r.error();
    if ((*r)->type != REDIS_REPLY_STATUS) return unexpected("SET", **r);
    return ok();
  }

  Result<bool> create(const std::string& key, std::string_view bytes) override {
    if (auto k = check_key(key); !k) return k.error();
    if (m_endpoint.read_only) return make_error(where() + " is read-only");
    if (bytes.size() > m_limits.max_object_bytes) {
      return make_error("an object of " + size_text(bytes.size()) + " is over the limit of " +
                        size_text(m_limits.max_object_bytes));
    }
    // SET ... NX answers OK when it wrote, a nil reply when the key existed.
    auto r = command({"SET", key, bytes, "NX"});
    if (!r) return r.error();
    if ((*r)->type == REDIS_REPLY_NIL) return false;
    if ((*r)->type != REDIS_REPLY_STATUS) return unexpected("SET NX", **r);
    return true;
  }

  Result<bool> exists(const std::string& key) override {
    if (auto k = check_key(key); !k) return k.error();
    auto r = command({"EXISTS", key});
    if (!r) return r.error();
    if ((*r)->type != REDIS_REPLY_INTEGER) return unexpected("EXISTS", **r);
    return (*r)->integer > 0;
  }

private:
  struct ReplyFree {
    void operator()(redisReply* r) const { freeReplyObject(r); }
  };
  using Reply = std::unique_ptr<redisReply, ReplyFree>;

  std::string where() const { return m_endpoint.display; }

  Error unexpected(const char* what, const redisReply& r) {
    std::string text = r.type == REDIS_REPLY_ERROR ? std::string(r.str, r.len) : "a reply of type " + std::to_string(r.type);
    if (text.size() > 200) text.resize(200);
    return make_error(where() + ": " + what + " answered " + text);
  }

  static timeval to_timeval(std::chrono::milliseconds ms) {
    timeval tv{};
    tv.tv_sec = ms.count() / 1000;
    tv.tv_usec = (ms.count() % 1000) * 1000;
    return tv;
  }

  void drop() {
    if (m_c) redisFree(m_c);
    m_c = nullptr;
  }

  Result<redisContext*> context() {
    if (m_c) return m_c;
    redisContext* c =
        redisConnectWithTimeout(m_endpoint.host.c_str(), m_endpoint.port, to_timeval(m_limits.connect_timeout));
    if (!c) return make_error(where() + ": cannot allocate a connection");
    if (c->err) {
      std::string why = c->errstr;
      redisFree(c);
      return make_error(where() + ": cannot connect: " + why);
    }
    redisSetTimeout(c, to_timeval(m_limits.timeout));
    m_c = c;
    if (!m_endpoint.password.empty()) {
      std::vector<std::string_view> auth{"AUTH"};
      if (!m_endpoint.user.empty()) auth.push_back(m_endpoint.user);
      auth.push_back(m_endpoint.password);
      auto r = command(auth);
      if (!r) return r.error();
      if ((*r)->type != REDIS_REPLY_STATUS) {
        drop();
        return make_error(where() + ": AUTH was refused (check the user and password)");
      }
    }
    if (m_endpoint.db != 0) {
      std::string db = std::to_string(m_endpoint.db);
      auto r = command({"SELECT", db});
      if (!r) return r.error();
      if ((*r)->type != REDIS_REPLY_STATUS) {
        Error e = unexpected("SELECT", **r);
        drop();
        return e;
      }
    }
    return m_c;
  }

  Result<Reply> command(std::vector<std::string_view> args) {
    auto c = context();
    if (!c) return c.error();
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (auto a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(
        redisCommandArgv(*c, int(argv.size()), argv.data(), lens.data()));
    if (!r) {
      std::string why = (*c)->errstr[0] ? (*c)->errstr : "no reply";
      if ((*c)->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        why = "no answer within " + std::to_string(m_limits.timeout.count()) + " ms";
      }
      drop(); // the connection is in an unknown state: a fresh one next time
      return make_error(where() + ": " + std::string(args.front()) + " failed: " + why);
    }
    return Reply(r);
  }

  redisContext* m_c = nullptr;
};

// --- HTTP -----------------------------------------------------------------------------------

struct Keys {
  std::string id, secret, token;
};

Result<Keys> sigv4_keys(const Endpoint& e) {
  Keys k;
  if (!e.credentials_file.empty()) {
    struct stat st {};
    if (::stat(e.credentials_file.c_str(), &st) != 0) {
      return make_error("the sigv4 credentials file " + e.credentials_file + " cannot be read");
    }
    if (st.st_mode & 077) {
      return make_error("the sigv4 credentials file " + e.credentials_file +
                        " is readable by others: chmod 600 it");
    }
    std::ifstream in(e.credentials_file);
    std::string line;
    while (std::getline(in, line)) {
      size_t eq = line.find('=');
      if (eq == std::string::npos) continue;
      std::string name = line.substr(0, eq), value = line.substr(eq + 1);
      auto trim = [](std::string& s) {
        while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
        size_t i = 0;
        while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
        s.erase(0, i);
      };
      trim(name);
      trim(value);
      if (name == "AWS_ACCESS_KEY_ID") k.id = value;
      else if (name == "AWS_SECRET_ACCESS_KEY") k.secret = value;
      else if (name == "AWS_SESSION_TOKEN") k.token = value;
    }
  } else {
    auto env = [](const char* n) {
      const char* v = std::getenv(n);
      return std::string(v ? v : "");
    };
    k.id = env("AWS_ACCESS_KEY_ID");
    k.secret = env("AWS_SECRET_ACCESS_KEY");
    k.token = env("AWS_SESSION_TOKEN");
  }
  if (k.id.empty() || k.secret.empty()) {
    return make_error(e.display + ": sigv4 needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (" +
                      (e.credentials_file.empty() ? std::string("in the environment")
                                                  : "in " + e.credentials_file) +
                      ")");
  }
  return k;
}

class HttpBackend final : public Backend {
public:
  HttpBackend(Endpoint e, Limits l, std::optional<Keys> keys)
      : Backend(std::move(e), l), m_keys(std::move(keys)) {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  }

  Result<std::optional<std::string>> get(const std::string& key) override {
    if (auto k = check_key(key); !k) return k.error();
    auto r = request("GET", key, {});
    if (!r) return r.error();
    if (r->status == 404) return std::optional<std::string>();
    if (r->status != 200) return status_error("GET", key, *r);
    // An object is bytes; a proxy's or a login page's HTML in its place is not one.
    std::string type = lower(r->content_type);
    if (!type.empty() && type.rfind("application/octet-stream", 0) != 0 &&
        type.rfind("binary/octet-stream", 0) != 0) {
      return make_error(m_endpoint.display + ": GET " + key + " answered with Content-Type '" +
                        r->content_type + "', not application/octet-stream: not an object");
    }
    return std::optional<std::string>(std::move(r->body));
  }

  Result<void> put(const std::string& key, std::string_view bytes) override {
    if (auto k = check_key(key); !k) return k.error();
    if (m_endpoint.read_only) return make_error(m_endpoint.display + " is read-only");
    if (bytes.size() > m_limits.max_object_bytes) {
      return make_error("an object of " + size_text(bytes.size()) + " is over the limit of " +
                        size_text(m_limits.max_object_bytes));
    }
    auto r = request("PUT", key, bytes);
    if (!r) return r.error();
    if (r->status != 200 && r->status != 201 && r->status != 204) return status_error("PUT", key, *r);
    return ok();
  }

  Result<bool> create(const std::string& key, std::string_view bytes) override {
    if (auto k = check_key(key); !k) return k.error();
    if (m_endpoint.read_only) return make_error(m_endpoint.display + " is read-only");
    if (bytes.size() > m_limits.max_object_bytes) {
      return make_error("an object of " + size_text(bytes.size()) + " is over the limit of " +
                        size_text(m_limits.max_object_bytes));
    }
    auto there = exists(key);
    if (!there) return there.error();
    if (*there) return false;
    auto r = request("PUT", key, bytes, /*if_none_match=*/true);
    if (!r) return r.error();
    if (r->status == 412) return false; // it appeared since the HEAD
    if (r->status != 200 && r->status != 201 && r->status != 204) return status_error("PUT", key, *r);
    return true;
  }

  Result<bool> exists(const std::string& key) override {
    if (auto k = check_key(key); !k) return k.error();
    auto r = request("HEAD", key, {});
    if (!r) return r.error();
    if (r->status == 404) return false;
    if (r->status == 200) return true;
    return status_error("HEAD", key, *r);
  }

private:
  struct Reply {
    long status = 0;
    std::string body;
    std::string content_type;
    bool too_large = false;
  };

  Error status_error(const char* method, const std::string& key, const Reply& r) {
    return make_error(m_endpoint.display + ": " + method + " " + key + " answered HTTP " +
                      std::to_string(r.status));
  }

  static size_t on_data(char* p, size_t size, size_t n, void* user) {
    auto* self = static_cast<std::pair<Reply*, uint64_t>*>(user);
    if (self->first->body.size() + size * n > self->second) {
      self->first->too_large = true;
      return 0; // ends the transfer
    }
    self->first->body.append(p, size * n);
    return size * n;
  }

  Result<Reply> request(const char* method, const std::string& key, std::string_view body,
                        bool if_none_match = false) {
    CURL* c = curl_easy_init();
    if (!c) return make_error("cannot start a curl handle");
    struct Cleanup {
      CURL* c;
      curl_slist* headers = nullptr;
      ~Cleanup() {
        curl_slist_free_all(headers);
        curl_easy_cleanup(c);
      }
    } cleanup{c};
    std::string url = std::string(m_endpoint.scheme == Scheme::https ? "https://" : "http://") +
                      url_host(m_endpoint.host) + ":" + std::to_string(m_endpoint.port) +
                      m_endpoint.prefix + "/" + key;
    Reply reply;
    std::pair<Reply*, uint64_t> sink{&reply, m_limits.max_object_bytes};
    char error[CURL_ERROR_SIZE] = {};
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, long(m_limits.connect_timeout.count()));
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, long(m_limits.timeout.count()));
    curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(m_limits.max_object_bytes));
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "hone");
    if (std::string_view(method) == "HEAD") {
      curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    } else if (std::string_view(method) == "PUT") {
      curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "PUT");
      curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
      curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.size()));
      cleanup.headers = curl_slist_append(cleanup.headers, "Content-Type: application/octet-stream");
      cleanup.headers = curl_slist_append(cleanup.headers, "Expect:");
      if (if_none_match) cleanup.headers = curl_slist_append(cleanup.headers, "If-None-Match: *");
    }
    if (m_keys) {
      for (const auto& h : sign(method, key, body)) cleanup.headers = curl_slist_append(cleanup.headers, h.c_str());
    }
    if (cleanup.headers) curl_easy_setopt(c, CURLOPT_HTTPHEADER, cleanup.headers);
    CURLcode rc = curl_easy_perform(c);
    if (reply.too_large || rc == CURLE_FILESIZE_EXCEEDED) {
      return make_error(m_endpoint.display + ": " + method + " " + key +
                        ": the object is over the limit of " + size_text(m_limits.max_object_bytes));
    }
    if (rc != CURLE_OK) {
      return make_error(m_endpoint.display + ": " + method + " " + key + " failed: " +
                        (error[0] ? error : curl_easy_strerror(rc)));
    }
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &reply.status);
    char* type = nullptr;
    curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &type);
    if (type) reply.content_type = type;
    return reply;
  }

  // The headers of a request signed with AWS Signature Version 4 (sigv4.hpp): Host as curl sends
  // it, the time, the payload's hash, the session token, and Authorization over all of them.
  std::vector<std::string> sign(const char* method, const std::string& key, std::string_view body) {
    bool default_port = (m_endpoint.scheme == Scheme::https && m_endpoint.port == 443) ||
                        (m_endpoint.scheme == Scheme::http && m_endpoint.port == 80);
    std::string host = url_host(m_endpoint.host);
    if (!default_port) host += ":" + std::to_string(m_endpoint.port);
    char stamp[32];
    std::time_t now = std::time(nullptr);
    std::tm utc{};
    gmtime_r(&now, &utc);
    std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &utc);
    size_t colon = m_endpoint.sigv4.find(':');
    sigv4::Scope scope{stamp, m_endpoint.sigv4.substr(0, colon), m_endpoint.sigv4.substr(colon + 1)};
    sigv4::Request r;
    r.method = method;
    r.path = m_endpoint.prefix + "/" + key;
    r.payload_sha256 = sigv4::sha256_hex(body);
    r.headers = {{"host", host}, {"x-amz-content-sha256", r.payload_sha256}, {"x-amz-date", stamp}};
    if (!m_keys->token.empty()) r.headers.emplace_back("x-amz-security-token", m_keys->token);
    std::vector<std::string> out;
    for (const auto& [name, value] : r.headers) out.push_back(name + ": " + value);
    out.push_back("Authorization: " + sigv4::authorization(m_keys->id, m_keys->secret, scope, r));
    return out;
  }

  std::optional<Keys> m_keys;
};

} // namespace

Result<std::unique_ptr<Backend>> connect(const Endpoint& endpoint, const Limits& limits) {
  if (endpoint.scheme == Scheme::redis) {
    return std::unique_ptr<Backend>(new RedisBackend(endpoint, limits));
  }
  std::optional<Keys> keys;
  if (!endpoint.sigv4.empty()) {
    auto k = sigv4_keys(endpoint);
    if (!k) return k.error();
    keys = std::move(*k);
  }
  return std::unique_ptr<Backend>(new HttpBackend(endpoint, limits, std::move(keys)));
}

} // namespace hone::store::remote
