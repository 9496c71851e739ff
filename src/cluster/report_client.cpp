#include "cluster/report_client.h"

#include <unistd.h>

#include <cctype>
#include <charconv>
#include <chrono>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "cluster/auth.h"
#include "http/chunked_decoder.h"
#include "http/listener.h"
#include "http/socket_io.h"

namespace carma::cluster {

namespace {

using http::Clock;

struct Fd {
    int fd = -1;
    explicit Fd(int f) : fd(f) {}
    ~Fd() {
        if (fd >= 0) {
            ::close(fd);
        }
    }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
};

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) {
        return false;
    }
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (std::tolower(static_cast<unsigned char>(a[i])) !=
            std::tolower(static_cast<unsigned char>(b[i]))) {
            return false;
        }
    }
    return true;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
        s.remove_prefix(1);
    }
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
        s.remove_suffix(1);
    }
    return s;
}

}  // namespace

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
    const Fd fd(*connected);
    // One report per connection: nothing is left half-read between reports.
    const std::string head = fmt::format(
        "POST /agent/v1/report HTTP/1.1\r\nHost: {}\r\n{}: {}\r\nContent-Type: {}\r\n"
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        address, auth::kAuthHeader, auth_header, content_type, body.size());
    const int io_ms = io_timeout_s_ * 1000;
    if (!http::send_all(fd.fd, head, io_ms) || !http::send_all(fd.fd, body, io_ms)) {
        return unreachable("it stopped taking the report");
    }
    // The whole answer within a few read timeouts, so a server that trickles it cannot hold the
    // agent (each read alone would wait only io_timeout_s).
    const Clock::time_point deadline = Clock::now() + std::chrono::seconds(3 * io_timeout_s_);
    http::SocketReader reader(fd.fd, io_ms);

    // The head: capped in bytes and in lines before anything of it is kept.
    std::size_t head_end = std::string_view::npos;
    while ((head_end = reader.pending().find("\r\n\r\n")) == std::string_view::npos) {
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
    reader.consume(head_end + 4);

    ReportAnswer answer;
    std::string_view rest = answer_head;
    auto next_line = [&] {
        const std::size_t eol = rest.find("\r\n");
        std::string_view line = rest.substr(0, eol);
        rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 2);
        return line;
    };
    const std::string_view status_line = next_line();
    if (!status_line.starts_with("HTTP/1.") || status_line.size() < 12) {
        return unreachable("its answer is not HTTP");
    }
    const auto [status_end, status_ec] =
        std::from_chars(status_line.data() + 9, status_line.data() + 12, answer.status);
    if (status_ec != std::errc() || status_end != status_line.data() + 12) {
        return unreachable("its answer has no status");
    }
    std::optional<std::size_t> length;
    bool chunked = false;
    std::size_t lines = 0;
    while (!rest.empty()) {
        const std::string_view line = next_line();
        if (++lines > kMaxAnswerHeaderLines) {
            return too_large(fmt::format("more than {} header lines", kMaxAnswerHeaderLines));
        }
        const std::size_t colon = line.find(':');
        if (colon == std::string_view::npos) {
            return unreachable("its answer has a malformed header line");
        }
        const std::string_view name = line.substr(0, colon);
        const std::string_view value = trim(line.substr(colon + 1));
        if (iequals(name, "Content-Length")) {
            std::size_t n = 0;
            const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
            if (ec == std::errc::result_out_of_range) {
                return too_large("a length beyond any size announced");
            }
            if (ec != std::errc() || end != value.data() + value.size()) {
                return unreachable("its answer has a malformed Content-Length");
            }
            length = n;
        } else if (iequals(name, "Transfer-Encoding")) {
            chunked = iequals(value, "chunked");
        } else if (iequals(name, auth::kAuthHeader)) {
            answer.auth_header = std::string(value);
        }
    }

    using Got = http::SocketReader::Got;
    if (chunked) {
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
    if (length) {
        if (*length > max_answer_bytes_) {
            return too_large(fmt::format("{} bytes announced, the limit is {}", *length,
                                         http::size_text(max_answer_bytes_)));
        }
        if (reader.take(*length, deadline, &answer.body) != Got::Data) {
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
