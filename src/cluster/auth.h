#pragma once
// Authentication of the agent's reports and the server's answers in token mode (outside Slurm):
// keyed HMAC-SHA256 over the message, a timestamp and a random nonce; the key itself never
// travels. Pure apart from the random nonce: the clock is the caller's, nothing is stored.
//
// Keys. The server holds a master token; each node's key is node_key(master, node), a 64-digit
// hex string. A node is given only its own key, so it cannot sign as another node, and the
// server derives any node's key from the name in the header without a table.
//
// A request carries one header (kAuthHeader) whose value is, fields in this order, one space
// between them:
//   carma1 token node=<node> ts=<unix s> nonce=<32 hex> len=<body bytes> body=<64 hex> head=<64 hex>
// body = HMAC(key, "carma-request-body\n" ts|nonce|node|len|SHA-256(body)) and
// head = HMAC(key, "carma-request-head\n" + every field before " head="). The head MAC covers the
// whole header, so the server refuses a sender without the key (401) before it reads the body,
// and may refuse a too-long `len` then too. The body MAC then binds the body to that header.
//
// Replay. The server refuses a ts more than the window away from its clock, and remembers the
// nonces of the window (ReplayGuard): a captured report sent again is refused by one or the
// other. An answer carries (same header name)
//   carma1 token ts=<unix s> mac=<64 hex>
// mac = HMAC(key, "carma-answer\n" ts|request nonce|len|SHA-256(body)): bound to the request's
// nonce, so the agent refuses an old answer, one meant for another request, and one from a server
// that does not have its key.
//
// Errors: every refusal is ErrorCode::InvalidArgument with a message that says which check
// failed and what to look at; none of them quotes a key or a MAC. The server answers any of them
// with 401, and should log the message. The caller must still check that the node named in the
// report's JSON is the authenticated RequestHead::node.

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/node_name.h"
#include "core/result.h"
#include "core/secret.h"

namespace carma::cluster::auth {

// The HTTP header of a request and of its answer.
inline constexpr std::string_view kAuthHeader = "X-Carma-Auth";
// How far a timestamp may be from the verifier's clock, either way, by default (seconds).
inline constexpr double kDefaultWindowS = 60;
using carma::kMaxNodeNameLength;
inline constexpr std::size_t kNonceHexLength = 32;

enum class Mode { Token, Munge };

// 1..255 characters of [A-Za-z0-9._-], not "." or ".." (core/node_name.h).
using carma::valid_node_name;

// Lowercase hex of SHA-256(data) (core/secret.h).
using carma::sha256_hex;

// 16 random bytes (OpenSSL's RAND_bytes) as 32 lowercase hex digits.
Result<std::string> new_nonce();

// The key of `node` under the server's master token: hex HMAC-SHA256(master, "carma-node-key:" +
// node). What a node's agent is given instead of the master token.
std::string node_key(std::string_view master_token, std::string_view node);

// A request's header, as the verifier read it. In MUNGE mode (cluster/munge_auth.h) the MACs are
// empty and munged vouches for uid, gid and origin_addr instead.
struct RequestHead {
    Mode mode = Mode::Token;
    std::string node;
    std::string ts_text;  // the timestamp exactly as signed
    double ts = 0;        // unix seconds
    std::string nonce;    // 32 lowercase hex digits: what the answer is bound to
    std::uint64_t body_length = 0;
    std::string body_mac;     // token mode: hex HMAC the body must have
    std::string head_mac;     // token mode: hex HMAC of the header (already checked)
    std::string body_sha256;  // MUNGE mode: hex SHA-256 the body must have
    uid_t uid = 0;            // MUNGE mode: who encoded the credential
    gid_t gid = 0;
    std::string origin_addr;  // MUNGE mode: dotted IPv4 address of the encoding host
};

// The header value of a request of `node` with `body`, at `now_unix`, under `key` (node_key's
// result). Fails on an invalid node name, an empty key, a clock before 1970 or not finite, a
// nonce that is not 32 lowercase hex digits, or when no random nonce can be drawn.
Result<std::string> sign_request(std::string_view key, std::string_view node,
                                 std::string_view body, double now_unix);
Result<std::string> sign_request(std::string_view key, std::string_view node,
                                 std::string_view body, double now_unix, std::string_view nonce);

// The key of a node, nothing for a node the server does not know.
using KeyOf = std::function<std::optional<std::string>(const std::string& node)>;

// key_of for a server that holds the master token: node_key(master, node) for any node.
KeyOf keys_from_master(std::string master_token);

// Reads a request header strictly and checks its timestamp and head MAC (constant time): the
// checks that need no body. Any malformed input is an error, never an exception.
Result<RequestHead> verify_request_head(std::string_view header, const KeyOf& key_of,
                                        double now_unix, double window_s = kDefaultWindowS);

// The body against a head that verify_request_head accepted: its length and its MAC.
Result<void> verify_request_body(const RequestHead& head, std::string_view key,
                                 std::string_view body);

// The nonces a server has accepted within the window. first_use is true the first time a
// (node, nonce) is offered while `ts` is within the window of `now`; false for a nonce seen
// before, a ts outside the window, or when the guard is full (max_entries overall or
// max_per_node for the node; entries leave once their ts is older than the window). Call it once
// the head MAC has been checked, so only holders of a key can fill it. Safe from several threads.
//
// The nonces live in memory, so a server that restarts has forgotten them: it refuses every
// request signed before it started (refuse_signed_before), which any request it may have taken
// before the restart was. An agent whose clock is behind the server's is refused so after a
// restart until its clock passes the start (at most the window).
class ReplayGuard {
public:
    explicit ReplayGuard(double window_s, std::size_t max_entries = 100000,
                         std::size_t max_per_node = 10000);
    bool first_use(const std::string& node, const std::string& nonce, double ts, double now);
    std::size_t size() const;

    // From now on a ts before `start_unix` (to the millisecond a timestamp carries) is refused:
    // the server's start.
    void refuse_signed_before(double start_unix);
    // Whether `ts` is before that start (false when none was given).
    bool signed_before_start(double ts) const;
    double start() const;

private:
    void forget_older_than(double cutoff);

    double window_s_;
    double not_before_ = 0;
    std::size_t max_entries_;
    std::size_t max_per_node_;
    mutable std::mutex mutex_;
    std::multimap<double, std::string> by_ts_;         // ts -> node '\n' nonce
    std::unordered_map<std::string, double> seen_;     // node '\n' nonce -> ts
    std::unordered_map<std::string, std::size_t> per_node_;
};

// The answer's header value for the request whose nonce is `request_nonce`. Fails on an empty
// key, a malformed nonce or a clock that is not a unix time.
Result<std::string> sign_answer(std::string_view key, std::string_view request_nonce,
                                std::string_view body, double now_unix);

// Checks an answer's header against the body received, the nonce of the request it answers and
// the agent's key; its timestamp must be within the window of `now_unix`.
Result<void> verify_answer(std::string_view header, std::string_view key,
                           std::string_view request_nonce, std::string_view body,
                           double now_unix, double window_s = kDefaultWindowS);

// ---- pieces cluster/munge_auth.cpp shares ----------------------------------------------------
namespace detail {

// "1700000000.250": what a timestamp looks like on the wire (milliseconds).
Result<std::string> format_ts(double now_unix);
// Strict: 1..12 digits, optionally '.' and 1..9 digits; nothing else.
std::optional<double> parse_ts(std::string_view text);
// Strict decimal without sign or leading zeros, at most 19 digits.
std::optional<std::uint64_t> parse_length(std::string_view text);
bool is_lower_hex(std::string_view text, std::size_t length);
// The timestamp `ts` against the clock: a message naming `what` when it is outside the window.
Result<void> check_window(double ts, double now_unix, double window_s, std::string_view what);

}  // namespace detail

}  // namespace carma::cluster::auth
