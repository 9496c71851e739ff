#pragma once
// HTTP requests the end-to-end tests send to a daemon they started, with the status and headers
// kept whatever they are (the API client turns errors into messages).

#include <sys/socket.h>

#include <string>

#include <httplib.h>

namespace carma::test_support {

struct HttpReply {
    int status = 0;  // -1: no answer (the body says why)
    std::string body;
    httplib::Headers headers;
};

// A body, when there is one or the method is not GET, goes as JSON.
inline HttpReply send_request(httplib::Client& cli, const std::string& method,
                              const std::string& target, const std::string& body,
                              const httplib::Headers& headers) {
    cli.set_read_timeout(60);
    httplib::Request req;
    req.method = method;
    req.path = target;
    req.headers = headers;
    if (method != "GET" || !body.empty()) {
        req.body = body;
        req.set_header("Content-Type", "application/json");
    }
    httplib::Result r = cli.send(req);
    if (!r) {
        return {-1, httplib::to_string(r.error()), {}};
    }
    return {r->status, r->body, r->headers};
}

// On the daemon's Unix socket.
inline HttpReply socket_request(const std::string& socket, const std::string& method,
                                const std::string& target, const std::string& body = "",
                                const httplib::Headers& headers = {}) {
    httplib::Client cli(socket, 80);
    cli.set_address_family(AF_UNIX);
    return send_request(cli, method, target, body, headers);
}

// On 127.0.0.1:port.
inline HttpReply tcp_request(int port, const std::string& method, const std::string& target,
                             const httplib::Headers& headers = {}, const std::string& body = "") {
    httplib::Client cli("127.0.0.1", port);
    return send_request(cli, method, target, body, headers);
}

}  // namespace carma::test_support
