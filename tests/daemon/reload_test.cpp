// The configuration reloaded on SIGHUP (systemctl reload): what may change live changes, what
// cannot is named, and a config with errors is refused while the old one stays.

#include <signal.h>

#include <string>

#include "daemon/daemon_fixture.h"

namespace carma {
namespace {

using namespace daemon_test;

class ReloadTest : public DaemonTest {
protected:
    // GET /v1/share's limits.max_gpus_per_user; -1 when it cannot be read.
    long gpu_limit() {
        auto share = client().share();
        return share ? (*share)["limits"]["max_gpus_per_user"].get<long>() : -1;
    }
    bool log_says(const std::string& text) {
        return daemon_log().find(text) != std::string::npos;
    }
};

// This test verifies the reload: a running daemon sent SIGHUP after its config file changed
// applies the new limit (GET /v1/share shows it), warns of a share for a user this machine does
// not know, and names a key that needs a restart (window) while keeping its old value; a config
// with an error is then refused with the error logged, and the limit in use stays.
TEST_F(ReloadTest, SighupAppliesLimitsAndRefusesABadConfig) {
    const std::string config = write_config(dir_, "limits: {max_gpus_per_user: 2}\n");
    start("carma", {"--config", config});
    ASSERT_EQ(gpu_limit(), 2);

    write_config(dir_, "limits: {max_gpus_per_user: 3}\nshares: {nu4_alcie: 2}\nwindow: 20\n");
    ASSERT_EQ(::kill(daemon_, SIGHUP), 0);
    ASSERT_TRUE(eventually([&] { return gpu_limit() == 3; })) << daemon_log();
    EXPECT_TRUE(eventually([&] { return log_says("reload: limits.max_gpus_per_user: 2 -> 3"); }))
        << daemon_log();
    EXPECT_TRUE(log_says("no user 'nu4_alcie'")) << daemon_log();
    EXPECT_TRUE(log_says("reload: window: 30 -> 20 needs a restart")) << daemon_log();
    auto gpus = client().gpus();
    ASSERT_TRUE(gpus);
    EXPECT_EQ((*gpus)["gpus"][0]["window"]["samples"], 30) << "window changed without a restart";

    write_config(dir_, "limits: {max_gpus_per_user: 1}\ntime_scale: fast\n");
    ASSERT_EQ(::kill(daemon_, SIGHUP), 0);
    ASSERT_TRUE(eventually([&] { return log_says("reload refused"); })) << daemon_log();
    EXPECT_TRUE(log_says("time_scale: found 'fast', expected a number")) << daemon_log();
    EXPECT_EQ(gpu_limit(), 3);
    EXPECT_TRUE(client().healthz().has_value()) << daemon_log();
}

}  // namespace
}  // namespace carma
