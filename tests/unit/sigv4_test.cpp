// AWS Signature Version 4 (store/sigv4.*) against AWS's published examples: the S3 developer
// guide's "GET Object" example (the request, its canonical request, the string to sign and the
// signature), and requests of the Signature Version 4 test suite (get-vanilla, get-space, get-utf8,
// get-header-value-trim), each step checked where the example gives it.
#include "store/sigv4.hpp"

#include <gtest/gtest.h>

using namespace hone::store::sigv4;

namespace {

const char* k_empty_sha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

// The test suite's credentials, date and scope.
const char* k_suite_secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
const Scope k_suite_scope{"20150830T123600Z", "us-east-1", "service"};

Request suite_get(const std::string& path) {
  Request r;
  r.method = "GET";
  r.path = path;
  r.headers = {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}};
  r.payload_sha256 = k_empty_sha256;
  return r;
}

} // namespace

TEST(SigV4, S3GetObjectExample) {
  // GET /test.txt HTTP/1.1
  // Host: examplebucket.s3.amazonaws.com
  // Range: bytes=0-9
  // x-amz-content-sha256: e3b0...b855 (no payload)
  // x-amz-date: 20130524T000000Z
  Request r;
  r.method = "GET";
  r.path = "/test.txt";
  r.headers = {{"Host", "examplebucket.s3.amazonaws.com"},
               {"Range", "bytes=0-9"},
               {"x-amz-content-sha256", k_empty_sha256},
               {"x-amz-date", "20130524T000000Z"}};
  r.payload_sha256 = k_empty_sha256;
  const std::string creq = canonical_request(r);
  EXPECT_EQ(creq, std::string("GET\n/test.txt\n\n"
                              "host:examplebucket.s3.amazonaws.com\n"
                              "range:bytes=0-9\n"
                              "x-amz-content-sha256:") +
                      k_empty_sha256 +
                      "\nx-amz-date:20130524T000000Z\n\n"
                      "host;range;x-amz-content-sha256;x-amz-date\n" +
                      k_empty_sha256);
  Scope scope{"20130524T000000Z", "us-east-1", "s3"};
  const std::string sts = string_to_sign(scope, creq);
  EXPECT_EQ(sts, "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
                 "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
  const std::string secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
  EXPECT_EQ(signature(secret, scope, sts),
            "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  EXPECT_EQ(authorization("AKIAIOSFODNN7EXAMPLE", secret, scope, r),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST(SigV4, TestSuiteGetVanilla) {
  Request r = suite_get("/");
  EXPECT_EQ(canonical_request(r), std::string("GET\n/\n\nhost:example.amazonaws.com\n"
                                              "x-amz-date:20150830T123600Z\n\nhost;x-amz-date\n") +
                                      k_empty_sha256);
  EXPECT_EQ(authorization("AKIDEXAMPLE", k_suite_secret, k_suite_scope, r),
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
            "SignedHeaders=host;x-amz-date, "
            "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
}

TEST(SigV4, TestSuitePathsAreEscaped) {
  // normalize-path/get-space: GET /example space/
  Request space = suite_get("/example space/");
  EXPECT_NE(canonical_request(space).find("\n/example%20space/\n"), std::string::npos)
      << canonical_request(space);
  EXPECT_EQ(authorization("AKIDEXAMPLE", k_suite_secret, k_suite_scope, space),
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
            "SignedHeaders=host;x-amz-date, "
            "Signature=652487583200325589f1fba4c7e578f72c47cb61beeca81406b39ddec1366741");
  // get-utf8: GET /ሴ (U+1234)
  Request utf8 = suite_get("/\xe1\x88\xb4");
  EXPECT_EQ(canonical_request(utf8), std::string("GET\n/%E1%88%B4\n\nhost:example.amazonaws.com\n"
                                                 "x-amz-date:20150830T123600Z\n\nhost;x-amz-date\n") +
                                         k_empty_sha256);
}

TEST(SigV4, TestSuiteHeaderValuesAreTrimmedAndNamesSorted) {
  // get-header-value-trim: My-Header1: " value1", My-Header2: "\"a   b   c\""
  Request r = suite_get("/");
  r.headers.emplace_back("My-Header1", " value1");
  r.headers.emplace_back("My-Header2", "\"a   b   c\"");
  EXPECT_EQ(canonical_request(r),
            std::string("GET\n/\n\nhost:example.amazonaws.com\nmy-header1:value1\n"
                        "my-header2:\"a b c\"\nx-amz-date:20150830T123600Z\n\n"
                        "host;my-header1;my-header2;x-amz-date\n") +
                k_empty_sha256);
  EXPECT_EQ(signed_headers(r), "host;my-header1;my-header2;x-amz-date");
}

TEST(SigV4, QueryIsSortedAndEscaped) {
  Request r = suite_get("/");
  r.query = {{"Param2", "value2"}, {"Param1", "value 1"}};
  EXPECT_NE(canonical_request(r).find("\nParam1=value%201&Param2=value2\n"), std::string::npos)
      << canonical_request(r);
  EXPECT_EQ(sha256_hex(""), k_empty_sha256);
}
