#include "daemon/config.h"

#include "cluster/hub.h"
#include "daemon/config_check.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace carma::daemon {
namespace {

// This test verifies that the shipped example configuration parses to the documented values.
TEST(ConfigTest, ExampleConfigParses) {
    auto c = load_config(CARMA_SOURCE_DIR "/examples/carma.yaml", DaemonConfig{});
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ(c->policy, "carma");
    EXPECT_EQ(c->memory_margin_mib, 2048);
    EXPECT_EQ(c->no_info_min_free_mib, 5120);
    EXPECT_DOUBLE_EQ(c->risk.smocc, 0.45);
    EXPECT_EQ(c->max_attempts, 3);
    EXPECT_EQ(c->exclude_gpus, std::vector<std::string>{"*Display*"});
    EXPECT_FALSE(c->mps);
    EXPECT_DOUBLE_EQ(c->retention_days, 30);
    auto f = finalize(*c);
    ASSERT_TRUE(f) << f.error().message;
    EXPECT_EQ(f->socket, f->state_dir + "/carma.sock");
}

// This test verifies the real-GPU keys: exclude_gpus as a list or one pattern (an empty list
// leaves no GPU out), mps, mps_control and dcgm_host.
TEST(ConfigTest, RealGpuKeys) {
    auto c = parse_config("exclude_gpus: [3, 'GPU-8a1c', '*Quadro*']\nmps: true\n"
                          "mps_control: /opt/nvidia/mps-control\ndcgm_host: localhost:5555\n",
                          "test.yaml", DaemonConfig{});
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ(c->exclude_gpus, (std::vector<std::string>{"3", "GPU-8a1c", "*Quadro*"}));
    EXPECT_TRUE(c->mps);
    EXPECT_EQ(c->mps_control, "/opt/nvidia/mps-control");
    EXPECT_EQ(c->dcgm_host, "localhost:5555");
    auto one = parse_config("exclude_gpus: '*Display*'\n", "test.yaml", DaemonConfig{});
    ASSERT_TRUE(one) << one.error().message;
    EXPECT_EQ(one->exclude_gpus, std::vector<std::string>{"*Display*"});
    auto none = parse_config("exclude_gpus: []\n", "test.yaml", DaemonConfig{});
    ASSERT_TRUE(none) << none.error().message;
    EXPECT_TRUE(none->exclude_gpus.empty());
    auto bad = parse_config("mps: maybe\n", "test.yaml", DaemonConfig{});
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().message.find("mps"), std::string::npos);
}

// This test verifies the TCP keys, tcp_run_as among them (unset by default: a root daemon
// never acts as root for a TCP client).
TEST(ConfigTest, TcpKeys) {
    EXPECT_TRUE(DaemonConfig{}.tcp_run_as.empty());
    auto c = parse_config("tcp: 127.0.0.1:8787\ntoken_file: /etc/carma/token\n"
                          "tcp_run_as: carma-remote\n",
                          "test.yaml", DaemonConfig{});
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ(c->tcp, "127.0.0.1:8787");
    EXPECT_EQ(c->token_file, "/etc/carma/token");
    EXPECT_EQ(c->tcp_run_as, "carma-remote");
}

// This test verifies the keys of issue 18: the web page's own token, the names Host may
// carry, and the per-user limits (defaults, values, 0 for none, and mistakes named).
TEST(ConfigTest, LimitsAndWebKeys) {
    const DaemonConfig defaults;
    EXPECT_EQ(defaults.limits.max_waiting_per_user, 10000u);
    EXPECT_EQ(defaults.limits.max_array_size, 10000u);
    EXPECT_EQ(defaults.limits.max_submit_bytes_per_task, 65536u);
    EXPECT_GT(defaults.limits.submit_rate_per_user, 0);
    auto c = parse_config("web: 0.0.0.0:8080\nweb_token_file: /etc/carma/web-token\n"
                          "allowed_hosts: [GPU-Server, gpu-server.lab.example]\n"
                          "limits:\n  max_waiting_per_user: 500\n  max_array_size: 1001\n"
                          "  max_submit_bytes_per_task: 0\n  submit_rate_per_user: 5\n"
                          "  submit_burst_per_user: 20\n",
                          "test.yaml", DaemonConfig{});
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ(c->web_token_file, "/etc/carma/web-token");
    EXPECT_EQ(c->limits.max_waiting_per_user, 500u);
    EXPECT_EQ(c->limits.max_array_size, 1001u);
    EXPECT_EQ(c->limits.max_submit_bytes_per_task, 0u);
    EXPECT_DOUBLE_EQ(c->limits.submit_rate_per_user, 5);
    EXPECT_DOUBLE_EQ(c->limits.submit_burst_per_user, 20);
    auto f = finalize(*c);
    ASSERT_TRUE(f) << f.error().message;
    EXPECT_EQ(f->allowed_hosts, (std::vector<std::string>{"gpu-server", "gpu-server.lab.example"}));

    auto unknown = parse_config("limits: {max_waiting: 3}\n", "test.yaml", DaemonConfig{});
    ASSERT_FALSE(unknown);
    EXPECT_NE(unknown.error().message.find("unknown limit 'max_waiting'"), std::string::npos);
    auto negative = parse_config("limits: {max_array_size: -1}\n", "test.yaml", DaemonConfig{});
    ASSERT_FALSE(negative);
    EXPECT_NE(negative.error().message.find("limits.max_array_size"), std::string::npos);
    auto huge = parse_config("limits: {max_array_size: 20000}\n", "test.yaml", DaemonConfig{});
    ASSERT_TRUE(huge);
    EXPECT_FALSE(finalize(*huge));
    auto url = parse_config("allowed_hosts: http://gpu-server:8080/\n", "test.yaml",
                            DaemonConfig{});
    ASSERT_TRUE(url);
    auto refused = finalize(*url);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("allowed_hosts"), std::string::npos);
}

// This test verifies fair share's keys (issue 23): on by default with a 7-day half-life and no
// shares; the running limits beside the others in `limits:`; a file's values; mistakes named.
TEST(ConfigTest, FairShareKeys) {
    const DaemonConfig defaults;
    EXPECT_TRUE(defaults.fair_share);
    EXPECT_DOUBLE_EQ(defaults.fairshare_half_life_s, 7 * 24 * 3600.0);
    EXPECT_DOUBLE_EQ(defaults.fairshare_horizon_s, 3600.0);
    EXPECT_TRUE(defaults.shares.empty());
    EXPECT_EQ(defaults.limits.max_gpus_per_user, 0u);
    auto c = parse_config("fair_share: false\nfairshare_half_life: 36h\nfairshare_horizon: 0s\n"
                          "shares: {alice: 2, \"@phd\": 3}\n"
                          "priority_weight_fairshare: 5000\npriority_weight_age: 0\n"
                          "limits: {max_gpus_per_user: 4, max_running_per_user: 2}\n",
                          "test.yaml", DaemonConfig{});
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_FALSE(c->fair_share);
    EXPECT_DOUBLE_EQ(c->fairshare_half_life_s, 36 * 3600.0);
    EXPECT_DOUBLE_EQ(c->fairshare_horizon_s, 0.0);
    EXPECT_EQ(c->shares, (std::map<std::string, double>{{"alice", 2}, {"@phd", 3}}));
    EXPECT_DOUBLE_EQ(c->priority_weight_fairshare, 5000);
    EXPECT_DOUBLE_EQ(c->priority_weight_age, 0);
    EXPECT_EQ(c->limits.max_gpus_per_user, 4u);
    EXPECT_EQ(c->limits.max_running_per_user, 2u);
    // What --print-config writes reads back as the same.
    auto again = parse_config(config_yaml(*c), "printed.yaml", DaemonConfig{});
    ASSERT_TRUE(again) << again.error().message;
    EXPECT_EQ(again->shares, c->shares);
    EXPECT_DOUBLE_EQ(again->fairshare_half_life_s, c->fairshare_half_life_s);
    EXPECT_DOUBLE_EQ(again->fairshare_horizon_s, 0.0);
    EXPECT_EQ(again->limits.max_running_per_user, 2u);

    // Fair-share preemption: off by default; a task runs 10 minutes before it may be stopped.
    EXPECT_FALSE(defaults.preemption.enabled);
    EXPECT_DOUBLE_EQ(defaults.preemption.min_run_s, 600.0);
    auto p = parse_config("preemption: true\npreempt_min_run: 1h\npreempt_margin: 0.25\n",
                          "test.yaml", DaemonConfig{});
    ASSERT_TRUE(p) << p.error().message;
    EXPECT_TRUE(p->preemption.enabled);
    EXPECT_DOUBLE_EQ(p->preemption.min_run_s, 3600.0);
    EXPECT_DOUBLE_EQ(p->preemption.margin, 0.25);
    auto p_again = parse_config(config_yaml(*p), "printed.yaml", DaemonConfig{});
    ASSERT_TRUE(p_again) << p_again.error().message;
    EXPECT_TRUE(p_again->preemption.enabled);
    EXPECT_DOUBLE_EQ(p_again->preemption.min_run_s, 3600.0);
    EXPECT_DOUBLE_EQ(p_again->preemption.margin, 0.25);
    // A user's stops are bounded over a window (issue 44, break 3), and group memberships are
    // looked up again after a while (issue 44, item 8).
    EXPECT_EQ(defaults.preemption.max_stops_per_user, 4);
    EXPECT_DOUBLE_EQ(defaults.preemption.stops_window_s, 3600.0);
    EXPECT_DOUBLE_EQ(defaults.groups_refresh_s, 300.0);
    auto budget = parse_config("preempt_max_stops: 2\npreempt_stops_window: 1d\n"
                               "groups_refresh: 30s\n",
                               "test.yaml", DaemonConfig{});
    ASSERT_TRUE(budget) << budget.error().message;
    auto budget_again = parse_config(config_yaml(*budget), "printed.yaml", DaemonConfig{});
    ASSERT_TRUE(budget_again) << budget_again.error().message;
    EXPECT_EQ(budget_again->preemption.max_stops_per_user, 2);
    EXPECT_DOUBLE_EQ(budget_again->preemption.stops_window_s, 86400.0);
    EXPECT_DOUBLE_EQ(budget_again->groups_refresh_s, 30.0);

    for (const auto& [text, says] : std::vector<std::pair<const char*, const char*>>{
             {"fairshare_half_life: 0s\n", "fairshare_half_life"},
             {"fairshare_half_life: soon\n", "7d"},
             {"fairshare_horizon: -1h\n", "fairshare_horizon"},
             {"fairshare_horizon: later\n", "0s to order by usage alone"},
             {"shares: {alice: 0}\n", "shares of 'alice'"},
             {"shares: [alice]\n", "shares: found a list, expected a mapping of users"},
             {"priority_weight_age: -1\n", "priority_weight_age"},
             {"preemption: sometimes\n", "preemption"},
             {"preempt_min_run: -5m\n", "preempt_min_run"},
             {"preempt_margin: -1\n", "preempt_margin"},
             {"preempt_max_stops: 0\n", "preemption: false"},
             {"preempt_stops_window: 0s\n", "preempt_stops_window"},
             {"groups_refresh: never\n", "groups_refresh"}}) {
        auto bad = parse_config(text, "test.yaml", DaemonConfig{});
        ASSERT_FALSE(bad) << text;
        EXPECT_NE(bad.error().message.find(says), std::string::npos) << bad.error().message;
    }
}

// This test verifies that config mistakes are errors naming the key, the file and the fix.
TEST(ConfigTest, MistakesAreNamed) {
    struct Case {
        const char* text;
        const char* says;
    };
    const Case cases[] = {
        {"polcy: exclusive\n", "unknown key 'polcy'"},
        {"window: many\n", "line 1: window: found 'many', expected a whole number"},
        {"risk: {smact: 0.8, heat: 3}\n", "unknown risk threshold 'heat'"},
        {"memory_margin: lots\n", "memory_margin"},
        {"policy: [a\n", "line"},
        {"- just\n- a list\n", "must be a mapping"},
    };
    for (const Case& c : cases) {
        auto r = parse_config(c.text, "test.yaml", DaemonConfig{});
        ASSERT_FALSE(r) << c.text;
        EXPECT_NE(r.error().message.find(c.says), std::string::npos) << r.error().message;
        EXPECT_NE(r.error().message.find("test.yaml"), std::string::npos) << r.error().message;
    }
}

// This test verifies that every mistake in a value names the key, its line, what was found and
// what is expected (time_scale: fast used to say only "has the wrong type"), and that a range
// mistake is caught with its line too.
TEST(ConfigTest, ValueMistakesSayFoundAndExpected) {
    struct Case {
        const char* text;
        const char* says;
    };
    const Case cases[] = {
        {"policy: carma\ntime_scale: fast\n",
         "test.yaml line 2: time_scale: found 'fast', expected a number above 0 and at most "
         "10000, such as 1 or 60"},
        {"time_scale: 0\n", "line 1: time_scale: found '0', expected a number above 0"},
        {"max_attempts: 1000\n", "line 1: max_attempts: found '1000', expected a whole number "
                                 "from 1 to 100"},
        {"mps: maybe\n", "line 1: mps: found 'maybe', expected true or false"},
        {"\nmemory_margin: lots\n", "line 2: memory_margin: found 'lots', expected an amount "
                                     "of memory such as 2GiB"},
        {"risk: 3\n", "line 1: risk: found '3', expected a mapping of smact, smocc and drama"},
        {"limits:\n  max_array_size: huge\n",
         "line 2: limits.max_array_size: found 'huge', expected a number"},
        {"fairshare_half_life: soon\n", "line 1: fairshare_half_life: found 'soon', expected"},
        {"window: {a: 1}\n", "window: found a mapping, expected a whole number"},
    };
    for (const Case& c : cases) {
        auto r = parse_config(c.text, "test.yaml", DaemonConfig{});
        ASSERT_FALSE(r) << c.text;
        EXPECT_NE(r.error().message.find(c.says), std::string::npos) << r.error().message;
    }
}

// This test verifies that an unquoted "@group" (which YAML reserves) is named with its line and
// told to be quoted, where yaml-cpp says only "unknown token".
TEST(ConfigTest, UnquotedAtGroupIsToldToBeQuoted) {
    for (const char* text : {"policy: carma\nshares:\n  alice: 1\n  @phd: 2\n",
                             "policy: carma\n\n\nshares: {alice: 1, @phd: 2}\n"}) {
        auto r = parse_config(text, "carma.yaml", DaemonConfig{});
        ASSERT_FALSE(r) << text;
        const std::string& m = r.error().message;
        EXPECT_NE(m.find("carma.yaml line 4: the key '@phd' must be quoted in YAML (\"@phd\": "
                         "...)"),
                  std::string::npos)
            << m;
        EXPECT_EQ(m.find("unknown token"), std::string::npos) << m;
    }
}

// This test verifies that shares of a user or a group this machine does not know are warned
// of (not refused: accounts may come later), and known ones are not.
TEST(ConfigTest, UnknownShareOwnersAreWarnedOf) {
    const std::vector<std::string> warnings =
        share_warnings({{"root", 1}, {"@root", 1}, {"nu4_alcie", 1}, {"@nu4_phdd", 2}});
    ASSERT_EQ(warnings.size(), 2u);
    EXPECT_NE(warnings[0].find("no group 'nu4_phdd'"), std::string::npos) << warnings[0];
    EXPECT_NE(warnings[1].find("no user 'nu4_alcie'"), std::string::npos) << warnings[1];
}

// This test verifies the value checks done once flags and file are merged.
TEST(ConfigTest, FinalizeChecksValues) {
    auto bad = [](auto mutate) {
        DaemonConfig c;
        c.state_dir = "/tmp/carma-config-test";
        mutate(c);
        return !finalize(c).has_value();
    };
    EXPECT_TRUE(bad([](DaemonConfig& c) { c.policy = "fastest"; }));
    EXPECT_TRUE(bad([](DaemonConfig& c) { c.estimator = "guess"; }));
    EXPECT_TRUE(bad([](DaemonConfig& c) { c.window = 0; }));
    EXPECT_TRUE(bad([](DaemonConfig& c) { c.max_attempts = 0; }));
    EXPECT_TRUE(bad([](DaemonConfig& c) { c.time_scale = 0; }));
    EXPECT_FALSE(bad([](DaemonConfig&) {}));
    DaemonConfig rel;
    rel.state_dir = "relative/dir/";
    auto f = finalize(rel);
    ASSERT_TRUE(f);
    EXPECT_EQ(f->state_dir.front(), '/');  // made absolute: attempts are found by path later
    EXPECT_NE(f->state_dir.back(), '/');
}

// This test verifies the agents' port keys: their defaults are the hub's own, a file sets them,
// and finalize refuses a per-node cap above the total and deadlines out of range.
TEST(ConfigTest, AgentPortKeys) {
    const DaemonConfig d;
    const http::ListenerLimits hub = cluster::agent_port_limits();
    EXPECT_EQ(d.agent_connections, hub.max_authenticated_connections);
    EXPECT_EQ(d.agent_connections_per_node, hub.max_connections_per_identity);
    EXPECT_EQ(d.agent_head_timeout_s, hub.head_timeout_s);
    EXPECT_EQ(d.agent_request_timeout_s, hub.request_timeout_s);
    auto c = parse_config("agent_connections: 64\nagent_connections_per_node: 2\n"
                          "agent_head_timeout_s: 3\nagent_request_timeout_s: 20\n",
                          "agents.yaml", DaemonConfig{});
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ(c->agent_connections, 64u);
    EXPECT_EQ(c->agent_connections_per_node, 2u);
    EXPECT_EQ(c->agent_head_timeout_s, 3);
    EXPECT_EQ(c->agent_request_timeout_s, 20);
    const auto refused = [](auto mutate) -> std::string {
        DaemonConfig x;
        x.state_dir = "/tmp/carma-config-test";
        mutate(x);
        auto f = finalize(x);
        return f ? std::string() : f.error().message;
    };
    EXPECT_NE(refused([](DaemonConfig& x) { x.agent_connections_per_node = 300; })
                  .find("agent_connections_per_node"),
              std::string::npos);
    EXPECT_NE(refused([](DaemonConfig& x) { x.agent_connections = 0; }).find("agent_connections"),
              std::string::npos);
    EXPECT_NE(refused([](DaemonConfig& x) { x.agent_request_timeout_s = 2; })
                  .find("agent_request_timeout_s"),
              std::string::npos);
    EXPECT_EQ(refused([](DaemonConfig&) {}), "");
}

}  // namespace
}  // namespace carma::daemon

namespace carma::daemon {
namespace {

// This test verifies the world keys of emulated GPUs (world, world_bias, world_noise), their
// defaults, and that a wrong value is refused naming the key.
TEST(ConfigTest, WorldKeys) {
    auto plain = parse_config("gpus: emulated:2xA100-40GB\n", "t.yaml", DaemonConfig{});
    ASSERT_TRUE(plain) << plain.error().message;
    EXPECT_EQ(plain->world, "model");
    EXPECT_DOUBLE_EQ(plain->world_bias, 0);
    EXPECT_DOUBLE_EQ(plain->world_noise, 0);
    auto c = parse_config("world: measured\nworld_bias: 0.25\nworld_noise: 0.1\n", "t.yaml",
                          DaemonConfig{});
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ(c->world, "measured");
    EXPECT_DOUBLE_EQ(c->world_bias, 0.25);
    EXPECT_DOUBLE_EQ(c->world_noise, 0.1);
    EXPECT_TRUE(finalize(*c));
    auto bad_kind = parse_config("world: real\n", "t.yaml", DaemonConfig{});
    ASSERT_TRUE(bad_kind);
    auto f = finalize(*bad_kind);
    ASSERT_FALSE(f);
    EXPECT_NE(f.error().message.find("world"), std::string::npos) << f.error().message;
    auto bad_bias = parse_config("world_bias: -1\n", "t.yaml", DaemonConfig{});
    ASSERT_TRUE(bad_bias);
    EXPECT_FALSE(finalize(*bad_bias));
    EXPECT_FALSE(parse_config("world_noise: lots\n", "t.yaml", DaemonConfig{}));
}

// This test verifies that `carma serve --print-config` (config_yaml) writes a file that reads
// back to the same configuration, defaults and set values alike, with every key of the table
// the man page carma.yaml(5) and the packaged /etc/carma/carma.yaml are generated from.
TEST(ConfigTest, ConfigYamlReadsBackWithEveryKey) {
    const std::string defaults = config_yaml(DaemonConfig{});
    for (const ConfigKey& k : config_keys()) {
        const std::string key = k.key;
        const auto dot = key.find('.');
        const std::string line = dot == std::string::npos ? "\n" + key + ":"
                                                          : "\n  " + key.substr(dot + 1) + ":";
        EXPECT_NE(defaults.find(line), std::string::npos) << key << " is not written";
        EXPECT_GT(std::string(k.help).size(), 10u) << key << " has no meaning";
    }
    auto back = parse_config(defaults, "defaults.yaml", DaemonConfig{});
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(config_yaml(*back), defaults);

    // Every value set away from its default, through a config file that starts from nothing.
    DaemonConfig set;
    set.policy = "oracle-MAGM";
    set.gpus = "emulated:2xV100";
    set.dcgm_host = "localhost:5555";
    set.exclude_gpus = {"3", "*Quadro*"};
    set.mps = true;
    set.mps_control = "/opt/mps control";
    set.world = "measured";
    set.world_bias = 0.25;
    set.window = 12;
    set.memory_margin_mib = 1500;
    set.risk.smocc = 0.5;
    set.retry_failures = true;
    set.state_dir = "/srv/carma";
    set.allowed_hosts = {"gpu-server"};
    set.agent_uid = 1234;
    set.limits.max_array_size = 7;
    set.limits.submit_rate_per_user = 2.5;
    const std::string text = config_yaml(set);
    auto read = parse_config(text, "set.yaml", DaemonConfig{});
    ASSERT_TRUE(read) << read.error().message;
    EXPECT_EQ(config_yaml(*read), text);
    EXPECT_EQ(read->mps_control, "/opt/mps control");
    EXPECT_EQ(read->memory_margin_mib, 1500);
    EXPECT_EQ(read->agent_uid.value_or(0), 1234u);
    EXPECT_DOUBLE_EQ(read->limits.submit_rate_per_user, 2.5);
    EXPECT_NE(text, defaults);
}

// This test verifies that the table and the parser agree: every key of the table is one the
// parser takes, sections' keys included, and the parser names the table's keys when one is not.
TEST(ConfigTest, ParserTakesEveryKeyOfTheTable) {
    const DaemonConfig defaults;
    for (const ConfigKey& k : config_keys()) {
        const std::string key = k.key;
        const auto dot = key.find('.');
        std::string text;
        if (dot == std::string::npos) {
            if (key == "risk" || key == "limits" || key == "host") {
                continue;  // sections: their keys follow
            }
            const std::string all = config_yaml(defaults);
            const auto at = all.find("\n" + key + ":");
            text = all.substr(at + 1, all.find('\n', at + 1) - at);
        } else {
            text = key.substr(0, dot) + ":\n  " + key.substr(dot + 1) + ": 1\n";
        }
        auto c = parse_config(text, "one.yaml", DaemonConfig{});
        EXPECT_TRUE(c) << key << ": " << (c ? "" : c.error().message);
    }
    auto unknown = parse_config("polcy: carma\n", "typo.yaml", DaemonConfig{});
    ASSERT_FALSE(unknown);
    EXPECT_NE(unknown.error().message.find("node_timeout_s"), std::string::npos);
}

}  // namespace
}  // namespace carma::daemon
