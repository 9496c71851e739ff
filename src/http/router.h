#pragma once
// Which handler answers a request: a method and a std::regex that must match the whole
// (decoded) path, the first registered that matches winning; its captures go to the handler as
// req.matches. HEAD is answered by the GET route (the listener sends the head only). No match
// is 404; every answer of 400 or above then passes the error handler, and anything a handler
// throws the exception handler (else a JSON 500). Pure: tested without a socket.

#include <exception>
#include <regex>
#include <string>
#include <vector>

#include "http/message.h"

namespace carma::http {

class Router {
public:
    Router& Get(const std::string& pattern, Handler handler);
    Router& Post(const std::string& pattern, Handler handler);
    Router& Put(const std::string& pattern, Handler handler);
    Router& Delete(const std::string& pattern, Handler handler);
    Router& Patch(const std::string& pattern, Handler handler);
    Router& Options(const std::string& pattern, Handler handler);

    // Called for every answer of 400 or above just before it is written, whoever made it (a
    // handler, the router's 404, the listener's 400); a handler that leaves the body empty
    // lets it say why.
    Router& set_error_handler(Handler handler);
    Router& set_exception_handler(ExceptionHandler handler);

    // Runs the handler of the first route that matches (captures in req.matches), catching
    // what it throws; 404 when none matches. Leaves the status -1 when the handler did not
    // set one (finish() makes it 200).
    void route(Request& req, Response& res) const;

    // Before an answer is written: an unset status is 200, and 400 or above goes through the
    // error handler; an error answer still without a body gets a JSON one.
    void finish(const Request& req, Response& res) const;

private:
    struct Route {
        std::string method;
        std::regex pattern;
        Handler handler;
    };
    Router& add(const char* method, const std::string& pattern, Handler handler);

    std::vector<Route> routes_;
    Handler error_handler_;
    ExceptionHandler exception_handler_;
};

}  // namespace carma::http
