#include "cluster/authenticator.h"

#include <cmath>
#include <utility>

#include <fmt/format.h>

namespace carma::cluster::auth {

namespace {

Result<void> check_window_size(double window_s) {
    if (!std::isfinite(window_s) || window_s <= 0) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("the authentication window is {} s; it must be a positive number "
                                "of seconds",
                                window_s));
    }
    return {};
}

Error replayed(const RequestHead& head) {
    return Error{ErrorCode::InvalidArgument,
                 fmt::format("node '{}''s request reuses nonce {}: a replayed request (or the "
                             "server's replay memory is full)",
                             head.node, head.nonce)};
}

Error signed_before_start(const RequestHead& head, double start) {
    return Error{ErrorCode::InvalidArgument,
                 fmt::format("node '{}''s request was signed at {}, before this server started "
                             "({:.3f}): a request captured before a restart and sent again, or "
                             "the agent's clock is behind the server's (it is taken once the "
                             "agent's clock passes the start; NTP)",
                             head.node, head.ts_text, start)};
}

// A head that verified, once, and signed since the server started: the same rule in both
// modes, whatever munged's own replay cache holds.
Result<RequestHead> first_use_only(ReplayGuard& guard, Result<RequestHead> head, double now_unix) {
    if (head && guard.signed_before_start(head->ts)) {
        return tl::unexpected(signed_before_start(*head, guard.start()));
    }
    if (head && !guard.first_use(head->node, head->nonce, head->ts, now_unix)) {
        return tl::unexpected(replayed(*head));
    }
    return head;
}

class TokenAgent final : public AgentAuth {
public:
    TokenAgent(std::string node, std::string key, double window_s)
        : node_(std::move(node)), key_(std::move(key)), window_s_(window_s) {}

    Mode mode() const override { return Mode::Token; }

    Result<SignedMessage> sign_request(std::string_view body, double now_unix) const override {
        auto nonce = new_nonce();
        if (!nonce) {
            return tl::unexpected(nonce.error());
        }
        auto header = auth::sign_request(key_, node_, body, now_unix, *nonce);
        if (!header) {
            return tl::unexpected(header.error());
        }
        return SignedMessage{std::move(*header), std::string(body), std::move(*nonce)};
    }

    Result<std::string> verify_answer(std::string_view header, std::string_view nonce,
                                      std::string_view body, double now_unix) const override {
        if (auto ok = auth::verify_answer(header, key_, nonce, body, now_unix, window_s_); !ok) {
            return tl::unexpected(ok.error());
        }
        return std::string(body);
    }

private:
    std::string node_;
    std::string key_;
    double window_s_;
};

class TokenServer final : public ServerAuth {
public:
    TokenServer(KeyOf key_of, double window_s)
        : key_of_(std::move(key_of)), window_s_(window_s), guard_(window_s) {}

    Mode mode() const override { return Mode::Token; }

    Result<RequestHead> verify_head(std::string_view header, double now_unix) override {
        return first_use_only(guard_, verify_request_head(header, key_of_, now_unix, window_s_),
                              now_unix);
    }

    Result<std::string> verify_body(const RequestHead& head,
                                    std::string_view body) const override {
        auto key = key_for(head.node);
        if (!key) {
            return tl::unexpected(key.error());
        }
        if (auto ok = verify_request_body(head, *key, body); !ok) {
            return tl::unexpected(ok.error());
        }
        return std::string(body);
    }

    Result<SignedMessage> sign_answer(const RequestHead& head, std::string_view body,
                                      double now_unix) const override {
        auto key = key_for(head.node);
        if (!key) {
            return tl::unexpected(key.error());
        }
        auto header = auth::sign_answer(*key, head.nonce, body, now_unix);
        if (!header) {
            return tl::unexpected(header.error());
        }
        return SignedMessage{std::move(*header), std::string(body), head.nonce};
    }

    void refuse_signed_before(double start_unix) override {
        guard_.refuse_signed_before(start_unix);
    }

private:
    Result<std::string> key_for(const std::string& node) const {
        std::optional<std::string> key = key_of_(node);
        if (!key) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("node '{}' has no key on this server any more", node));
        }
        return std::move(*key);
    }

    KeyOf key_of_;
    double window_s_;
    ReplayGuard guard_;
};

class MungeAgent final : public AgentAuth {
public:
    MungeAgent(Munge munge, std::string node, uid_t server_uid, double window_s)
        : munge_(std::move(munge)), node_(std::move(node)), server_uid_(server_uid),
          window_s_(window_s) {}

    Mode mode() const override { return Mode::Munge; }

    Result<SignedMessage> sign_request(std::string_view body, double now_unix) const override {
        auto nonce = new_nonce();
        if (!nonce) {
            return tl::unexpected(nonce.error());
        }
        // For the server's uid alone: no other user of a munge host can read a report.
        auto header = munge_request_header(munge_, node_, body, now_unix, server_uid_, *nonce);
        if (!header) {
            return tl::unexpected(header.error());
        }
        auto sealed = munge_seal(munge_, body, server_uid_);
        if (!sealed) {
            return tl::unexpected(sealed.error());
        }
        return SignedMessage{std::move(*header), std::move(*sealed), std::move(*nonce)};
    }

    Result<std::string> verify_answer(std::string_view header, std::string_view nonce,
                                      std::string_view body, double now_unix) const override {
        return verify_munge_answer(munge_, header, server_uid_, nonce, body, now_unix, window_s_);
    }

private:
    Munge munge_;
    std::string node_;
    uid_t server_uid_;
    double window_s_;
};

class MungeServer final : public ServerAuth {
public:
    MungeServer(Munge munge, uid_t agent_uid, double window_s)
        : munge_(std::move(munge)), agent_uid_(agent_uid), window_s_(window_s),
          guard_(window_s) {}

    Mode mode() const override { return Mode::Munge; }

    Result<RequestHead> verify_head(std::string_view header, double now_unix) override {
        return first_use_only(
            guard_, verify_munge_head(munge_, header, agent_uid_, now_unix, window_s_), now_unix);
    }

    Result<std::string> verify_body(const RequestHead& head,
                                    std::string_view body) const override {
        return verify_munge_body(munge_, head, body);
    }

    Result<SignedMessage> sign_answer(const RequestHead& head, std::string_view body,
                                      double now_unix) const override {
        // For the agents' uid alone: no other user of a munge host can read a launch (its
        // command line and environment).
        auto header = munge_answer_header(munge_, head.nonce, body, now_unix, agent_uid_);
        if (!header) {
            return tl::unexpected(header.error());
        }
        auto sealed = munge_seal(munge_, body, agent_uid_);
        if (!sealed) {
            return tl::unexpected(sealed.error());
        }
        return SignedMessage{std::move(*header), std::move(*sealed), head.nonce};
    }

    void refuse_signed_before(double start_unix) override {
        guard_.refuse_signed_before(start_unix);
    }

private:
    Munge munge_;
    uid_t agent_uid_;
    double window_s_;
    ReplayGuard guard_;
};

Result<void> check_node(std::string_view node) {
    if (!valid_node_name(node)) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("node name '{}' cannot be authenticated: 1 to {} characters of "
                                "A-Z a-z 0-9 . _ -",
                                node.substr(0, 64), kMaxNodeNameLength));
    }
    return {};
}

}  // namespace

Result<std::unique_ptr<AgentAuth>> token_agent(std::string node, std::string key,
                                               double window_s) {
    if (auto ok = check_node(node); !ok) {
        return tl::unexpected(ok.error());
    }
    if (auto ok = check_window_size(window_s); !ok) {
        return tl::unexpected(ok.error());
    }
    if (key.empty()) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("node '{}' has an empty key: give it node_key(master token, "
                                "'{}')",
                                node, node));
    }
    return std::make_unique<TokenAgent>(std::move(node), std::move(key), window_s);
}

Result<std::unique_ptr<ServerAuth>> token_server(KeyOf key_of, double window_s) {
    if (!key_of) {
        return fail(ErrorCode::InvalidArgument, "a token server needs a way to find node keys");
    }
    if (auto ok = check_window_size(window_s); !ok) {
        return tl::unexpected(ok.error());
    }
    return std::make_unique<TokenServer>(std::move(key_of), window_s);
}

Result<std::unique_ptr<AgentAuth>> munge_agent(Munge munge, std::string node, uid_t server_uid,
                                               double window_s) {
    if (auto ok = check_node(node); !ok) {
        return tl::unexpected(ok.error());
    }
    if (auto ok = check_window_size(window_s); !ok) {
        return tl::unexpected(ok.error());
    }
    return std::make_unique<MungeAgent>(std::move(munge), std::move(node), server_uid, window_s);
}

Result<std::unique_ptr<ServerAuth>> munge_server(Munge munge, uid_t agent_uid, double window_s) {
    if (auto ok = check_window_size(window_s); !ok) {
        return tl::unexpected(ok.error());
    }
    return std::make_unique<MungeServer>(std::move(munge), agent_uid, window_s);
}

}  // namespace carma::cluster::auth
