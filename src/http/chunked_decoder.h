#pragma once
// A chunked request body (RFC 9112 7.1) decoded as it arrives, without a socket: the listener
// (http/listener.h) feeds it what came; malformed framing and a body over the limit are told
// apart (400 and 413), the latter as soon as a chunk's size says so.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace carma::http {

// A chunked body as it arrives: feed() takes what came, appends the data to
// `out` and returns how far it got. Chunk extensions and trailers are read and dropped.
class ChunkedDecoder {
public:
    enum class State { NeedMore, Done, Malformed, TooLarge };

    // `max_body`: the body's data beyond which TooLarge; `max_line`: a chunk-size or trailer
    // line beyond which Malformed.
    explicit ChunkedDecoder(std::size_t max_body, std::size_t max_line = 1024)
        : max_body_(max_body), max_line_(max_line) {}

    // Consumes from `in` (sets `consumed`), appends data to `out`.
    State feed(std::string_view in, std::size_t& consumed, std::string& out);
    State state() const { return state_; }
    const std::string& error() const { return error_; }

private:
    enum class Step { Size, Data, DataEnd, Trailer };
    State fail(std::string why);
    State size_line(std::string_view line);

    std::size_t max_body_, max_line_;
    Step step_ = Step::Size;
    State state_ = State::NeedMore;
    std::string line_;
    std::uint64_t left_ = 0;  // of the current chunk's data
    std::size_t total_ = 0;
    std::size_t trailer_bytes_ = 0;
    std::string error_;
};

}  // namespace carma::http
