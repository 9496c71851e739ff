#include "http/chunked_decoder.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/text.h"
#include "http/client_bytes.h"

namespace carma::http {

namespace {

// A size line in a message: at most 40 bytes of it, escaped (core/text.h).
std::string chunk_shown(std::string_view s) { return escaped_bytes(s, 40); }

}  // namespace

ChunkedDecoder::State ChunkedDecoder::fail(std::string why) {
    error_ = std::move(why);
    return state_ = State::Malformed;
}

ChunkedDecoder::State ChunkedDecoder::size_line(std::string_view line) {
    std::size_t digits = 0;
    std::uint64_t size = 0;
    while (digits < line.size() && hex_value(line[digits]) >= 0) {
        if (digits == 16) {
            return fail(fmt::format("the chunk size '{}' has more than 16 hexadecimal digits",
                                    chunk_shown(line)));
        }
        size = size * 16 + static_cast<std::uint64_t>(hex_value(line[digits]));
        ++digits;
    }
    const std::string_view rest = trim_ows(line.substr(digits));
    if (digits == 0 || (!rest.empty() && rest.front() != ';')) {
        return fail(fmt::format("'{}' is not a chunk size (hexadecimal digits)", chunk_shown(line)));
    }
    if (size == 0) {
        step_ = Step::Trailer;
        return state_;
    }
    if (size > max_body_ - total_) {
        error_ = "the chunked body is larger than the limit";
        return state_ = State::TooLarge;
    }
    left_ = size;
    step_ = Step::Data;
    return state_;
}

ChunkedDecoder::State ChunkedDecoder::feed(std::string_view in, std::size_t& consumed,
                                           std::string& out) {
    consumed = 0;
    while (state_ == State::NeedMore && consumed < in.size()) {
        if (step_ == Step::Data) {
            const std::size_t n =
                static_cast<std::size_t>(std::min<std::uint64_t>(left_, in.size() - consumed));
            out.append(in.data() + consumed, n);
            consumed += n;
            left_ -= n;
            total_ += n;
            if (left_ == 0) {
                step_ = Step::DataEnd;
            }
            continue;
        }
        const char c = in[consumed++];
        if (c != '\n') {
            if (line_.size() >= max_line_) {
                return fail(step_ == Step::Trailer ? "a trailer line is too long"
                                                   : "a chunk-size line is too long");
            }
            line_ += c;
            continue;
        }
        std::string line = std::move(line_);
        line_.clear();
        if (!line.empty() && line.back() == '\r') {
            line.pop_back();
        }
        switch (step_) {
            case Step::Size: size_line(line); break;
            case Step::DataEnd:
                if (!line.empty()) {
                    return fail("a chunk's data is longer than its size");
                }
                step_ = Step::Size;
                break;
            case Step::Trailer:
                if (line.empty()) {
                    return state_ = State::Done;
                }
                if (line.find(':') == std::string::npos) {
                    return fail("a trailer line has no ':'");
                }
                if ((trailer_bytes_ += line.size()) > 8 * max_line_) {
                    return fail("the trailers are too long");
                }
                break;
            case Step::Data: break;
        }
    }
    return state_;
}

}  // namespace carma::http
