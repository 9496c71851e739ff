#pragma once
// The agent's side of one report over HTTP (cluster/agent.cpp): POSTs the signed report to the
// server and reads its answer under caps. Whatever answers on the server's port is not trusted
// until the answer's MAC or credential checks out, and that check needs the whole answer; so the
// answer is capped while it is read: its head in bytes and in header lines, an announced
// Content-Length over the cap before any of the body is read, a body without one at the cap,
// and the whole answer in time. A client of our own: cpp-httplib's (0.11.4) caps neither the
// number of header lines nor the time a trickled answer takes.

#include <cstddef>
#include <string>

#include "cluster/wire.h"
#include "core/result.h"

namespace carma::cluster {

// The largest answer an agent reads: a server's answer is wire JSON (kMaxWireBytes) in token
// mode, a MUNGE credential (at most 1 MiB) in MUNGE mode.
inline constexpr std::size_t kMaxAnswerBytes = kMaxWireBytes;
// The server's answers carry a handful of headers.
inline constexpr std::size_t kMaxAnswerHeadBytes = 64 << 10;
inline constexpr std::size_t kMaxAnswerHeaderLines = 100;

struct ReportAnswer {
    int status = 0;
    std::string auth_header;  // auth::kAuthHeader's value, "" when it has none
    std::string body;
};

class ReportClient {
public:
    // Times in seconds: connecting, and each read and write; the whole answer gets three
    // reads' worth.
    ReportClient(std::string host, int port, std::size_t max_answer_bytes = kMaxAnswerBytes,
                 int connect_timeout_s = 5, int io_timeout_s = 10);
    ~ReportClient();
    ReportClient(const ReportClient&) = delete;
    ReportClient& operator=(const ReportClient&) = delete;

    // POST /agent/v1/report with the request's auth header and body. Errors: the server cannot
    // be reached (ErrorCode::Io, naming the address and what failed), or its answer is larger
    // than the cap (ErrorCode::InvalidArgument, naming the address and the cap).
    Result<ReportAnswer> post(const std::string& auth_header, const std::string& body,
                              const std::string& content_type);

private:
    std::string host_;
    int port_;
    std::size_t max_answer_bytes_;
    int connect_timeout_s_;
    int io_timeout_s_;
};

}  // namespace carma::cluster
