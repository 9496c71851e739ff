#pragma once
// The agent's side of one report over HTTP (cluster/agent.cpp): POSTs the signed report to the
// server and reads its answer under a size cap. Whatever answers on the server's port is not
// trusted until the answer's MAC or credential checks out, and that check needs the whole
// answer; so the answer is capped while it is read: an announced Content-Length over the cap is
// refused before any of the body is read, and a body without one is cut off at the cap.

#include <cstddef>
#include <memory>
#include <string>

#include "cluster/wire.h"
#include "core/result.h"

namespace httplib {
class Client;
}

namespace carma::cluster {

// The largest answer an agent reads: a server's answer is wire JSON (kMaxWireBytes) in token
// mode, a MUNGE credential (at most 1 MiB) in MUNGE mode.
inline constexpr std::size_t kMaxAnswerBytes = kMaxWireBytes;

struct ReportAnswer {
    int status = 0;
    std::string auth_header;  // auth::kAuthHeader's value, "" when it has none
    std::string body;
};

class ReportClient {
public:
    // Times in seconds: connecting, and each read and write.
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
    std::unique_ptr<httplib::Client> client_;
};

}  // namespace carma::cluster
