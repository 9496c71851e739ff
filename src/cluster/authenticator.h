#pragma once
// One interface over both authentication modes (cluster/auth.h: token; cluster/munge_auth.h:
// MUNGE), so the hub and the agent do not care which one a cluster uses.
//
// Agent, each report:
//   auto req = agent->sign_request(report_json, now);        // header + body to POST + nonce
//   POST with header kAuthHeader: req->header, body req->body
//   auto json = agent->verify_answer(answer kAuthHeader, req->nonce, answer body, now);
// Server, each POST:
//   auto head = server->verify_head(request kAuthHeader, now);  // 401 unless it holds (503 on Io)
//   (refuse a body longer than the limit from head->body_length / Content-Length before reading)
//   auto json = server->verify_body(*head, body);               // 401 unless it holds
//   check that the report's JSON names head->node
//   auto ans = server->sign_answer(*head, answer_json, now);    // send ans->header, ans->body
//
// The body on the wire is the JSON itself in token mode and a MUNGE credential of it in MUNGE
// mode (Content-Type text/plain then); verify_* return the JSON.

#include <sys/types.h>

#include <memory>
#include <string>
#include <string_view>

#include "cluster/auth.h"
#include "cluster/munge_auth.h"
#include "core/result.h"

namespace carma::cluster::auth {

struct SignedMessage {
    std::string header;  // the value of kAuthHeader
    std::string body;    // what to send as the HTTP body
    std::string nonce;   // the request's nonce (the answer must be bound to it)
};

class AgentAuth {
public:
    virtual ~AgentAuth() = default;
    virtual Mode mode() const = 0;
    virtual Result<SignedMessage> sign_request(std::string_view body, double now_unix) const = 0;
    // The answer's JSON once its header and body verify against the request's nonce.
    virtual Result<std::string> verify_answer(std::string_view header, std::string_view nonce,
                                              std::string_view body, double now_unix) const = 0;
};

// Safe from several threads (the replay guard has its own lock).
class ServerAuth {
public:
    virtual ~ServerAuth() = default;
    virtual Mode mode() const = 0;
    // Checks the header and takes its nonce (a second use of it is refused as a replay).
    virtual Result<RequestHead> verify_head(std::string_view header, double now_unix) = 0;
    // The request's JSON once the body verifies against the head.
    virtual Result<std::string> verify_body(const RequestHead& head,
                                            std::string_view body) const = 0;
    virtual Result<SignedMessage> sign_answer(const RequestHead& head, std::string_view body,
                                              double now_unix) const = 0;
    // The server starts at `start_unix`: a request signed before it is refused, since the
    // nonces taken before a restart are not remembered (ReplayGuard).
    virtual void refuse_signed_before(double start_unix) = 0;
};

// Token mode. The agent holds its node's key (node_key(master, node)); the server finds any
// node's key with key_of (keys_from_master(master) for a server that holds the master token).
Result<std::unique_ptr<AgentAuth>> token_agent(std::string node, std::string key,
                                               double window_s = kDefaultWindowS);
Result<std::unique_ptr<ServerAuth>> token_server(KeyOf key_of, double window_s = kDefaultWindowS);

// MUNGE mode. The agent accepts answers encoded by `server_uid`; the server accepts requests
// encoded by `agent_uid`.
Result<std::unique_ptr<AgentAuth>> munge_agent(Munge munge, std::string node, uid_t server_uid,
                                               double window_s = kDefaultWindowS);
Result<std::unique_ptr<ServerAuth>> munge_server(Munge munge, uid_t agent_uid,
                                                 double window_s = kDefaultWindowS);

}  // namespace carma::cluster::auth
