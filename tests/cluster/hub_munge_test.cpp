// The agents' port in MUNGE mode against a private munged (tests/munge_support.h): a node's name
// is bound to the host its credential was made on (munged's origin address against the node's
// address), and the answer travels for the agents' uid.

#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include "cluster/authenticator.h"
#include "cluster/hub.h"
#include "cluster/reports.h"
#include "exec/clock.h"
#include "munge_support.h"

namespace carma::cluster {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::HasSubstr;

// This test verifies the origin binding: munged vouches the reports below were made on
// 127.0.0.1; node n1, whose address that is, is taken and its answer verifies; n2, whose
// address is another, and n3, whose address cannot be found, are refused (403) naming the
// origin and the node's address, and are not taken.
TEST(HubMunge, ANodeReportsOnlyFromItsOwnAddress) {
    test_support::PrivateMunged munged;
    ASSERT_TRUE(munged.start("127.0.0.1")) << munged.error();
    auto munge = auth::Munge::open(munged.socket());
    ASSERT_TRUE(munge) << munge.error().message;
    const fs::path dir = fs::temp_directory_path() /
                         ("carma-hub-munge-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);

    HubOptions o;
    auto server = auth::munge_server(*munge, ::getuid());
    ASSERT_TRUE(server) << server.error().message;
    o.auth = std::move(*server);
    o.state_dir = dir.string();
    o.allocation_nodes = [](const std::string&) {
        return std::optional<std::set<std::string>>({"n1", "n2", "n3"});
    };
    o.node_addresses = [](const std::string& node) -> std::optional<std::set<std::string>> {
        const std::map<std::string, std::set<std::string>> known = {
            {"n1", {"10.0.0.1", "127.0.0.1"}}, {"n2", {"10.9.8.7"}}};
        const auto it = known.find(node);
        return it == known.end() ? std::nullopt : std::optional(it->second);
    };
    auto hub = Hub::create(std::move(o));
    ASSERT_TRUE(hub) << hub.error().message;
    ASSERT_TRUE((*hub)->listen());
    const std::string address = (*hub)->address();
    httplib::Client client("127.0.0.1", std::stoi(address.substr(address.rfind(':') + 1)));
    client.set_read_timeout(10, 0);

    struct Sent {
        httplib::Result res;
        std::string nonce;
    };
    auto report = [&](const std::string& node, const auth::AgentAuth& agent) {
        auto sealed = agent.sign_request(to_json(report_of(node, 1)).dump(), exec::unix_now());
        EXPECT_TRUE(sealed) << sealed.error().message;
        const httplib::Headers headers{{std::string(auth::kAuthHeader), sealed->header}};
        return Sent{client.Post("/agent/v1/report", headers, sealed->body, "text/plain"),
                    sealed->nonce};
    };

    auto n1 = auth::munge_agent(*munge, "n1", ::getuid());
    ASSERT_TRUE(n1);
    Sent taken = report("n1", **n1);
    ASSERT_TRUE(taken.res) << httplib::to_string(taken.res.error());
    ASSERT_EQ(taken.res->status, 200) << taken.res->body;
    auto answer = (*n1)->verify_answer(taken.res->get_header_value(std::string(auth::kAuthHeader)),
                                       taken.nonce, taken.res->body, exec::unix_now());
    EXPECT_TRUE(answer) << answer.error().message;

    auto n2 = auth::munge_agent(*munge, "n2", ::getuid());
    Sent elsewhere = report("n2", **n2);
    ASSERT_TRUE(elsewhere.res);
    EXPECT_EQ(elsewhere.res->status, 403) << elsewhere.res->body;
    EXPECT_THAT(elsewhere.res->body, HasSubstr("made on 127.0.0.1"));
    EXPECT_THAT(elsewhere.res->body, HasSubstr("not on node n2 (10.9.8.7)"));
    EXPECT_THAT(elsewhere.res->body, HasSubstr("--origin"));

    auto n3 = auth::munge_agent(*munge, "n3", ::getuid());
    Sent unknown = report("n3", **n3);
    ASSERT_TRUE(unknown.res);
    EXPECT_EQ(unknown.res->status, 403) << unknown.res->body;
    EXPECT_THAT(unknown.res->body, HasSubstr("node n3's address cannot be found"));

    const auto nodes = (*hub)->nodes();
    ASSERT_EQ(nodes.size(), 1u);
    EXPECT_EQ(nodes[0].node, "n1");
    hub->reset();
    fs::remove_all(dir);
}

}  // namespace
}  // namespace carma::cluster
