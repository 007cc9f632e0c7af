// AWS Signature Version 4 for the remote tier's S3-compatible stores (store/README.md, "Remote
// tier"): the canonical request, the string to sign and the signature, each step a function of its
// own so that the tests check every one against AWS's published examples. Hashes and HMACs come
// from libsodium.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hone::store::sigv4 {

struct Request {
  std::string method;                                        // GET, PUT, HEAD
  std::string path;                                          // as sent, not yet escaped ("/a b/c")
  std::vector<std::pair<std::string, std::string>> query;    // unescaped names and values
  std::vector<std::pair<std::string, std::string>> headers;  // every header that is signed
  std::string payload_sha256;                                // lowercase hex of the body's SHA-256
};

struct Scope {
  std::string date_time; // 20150830T123600Z
  std::string region;    // us-east-1
  std::string service;   // s3
};

// Lowercase hex SHA-256 of `bytes`.
std::string sha256_hex(std::string_view bytes);

// RFC 3986 escaping as SigV4 wants it: unreserved characters kept, everything else %XX in upper
// case; '/' kept when `keep_slash` (paths).
std::string uri_escape(std::string_view s, bool keep_slash);

// The canonical request: method, escaped path, sorted query, sorted lowercase headers with
// trimmed values (inner runs of spaces made one), the signed header list, the payload hash.
std::string canonical_request(const Request& request);
// "host;x-amz-date": the names canonical_request() signed.
std::string signed_headers(const Request& request);

// "AWS4-HMAC-SHA256\n<date_time>\n<date>/<region>/<service>/aws4_request\n<hex sha256 of creq>".
std::string string_to_sign(const Scope& scope, std::string_view canonical);

// Lowercase hex HMAC chain: kSecret = "AWS4" + secret, then date, region, service,
// "aws4_request", then the string to sign.
std::string signature(std::string_view secret, const Scope& scope, std::string_view to_sign);

// The Authorization header's value.
std::string authorization(std::string_view access_key_id, std::string_view secret,
                          const Scope& scope, const Request& request);

} // namespace hone::store::sigv4
