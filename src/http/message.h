#pragma once
// The request and response the HTTP listener (http/listener.h) hands to handlers: only what
// CARMA's handlers use, under the member names cpp-httplib gives them (path, method, headers,
// body, params, matches; status, set_content, set_header), so a handler reads as it would
// against any small HTTP library. No sockets here: parsing (request_parser.h), routing
// (router.h) and writing (response_writer.h) are pure and tested without a network.

#include <exception>
#include <functional>
#include <map>
#include <regex>
#include <string>
#include <string_view>

namespace carma::http {

// Header names compare without regard to case (RFC 9110 5.1).
struct CaseInsensitiveLess {
    bool operator()(const std::string& a, const std::string& b) const;
};
using Headers = std::multimap<std::string, std::string, CaseInsensitiveLess>;
// Query parameters in the order they came; a name may repeat (get_param_value gives the first).
using Params = std::multimap<std::string, std::string>;

struct Request {
    std::string method;
    std::string target;   // as it came on the request line
    std::string path;     // the target up to '?', percent-decoded
    std::string version;  // "HTTP/1.1" or "HTTP/1.0"
    Headers headers;
    Params params;
    std::string body;
    // The route's captures (std::regex full match on `path`); [0] is the whole path.
    std::smatch matches;
    // Why the request could not be read, for the error handler of a 400 the listener answers
    // itself (empty otherwise).
    std::string parse_error;
    // Whether the parser found a body (chunked, or a Content-Length above 0): what guards read,
    // never the raw headers, so that they and the parser read each header one way.
    bool has_body = false;

    bool has_header(const std::string& name) const;
    // The first value of `name`, or `fallback`.
    std::string get_header_value(const std::string& name, const char* fallback = "") const;
    bool has_param(const std::string& name) const;
    std::string get_param_value(const std::string& name) const;
};

struct Response {
    int status = -1;  // -1: not set; a routed request that leaves it so is answered 200
    Headers headers;
    std::string body;

    bool has_header(const std::string& name) const;
    std::string get_header_value(const std::string& name) const;
    // Replaces any earlier value; a value or name holding CR, LF or NUL is dropped (it would
    // split the answer).
    void set_header(const std::string& name, const std::string& value);
    void set_content(std::string body, const std::string& content_type);
    // 303 or another 3xx (302 if `status` is not one), with Location.
    void set_redirect(const std::string& location, int status = 302);
};

using Handler = std::function<void(const Request&, Response&)>;
using ExceptionHandler = std::function<void(const Request&, Response&, std::exception_ptr)>;
enum class HandlerResponse { Handled, Unhandled };

// "OK", "Not Found", ...; "Unknown" for a code without one.
const char* reason_phrase(int status);

}  // namespace carma::http
