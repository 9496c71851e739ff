// libFuzzer target for the daemon's HTTP request parser (http/request_parser.h) and chunked body
// decoder (http/chunked_decoder.h): the bytes a listener reads from any local user or TCP peer.
// Built and run by scripts/fuzz-http (clang's -fsanitize=fuzzer with ASan and UBSan), from the
// corpus of real requests in tests/fuzz/corpus/http_request. The properties: no crash, no
// sanitizer report, no exception, and what is accepted is consistent (a head ends inside the
// input, a chunked body never grows past its limit or consumes more than it was given).

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "http/chunked_decoder.h"
#include "http/request_parser.h"

namespace {

constexpr std::size_t kMaxBody = 4096;

void check(bool ok) {
    if (!ok) {
        std::abort();  // libFuzzer reports the input
    }
}

// Feeds the body in two pieces split at `cut`, as two reads from a socket would bring it.
void decode_chunked(std::string_view body, std::size_t cut) {
    carma::http::ChunkedDecoder decoder(kMaxBody, 64);
    std::string out;
    std::size_t at = 0;
    for (std::string_view piece : {body.substr(0, cut), body.substr(cut)}) {
        std::size_t offset = 0;
        while (offset < piece.size()) {
            std::size_t consumed = 0;
            const auto state = decoder.feed(piece.substr(offset), consumed, out);
            check(consumed <= piece.size() - offset);
            check(out.size() <= kMaxBody);
            offset += consumed;
            at += consumed;
            if (state != carma::http::ChunkedDecoder::State::NeedMore || consumed == 0) {
                break;
            }
        }
        if (decoder.state() != carma::http::ChunkedDecoder::State::NeedMore) {
            break;
        }
    }
    check(at <= body.size());
    if (decoder.state() == carma::http::ChunkedDecoder::State::Malformed ||
        decoder.state() == carma::http::ChunkedDecoder::State::TooLarge) {
        check(!decoder.error().empty());
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const std::size_t end = carma::http::head_end(input);
    if (end == std::string_view::npos) {
        return 0;
    }
    check(end <= input.size());
    carma::http::Request req;
    if (auto failed = carma::http::parse_head(input.substr(0, end), req)) {
        check(failed->status >= 400 && failed->status < 600 && !failed->reason.empty());
        return 0;
    }
    const auto framing = carma::http::body_framing(req.headers);
    if (framing.failure) {
        check(framing.failure->status >= 400 && !framing.failure->reason.empty());
        return 0;
    }
    const std::string_view body = input.substr(end);
    if (framing.framing.kind == carma::http::BodyFraming::Kind::Chunked) {
        decode_chunked(body, body.empty() ? 0 : static_cast<unsigned char>(body[0]) % body.size());
    }
    return 0;
}
