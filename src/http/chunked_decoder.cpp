#include "http/chunked_decoder.h"

#include <algorithm>

#include <fmt/format.h>

namespace carma::http {

namespace {

int hex_digit(char c) {
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

// A size line as a message shows it: at most 40 bytes, control bytes escaped.
std::string shown(std::string_view s) {
    std::string out;
    for (char c : s.substr(0, 40)) {
        const auto u = static_cast<unsigned char>(c);
        out += u < 0x20 || u == 0x7f ? fmt::format("\\x{:02x}", u) : std::string(1, c);
    }
    return s.size() > 40 ? out + "..." : out;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
        s.remove_prefix(1);
    }
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
        s.remove_suffix(1);
    }
    return s;
}

}  // namespace

ChunkedDecoder::State ChunkedDecoder::fail(std::string why) {
    error_ = std::move(why);
    return state_ = State::Malformed;
}

ChunkedDecoder::State ChunkedDecoder::size_line(std::string_view line) {
    std::size_t digits = 0;
    std::uint64_t size = 0;
    while (digits < line.size() && hex_digit(line[digits]) >= 0) {
        if (digits == 16) {
            return fail(fmt::format("the chunk size '{}' has more than 16 hexadecimal digits",
                                    shown(line)));
        }
        size = size * 16 + static_cast<std::uint64_t>(hex_digit(line[digits]));
        ++digits;
    }
    const std::string_view rest = trim(line.substr(digits));
    if (digits == 0 || (!rest.empty() && rest.front() != ';')) {
        return fail(fmt::format("'{}' is not a chunk size (hexadecimal digits)", shown(line)));
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
