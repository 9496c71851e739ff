#pragma once
// The socket side of the HTTP listener (http/listener.h): binding, reading with deadlines,
// writing whole answers. Nothing here knows HTTP beyond "a refusal is a short JSON answer".

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include "core/result.h"

namespace carma::http {

using Clock = std::chrono::steady_clock;

int millis_until(Clock::time_point t);
// Whether fd becomes ready for `events` within timeout_ms.
bool wait_ready(int fd, short events, int timeout_ms);

// A listening TCP socket on host:port (port 0: any free one); the descriptor and the port.
struct BoundSocket {
    int fd = -1;
    int port = 0;
};
// Errors say why (strerror, or the resolver's words); the caller names the address.
Result<BoundSocket> listen_tcp(const std::string& host, int port);
Result<int> listen_unix(const std::string& path);
// A TCP connection to host:port made within timeout_ms, non-blocking; errors as listen_tcp's.
Result<int> connect_tcp(const std::string& host, int port, int timeout_ms);

// Sends all of `data`, each wait for room at most wait_ms; false when the peer is gone or slow.
bool send_all(int fd, std::string_view data, int wait_ms);

// After the last answer on a connection whose client may still be sending (a body the server
// refused to read): no more to send, and what still comes is read and dropped for a moment, so
// the client gets the answer instead of a reset (or a SIGPIPE while it writes).
void finish_answer(int fd);

// A JSON answer of `status` with {"error": message} and Connection: close, sent without any
// handler (too many connections, head or body too large, too slow); then finish_answer().
void refuse(int fd, int status, const std::string& message);

// A connection's bytes as they come: what has come and not been used yet (pending()), and
// fill() for more, each wait at most read_timeout_ms and never past a deadline.
class SocketReader {
public:
    enum class Got { Data, Closed, Timeout };

    SocketReader(int fd, int read_timeout_ms) : fd_(fd), read_timeout_ms_(read_timeout_ms) {}

    int fd() const { return fd_; }
    std::string_view pending() const {
        return std::string_view(buffer_).substr(pos_);
    }
    void consume(std::size_t n);
    // Reads what has come, at most max_bytes (into the heap buffer: a thread per connection
    // keeps its stack small).
    Got fill(Clock::time_point deadline, std::size_t max_bytes = 4096);
    // The next n bytes, appended to `out` (or dropped when out is null).
    Got take(std::size_t n, Clock::time_point deadline, std::string* out);

private:
    int fd_;
    int read_timeout_ms_;
    std::string buffer_;
    std::size_t pos_ = 0;
};

}  // namespace carma::http
