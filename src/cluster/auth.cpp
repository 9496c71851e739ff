#include "cluster/auth.h"

#include <openssl/rand.h>

#include <array>
#include <charconv>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "core/secret.h"

namespace carma::cluster::auth {

namespace {

constexpr std::string_view kVersion = "carma1";
constexpr std::string_view kTokenMode = "token";
// Longer than any header we write (node names are bounded); a longer one is refused unread.
constexpr std::size_t kMaxHeaderLength = 1024;
constexpr std::size_t kMacHexLength = 64;

// The fields split at single spaces; an empty field (two spaces) stays as "".
std::vector<std::string_view> split_fields(std::string_view text) {
    std::vector<std::string_view> fields;
    while (true) {
        const std::size_t space = text.find(' ');
        fields.push_back(text.substr(0, space));
        if (space == std::string_view::npos) {
            return fields;
        }
        text.remove_prefix(space + 1);
    }
}

// The value of "name=value", nothing when the field is named otherwise.
std::optional<std::string_view> field_value(std::string_view field, std::string_view name) {
    if (field.size() <= name.size() || !field.starts_with(name) || field[name.size()] != '=') {
        return std::nullopt;
    }
    return field.substr(name.size() + 1);
}

Error malformed(std::string_view what, std::string_view why) {
    return Error{ErrorCode::InvalidArgument,
                 fmt::format("the {} header ({}) is malformed: {}", what, kAuthHeader, why)};
}

std::string body_message(std::string_view ts, std::string_view nonce, std::string_view node,
                         std::uint64_t length, std::string_view body) {
    return fmt::format("carma-request-body\n{}|{}|{}|{}|{}", ts, nonce, node, length,
                       sha256_hex(body));
}

std::string answer_message(std::string_view ts, std::string_view nonce, std::string_view body) {
    return fmt::format("carma-answer\n{}|{}|{}|{}", ts, nonce, body.size(), sha256_hex(body));
}

Result<void> check_nonce(std::string_view nonce) {
    if (!detail::is_lower_hex(nonce, kNonceHexLength)) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("a nonce is {} lowercase hex digits (new_nonce() draws one)",
                                kNonceHexLength));
    }
    return {};
}

}  // namespace

namespace detail {

Result<std::string> format_ts(double now_unix) {
    if (!std::isfinite(now_unix) || now_unix < 0 || now_unix >= 1e12) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("the clock reads {}, not a unix time in seconds", now_unix));
    }
    return fmt::format("{:.3f}", now_unix);
}

std::optional<double> parse_ts(std::string_view text) {
    const std::size_t dot = text.find('.');
    const std::string_view whole = text.substr(0, dot);
    const std::string_view fraction =
        dot == std::string_view::npos ? std::string_view{} : text.substr(dot + 1);
    const auto digits = [](std::string_view s) {
        for (char c : s) {
            if (c < '0' || c > '9') {
                return false;
            }
        }
        return true;
    };
    if (whole.empty() || whole.size() > 12 || !digits(whole) ||
        (dot != std::string_view::npos &&
         (fraction.empty() || fraction.size() > 9 || !digits(fraction)))) {
        return std::nullopt;
    }
    double value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) {
        return std::nullopt;
    }
    return value;
}

std::optional<std::uint64_t> parse_length(std::string_view text) {
    if (text.empty() || text.size() > 19 || (text.size() > 1 && text[0] == '0')) {
        return std::nullopt;
    }
    for (char c : text) {
        if (c < '0' || c > '9') {
            return std::nullopt;
        }
    }
    std::uint64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size()) {
        return std::nullopt;
    }
    return value;
}

bool is_lower_hex(std::string_view text, std::size_t length) {
    if (text.size() != length) {
        return false;
    }
    for (char c : text) {
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
            return false;
        }
    }
    return true;
}

Result<void> check_window(double ts, double now_unix, double window_s, std::string_view what) {
    const double offset = ts - now_unix;
    if (!std::isfinite(offset) || std::fabs(offset) > window_s) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("the {}'s timestamp is {:.1f} s {} this clock (at most {:g} s "
                                "either way): a replayed message, or clocks out of sync (NTP)",
                                what, std::fabs(offset), offset < 0 ? "behind" : "ahead of",
                                window_s));
    }
    return {};
}

}  // namespace detail

Result<std::string> new_nonce() {
    std::array<unsigned char, kNonceHexLength / 2> bytes{};
    if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) {
        return fail(ErrorCode::Internal,
                    "OpenSSL's random generator (RAND_bytes) gave no nonce: is /dev/urandom "
                    "readable?");
    }
    return hex_lower(bytes.data(), bytes.size());
}

std::string node_key(std::string_view master_token, std::string_view node) {
    return hmac_sha256_hex(master_token, fmt::format("carma-node-key:{}", node));
}

KeyOf keys_from_master(std::string master_token) {
    return [master = std::move(master_token)](const std::string& node) -> std::optional<std::string> {
        if (master.empty() || !valid_node_name(node)) {
            return std::nullopt;
        }
        return node_key(master, node);
    };
}

Result<std::string> sign_request(std::string_view key, std::string_view node,
                                 std::string_view body, double now_unix) {
    auto nonce = new_nonce();
    if (!nonce) {
        return tl::unexpected(nonce.error());
    }
    return sign_request(key, node, body, now_unix, *nonce);
}

Result<std::string> sign_request(std::string_view key, std::string_view node,
                                 std::string_view body, double now_unix, std::string_view nonce) {
    if (key.empty()) {
        return fail(ErrorCode::InvalidArgument, "the node's key is empty: nothing to sign with");
    }
    if (!valid_node_name(node)) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("node name '{}' cannot be signed: 1 to {} characters of "
                                "A-Z a-z 0-9 . _ -",
                                node.substr(0, 64), kMaxNodeNameLength));
    }
    if (auto ok = check_nonce(nonce); !ok) {
        return tl::unexpected(ok.error());
    }
    auto ts = detail::format_ts(now_unix);
    if (!ts) {
        return tl::unexpected(ts.error());
    }
    const std::string body_mac = hmac_sha256_hex(key, body_message(*ts, nonce, node, body.size(), body));
    std::string header = fmt::format("{} {} node={} ts={} nonce={} len={} body={}", kVersion,
                                     kTokenMode, node, *ts, nonce, body.size(), body_mac);
    const std::string head_mac = hmac_sha256_hex(key, "carma-request-head\n" + header);
    if (body_mac.empty() || head_mac.empty()) {
        return fail(ErrorCode::Internal, "OpenSSL could not compute an HMAC-SHA256");
    }
    header += " head=" + head_mac;
    return header;
}

Result<RequestHead> verify_request_head(std::string_view header, const KeyOf& key_of,
                                        double now_unix, double window_s) {
    constexpr std::string_view kWhat = "request";
    if (header.empty()) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("the request has no {} header: the agent sends no credentials "
                                "(give it its node key)",
                                kAuthHeader));
    }
    if (header.size() > kMaxHeaderLength) {
        return tl::unexpected(malformed(kWhat, fmt::format("longer than {} characters",
                                                           kMaxHeaderLength)));
    }
    const std::vector<std::string_view> f = split_fields(header);
    if (f[0] != kVersion) {
        return tl::unexpected(malformed(
            kWhat, "it does not start with 'carma1': an agent of another CARMA version?"));
    }
    if (f.size() > 1 && f[1] != kTokenMode) {
        return tl::unexpected(malformed(
            kWhat, "its mode is not 'token': the agent and the server disagree on the "
                   "authentication mode (token or MUNGE)"));
    }
    if (f.size() != 8) {
        return tl::unexpected(malformed(kWhat, "it does not have the 8 fields of carma1 token"));
    }
    const auto node = field_value(f[2], "node");
    const auto ts_text = field_value(f[3], "ts");
    const auto nonce = field_value(f[4], "nonce");
    const auto length_text = field_value(f[5], "len");
    const auto body_mac = field_value(f[6], "body");
    const auto head_mac = field_value(f[7], "head");
    if (!node || !valid_node_name(*node)) {
        return tl::unexpected(malformed(kWhat, "no valid node= (1 to 255 of A-Z a-z 0-9 . _ -)"));
    }
    const std::optional<double> ts = ts_text ? detail::parse_ts(*ts_text) : std::nullopt;
    if (!ts) {
        return tl::unexpected(malformed(kWhat, "no valid ts= (unix seconds)"));
    }
    if (!nonce || !detail::is_lower_hex(*nonce, kNonceHexLength)) {
        return tl::unexpected(malformed(kWhat, "no valid nonce= (32 lowercase hex digits)"));
    }
    const std::optional<std::uint64_t> length =
        length_text ? detail::parse_length(*length_text) : std::nullopt;
    if (!length) {
        return tl::unexpected(malformed(kWhat, "no valid len= (a decimal byte count)"));
    }
    if (!body_mac || !detail::is_lower_hex(*body_mac, kMacHexLength) || !head_mac ||
        !detail::is_lower_hex(*head_mac, kMacHexLength)) {
        return tl::unexpected(malformed(kWhat, "no valid body= and head= (64 hex digits each)"));
    }
    if (auto in_window = detail::check_window(*ts, now_unix, window_s, kWhat); !in_window) {
        return tl::unexpected(in_window.error());
    }
    const std::string node_name(*node);
    const std::optional<std::string> key = key_of ? key_of(node_name) : std::nullopt;
    if (!key || key->empty()) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("node '{}' has no key on this server: it is not one of the nodes "
                                "the server knows",
                                node_name));
    }
    const std::string_view signed_part = header.substr(0, header.size() - f[7].size() - 1);
    const std::string expected =
        hmac_sha256_hex(*key, fmt::format("carma-request-head\n{}", signed_part));
    if (expected.empty() || !secrets_equal(expected, *head_mac)) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("the request's MAC does not verify with node '{}''s key: the "
                                "agent's key is another node's, or derived from another master "
                                "token (the agent needs node_key(master token, '{}'))",
                                node_name, node_name));
    }
    RequestHead head;
    head.mode = Mode::Token;
    head.node = node_name;
    head.ts_text = std::string(*ts_text);
    head.ts = *ts;
    head.nonce = std::string(*nonce);
    head.body_length = *length;
    head.body_mac = std::string(*body_mac);
    head.head_mac = std::string(*head_mac);
    return head;
}

Result<void> verify_request_body(const RequestHead& head, std::string_view key,
                                 std::string_view body) {
    if (head.mode != Mode::Token) {
        return fail(ErrorCode::InvalidArgument,
                    "a MUNGE request's body is checked by verify_munge_body, not with a key");
    }
    if (body.size() != head.body_length) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("node '{}''s request body has {} bytes, its header says {}: "
                                "cut short or changed in transit",
                                head.node, body.size(), head.body_length));
    }
    const std::string expected =
        hmac_sha256_hex(key, body_message(head.ts_text, head.nonce, head.node, body.size(), body));
    if (key.empty() || expected.empty() || !secrets_equal(expected, head.body_mac)) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("node '{}''s request body does not match its MAC: changed in "
                                "transit, or not the body the header was signed with",
                                head.node));
    }
    return {};
}

ReplayGuard::ReplayGuard(double window_s, std::size_t max_entries, std::size_t max_per_node)
    : window_s_(window_s), max_entries_(max_entries), max_per_node_(max_per_node) {}

void ReplayGuard::forget_older_than(double cutoff) {
    while (!by_ts_.empty() && by_ts_.begin()->first < cutoff) {
        const std::string& entry = by_ts_.begin()->second;
        seen_.erase(entry);
        const std::string node = entry.substr(0, entry.find('\n'));
        if (auto it = per_node_.find(node); it != per_node_.end() && --it->second == 0) {
            per_node_.erase(it);
        }
        by_ts_.erase(by_ts_.begin());
    }
}

void ReplayGuard::refuse_signed_before(double start_unix) {
    std::lock_guard lock(mutex_);
    // Timestamps travel rounded to the millisecond: a request signed just after the start may
    // carry the start's millisecond rounded down, and must still pass.
    not_before_ = std::isfinite(start_unix) ? std::floor(start_unix * 1000) / 1000 : 0;
}

bool ReplayGuard::signed_before_start(double ts) const {
    std::lock_guard lock(mutex_);
    return !(ts >= not_before_);
}

double ReplayGuard::start() const {
    std::lock_guard lock(mutex_);
    return not_before_;
}

bool ReplayGuard::first_use(const std::string& node, const std::string& nonce, double ts,
                            double now) {
    if (!std::isfinite(ts) || !std::isfinite(now) || std::fabs(ts - now) > window_s_) {
        return false;
    }
    std::lock_guard lock(mutex_);
    if (!(ts >= not_before_)) {
        return false;  // before the server's start: its nonce may have been taken then
    }
    // A ts older than this is refused by the window check already, so its nonce can go.
    forget_older_than(now - window_s_);
    std::string entry = node + '\n' + nonce;
    if (seen_.contains(entry) || seen_.size() >= max_entries_) {
        return false;
    }
    const auto count = per_node_.find(node);
    if ((count == per_node_.end() ? 0 : count->second) >= max_per_node_) {
        return false;
    }
    ++per_node_[node];
    seen_.emplace(entry, ts);
    by_ts_.emplace(ts, std::move(entry));
    return true;
}

std::size_t ReplayGuard::size() const {
    std::lock_guard lock(mutex_);
    return seen_.size();
}

Result<std::string> sign_answer(std::string_view key, std::string_view request_nonce,
                                std::string_view body, double now_unix) {
    if (key.empty()) {
        return fail(ErrorCode::InvalidArgument, "the node's key is empty: nothing to sign with");
    }
    if (auto ok = check_nonce(request_nonce); !ok) {
        return tl::unexpected(ok.error());
    }
    auto ts = detail::format_ts(now_unix);
    if (!ts) {
        return tl::unexpected(ts.error());
    }
    const std::string mac = hmac_sha256_hex(key, answer_message(*ts, request_nonce, body));
    if (mac.empty()) {
        return fail(ErrorCode::Internal, "OpenSSL could not compute an HMAC-SHA256");
    }
    return fmt::format("{} {} ts={} mac={}", kVersion, kTokenMode, *ts, mac);
}

Result<void> verify_answer(std::string_view header, std::string_view key,
                           std::string_view request_nonce, std::string_view body,
                           double now_unix, double window_s) {
    constexpr std::string_view kWhat = "answer";
    if (header.empty()) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("the server's answer has no {} header: not a CARMA server that "
                                "knows this node's key",
                                kAuthHeader));
    }
    if (header.size() > kMaxHeaderLength) {
        return tl::unexpected(malformed(kWhat, fmt::format("longer than {} characters",
                                                           kMaxHeaderLength)));
    }
    const std::vector<std::string_view> f = split_fields(header);
    if (f.size() != 4 || f[0] != kVersion || f[1] != kTokenMode) {
        return tl::unexpected(malformed(kWhat, "not 'carma1 token ts=... mac=...'"));
    }
    const auto ts_text = field_value(f[2], "ts");
    const auto mac = field_value(f[3], "mac");
    const std::optional<double> ts = ts_text ? detail::parse_ts(*ts_text) : std::nullopt;
    if (!ts) {
        return tl::unexpected(malformed(kWhat, "no valid ts= (unix seconds)"));
    }
    if (!mac || !detail::is_lower_hex(*mac, kMacHexLength)) {
        return tl::unexpected(malformed(kWhat, "no valid mac= (64 hex digits)"));
    }
    if (auto ok = check_nonce(request_nonce); !ok) {
        return tl::unexpected(ok.error());
    }
    if (auto in_window = detail::check_window(*ts, now_unix, window_s, kWhat); !in_window) {
        return tl::unexpected(in_window.error());
    }
    const std::string expected = hmac_sha256_hex(key, answer_message(*ts_text, request_nonce, body));
    if (key.empty() || expected.empty() || !secrets_equal(expected, *mac)) {
        return fail(ErrorCode::InvalidArgument,
                    "the server's answer does not verify with this node's key: an answer to "
                    "another request, changed in transit, or from a server without this node's "
                    "master token");
    }
    return {};
}

}  // namespace carma::cluster::auth
