#pragma once
// The bytes of an answer (RFC 9112): status line with its reason phrase, the response's
// headers, Content-Length from its body, Connection, then the body unless the request was HEAD.
// Pure: the listener (http/listener.h) sends what this returns.

#include <string>

#include "http/message.h"

namespace carma::http {

struct WriteOptions {
    bool head_only = false;  // HEAD: the headers of the GET answer, no body
    bool close = false;      // no request after this one on the connection
    int keep_alive_s = 5;    // announced in Keep-Alive when the connection stays open
};

std::string serialize_response(const Response& res, const WriteOptions& options);

}  // namespace carma::http
