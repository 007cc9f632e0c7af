// The store's remote tier (issue 15, store/README.md "Remote tier"): objects kept on engines an
// operator already runs, named by URL as ccache names its remote storage. This file is the
// transport only: a URL parsed into an endpoint, and a backend that gets and puts whole objects
// with bounded time and size. What the objects hold, and that nothing fetched is trusted before
// this host has validated it, is the daemon's business.
//
//   redis://[user:password@]host[:port][/db]     Redis or Valkey (hiredis): GET, SET, EXISTS
//   http://host[:port]/prefix                    plain GET, PUT and HEAD on <prefix>/<key>
//   https://host[:port]/prefix                   (WebDAV servers such as nginx's dav module;
//                                                 S3-compatible stores with sigv4 credentials)
//
// An attribute list may follow the URL after '|', as ccache writes it: `|read-only` (never
// written), `|sigv4=REGION:SERVICE` (sign HTTP requests with AWS Signature Version 4; the keys
// come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or a 0600 file named by
// `|credentials=PATH`). Passwords and keys never appear in `Endpoint::display`, logs or errors.
#pragma once

#include "common/result.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace hone::store::remote {

enum class Scheme { redis, http, https };

struct Endpoint {
  Scheme scheme = Scheme::redis;
  std::string host;
  uint16_t port = 0;
  std::string user;      // redis ACL user (empty: the default user)
  std::string password;  // redis AUTH password (secret)
  uint32_t db = 0;       // redis database
  std::string prefix;    // http: the path objects go under, without a trailing '/'
  bool read_only = false;
  std::string sigv4;            // "region:service" when HTTP requests are signed
  std::string credentials_file; // where the sigv4 keys are, else the environment
  // The URL as it may be shown: no password, attributes after '|'.
  std::string display;
};

// Parses one entry of `[store.remote] urls`. Errors name the part that is wrong.
Result<Endpoint> parse_url(std::string_view text);

struct Limits {
  std::chrono::milliseconds connect_timeout{1000};
  std::chrono::milliseconds timeout{3000};  // a whole request, connect included
  uint64_t max_object_bytes = 64ull << 20;  // larger objects are refused, both ways
};

// One remote. A backend is used from one thread at a time; requests block for at most the
// limits' timeout. Keys are printable ASCII without '/' or whitespace (the caller's hex names).
class Backend {
public:
  virtual ~Backend() = default;
  // The object, or nullopt when the remote does not have it.
  virtual Result<std::optional<std::string>> get(const std::string& key) = 0;
  // Refused for a read-only endpoint.
  virtual Result<void> put(const std::string& key, std::string_view bytes) = 0;
  virtual Result<bool> exists(const std::string& key) = 0;
  // Writes `bytes` under `key` only if nothing is there yet: true when written, false when the key
  // already held something (left as it was). Refused for a read-only endpoint. Redis: SET NX, one
  // atomic step. HTTP: HEAD, then PUT with `If-None-Match: *` (RFC 9110 section 13.1.2), which
  // S3 and servers that honour the header refuse with 412 when the key appeared in between;
  // nginx's dav module ignores the header, so there two writers racing can both write.
  virtual Result<bool> create(const std::string& key, std::string_view bytes) = 0;
  const Endpoint& endpoint() const { return m_endpoint; }

protected:
  Backend(Endpoint e, Limits l) : m_endpoint(std::move(e)), m_limits(l) {}
  Endpoint m_endpoint;
  Limits m_limits;
};

// A backend for `endpoint`; nothing is contacted until the first request. An error when the
// endpoint cannot work in this build (rediss://, sigv4 keys missing or readable by others).
Result<std::unique_ptr<Backend>> connect(const Endpoint& endpoint, const Limits& limits = {});

} // namespace hone::store::remote
