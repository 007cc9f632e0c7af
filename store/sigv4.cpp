#include "store/sigv4.hpp"

#include <sodium.h>

#include <algorithm>
#include <cctype>

namespace hone::store::sigv4 {

namespace {

// libsodium wants sodium_init() before its first use.
void init_sodium() {
  static const int once = sodium_init();
  (void)once;
}

std::string hex(const unsigned char* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    out += digits[p[i] >> 4];
    out += digits[p[i] & 15];
  }
  return out;
}

std::string hmac(std::string_view key, std::string_view data) {
  init_sodium();
  crypto_auth_hmacsha256_state st;
  crypto_auth_hmacsha256_init(&st, reinterpret_cast<const unsigned char*>(key.data()), key.size());
  crypto_auth_hmacsha256_update(&st, reinterpret_cast<const unsigned char*>(data.data()),
                                data.size());
  unsigned char out[crypto_auth_hmacsha256_BYTES];
  crypto_auth_hmacsha256_final(&st, out);
  return std::string(reinterpret_cast<const char*>(out), sizeof out);
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Leading and trailing spaces dropped, inner runs of spaces one space.
std::string trim_value(std::string_view v) {
  std::string out;
  bool space = false;
  for (char c : v) {
    if (c == ' ' || c == '\t') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> canonical_headers(const Request& r) {
  std::vector<std::pair<std::string, std::string>> h;
  for (const auto& [name, value] : r.headers) {
    std::string n = lower(name), v = trim_value(value);
    auto it = std::find_if(h.begin(), h.end(), [&](const auto& p) { return p.first == n; });
    if (it != h.end()) {
      it->second += "," + v; // a repeated header: its values in order, comma-separated
    } else {
      h.emplace_back(n, v);
    }
  }
  std::sort(h.begin(), h.end());
  return h;
}

} // namespace

std::string sha256_hex(std::string_view bytes) {
  init_sodium();
  unsigned char out[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(out, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  return hex(out, sizeof out);
}

std::string uri_escape(std::string_view s, bool keep_slash) {
  static const char* digits = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out += char(c);
    } else {
      out += '%';
      out += digits[c >> 4];
      out += digits[c & 15];
    }
  }
  return out;
}

std::string signed_headers(const Request& request) {
  std::string out;
  for (const auto& [name, value] : canonical_headers(request)) {
    if (!out.empty()) out += ';';
    out += name;
  }
  return out;
}

std::string canonical_request(const Request& request) {
  std::vector<std::pair<std::string, std::string>> query;
  for (const auto& [name, value] : request.query)
    query.emplace_back(uri_escape(name, false), uri_escape(value, false));
  std::sort(query.begin(), query.end());
  std::string q;
  for (const auto& [name, value] : query) {
    if (!q.empty()) q += '&';
    q += name + "=" + value;
  }
  std::string out = request.method + "\n" + uri_escape(request.path.empty() ? "/" : request.path, true) +
                    "\n" + q + "\n";
  for (const auto& [name, value] : canonical_headers(request)) out += name + ":" + value + "\n";
  out += "\n" + signed_headers(request) + "\n" + request.payload_sha256;
  return out;
}

std::string string_to_sign(const Scope& scope, std::string_view canonical) {
  return "AWS4-HMAC-SHA256\n" + scope.date_time + "\n" + scope.date_time.substr(0, 8) + "/" +
         scope.region + "/" + scope.service + "/aws4_request\n" + sha256_hex(canonical);
}

std::string signature(std::string_view secret, const Scope& scope, std::string_view to_sign) {
  std::string k = hmac("AWS4" + std::string(secret), scope.date_time.substr(0, 8));
  k = hmac(k, scope.region);
  k = hmac(k, scope.service);
  k = hmac(k, "aws4_request");
  std::string s = hmac(k, to_sign);
  return hex(reinterpret_cast<const unsigned char*>(s.data()), s.size());
}

std::string authorization(std::string_view access_key_id, std::string_view secret,
                          const Scope& scope, const Request& request) {
  std::string creq = canonical_request(request);
  std::string sig = signature(secret, scope, string_to_sign(scope, creq));
  return "AWS4-HMAC-SHA256 Credential=" + std::string(access_key_id) + "/" +
         scope.date_time.substr(0, 8) + "/" + scope.region + "/" + scope.service +
         "/aws4_request, SignedHeaders=" + signed_headers(request) + ", Signature=" + sig;
}

} // namespace hone::store::sigv4
