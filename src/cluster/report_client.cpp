#include "cluster/report_client.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <string_view>

#include <fmt/format.h>

#include "cluster/auth.h"
#include "exec/fd.h"
#include "http/chunked_decoder.h"
#include "http/listener.h"
#include "http/request_parser.h"
#include "http/socket_io.h"

namespace carma::cluster {

using http::Clock;

ReportClient::ReportClient(std::string host, int port, std::size_t max_answer_bytes,
                           int connect_timeout_s, int io_timeout_s)
    : host_(std::move(host)),
      port_(port),
      max_answer_bytes_(max_answer_bytes),
      connect_timeout_s_(connect_timeout_s),
      io_timeout_s_(io_timeout_s) {}

ReportClient::~ReportClient() = default;

Result<ReportAnswer> ReportClient::post(const std::string& auth_header, const std::string& body,
                                        const std::string& content_type) {
    const std::string address = fmt::format("{}:{}", host_, port_);
    auto unreachable = [&](std::string_view why) {
        return fail(ErrorCode::Io, fmt::format("cannot reach the server at {} ({})", address, why));
    };
    auto too_large = [&](std::string_view what) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("the answer from {} is larger than an agent reads ({}): refused "
                                "unread; is that port the CARMA server's agents' port?",
                                address, what));
    };
    auto connected = http::connect_tcp(host_, port_, connect_timeout_s_ * 1000);
    if (!connected) {
        return unreachable(connected.error().message);
    }
    const exec::Fd fd(*connected);
    // One report per connection: nothing is left half-read between reports.
    const std::string head = fmt::format(
        "POST /agent/v1/report HTTP/1.1\r\nHost: {}\r\n{}: {}\r\nContent-Type: {}\r\n"
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        address, auth::kAuthHeader, auth_header, content_type, body.size());
    const int io_ms = io_timeout_s_ * 1000;
    if (!http::send_all(fd.get(), head, io_ms) || !http::send_all(fd.get(), body, io_ms)) {
        return unreachable("it stopped taking the report");
    }
    // The whole answer within a few read timeouts, so a server that trickles it cannot hold the
    // agent (each read alone would wait only io_timeout_s).
    const Clock::time_point deadline = Clock::now() + std::chrono::seconds(3 * io_timeout_s_);
    http::SocketReader reader(fd.get(), io_ms);

    // The head: capped in bytes and in lines before any of it is parsed; then read by the rules
    // the API's requests are (http/request_parser.h).
    std::size_t head_end = std::string_view::npos;
    while ((head_end = http::head_end(reader.pending())) == std::string_view::npos) {
        if (reader.pending().size() > kMaxAnswerHeadBytes) {
            return too_large(fmt::format("a head over {}", http::size_text(kMaxAnswerHeadBytes)));
        }
        if (const auto got = reader.fill(deadline); got != http::SocketReader::Got::Data) {
            return unreachable(got == http::SocketReader::Got::Closed
                                   ? "it closed the connection before answering"
                                   : "no answer in time");
        }
    }
    if (head_end > kMaxAnswerHeadBytes) {
        return too_large(fmt::format("a head over {}", http::size_text(kMaxAnswerHeadBytes)));
    }
    const std::string answer_head(reader.pending().substr(0, head_end));
    reader.consume(head_end);
    if (static_cast<std::size_t>(std::count(answer_head.begin(), answer_head.end(), '\n')) >
        kMaxAnswerHeaderLines + 2) {  // the status line and the blank line besides
        return too_large(fmt::format("more than {} header lines", kMaxAnswerHeaderLines));
    }

    ReportAnswer answer;
    std::size_t pos = 0;
    const std::string_view status_line = http::start_line(answer_head, pos);
    if (!status_line.starts_with("HTTP/1.") || status_line.size() < 12) {
        return unreachable("its answer is not HTTP");
    }
    const auto [status_end, status_ec] =
        std::from_chars(status_line.data() + 9, status_line.data() + 12, answer.status);
    if (status_ec != std::errc() || status_end != status_line.data() + 12) {
        return unreachable("its answer has no status");
    }
    http::Headers headers;
    if (auto failed = http::parse_header_fields(answer_head, pos, headers)) {
        return unreachable("its answer's head is malformed: " + failed->reason);
    }
    const http::FramingResult framing = http::body_framing(headers);
    if (framing.failure) {
        return unreachable("its answer's body is framed two ways or not at all: " +
                           framing.failure->reason);
    }
    if (auto auth = headers.find(std::string(auth::kAuthHeader)); auth != headers.end()) {
        answer.auth_header = auth->second;
    }

    using Got = http::SocketReader::Got;
    if (framing.framing.kind == http::BodyFraming::Kind::Chunked) {
        http::ChunkedDecoder decoder(max_answer_bytes_);
        for (;;) {
            std::size_t used = 0;
            const auto state = decoder.feed(reader.pending(), used, answer.body);
            reader.consume(used);
            if (state == http::ChunkedDecoder::State::Done) {
                return answer;
            }
            if (state == http::ChunkedDecoder::State::TooLarge) {
                return too_large(fmt::format("the limit is {}",
                                             http::size_text(max_answer_bytes_)));
            }
            if (state == http::ChunkedDecoder::State::Malformed) {
                return unreachable("its chunked answer is malformed: " + decoder.error());
            }
            if (const Got got = reader.fill(deadline, 64 << 10); got != Got::Data) {
                return unreachable("its answer stopped before its end");
            }
        }
    }
    if (framing.framing.kind == http::BodyFraming::Kind::Length) {
        const std::uint64_t length = framing.framing.length;
        if (length > max_answer_bytes_) {
            return too_large(fmt::format("{} bytes announced, the limit is {}", length,
                                         http::size_text(max_answer_bytes_)));
        }
        if (reader.take(static_cast<std::size_t>(length), deadline, &answer.body) != Got::Data) {
            return unreachable("its answer stopped before its announced length");
        }
        return answer;
    }
    // Neither: the body ends with the connection.
    for (;;) {
        answer.body.append(reader.pending());
        reader.consume(reader.pending().size());
        if (answer.body.size() > max_answer_bytes_) {
            return too_large(fmt::format("the limit is {}", http::size_text(max_answer_bytes_)));
        }
        const Got got = reader.fill(deadline, 64 << 10);
        if (got == Got::Closed) {
            return answer;
        }
        if (got == Got::Timeout) {
            return unreachable("its answer did not end in time");
        }
    }
}

}  // namespace carma::cluster
