// The HTTP request parser (http/request_parser.h) on well-formed and malformed bytes: every
// malformed input is a 400 (or 501) with a reason, never an exception or a crash.

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "http/chunked_decoder.h"
#include "http/request_parser.h"

namespace carma::http {
namespace {

using testing::HasSubstr;

// This test verifies a plain request: method, path, version, headers whose names ignore case,
// and the query decoded ('%XX' and '+' as a space).
TEST(RequestParserTest, ReadsARequestHead) {
    Request req;
    const std::string head =
        "GET /v1/tasks/%34%32?all=1&name=a+b%20c&x=&flag HTTP/1.1\r\nHost: localhost\r\n"
        "content-TYPE:  application/json \r\nX-Two: 1\r\nX-Two: 2\r\n\r\n";
    ASSERT_EQ(head_end(head), head.size());
    ASSERT_FALSE(parse_head(head, req));
    EXPECT_EQ(req.method, "GET");
    EXPECT_EQ(req.path, "/v1/tasks/42");
    EXPECT_EQ(req.version, "HTTP/1.1");
    EXPECT_EQ(req.get_header_value("Content-Type"), "application/json");
    EXPECT_EQ(req.get_header_value("x-two"), "1");
    EXPECT_TRUE(req.has_header("HOST"));
    EXPECT_FALSE(req.has_header("Origin"));
    EXPECT_EQ(req.get_header_value("Origin"), "");
    EXPECT_EQ(req.get_param_value("all"), "1");
    EXPECT_EQ(req.get_param_value("name"), "a b c");
    EXPECT_TRUE(req.has_param("x"));
    EXPECT_EQ(req.get_param_value("x"), "");
    EXPECT_TRUE(req.has_param("flag"));
    EXPECT_FALSE(req.has_param("missing"));
}

// This test verifies where a head ends: at its blank line (CRLF or a bare LF), not before
// it has come, and after empty lines that precede the request line.
TEST(RequestParserTest, FindsTheEndOfTheHead) {
    EXPECT_EQ(head_end("GET / HTTP/1.1\r\nHost: x\r\n"), std::string_view::npos);
    EXPECT_EQ(head_end("GET / HTTP/1.1\r\nHost: x\r\n\r"), std::string_view::npos);
    EXPECT_EQ(head_end("GET / HTTP/1.1\r\n\r\nbody"), 18u);
    EXPECT_EQ(head_end("GET / HTTP/1.1\n\nbody"), 16u);
    EXPECT_EQ(head_end("\r\n\r\nGET / HTTP/1.0\r\n\r\n"), 22u);
    Request req;
    ASSERT_FALSE(parse_head("\r\nGET /x HTTP/1.0\nA: b\n\n", req));
    EXPECT_EQ(req.path, "/x");
    EXPECT_EQ(req.version, "HTTP/1.0");
    EXPECT_EQ(req.get_header_value("a"), "b");
}

struct Bad {
    std::string head;
    std::string says;
};

// This test verifies that malformed heads are 400 with a reason: the request line, the
// target, the version, the method, header lines, percent-encoding, a second '?'.
TEST(RequestParserTest, MalformedHeadsAreRefusedWithAReason) {
    const std::vector<Bad> cases = {
        {"GET /\r\n\r\n", "not METHOD TARGET HTTP/1.1"},
        {"GET  / HTTP/1.1\r\n\r\n", "not METHOD TARGET"},
        {"GET / HTTP/1.1 extra\r\n\r\n", "not METHOD TARGET HTTP/1.1"},
        {"GET http://x/ HTTP/1.1\r\n\r\n", "does not start with '/'"},
        {"GET / HTTP/2.0\r\n\r\n", "is not HTTP/1.1"},
        {"GET / FTP\r\n\r\n", "is not HTTP/1.1"},
        {"G(T / HTTP/1.1\r\n\r\n", "not METHOD TARGET"},
        {"BREW / HTTP/1.1\r\n\r\n", "unknown method 'BREW'"},
        {"GET /a\x01 HTTP/1.1\r\n\r\n", "control character"},
        {"GET / HTTP/1.1\r\nNo colon here\r\n\r\n", "has no ':'"},
        {"GET / HTTP/1.1\r\nBad Name: x\r\n\r\n", "not a header name"},
        {"GET / HTTP/1.1\r\n: x\r\n\r\n", "not a header name"},
        {"GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n", "line folding"},
        {"GET / HTTP/1.1\r\nA: b\rc\r\n\r\n", "CR, LF or NUL"},
        {"GET /%zz HTTP/1.1\r\n\r\n", "'%' not followed by two hexadecimal"},
        {"GET /a% HTTP/1.1\r\n\r\n", "'%' not followed"},
        {"GET /a%4 HTTP/1.1\r\n\r\n", "'%' not followed"},
        {"GET /a?x=%G1 HTTP/1.1\r\n\r\n", "query parameter 'x=%G1'"},
        {"GET /v1/tasks?all=1?x=2 HTTP/1.1\r\n\r\n", "second '?'"},
        {"\r\n\r\n", "no request line"},
    };
    for (const Bad& b : cases) {
        Request req;
        const auto failed = parse_head(b.head, req);
        ASSERT_TRUE(failed) << b.head;
        EXPECT_EQ(failed->status, 400) << b.head;
        EXPECT_THAT(failed->reason, HasSubstr(b.says)) << b.head;
    }
    Request req;
    ASSERT_TRUE(parse_head("GET /v1/tasks?all=1?x=2 HTTP/1.1\r\n\r\n", req));
    EXPECT_EQ(req.method, "GET") << "what was read stays, for the error handler";
    EXPECT_EQ(req.path, "/v1/tasks");
}

// This test verifies that bytes that are not ASCII pass through the path and query as they
// are (an error answer quotes them as JSON), and that url_decode keeps '+' in paths.
TEST(RequestParserTest, NonAsciiAndPlusSigns) {
    Request req;
    ASSERT_FALSE(parse_head("POST /agent/\xff\xfe/report?x=\xc3 HTTP/1.1\r\n\r\n", req));
    EXPECT_EQ(req.path, "/agent/\xff\xfe/report");
    EXPECT_EQ(req.get_param_value("x"), "\xc3");
    EXPECT_EQ(url_decode("a+b%2B", false), "a+b+");
    EXPECT_EQ(url_decode("a+b%2B", true), "a b+");
    EXPECT_EQ(url_decode("%", true), std::nullopt);
}

Headers headers(std::initializer_list<std::pair<const char*, const char*>> list) {
    Headers h;
    for (const auto& [k, v] : list) {
        h.emplace(k, v);
    }
    return h;
}

// This test verifies body framing: Content-Length, chunked, none; and that a request that
// could be read two ways is refused (duplicate Content-Length, Content-Length with chunked).
TEST(RequestParserTest, BodyFraming) {
    auto none = body_framing(headers({}));
    EXPECT_FALSE(none.failure);
    EXPECT_EQ(none.framing.kind, BodyFraming::Kind::None);
    auto length = body_framing(headers({{"content-length", "42"}}));
    ASSERT_FALSE(length.failure);
    EXPECT_EQ(length.framing.kind, BodyFraming::Kind::Length);
    EXPECT_EQ(length.framing.length, 42u);
    auto chunked = body_framing(headers({{"Transfer-Encoding", "Chunked"}}));
    ASSERT_FALSE(chunked.failure);
    EXPECT_EQ(chunked.framing.kind, BodyFraming::Kind::Chunked);

    const std::vector<std::pair<Headers, std::string>> bad = {
        {headers({{"Content-Length", "5"}, {"Content-Length", "5"}}), "more than one"},
        {headers({{"Content-Length", "5"}, {"content-length", "6"}}), "more than one"},
        {headers({{"Content-Length", "5"}, {"Transfer-Encoding", "chunked"}}), "both"},
        {headers({{"Content-Length", "-1"}}), "not a whole number"},
        {headers({{"Content-Length", "5, 5"}}), "not a whole number"},
        {headers({{"Content-Length", ""}}), "not a whole number"},
        {headers({{"Content-Length", "99999999999999999999999"}}), "not a whole number"},
        {headers({{"Transfer-Encoding", "chunked"}, {"Transfer-Encoding", "chunked"}}),
         "more than one"},
    };
    for (const auto& [h, says] : bad) {
        const auto r = body_framing(h);
        ASSERT_TRUE(r.failure) << says;
        EXPECT_EQ(r.failure->status, 400);
        EXPECT_THAT(r.failure->reason, HasSubstr(says));
    }
    const auto gzip = body_framing(headers({{"Transfer-Encoding", "gzip, chunked"}}));
    ASSERT_TRUE(gzip.failure);
    EXPECT_EQ(gzip.failure->status, 501);
}

ChunkedDecoder::State decode(const std::string& in, std::string& out, std::size_t max = 1000,
                             std::size_t* used = nullptr) {
    ChunkedDecoder d(max);
    std::size_t consumed = 0;
    const auto state = d.feed(in, consumed, out);
    if (used) {
        *used = consumed;
    }
    return state;
}

// This test verifies chunked bodies: sizes in hexadecimal, extensions and trailers dropped,
// fed in one piece or byte by byte, and nothing read past the end.
TEST(ChunkedDecoderTest, DecodesInPiecesOrWhole) {
    const std::string body = "4\r\nWiki\r\n6;x=y\r\npedia \r\nE\r\nin \r\n\r\nchunks.\r\n"
                             "0\r\nTrailer: 1\r\n\r\nNEXT";
    std::string out;
    std::size_t used = 0;
    EXPECT_EQ(decode(body, out, 1000, &used), ChunkedDecoder::State::Done);
    EXPECT_EQ(out, "Wikipedia in \r\n\r\nchunks.");
    EXPECT_EQ(body.substr(used), "NEXT");

    ChunkedDecoder d(1000);
    std::string bytewise;
    for (std::size_t i = 0; i < body.size() && d.state() == ChunkedDecoder::State::NeedMore;
         ++i) {
        std::size_t consumed = 0;
        d.feed(std::string_view(body).substr(i, 1), consumed, bytewise);
        EXPECT_EQ(consumed, 1u);
    }
    EXPECT_EQ(d.state(), ChunkedDecoder::State::Done);
    EXPECT_EQ(bytewise, out);
    std::string lf;
    EXPECT_EQ(decode("3\nabc\n0\n\n", lf), ChunkedDecoder::State::Done);
    EXPECT_EQ(lf, "abc");
}

// This test verifies malformed chunked bodies (400) and one larger than the limit (413), as
// soon as the size line says so, before its data comes.
TEST(ChunkedDecoderTest, MalformedAndTooLarge) {
    for (const std::string& bad :
         {std::string("zz\r\n"), std::string("\r\n"), std::string("4 x\r\nabcd\r\n"),
          std::string("11111111111111111\r\n"), std::string("ffffffffffffffffff\r\n"),
          std::string("3\r\nabcdef\r\n"), std::string("0\r\nno colon\r\n\r\n"),
          std::string(2000, '1')}) {
        std::string out;
        ChunkedDecoder d(1 << 20);
        std::size_t used = 0;
        EXPECT_EQ(d.feed(bad, used, out), ChunkedDecoder::State::Malformed) << bad.substr(0, 40);
        EXPECT_FALSE(d.error().empty());
    }
    std::string out;
    EXPECT_EQ(decode("3e9\r\n", out, 1000), ChunkedDecoder::State::TooLarge);
    EXPECT_EQ(decode("1f4\r\n" + std::string(500, 'a') + "\r\n1f5\r\n", out, 1000),
              ChunkedDecoder::State::TooLarge);
    EXPECT_EQ(decode("ffffffffffffffff\r\n", out, 1000), ChunkedDecoder::State::TooLarge)
        << "16 digits is a size, just too large";
    ChunkedDecoder d(1000);
    std::size_t used = 0;
    std::string trailers = "0\r\n";
    for (int i = 0; i < 1000; ++i) {
        trailers += "T: 12345678\r\n";
    }
    EXPECT_EQ(d.feed(trailers, used, out), ChunkedDecoder::State::Malformed);
}

}  // namespace
}  // namespace carma::http
