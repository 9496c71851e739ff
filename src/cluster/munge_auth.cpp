#include "cluster/munge_auth.h"

#include <arpa/inet.h>
#include <munge.h>
#include <netinet/in.h>

#include <cstdlib>
#include <memory>
#include <optional>
#include <vector>

#include <fmt/format.h>

namespace carma::cluster::auth {

namespace {

constexpr std::string_view kHeaderPrefix = "carma1 munge ";
constexpr std::string_view kRequestPrefix = "carma-munge-request v1\n";
constexpr std::string_view kAnswerPrefix = "carma-munge-answer v1\n";
constexpr std::string_view kBodyPrefix = "carma-munge-body v1\n";
// munged 0.5.15's MUNGE_MAXIMUM_REQ_LEN: no credential longer than this can be decoded.
constexpr std::size_t kMaxCredential = 1048576;
// The decode request adds a few fields to the credential; a credential this long still fits.
constexpr std::size_t kMaxDecodableCredential = kMaxCredential - 256;
// A header's credential holds ~200 bytes; anything much longer is not one of ours.
constexpr std::size_t kMaxHeaderCredential = 2048;

using Context = std::unique_ptr<struct munge_ctx, decltype(&munge_ctx_destroy)>;

Result<Context> context(const std::string& socket, bool explicit_socket) {
    Context ctx(munge_ctx_create(), &munge_ctx_destroy);
    if (!ctx) {
        return fail(ErrorCode::Internal, "libmunge could not create a context (out of memory?)");
    }
    if (explicit_socket &&
        munge_ctx_set(ctx.get(), MUNGE_OPT_SOCKET, socket.c_str()) != EMUNGE_SUCCESS) {
        return fail(ErrorCode::Internal,
                    fmt::format("libmunge refuses socket {}: {}", socket,
                                munge_ctx_strerror(ctx.get())));
    }
    return ctx;
}

// What munged said, as an error naming its socket and what to look at.
Error munge_error(munge_err_t e, munge_ctx_t ctx, const std::string& socket,
                  std::string_view doing) {
    const char* detail = ctx != nullptr ? munge_ctx_strerror(ctx) : nullptr;
    const std::string said = detail != nullptr ? detail : munge_strerror(e);
    switch (e) {
        case EMUNGE_SOCKET:
        case EMUNGE_TIMEOUT:
            return Error{ErrorCode::Io,
                         fmt::format("cannot {} through munged at {}: {} (is munged running on "
                                     "this node, and is that its socket?)",
                                     doing, socket, said)};
        case EMUNGE_CRED_REPLAYED:
            return Error{ErrorCode::InvalidArgument,
                         fmt::format("the MUNGE credential was replayed: munged at {} has "
                                     "decoded it before ({})",
                                     socket, said)};
        case EMUNGE_CRED_EXPIRED:
            return Error{ErrorCode::InvalidArgument,
                         fmt::format("the MUNGE credential has expired ({}): an old message, or "
                                     "this node's clock is behind the encoding node's (NTP)",
                                     said)};
        case EMUNGE_CRED_REWOUND:
            return Error{ErrorCode::InvalidArgument,
                         fmt::format("the MUNGE credential was encoded in the future ({}): the "
                                     "nodes' clocks are out of sync (NTP)",
                                     said)};
        case EMUNGE_BAD_LENGTH:
            return Error{ErrorCode::InvalidArgument,
                         fmt::format("too long for munged at {} ({}): munged 0.5.15 takes at "
                                     "most 1 MiB per request",
                                     socket, said)};
        case EMUNGE_BAD_CRED:
        case EMUNGE_BAD_VERSION:
        case EMUNGE_BAD_CIPHER:
        case EMUNGE_BAD_MAC:
        case EMUNGE_BAD_ZIP:
        case EMUNGE_BAD_REALM:
        case EMUNGE_CRED_INVALID:
            return Error{ErrorCode::InvalidArgument,
                         fmt::format("munged at {} refuses the credential: {} (not a MUNGE "
                                     "credential, or encoded with another key: every node's "
                                     "munged needs the same munge.key)",
                                     socket, said)};
        case EMUNGE_CRED_UNAUTHORIZED:
            return Error{ErrorCode::InvalidArgument,
                         fmt::format("munged at {} does not let this user decode the credential: "
                                     "{} (it is restricted to another uid: the server's "
                                     "--agent-uid or the agent's --server-uid names another "
                                     "user than the one running there)",
                                     socket, said)};
        default:
            return Error{ErrorCode::Io, fmt::format("cannot {} through munged at {}: {}", doing,
                                                    socket, said)};
    }
}

std::vector<std::string_view> split_bars(std::string_view text) {
    std::vector<std::string_view> parts;
    while (true) {
        const std::size_t bar = text.find('|');
        parts.push_back(text.substr(0, bar));
        if (bar == std::string_view::npos) {
            return parts;
        }
        text.remove_prefix(bar + 1);
    }
}

// The credential of a "carma1 munge <credential>" header.
Result<std::string_view> header_credential(std::string_view header, std::string_view what) {
    if (header.empty()) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("the {} has no {} header: its sender does not authenticate with "
                                "MUNGE",
                                what, kAuthHeader));
    }
    if (!header.starts_with(kHeaderPrefix)) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("the {}'s {} header is not 'carma1 munge <credential>': the "
                                "agent and the server disagree on the authentication mode (token "
                                "or MUNGE), or on the CARMA version",
                                what, kAuthHeader));
    }
    const std::string_view credential = header.substr(kHeaderPrefix.size());
    if (credential.empty() || credential.size() > kMaxHeaderCredential) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("the {}'s {} header holds no credential of a sane length", what,
                                kAuthHeader));
    }
    return credential;
}

Result<MungeDecoded> decode_from(const Munge& munge, std::string_view credential,
                                 uid_t expected_uid, std::string_view what) {
    auto decoded = munge.decode(credential);
    if (!decoded) {
        return tl::unexpected(Error{decoded.error().code,
                                    fmt::format("the {}: {}", what, decoded.error().message)});
    }
    if (decoded->uid != expected_uid) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("the {} was encoded by uid {}, not uid {} as expected: another "
                                "user's process on {}",
                                what, decoded->uid, expected_uid, decoded->origin_addr));
    }
    return decoded;
}

Result<std::string> header_of(const Munge& munge, std::string_view prefix,
                              std::string_view fields, uid_t reader) {
    std::string payload(prefix);
    payload += fields;
    auto credential = munge.encode(payload, Munge::Zip::None, reader);
    if (!credential) {
        return tl::unexpected(credential.error());
    }
    return std::string(kHeaderPrefix) + *credential;
}

}  // namespace

Result<Munge> Munge::open(std::string socket_path) {
    const bool explicit_socket = !socket_path.empty();
    if (!explicit_socket) {
        auto ctx = context("", false);
        if (!ctx) {
            return tl::unexpected(ctx.error());
        }
        char* path = nullptr;
        if (munge_ctx_get(ctx->get(), MUNGE_OPT_SOCKET, &path) == EMUNGE_SUCCESS && path) {
            socket_path = path;
        }
    }
    Munge munge(std::move(socket_path), explicit_socket);
    if (auto probe = munge.encode(""); !probe) {
        return tl::unexpected(probe.error());
    }
    return munge;
}

Result<std::string> Munge::encode(std::string_view payload, Zip zip,
                                  std::optional<uid_t> reader) const {
    if (payload.size() > kMaxCredential) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("a payload of {} bytes is more than munged 0.5.15 takes (1 MiB)",
                                payload.size()));
    }
    auto ctx = context(socket_, explicit_socket_);
    if (!ctx) {
        return tl::unexpected(ctx.error());
    }
    if (zip == Zip::Zlib &&
        munge_ctx_set(ctx->get(), MUNGE_OPT_ZIP_TYPE, MUNGE_ZIP_ZLIB) != EMUNGE_SUCCESS) {
        return fail(ErrorCode::Internal, fmt::format("libmunge refuses zlib compression: {}",
                                                     munge_ctx_strerror(ctx->get())));
    }
    if (reader && munge_ctx_set(ctx->get(), MUNGE_OPT_UID_RESTRICTION, *reader) !=
                      EMUNGE_SUCCESS) {
        return fail(ErrorCode::Internal,
                    fmt::format("libmunge refuses to restrict a credential to uid {}: {}",
                                *reader, munge_ctx_strerror(ctx->get())));
    }
    char* credential = nullptr;
    const munge_err_t e = munge_encode(&credential, ctx->get(), payload.data(),
                                       static_cast<int>(payload.size()));
    std::unique_ptr<char, decltype(&std::free)> owned(credential, &std::free);
    if (e != EMUNGE_SUCCESS || credential == nullptr) {
        return tl::unexpected(munge_error(e, ctx->get(), socket_, "encode a credential"));
    }
    std::string text(credential);
    if (text.size() > kMaxDecodableCredential) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("a payload of {} bytes makes a credential of {} bytes, more than "
                                "munged 0.5.15 decodes (1 MiB): the payload compresses too "
                                "poorly to travel through MUNGE",
                                payload.size(), text.size()));
    }
    return text;
}

Result<MungeDecoded> Munge::decode(std::string_view credential) const {
    if (credential.size() > kMaxCredential) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("a credential of {} bytes is more than munged 0.5.15 decodes "
                                "(1 MiB)",
                                credential.size()));
    }
    if (credential.empty() || credential.find('\0') != std::string_view::npos) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("not a MUNGE credential: {} bytes{}", credential.size(),
                                credential.find('\0') != std::string_view::npos
                                    ? " with a NUL byte"
                                    : ""));
    }
    auto ctx = context(socket_, explicit_socket_);
    if (!ctx) {
        return tl::unexpected(ctx.error());
    }
    const std::string text(credential);  // libmunge reads a NUL-terminated string
    void* buf = nullptr;
    int len = 0;
    uid_t uid = 0;
    gid_t gid = 0;
    const munge_err_t e = munge_decode(text.c_str(), ctx->get(), &buf, &len, &uid, &gid);
    // Allocated even for some errors (expired, replayed): freed on every path.
    std::unique_ptr<void, decltype(&std::free)> owned(buf, &std::free);
    if (e != EMUNGE_SUCCESS) {
        return tl::unexpected(munge_error(e, ctx->get(), socket_, "decode a credential"));
    }
    MungeDecoded out;
    if (buf != nullptr && len > 0) {
        out.payload.assign(static_cast<const char*>(buf), static_cast<std::size_t>(len));
    }
    out.uid = uid;
    out.gid = gid;
    in_addr addr{};
    char text_addr[INET_ADDRSTRLEN] = "0.0.0.0";
    if (munge_ctx_get(ctx->get(), MUNGE_OPT_ADDR4, &addr) == EMUNGE_SUCCESS) {
        ::inet_ntop(AF_INET, &addr, text_addr, sizeof text_addr);
    }
    out.origin_addr = text_addr;
    return out;
}

Result<std::string> munge_request_header(const Munge& munge, std::string_view node,
                                         std::string_view body, double now_unix, uid_t reader) {
    auto nonce = new_nonce();
    if (!nonce) {
        return tl::unexpected(nonce.error());
    }
    return munge_request_header(munge, node, body, now_unix, reader, *nonce);
}

Result<std::string> munge_request_header(const Munge& munge, std::string_view node,
                                         std::string_view body, double now_unix, uid_t reader,
                                         std::string_view nonce) {
    if (!valid_node_name(node)) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("node name '{}' cannot be signed: 1 to {} characters of "
                                "A-Z a-z 0-9 . _ -",
                                node.substr(0, 64), kMaxNodeNameLength));
    }
    if (!detail::is_lower_hex(nonce, kNonceHexLength)) {
        return fail(ErrorCode::InvalidArgument, "a nonce is 32 lowercase hex digits");
    }
    auto ts = detail::format_ts(now_unix);
    if (!ts) {
        return tl::unexpected(ts.error());
    }
    return header_of(munge, kRequestPrefix,
                     fmt::format("{}|{}|{}|{}|{}", node, *ts, nonce, body.size(),
                                 sha256_hex(body)),
                     reader);
}

Result<RequestHead> verify_munge_head(const Munge& munge, std::string_view header,
                                      uid_t expected_uid, double now_unix, double window_s) {
    auto credential = header_credential(header, "request");
    if (!credential) {
        return tl::unexpected(credential.error());
    }
    auto decoded = decode_from(munge, *credential, expected_uid, "request's credential");
    if (!decoded) {
        return tl::unexpected(decoded.error());
    }
    const std::string_view payload = decoded->payload;
    const auto bad = [] {
        return fail(ErrorCode::InvalidArgument,
                    "the request's MUNGE credential does not hold a CARMA request header: the "
                    "agent is another CARMA version, or the credential was made for something "
                    "else");
    };
    if (!payload.starts_with(kRequestPrefix)) {
        return bad();
    }
    const std::vector<std::string_view> parts = split_bars(payload.substr(kRequestPrefix.size()));
    if (parts.size() != 5) {
        return bad();
    }
    const std::optional<double> ts = detail::parse_ts(parts[1]);
    const std::optional<std::uint64_t> length = detail::parse_length(parts[3]);
    if (!valid_node_name(parts[0]) || !ts || !detail::is_lower_hex(parts[2], kNonceHexLength) ||
        !length || !detail::is_lower_hex(parts[4], 64)) {
        return bad();
    }
    if (auto in_window = detail::check_window(*ts, now_unix, window_s, "request"); !in_window) {
        return tl::unexpected(in_window.error());
    }
    RequestHead head;
    head.mode = Mode::Munge;
    head.node = std::string(parts[0]);
    head.ts_text = std::string(parts[1]);
    head.ts = *ts;
    head.nonce = std::string(parts[2]);
    head.body_length = *length;
    head.body_sha256 = std::string(parts[4]);
    head.uid = decoded->uid;
    head.gid = decoded->gid;
    head.origin_addr = decoded->origin_addr;
    return head;
}

Result<std::string> munge_seal(const Munge& munge, std::string_view body, uid_t reader) {
    if (body.size() > kMungeMaxBody) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("a body of {} bytes is more than MUNGE mode carries ({} bytes; "
                                "munged 0.5.15 takes at most 1 MiB per request)",
                                body.size(), kMungeMaxBody));
    }
    std::string payload(kBodyPrefix);
    payload += body;
    return munge.encode(payload, Munge::Zip::Zlib, reader);
}

Result<std::string> munge_open(const Munge& munge, std::string_view credential,
                               uid_t expected_uid, std::string_view expected_sha256) {
    if (!detail::is_lower_hex(expected_sha256, 64)) {
        return fail(ErrorCode::InvalidArgument,
                    "a sealed body is opened against the SHA-256 of its header (64 hex digits)");
    }
    auto decoded = decode_from(munge, credential, expected_uid, "sealed body");
    if (!decoded) {
        return tl::unexpected(decoded.error());
    }
    if (!std::string_view(decoded->payload).starts_with(kBodyPrefix)) {
        return fail(ErrorCode::InvalidArgument,
                    "the body's MUNGE credential is not a sealed CARMA body (munge_seal)");
    }
    std::string body = decoded->payload.substr(kBodyPrefix.size());
    if (!secrets_equal(sha256_hex(body), expected_sha256)) {
        return fail(ErrorCode::InvalidArgument,
                    "the sealed body is not the one its header was made for (SHA-256 differs): "
                    "bodies and headers of different messages mixed");
    }
    return body;
}

Result<std::string> verify_munge_body(const Munge& munge, const RequestHead& head,
                                      std::string_view sealed_body) {
    if (head.mode != Mode::Munge) {
        return fail(ErrorCode::InvalidArgument,
                    "a token request's body is checked by verify_request_body, not by munged");
    }
    auto body = munge_open(munge, sealed_body, head.uid, head.body_sha256);
    if (!body) {
        return tl::unexpected(Error{body.error().code, fmt::format("node '{}''s request: {}",
                                                                   head.node,
                                                                   body.error().message)});
    }
    if (body->size() != head.body_length) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("node '{}''s request body has {} bytes, its header says {}",
                                head.node, body->size(), head.body_length));
    }
    return body;
}

Result<std::string> munge_answer_header(const Munge& munge, std::string_view request_nonce,
                                        std::string_view body, double now_unix, uid_t reader) {
    if (!detail::is_lower_hex(request_nonce, kNonceHexLength)) {
        return fail(ErrorCode::InvalidArgument, "a nonce is 32 lowercase hex digits");
    }
    auto ts = detail::format_ts(now_unix);
    if (!ts) {
        return tl::unexpected(ts.error());
    }
    return header_of(munge, kAnswerPrefix,
                     fmt::format("{}|{}|{}|{}", *ts, request_nonce, body.size(),
                                 sha256_hex(body)),
                     reader);
}

Result<std::string> verify_munge_answer(const Munge& munge, std::string_view header,
                                        uid_t expected_uid, std::string_view request_nonce,
                                        std::string_view sealed_body, double now_unix,
                                        double window_s) {
    auto credential = header_credential(header, "answer");
    if (!credential) {
        return tl::unexpected(credential.error());
    }
    auto decoded = decode_from(munge, *credential, expected_uid, "answer's credential");
    if (!decoded) {
        return tl::unexpected(decoded.error());
    }
    const std::string_view payload = decoded->payload;
    const auto bad = [] {
        return fail(ErrorCode::InvalidArgument,
                    "the answer's MUNGE credential does not hold a CARMA answer header: the "
                    "server is another CARMA version, or the credential was made for something "
                    "else");
    };
    if (!payload.starts_with(kAnswerPrefix)) {
        return bad();
    }
    const std::vector<std::string_view> parts = split_bars(payload.substr(kAnswerPrefix.size()));
    if (parts.size() != 4) {
        return bad();
    }
    const std::optional<double> ts = detail::parse_ts(parts[0]);
    const std::optional<std::uint64_t> length = detail::parse_length(parts[2]);
    if (!ts || !detail::is_lower_hex(parts[1], kNonceHexLength) || !length ||
        !detail::is_lower_hex(parts[3], 64)) {
        return bad();
    }
    if (!secrets_equal(parts[1], request_nonce)) {
        return fail(ErrorCode::InvalidArgument,
                    "the server's answer is bound to another request (its nonce differs): an old "
                    "answer replayed, or answers mixed up");
    }
    if (auto in_window = detail::check_window(*ts, now_unix, window_s, "answer"); !in_window) {
        return tl::unexpected(in_window.error());
    }
    auto body = munge_open(munge, sealed_body, expected_uid, parts[3]);
    if (!body) {
        return tl::unexpected(Error{body.error().code,
                                    fmt::format("the server's answer: {}", body.error().message)});
    }
    if (body->size() != *length) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("the server's answer body has {} bytes, its header says {}",
                                body->size(), *length));
    }
    return body;
}

}  // namespace carma::cluster::auth
