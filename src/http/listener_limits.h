#pragma once
// What one HTTP listener (http/listener.h) allows a client: kept apart from the listener so that
// options structs can hold it without pulling in the listener.

#include <cstddef>

namespace carma::http {

struct ListenerLimits {
    // A request's body. Content-Length above it is refused with 413; a body without one
    // (chunked) is counted as it is read, framing included, and cut off at the limit with 413.
    std::size_t max_body_bytes = 1 << 20;
    // Content-Length above the limit: true answers 413 at once and never reads the body (the
    // client's upload is cut off after the answer, so a client that writes its whole body
    // before reading, as cpp-httplib's, sees a broken connection); false reads and drops the
    // body within request_timeout_s first, so such a client gets the answer.
    bool refuse_long_body_unread = false;
    // Against slow or idle clients: each read or write waits at most read_timeout_s, a
    // request's head (request line and headers) must arrive within head_timeout_s and stay
    // under max_head_bytes (else 431), the whole request within request_timeout_s of its
    // first byte; an idle keep-alive connection is closed after keep_alive_s.
    int read_timeout_s = 5;
    int head_timeout_s = 10;
    int request_timeout_s = 60;
    int keep_alive_s = 5;
    std::size_t max_head_bytes = 8192;
    // TCP: connections that have not (yet) presented valid credentials wait in a pool of their
    // own whose oldest is dropped when it is full; those that have, at most
    // max_authenticated_connections (http/connection_gate.h). Unix socket: at most
    // max_authenticated_connections per peer uid, the kernel's word for who connected.
    std::size_t max_unauthenticated_connections = 16;
    std::size_t max_authenticated_connections = 8;
    // TCP: of the authenticated, at most this many per identity (Connection::promote_as: the
    // agents' port counts a node's connections), so that one identity's slow connections cannot
    // take every authenticated slot; 0: no cap per identity.
    std::size_t max_connections_per_identity = 0;
    // Handler threads, one per open connection; above the connection caps, so that the
    // connections of one kind can never hold every thread.
    std::size_t max_threads = 128;
};

}  // namespace carma::http
