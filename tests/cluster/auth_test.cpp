// Authentication of agents' reports and the server's answers (cluster/auth.h, munge_auth.h,
// authenticator.h): token mode with HMAC keys, and MUNGE mode against a private munged started
// by the test (tests/munge_support.h).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "cluster/auth.h"
#include "cluster/authenticator.h"
#include "cluster/munge_auth.h"
#include "munge_support.h"

namespace carma::cluster::auth {
namespace {

using ::testing::HasSubstr;

const std::string kMaster = "master-token-of-the-server-0123456789";
const std::string kBody = R"({"version":1,"node":"gpu-01","gpus":[]})";
const std::string kNonce = "00112233445566778899aabbccddeeff";
constexpr double kNow = 1700000000.25;

KeyOf master_keys() { return keys_from_master(kMaster); }

std::string signed_request(const std::string& node = "gpu-01", const std::string& body = kBody,
                           double now = kNow, const std::string& key = "") {
    auto header = sign_request(key.empty() ? node_key(kMaster, node) : key, node, body, now);
    EXPECT_TRUE(header) << header.error().message;
    return header ? *header : std::string{};
}

// ---- keys ---------------------------------------------------------------------------------------

TEST(AuthKeys, NodeKeyIsDeterministicPerNodeAndPerMaster) {
    const std::string a = node_key(kMaster, "gpu-01");
    EXPECT_EQ(a, node_key(kMaster, "gpu-01"));
    EXPECT_EQ(a.size(), 64u);
    EXPECT_NE(a, node_key(kMaster, "gpu-02"));
    EXPECT_NE(a, node_key(kMaster + "x", "gpu-01"));
    EXPECT_EQ(a.find(kMaster), std::string::npos);
}

TEST(AuthKeys, NodeNamesAreBoundedAndPlain) {
    EXPECT_TRUE(valid_node_name("gpu-01.cluster_a"));
    EXPECT_TRUE(valid_node_name(std::string(255, 'n')));
    EXPECT_FALSE(valid_node_name(std::string(256, 'n')));
    EXPECT_FALSE(valid_node_name(""));
    EXPECT_FALSE(valid_node_name("a b"));
    EXPECT_FALSE(valid_node_name("a|b"));
    EXPECT_FALSE(valid_node_name("a/b"));
    EXPECT_FALSE(valid_node_name("caf\xc3\xa9"));
}

TEST(AuthKeys, NoncesAreFreshHex) {
    auto a = new_nonce();
    auto b = new_nonce();
    ASSERT_TRUE(a && b);
    EXPECT_TRUE(detail::is_lower_hex(*a, kNonceHexLength));
    EXPECT_NE(*a, *b);
}

// ---- requests -------------------------------------------------------------------------------

TEST(AuthRequest, RoundTripGivesTheSignedFields) {
    const std::string header = signed_request();
    EXPECT_THAT(header, ::testing::StartsWith("carma1 token node=gpu-01 ts=1700000000.250 "));
    EXPECT_EQ(header.find(node_key(kMaster, "gpu-01")), std::string::npos)
        << "the key must not travel";
    auto head = verify_request_head(header, master_keys(), kNow + 1);
    ASSERT_TRUE(head) << head.error().message;
    EXPECT_EQ(head->mode, Mode::Token);
    EXPECT_EQ(head->node, "gpu-01");
    EXPECT_DOUBLE_EQ(head->ts, kNow);
    EXPECT_EQ(head->nonce.size(), kNonceHexLength);
    EXPECT_EQ(head->body_length, kBody.size());
    auto body = verify_request_body(*head, node_key(kMaster, "gpu-01"), kBody);
    EXPECT_TRUE(body) << body.error().message;
}

TEST(AuthRequest, ExplicitNonceIsTheOneInTheHead) {
    auto header = sign_request(node_key(kMaster, "n1"), "n1", kBody, kNow, kNonce);
    ASSERT_TRUE(header);
    auto head = verify_request_head(*header, master_keys(), kNow);
    ASSERT_TRUE(head) << head.error().message;
    EXPECT_EQ(head->nonce, kNonce);
}

TEST(AuthRequest, EmptyBodyRoundTrips) {
    auto head = verify_request_head(signed_request("gpu-01", ""), master_keys(), kNow);
    ASSERT_TRUE(head) << head.error().message;
    EXPECT_EQ(head->body_length, 0u);
    EXPECT_TRUE(verify_request_body(*head, node_key(kMaster, "gpu-01"), ""));
}

TEST(AuthRequest, WrongKeyIsRefusedAtTheHead) {
    const std::string header =
        signed_request("gpu-01", kBody, kNow, node_key("another master token", "gpu-01"));
    auto head = verify_request_head(header, master_keys(), kNow);
    ASSERT_FALSE(head);
    EXPECT_EQ(head.error().code, ErrorCode::InvalidArgument);
    EXPECT_THAT(head.error().message, HasSubstr("MAC does not verify with node 'gpu-01''s key"));
}

TEST(AuthRequest, KeyOfNodeADoesNotSignAsNodeB) {
    const std::string header = signed_request("node-b", kBody, kNow, node_key(kMaster, "node-a"));
    auto head = verify_request_head(header, master_keys(), kNow);
    ASSERT_FALSE(head);
    EXPECT_THAT(head.error().message, HasSubstr("node 'node-b'"));
    // And a key of A used on B's verified head does not pass the body either.
    auto good = verify_request_head(signed_request("node-b"), master_keys(), kNow);
    ASSERT_TRUE(good);
    EXPECT_FALSE(verify_request_body(*good, node_key(kMaster, "node-a"), kBody));
}

TEST(AuthRequest, MissingHeaderOrUnknownNodeIsRefused) {
    auto none = verify_request_head("", master_keys(), kNow);
    ASSERT_FALSE(none);
    EXPECT_THAT(none.error().message, HasSubstr("no X-Carma-Auth header"));
    const KeyOf only_a = [](const std::string& node) -> std::optional<std::string> {
        if (node == "a") {
            return node_key(kMaster, "a");
        }
        return std::nullopt;
    };
    auto unknown = verify_request_head(signed_request("b"), only_a, kNow);
    ASSERT_FALSE(unknown);
    EXPECT_THAT(unknown.error().message, HasSubstr("node 'b' has no key"));
    EXPECT_TRUE(verify_request_head(signed_request("a"), only_a, kNow));
}

TEST(AuthRequest, TamperedBodyIsRefused) {
    auto head = verify_request_head(signed_request(), master_keys(), kNow);
    ASSERT_TRUE(head);
    std::string same_length = kBody;
    same_length[same_length.find("gpu-01")] = 'G';
    auto changed = verify_request_body(*head, node_key(kMaster, "gpu-01"), same_length);
    ASSERT_FALSE(changed);
    EXPECT_THAT(changed.error().message, HasSubstr("does not match its MAC"));
    auto longer = verify_request_body(*head, node_key(kMaster, "gpu-01"), kBody + " ");
    ASSERT_FALSE(longer);
    EXPECT_THAT(longer.error().message, HasSubstr("its header says"));
}

TEST(AuthRequest, EveryHeaderFieldIsCoveredByTheHeadMac) {
    auto signed_header = sign_request(node_key(kMaster, "gpu-01"), "gpu-01", kBody, kNow, kNonce);
    ASSERT_TRUE(signed_header);
    const std::string header = *signed_header;
    const auto replace = [&](const std::string& from, const std::string& to) {
        std::string h = header;
        const std::size_t at = h.find(from);
        EXPECT_NE(at, std::string::npos) << from;
        return h.replace(at, from.size(), to);
    };
    for (const std::string& forged :
         {replace("node=gpu-01", "node=gpu-02"), replace("ts=1700000000.250", "ts=1700000000.251"),
          replace("len=" + std::to_string(kBody.size()), "len=" + std::to_string(kBody.size() + 1)),
          replace("nonce=" + kNonce.substr(0, 1), "nonce=f")}) {
        EXPECT_FALSE(verify_request_head(forged, master_keys(), kNow)) << forged;
    }
    // A changed body MAC (the head MAC covers it) is refused before the body is read.
    std::string h = header;
    const std::size_t body_at = h.find(" body=") + 6;
    h[body_at] = h[body_at] == '0' ? '1' : '0';
    EXPECT_FALSE(verify_request_head(h, master_keys(), kNow));
}

TEST(AuthRequest, TimestampOutsideTheWindowIsRefused) {
    const std::string header = signed_request();
    EXPECT_TRUE(verify_request_head(header, master_keys(), kNow + 59));
    EXPECT_TRUE(verify_request_head(header, master_keys(), kNow - 59));
    auto old = verify_request_head(header, master_keys(), kNow + 61);
    ASSERT_FALSE(old);
    EXPECT_THAT(old.error().message, HasSubstr("timestamp is 61.0 s behind"));
    auto future = verify_request_head(header, master_keys(), kNow - 61);
    ASSERT_FALSE(future);
    EXPECT_THAT(future.error().message, HasSubstr("ahead of"));
    EXPECT_TRUE(verify_request_head(header, master_keys(), kNow + 200, 300));
}

TEST(AuthRequest, MalformedHeadersAreErrors) {
    const std::string good = signed_request();
    for (const std::string& bad :
         {std::string("carma1"), std::string("carma2 token"), std::string("Bearer abc"),
          std::string("carma1 munge MUNGE:abc:"), good + " ", " " + good, good + " extra=1",
          std::string(2000, 'a'), good.substr(0, good.size() - 1),
          std::string("carma1 token node= ts=1 nonce=") + kNonce + " len=0 body=" +
              std::string(64, '0') + " head=" + std::string(64, '0'),
          std::string("carma1 token node=a ts=nan nonce=") + kNonce + " len=0 body=" +
              std::string(64, '0') + " head=" + std::string(64, '0'),
          std::string("carma1 token node=a ts=1e9 nonce=") + kNonce + " len=0 body=" +
              std::string(64, '0') + " head=" + std::string(64, '0'),
          std::string("carma1 token node=a ts=1 nonce=") + kNonce + " len=-1 body=" +
              std::string(64, '0') + " head=" + std::string(64, '0'),
          std::string("carma1 token node=a ts=1 nonce=") + kNonce +
              " len=99999999999999999999 body=" + std::string(64, '0') + " head=" +
              std::string(64, '0'),
          std::string("carma1 token node=a ts=1 nonce=") + std::string(32, 'A') + " len=0 body=" +
              std::string(64, '0') + " head=" + std::string(64, '0')}) {
        auto head = verify_request_head(bad, master_keys(), kNow);
        EXPECT_FALSE(head) << bad;
        if (!head) {
            EXPECT_EQ(head.error().code, ErrorCode::InvalidArgument);
            EXPECT_FALSE(head.error().message.empty());
        }
    }
}

TEST(AuthRequest, SigningRefusesWhatCannotBeVerified) {
    const std::string key = node_key(kMaster, "n");
    EXPECT_FALSE(sign_request(key, "bad node", kBody, kNow));
    EXPECT_FALSE(sign_request(key, std::string(256, 'n'), kBody, kNow));
    EXPECT_FALSE(sign_request("", "n", kBody, kNow));
    EXPECT_FALSE(sign_request(key, "n", kBody, std::nan("")));
    EXPECT_FALSE(sign_request(key, "n", kBody, -1));
    EXPECT_FALSE(sign_request(key, "n", kBody, kNow, "not-a-nonce"));
}

// ---- replay ---------------------------------------------------------------------------------

TEST(AuthReplay, ANonceIsUsedOnce) {
    ReplayGuard guard(60);
    EXPECT_TRUE(guard.first_use("a", kNonce, kNow, kNow));
    EXPECT_FALSE(guard.first_use("a", kNonce, kNow, kNow + 1));
    EXPECT_TRUE(guard.first_use("b", kNonce, kNow, kNow + 1)) << "nonces are per node";
}

TEST(AuthReplay, TimestampsOutsideTheWindowAreRefusedAndForgotten) {
    ReplayGuard guard(60);
    EXPECT_FALSE(guard.first_use("a", kNonce, kNow - 61, kNow));
    EXPECT_FALSE(guard.first_use("a", kNonce, kNow + 61, kNow));
    EXPECT_TRUE(guard.first_use("a", "n1", kNow, kNow));
    EXPECT_TRUE(guard.first_use("a", "n2", kNow + 30, kNow + 30));
    EXPECT_EQ(guard.size(), 2u);
    // n1's ts is now out of the window: forgotten, and refused by the window anyway.
    EXPECT_TRUE(guard.first_use("a", "n3", kNow + 61, kNow + 61));
    EXPECT_EQ(guard.size(), 2u);
    EXPECT_FALSE(guard.first_use("a", "n1", kNow, kNow + 61));
}

TEST(AuthReplay, MemoryIsBoundedPerNodeAndOverall) {
    ReplayGuard guard(60, 5, 3);
    for (const std::string nonce : {"a0", "a1", "a2"}) {
        EXPECT_TRUE(guard.first_use("a", nonce, kNow, kNow));
    }
    EXPECT_FALSE(guard.first_use("a", "a3", kNow, kNow)) << "node a is at its cap";
    EXPECT_TRUE(guard.first_use("b", "b0", kNow, kNow));
    EXPECT_TRUE(guard.first_use("c", "c0", kNow, kNow));
    EXPECT_FALSE(guard.first_use("d", "d0", kNow, kNow)) << "the guard is full";
    EXPECT_EQ(guard.size(), 5u);
    EXPECT_TRUE(guard.first_use("d", "d0", kNow + 61, kNow + 61)) << "room once the window passed";
    EXPECT_EQ(guard.size(), 1u);
}

// ---- answers --------------------------------------------------------------------------------

const std::string kAnswer = R"({"commands":[],"period_s":2})";

TEST(AuthAnswer, RoundTrip) {
    const std::string key = node_key(kMaster, "gpu-01");
    auto header = sign_answer(key, kNonce, kAnswer, kNow);
    ASSERT_TRUE(header) << header.error().message;
    EXPECT_THAT(*header, ::testing::StartsWith("carma1 token ts=1700000000.250 mac="));
    auto ok = verify_answer(*header, key, kNonce, kAnswer, kNow + 2);
    EXPECT_TRUE(ok) << ok.error().message;
}

TEST(AuthAnswer, RogueKeyOtherNonceTamperedOrOldIsRefused) {
    const std::string key = node_key(kMaster, "gpu-01");
    auto rogue = sign_answer(node_key("a rogue server's token", "gpu-01"), kNonce, kAnswer, kNow);
    ASSERT_TRUE(rogue);
    auto r = verify_answer(*rogue, key, kNonce, kAnswer, kNow);
    ASSERT_FALSE(r);
    EXPECT_THAT(r.error().message, HasSubstr("does not verify with this node's key"));

    auto header = sign_answer(key, kNonce, kAnswer, kNow);
    ASSERT_TRUE(header);
    EXPECT_FALSE(verify_answer(*header, key, "ffeeddccbbaa99887766554433221100", kAnswer, kNow))
        << "an answer to another request";
    EXPECT_FALSE(verify_answer(*header, key, kNonce, kAnswer + " ", kNow)) << "tampered body";
    EXPECT_FALSE(verify_answer(*header, node_key(kMaster, "gpu-02"), kNonce, kAnswer, kNow))
        << "another node's answer";
    auto old = verify_answer(*header, key, kNonce, kAnswer, kNow + 120);
    ASSERT_FALSE(old);
    EXPECT_THAT(old.error().message, HasSubstr("timestamp"));
    auto none = verify_answer("", key, kNonce, kAnswer, kNow);
    ASSERT_FALSE(none);
    EXPECT_THAT(none.error().message, HasSubstr("no X-Carma-Auth header"));
}

// One report and its answer through the mode-neutral interface, as the agent and the hub use
// it: the request (signed at `signed_at`, checked at `checked_at`), for the replay checks.
std::optional<SignedMessage> round_trip(const AgentAuth& agent, ServerAuth& server,
                                        double signed_at, double checked_at) {
    auto request = agent.sign_request(kBody, signed_at);
    EXPECT_TRUE(request) << request.error().message;
    if (!request) {
        return std::nullopt;
    }
    auto head = server.verify_head(request->header, checked_at);
    EXPECT_TRUE(head) << head.error().message;
    if (!head) {
        return std::nullopt;
    }
    EXPECT_EQ(head->node, "gpu-01");
    EXPECT_EQ(head->nonce, request->nonce);
    auto json = server.verify_body(*head, request->body);
    EXPECT_TRUE(json) << json.error().message;
    EXPECT_EQ(json.value_or(""), kBody);
    auto answer = server.sign_answer(*head, kAnswer, checked_at);
    EXPECT_TRUE(answer) << answer.error().message;
    if (!answer) {
        return std::nullopt;
    }
    auto answer_json =
        agent.verify_answer(answer->header, request->nonce, answer->body, checked_at + 1);
    EXPECT_TRUE(answer_json) << answer_json.error().message;
    EXPECT_EQ(answer_json.value_or(""), kAnswer);
    return std::move(*request);
}

// ---- the mode-neutral interface, token mode ---------------------------------------------------

TEST(AuthTokenInterface, AgentAndServerTalk) {
    auto agent = token_agent("gpu-01", node_key(kMaster, "gpu-01"));
    auto server = token_server(keys_from_master(kMaster));
    ASSERT_TRUE(agent && server);
    auto request = round_trip(**agent, **server, kNow, kNow + 1);
    ASSERT_TRUE(request);
    EXPECT_EQ(request->body, kBody);  // token mode signs the body, it does not seal it

    auto again = (*server)->verify_head(request->header, kNow + 2);
    ASSERT_FALSE(again);
    EXPECT_THAT(again.error().message, HasSubstr("replayed"));
    EXPECT_FALSE((*server)->verify_head(request->header, kNow + 120)) << "and later by its ts";
}

TEST(AuthTokenInterface, RefusesNonsenseAtConstruction) {
    EXPECT_FALSE(token_agent("bad node", "k"));
    EXPECT_FALSE(token_agent("n", ""));
    EXPECT_FALSE(token_agent("n", "k", 0));
    EXPECT_FALSE(token_server(nullptr));
}

// ---- MUNGE --------------------------------------------------------------------------------------

class MungeAuth : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        munged_ = std::make_unique<test_support::PrivateMunged>();
        other_ = std::make_unique<test_support::PrivateMunged>();
        if (!munged_->start()) {
            setup_error_ = "the test's munged: " + munged_->error();
        } else if (!other_->start()) {
            setup_error_ = "the second munged (another key): " + other_->error();
        }
    }
    static void TearDownTestSuite() {
        munged_.reset();
        other_.reset();
    }
    void SetUp() override {
        ASSERT_TRUE(setup_error_.empty()) << setup_error_;
        auto m = Munge::open(munged_->socket());
        ASSERT_TRUE(m) << m.error().message;
        munge_ = std::make_unique<Munge>(*m);
    }

    static double now() { return static_cast<double>(::time(nullptr)); }

    static std::unique_ptr<test_support::PrivateMunged> munged_;
    static std::unique_ptr<test_support::PrivateMunged> other_;
    static std::string setup_error_;
    std::unique_ptr<Munge> munge_;
};

std::unique_ptr<test_support::PrivateMunged> MungeAuth::munged_;
std::unique_ptr<test_support::PrivateMunged> MungeAuth::other_;
std::string MungeAuth::setup_error_;

TEST_F(MungeAuth, EncodeDecodeRoundTripSaysWhoAndWhere) {
    auto cred = munge_->encode("hello\nworld");
    ASSERT_TRUE(cred) << cred.error().message;
    EXPECT_THAT(*cred, ::testing::StartsWith("MUNGE:"));
    auto decoded = munge_->decode(*cred);
    ASSERT_TRUE(decoded) << decoded.error().message;
    EXPECT_EQ(decoded->payload, "hello\nworld");
    EXPECT_EQ(decoded->uid, ::getuid());
    EXPECT_EQ(decoded->gid, ::getgid());
    EXPECT_EQ(decoded->origin_addr, "127.0.0.1");
}

TEST_F(MungeAuth, ReplayedCredentialIsRefused) {
    auto cred = munge_->encode("once");
    ASSERT_TRUE(cred);
    ASSERT_TRUE(munge_->decode(*cred));
    auto again = munge_->decode(*cred);
    ASSERT_FALSE(again);
    EXPECT_EQ(again.error().code, ErrorCode::InvalidArgument);
    EXPECT_THAT(again.error().message, HasSubstr("replayed"));
}

TEST_F(MungeAuth, GarbageIsRefused) {
    for (const std::string& bad : {std::string("MUNGE:garbage:"), std::string("hello"),
                                   std::string(""), std::string("MUNGE:\0abc:", 11),
                                   std::string(2 * 1024 * 1024, 'A')}) {
        auto decoded = munge_->decode(bad);
        EXPECT_FALSE(decoded) << bad.substr(0, 40);
        if (!decoded) {
            EXPECT_EQ(decoded.error().code, ErrorCode::InvalidArgument) << decoded.error().message;
        }
    }
    auto cred = munge_->encode("x");
    ASSERT_TRUE(cred);
    std::string flipped = *cred;
    flipped[flipped.size() / 2] = flipped[flipped.size() / 2] == 'A' ? 'B' : 'A';
    EXPECT_FALSE(munge_->decode(flipped));
}

TEST_F(MungeAuth, CredentialOfAnotherKeyIsRefusedWithAHint) {
    auto other = Munge::open(other_->socket());
    ASSERT_TRUE(other) << other.error().message;
    auto cred = other->encode("from a node with another key");
    ASSERT_TRUE(cred);
    auto decoded = munge_->decode(*cred);
    ASSERT_FALSE(decoded);
    EXPECT_THAT(decoded.error().message, HasSubstr("same munge.key"));
}

TEST(MungeOpen, MungedNotRunningIsAnIoErrorNamingTheSocket) {
    auto m = Munge::open("/nonexistent/carma-test/munge.socket");
    ASSERT_FALSE(m);
    EXPECT_EQ(m.error().code, ErrorCode::Io);
    EXPECT_THAT(m.error().message, HasSubstr("/nonexistent/carma-test/munge.socket"));
    EXPECT_THAT(m.error().message, HasSubstr("is munged running"));
}

TEST_F(MungeAuth, RequestHeadAndBodyRoundTrip) {
    auto header = munge_request_header(*munge_, "gpu-01", kBody, now(), ::getuid(), kNonce);
    ASSERT_TRUE(header) << header.error().message;
    auto head = verify_munge_head(*munge_, *header, ::getuid(), now());
    ASSERT_TRUE(head) << head.error().message;
    EXPECT_EQ(head->mode, Mode::Munge);
    EXPECT_EQ(head->node, "gpu-01");
    EXPECT_EQ(head->nonce, kNonce);
    EXPECT_EQ(head->uid, ::getuid());
    EXPECT_EQ(head->origin_addr, "127.0.0.1");
    EXPECT_EQ(head->body_length, kBody.size());
    auto sealed = munge_seal(*munge_, kBody, ::getuid());
    ASSERT_TRUE(sealed);
    EXPECT_EQ(sealed->find("gpu-01"), std::string::npos) << "the body travels encrypted";
    auto body = verify_munge_body(*munge_, *head, *sealed);
    ASSERT_TRUE(body) << body.error().message;
    EXPECT_EQ(*body, kBody);
}

TEST_F(MungeAuth, WrongExpectedUidIsRefused) {
    auto header = munge_request_header(*munge_, "gpu-01", kBody, now(), ::getuid());
    ASSERT_TRUE(header);
    auto head = verify_munge_head(*munge_, *header, ::getuid() + 1, now());
    ASSERT_FALSE(head);
    EXPECT_THAT(head.error().message, HasSubstr("not uid"));
    auto sealed = munge_seal(*munge_, kBody, ::getuid());
    ASSERT_TRUE(sealed);
    auto body = munge_open(*munge_, *sealed, ::getuid() + 1, sha256_hex(kBody));
    ASSERT_FALSE(body);
    EXPECT_THAT(body.error().message, HasSubstr("not uid"));
}

TEST_F(MungeAuth, BodyOfAnotherRequestOrTokenHeaderIsRefused) {
    auto header = munge_request_header(*munge_, "gpu-01", kBody, now(), ::getuid());
    ASSERT_TRUE(header);
    auto head = verify_munge_head(*munge_, *header, ::getuid(), now());
    ASSERT_TRUE(head);
    auto other = munge_seal(*munge_, kBody + " ", ::getuid());
    ASSERT_TRUE(other);
    auto body = verify_munge_body(*munge_, *head, *other);
    ASSERT_FALSE(body);
    EXPECT_THAT(body.error().message, HasSubstr("SHA-256 differs"));
    // A credential that is not a sealed body (here: a header's) does not open as one.
    auto header2 = munge_request_header(*munge_, "gpu-01", kBody, now(), ::getuid());
    ASSERT_TRUE(header2);
    EXPECT_FALSE(verify_munge_body(*munge_, *head, header2->substr(13)));
    // The modes do not mix.
    EXPECT_FALSE(verify_munge_head(*munge_, signed_request(), ::getuid(), now()));
    EXPECT_FALSE(verify_request_head(*header, master_keys(), now()));
}

TEST_F(MungeAuth, ReplayedOrOldHeadIsRefused) {
    auto header = munge_request_header(*munge_, "gpu-01", kBody, now(), ::getuid());
    ASSERT_TRUE(header);
    ASSERT_TRUE(verify_munge_head(*munge_, *header, ::getuid(), now()));
    auto again = verify_munge_head(*munge_, *header, ::getuid(), now());
    ASSERT_FALSE(again);
    EXPECT_THAT(again.error().message, HasSubstr("replayed"));
    // Signed with a clock 2 minutes behind: munged accepts it (TTL 300 s), the window does not.
    auto old = munge_request_header(*munge_, "gpu-01", kBody, now() - 120, ::getuid());
    ASSERT_TRUE(old);
    auto late = verify_munge_head(*munge_, *old, ::getuid(), now());
    ASSERT_FALSE(late);
    EXPECT_THAT(late.error().message, HasSubstr("timestamp"));
}

TEST_F(MungeAuth, AnswerIsBoundToTheRequestNonceAndTheServerUid) {
    auto header = munge_answer_header(*munge_, kNonce, kAnswer, now(), ::getuid());
    auto sealed = munge_seal(*munge_, kAnswer, ::getuid());
    ASSERT_TRUE(header && sealed);
    auto json = verify_munge_answer(*munge_, *header, ::getuid(), kNonce, *sealed, now());
    ASSERT_TRUE(json) << json.error().message;
    EXPECT_EQ(*json, kAnswer);

    auto header2 = munge_answer_header(*munge_, kNonce, kAnswer, now(), ::getuid());
    auto sealed2 = munge_seal(*munge_, kAnswer, ::getuid());
    ASSERT_TRUE(header2 && sealed2);
    auto other_nonce = verify_munge_answer(*munge_, *header2, ::getuid(),
                                           "ffeeddccbbaa99887766554433221100", *sealed2, now());
    ASSERT_FALSE(other_nonce);
    EXPECT_THAT(other_nonce.error().message, HasSubstr("bound to another request"));

    auto header3 = munge_answer_header(*munge_, kNonce, kAnswer, now(), ::getuid());
    auto sealed3 = munge_seal(*munge_, kAnswer, ::getuid());
    ASSERT_TRUE(header3 && sealed3);
    EXPECT_FALSE(verify_munge_answer(*munge_, *header3, ::getuid() + 1, kNonce, *sealed3, now()))
        << "an answer encoded by another uid than the server's";
}

TEST_F(MungeAuth, LargeReportsFitUpToTheLimit) {
    // What a big report looks like: JSON, repetitive. zlib makes 1 MB fit in munged's 1 MiB.
    std::string json = "[";
    for (int i = 0; json.size() < kMungeMaxBody - 200; ++i) {
        json += R"({"index":)" + std::to_string(i % 8) + R"(,"used_mib":)" +
                std::to_string((i * 7919) % 81920) + R"(,"util":0.)" + std::to_string(i % 97) +
                "},";
    }
    json += "{}]";
    auto sealed = munge_seal(*munge_, json, ::getuid());
    ASSERT_TRUE(sealed) << sealed.error().message;
    auto opened = munge_open(*munge_, *sealed, ::getuid(), sha256_hex(json));
    ASSERT_TRUE(opened) << opened.error().message;
    EXPECT_EQ(*opened, json);

    auto too_long = munge_seal(*munge_, std::string(kMungeMaxBody + 1, 'x'), ::getuid());
    ASSERT_FALSE(too_long);
    EXPECT_THAT(too_long.error().message, HasSubstr("more than MUNGE mode carries"));

    // Incompressible bytes: 700,000 fit; 900,000 make a credential beyond munged's 1 MiB,
    // refused when sealed (the sender learns it, not the receiver).
    std::mt19937 rng(7);
    const auto noise = [&rng](std::size_t n) {
        std::string bytes(n, '\0');
        for (char& c : bytes) {
            c = static_cast<char>(rng() & 0xff);
        }
        return bytes;
    };
    const std::string fits = noise(700000);
    auto sealed_fits = munge_seal(*munge_, fits, ::getuid());
    ASSERT_TRUE(sealed_fits) << sealed_fits.error().message;
    auto opened_fits = munge_open(*munge_, *sealed_fits, ::getuid(), sha256_hex(fits));
    ASSERT_TRUE(opened_fits) << opened_fits.error().message;
    EXPECT_EQ(*opened_fits, fits);
    const std::string too_big = noise(900000);
    auto sealed_big = munge_seal(*munge_, too_big, ::getuid());
    ASSERT_FALSE(sealed_big);
    EXPECT_THAT(sealed_big.error().message, HasSubstr("compresses too poorly"));
    EXPECT_FALSE(munge_->decode(std::string(1048577, 'A')));
}

// This test verifies that every credential an agent or the server sends is restricted to its
// peer's uid (MUNGE_OPT_UID_RESTRICTION): munged decodes a report's header and body for the
// server's uid alone and an answer's for the agents' uid alone, so another local user who
// captures them (here this test's own uid, which is neither) cannot read a launch's command line
// and environment; the peer itself can (checked from a child as that uid when run as root).
TEST_F(MungeAuth, CredentialsAreReadableByThePeersUidAlone) {
    const uid_t peer = ::getuid() == 65534 ? 65533 : 65534;
    auto agent = munge_agent(*munge_, "gpu-01", peer);
    auto server = munge_server(*munge_, peer);
    ASSERT_TRUE(agent && server);
    auto request = (*agent)->sign_request(kBody, now());
    ASSERT_TRUE(request) << request.error().message;
    RequestHead head;
    head.mode = Mode::Munge;
    head.node = "gpu-01";
    head.nonce = kNonce;
    auto answer = (*server)->sign_answer(head, kAnswer, now());
    ASSERT_TRUE(answer) << answer.error().message;
    const std::vector<std::string> credentials = {
        request->header.substr(request->header.rfind(' ') + 1), request->body,
        answer->header.substr(answer->header.rfind(' ') + 1), answer->body};
    if (::geteuid() == 0) {
        // The peer reads each (before this process tries: a decode counts as the one use).
        const pid_t child = ::fork();
        ASSERT_GE(child, 0);
        if (child == 0) {
            if (::setgid(peer) != 0 || ::setuid(peer) != 0) {
                ::_exit(2);
            }
            for (const std::string& c : credentials) {
                auto read = munge_->decode(c);
                if (!read || read->uid != 0) {
                    ::_exit(1);
                }
            }
            ::_exit(0);
        }
        int status = 0;
        ASSERT_EQ(::waitpid(child, &status, 0), child);
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
            << "uid " << peer << " could not decode what was sent to it";
    }
    for (const std::string& c : credentials) {
        auto read = munge_->decode(c);
        ASSERT_FALSE(read) << "uid " << ::getuid() << " read a credential meant for uid "
                           << peer << ": " << read->payload.substr(0, 60);
        EXPECT_THAT(read.error().message, HasSubstr("does not let this user decode"));
    }
}

TEST_F(MungeAuth, AgentAndServerTalkThroughTheInterface) {
    auto agent = munge_agent(*munge_, "gpu-01", ::getuid());
    auto server = munge_server(*munge_, ::getuid());
    ASSERT_TRUE(agent && server);
    EXPECT_EQ((*agent)->mode(), Mode::Munge);
    auto request = round_trip(**agent, **server, now(), now());
    ASSERT_TRUE(request);
    EXPECT_FALSE((*server)->verify_head(request->header, now())) << "replayed";
}

}  // namespace
}  // namespace carma::cluster::auth
