// The router (http/router.h) and the response writer (http/response_writer.h), without a
// socket: full-match regex routes with captures, HEAD by the GET route, 404, the error and
// exception handlers, and the bytes of an answer.

#include <stdexcept>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "http/response_writer.h"
#include "http/router.h"

namespace carma::http {
namespace {

using testing::HasSubstr;

Request request(const std::string& method, const std::string& path) {
    Request r;
    r.method = method;
    r.path = path;
    r.version = "HTTP/1.1";
    return r;
}

// This test verifies routing: the method and a regex that must match the whole path, the
// first route that matches, captures in req.matches, HEAD answered by GET, and 404 otherwise.
TEST(RouterTest, MethodAndFullMatchWithCaptures) {
    Router router;
    std::string seen;
    router.Get(R"(/v1/tasks/(-?\d+))", [&](const Request& req, Response& res) {
        seen = req.matches[1];
        res.set_content("task " + seen, "text/plain");
    });
    router.Post(R"(/v1/tasks/(-?\d+)/(hold|release))", [&](const Request& req, Response& res) {
        seen = std::string(req.matches[1]) + " " + std::string(req.matches[2]);
        res.status = 201;
    });
    router.Get("/v1/.*", [](const Request&, Response& res) { res.set_content("any", "x/y"); });

    Request get = request("GET", "/v1/tasks/-42");
    Response res;
    router.route(get, res);
    EXPECT_EQ(seen, "-42");
    EXPECT_EQ(res.body, "task -42");
    EXPECT_EQ(res.status, -1) << "left unset; finish() makes it 200";
    router.finish(get, res);
    EXPECT_EQ(res.status, 200);

    Request hold = request("POST", "/v1/tasks/7/hold");
    Response held;
    router.route(hold, held);
    EXPECT_EQ(seen, "7 hold");
    EXPECT_EQ(held.status, 201);

    Request head = request("HEAD", "/v1/tasks/3");
    Response headed;
    router.route(head, headed);
    EXPECT_EQ(headed.body, "task 3");

    Request partial = request("GET", "/v1/tasks/3x");  // no full match: the catch-all
    Response caught;
    router.route(partial, caught);
    EXPECT_EQ(caught.body, "any");

    for (const auto& [method, path] : std::vector<std::pair<std::string, std::string>>{
             {"GET", "/nothing"}, {"DELETE", "/v1/tasks/3"}, {"POST", "/v1/tasks/3/holdx"}}) {
        Request r = request(method, path);
        Response missing;
        router.route(r, missing);
        EXPECT_EQ(missing.status, 404) << method << " " << path;
    }
}

// This test verifies the error handler (every answer of 400 and above, which may leave the
// body to the handler's own), the exception handler, and the JSON 500 without one.
TEST(RouterTest, ErrorAndExceptionHandlers) {
    Router router;
    router.Get("/throws", [](const Request&, Response&) { throw std::runtime_error("boom"); });
    router.Get("/own", [](const Request&, Response& res) {
        res.status = 409;
        res.set_content("{\"error\":\"mine\"}", "application/json");
    });
    Request r = request("GET", "/throws");
    Response res;
    router.route(r, res);
    EXPECT_EQ(res.status, 500);
    EXPECT_THAT(res.body, HasSubstr("internal error: boom"));

    router.set_exception_handler([](const Request&, Response& out, std::exception_ptr ep) {
        try {
            std::rethrow_exception(ep);
        } catch (const std::exception& e) {
            out.status = 503;
            out.set_content(std::string("caught ") + e.what(), "text/plain");
        }
    });
    Response handled;
    router.route(r, handled);
    EXPECT_EQ(handled.status, 503);
    EXPECT_EQ(handled.body, "caught boom");

    int calls = 0;
    router.set_error_handler([&](const Request& req, Response& out) {
        ++calls;
        if (out.body.empty()) {
            out.set_content("handler says " + std::to_string(out.status) + " " + req.path,
                            "text/plain");
        }
    });
    Request missing = request("GET", "/missing");
    Response nf;
    router.route(missing, nf);
    router.finish(missing, nf);
    EXPECT_EQ(nf.body, "handler says 404 /missing");
    Request own = request("GET", "/own");
    Response mine;
    router.route(own, mine);
    router.finish(own, mine);
    EXPECT_EQ(mine.body, "{\"error\":\"mine\"}");
    EXPECT_EQ(calls, 2);

    Router bare;  // no error handler: a JSON body naming the parse error or the status
    Request bad = request("GET", "/x");
    bad.parse_error = "the header line 'x' has no ':'";
    Response r400;
    r400.status = 400;
    bare.finish(bad, r400);
    EXPECT_EQ(r400.body, "{\"error\":\"malformed request: the header line 'x' has no ':'\"}");
    EXPECT_EQ(r400.get_header_value("Content-Type"), "application/json");
}

// This test verifies the bytes of an answer: the status line with its reason, the headers,
// Content-Length from the body whatever a handler set, Connection, and no body for HEAD.
TEST(ResponseWriterTest, StatusLineHeadersAndBody) {
    Response res;
    res.status = 201;
    res.set_content("{}", "application/json");
    res.set_header("Content-Length", "999");
    res.set_header("X-Evil", "a\r\nSet-Cookie: x");  // dropped: it would split the answer
    res.set_header("Retry-After", "3");
    EXPECT_FALSE(res.has_header("X-Evil"));
    const std::string kept = serialize_response(res, {false, false, 7});
    EXPECT_EQ(kept,
              "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nRetry-After: 3\r\n"
              "Content-Length: 2\r\nConnection: keep-alive\r\nKeep-Alive: timeout=7\r\n\r\n{}");
    const std::string head = serialize_response(res, {true, true, 5});
    EXPECT_THAT(head, HasSubstr("Content-Length: 2\r\nConnection: close\r\n\r\n"));
    EXPECT_EQ(head.substr(head.size() - 4), "\r\n\r\n") << "HEAD: no body";

    Response plain;
    plain.set_content("ok\n", "");
    plain.headers.clear();
    plain.body = "ok\n";
    EXPECT_THAT(serialize_response(plain, {}), HasSubstr("HTTP/1.1 200 OK\r\nContent-Type: "
                                                         "text/plain\r\nContent-Length: 3\r\n"));
    Response redirect;
    redirect.set_redirect("/", 303);
    EXPECT_THAT(serialize_response(redirect, {}),
                HasSubstr("HTTP/1.1 303 See Other\r\nLocation: /\r\nContent-Length: 0\r\n"));
    Response odd;
    odd.status = 299;
    EXPECT_THAT(serialize_response(odd, {}), HasSubstr("HTTP/1.1 299 Unknown\r\n"));
    EXPECT_STREQ(reason_phrase(429), "Too Many Requests");
    EXPECT_STREQ(reason_phrase(431), "Request Header Fields Too Large");
}

}  // namespace
}  // namespace carma::http
