#include "cluster/report_client.h"

#include <charconv>

#include <fmt/format.h>
#include <httplib.h>

#include "cluster/auth.h"
#include "http/listener.h"

namespace carma::cluster {

ReportClient::ReportClient(std::string host, int port, std::size_t max_answer_bytes,
                           int connect_timeout_s, int io_timeout_s)
    : host_(std::move(host)),
      port_(port),
      max_answer_bytes_(max_answer_bytes),
      client_(std::make_unique<httplib::Client>(host_, port_)) {
    client_->set_connection_timeout(connect_timeout_s, 0);
    client_->set_read_timeout(io_timeout_s, 0);
    client_->set_write_timeout(io_timeout_s, 0);
}

ReportClient::~ReportClient() = default;

Result<ReportAnswer> ReportClient::post(const std::string& auth_header, const std::string& body,
                                        const std::string& content_type) {
    httplib::Request req;
    req.method = "POST";
    req.path = "/agent/v1/report";
    req.headers = {{std::string(auth::kAuthHeader), auth_header},
                   {"Content-Type", content_type}};
    req.body = body;
    ReportAnswer answer;
    std::size_t announced = 0;  // an announced length over the cap; 0: none
    bool too_long = false;
    // Before the body: a length over the cap is refused unread.
    req.response_handler = [&](const httplib::Response& res) {
        const std::string length = res.get_header_value("Content-Length");
        std::size_t n = 0;
        const auto [end, ec] = std::from_chars(length.data(), length.data() + length.size(), n);
        if (!length.empty() && (ec != std::errc() || end != length.data() + length.size() ||
                                n > max_answer_bytes_)) {
            announced = ec == std::errc() ? n : SIZE_MAX;
            return false;
        }
        return true;
    };
    // While it comes: cut off at the cap, whatever was announced.
    req.content_receiver = [&](const char* data, std::size_t n, std::uint64_t, std::uint64_t) {
        if (n > max_answer_bytes_ - answer.body.size()) {
            too_long = true;
            return false;
        }
        answer.body.append(data, n);
        return true;
    };
    httplib::Response res;
    httplib::Error error = httplib::Error::Success;
    const bool sent = client_->send(req, res, error);
    if (announced > 0 || too_long) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("the answer from {}:{} is larger than an agent reads ({}{}): "
                                "refused unread; is that port the CARMA server's agents' port?",
                                host_, port_,
                                announced > 0 && announced != SIZE_MAX
                                    ? fmt::format("{} bytes announced, the limit is ", announced)
                                    : std::string("the limit is "),
                                http::size_text(max_answer_bytes_)));
    }
    if (!sent) {
        return fail(ErrorCode::Io, fmt::format("cannot reach the server at {}:{} ({})", host_,
                                               port_, httplib::to_string(error)));
    }
    answer.status = res.status;
    answer.auth_header = res.get_header_value(std::string(auth::kAuthHeader).c_str());
    return answer;
}

}  // namespace carma::cluster
