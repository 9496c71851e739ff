#pragma once
// The fixture of the daemon's end-to-end tests: a real `carma serve` on four emulated GPUs in a
// temporary directory, driven through the API client (daemon_test.cpp, arrays_slurm_test.cpp).

#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "api/client.h"
#include "support.h"
#include "users.h"

#ifndef CARMA_BIN
#error "CARMA_BIN must name the carma executable"
#endif

namespace carma::daemon_test {

using test_support::eventually;
using test_support::read_text;
namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

inline bool is_final(const std::string& state) {
    return api::is_final_state(state);
}

// Writes a YAML config into the test's directory and returns its path.
inline std::string write_config(const std::string& dir, const std::string& text) {
    const std::string path = dir + "/carma.yaml";
    std::ofstream(path) << text;
    return path;
}

class DaemonTest : public ::testing::Test {
protected:
    void SetUp() override {
        char tmpl[] = "/tmp/carma-daemon-test-XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
        // Other users (the two-user test) must reach the socket inside.
        ::chmod(dir_.c_str(), 0755);
        socket_ = dir_ + "/carma.sock";
    }

    void TearDown() override {
        stop(SIGTERM);
        // Jobs left behind by a failed test must not outlive it.
        for (pid_t pgid : task_groups()) {
            ::kill(-pgid, SIGKILL);
        }
        if (mounted_) {
            (void)std::system(("umount -l " + dir_ + "/state").c_str());
        }
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }

    bool mounted_ = false;  // the state directory is a small tmpfs (the disk-full tests)

    // Makes the state directory a 4 MiB tmpfs, which needs root. Its failures are fatal: call it
    // inside ASSERT_NO_FATAL_FAILURE.
    void mount_small_state() {
        ASSERT_EQ(::geteuid(), 0u) << "needs root to mount a small tmpfs as the state directory";
        fs::create_directories(dir_ + "/state");
        ASSERT_EQ(std::system(("mount -t tmpfs -o size=4m tmpfs " + dir_ + "/state").c_str()), 0)
            << "mount -t tmpfs failed";
        mounted_ = true;
    }

    void start(const std::string& policy, std::vector<std::string> extra = {}) {
        std::vector<std::string> args = {CARMA_BIN,     "serve",        "--gpus",
                                         "emulated:4xA100-40GB",        "--state-dir",
                                         dir_ + "/state", "--socket",    socket_,
                                         "--time-scale", "60",           "--policy",
                                         policy,         "--kill-grace", "2"};
        args.insert(args.end(), extra.begin(), extra.end());
        // A variable of the daemon's own environment, which no task may see.
        daemon_ = test_support::spawn_logged(args, dir_ + "/daemon.log",
                                             {"CARMA_DAEMON_ONLY_SECRET=hush"});
        ASSERT_GT(daemon_, 0) << "cannot start " << CARMA_BIN;
        api::ApiClient c(socket_);
        ASSERT_TRUE(eventually([&] { return c.healthz().has_value(); }, 30s)) << daemon_log();
        // Decisions wait until every GPU's monitor window has filled once.
        ASSERT_TRUE(eventually([&] {
            auto g = c.gpus();
            return g && (*g)["gpus"][0]["window"]["samples"] == 30;
        }));
    }

    void stop(int sig) {
        if (daemon_ > 0) {
            ::kill(daemon_, sig);
            int status = 0;
            waitpid(daemon_, &status, 0);
            daemon_ = 0;
        }
    }

    std::string daemon_log() const {
        std::ifstream in(dir_ + "/daemon.log");
        return std::string(std::istreambuf_iterator<char>(in), {});
    }

    std::set<pid_t> task_groups() const {
        std::set<pid_t> out;
        std::error_code ec;
        for (auto it = fs::recursive_directory_iterator(dir_ + "/state/attempts", ec);
             !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
            if (it->path().filename() == "task.pid") {
                std::ifstream in(it->path());
                pid_t p = 0;
                if (in >> p && p > 1) {
                    out.insert(p);
                }
            }
        }
        return out;
    }

    api::ApiClient client() const { return api::ApiClient(socket_); }

    // A copy of one of our programs that another user can run: the build tree may sit in a
    // directory only root can enter (a clone under /root, a 0700 temp dir).
    std::string reachable_copy(const std::string& program) {
        const fs::path dir = fs::path(dir_) / "bin";
        fs::create_directories(dir);
        fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                 fs::perms::others_read | fs::perms::others_exec);
        const fs::path copy = dir / fs::path(program).filename();
        fs::copy_file(program, copy, fs::copy_options::overwrite_existing);
        fs::permissions(copy, fs::perms::owner_all | fs::perms::group_read |
                                  fs::perms::group_exec | fs::perms::others_read |
                                  fs::perms::others_exec);
        return copy.string();
    }

    // `carma estimate -- <body's command>`: its exit status and what it printed (standard output
    // and error together).
    std::pair<int, std::string> cli_estimate(const json& body) const {
        const std::string out = dir_ + "/estimate.out";
        std::string cmd = std::string(CARMA_BIN) + " estimate --socket " + socket_ + " --";
        for (const json& arg : body["command"]) {
            cmd += ' ';
            cmd += arg.get<std::string>();
        }
        const int rc = std::system((cmd + " >" + out + " 2>&1").c_str());
        return {rc, read_text(out)};
    }

    static json fake_job(const std::string& profile, double duration_s,
                         std::optional<MiB> declared = std::nullopt) {
        json body = {{"name", profile},
                     {"command",
                      {CARMA_FAKEJOB_PATH, "--profile", profile, "--duration-s",
                       std::to_string(duration_s)}},
                     {"workdir", "/tmp"}};
        if (declared) {
            body["memory_mib"] = *declared;
        }
        return body;
    }

    TaskId submit(const json& body) {
        auto r = client().submit(body);
        EXPECT_TRUE(r) << (r ? "" : r.error().message);
        return r ? (*r)["id"].get<TaskId>() : 0;
    }

    // Submits `body` four times, once for each of the four emulated GPUs; the ids, in order.
    std::vector<TaskId> one_per_gpu(const json& body) {
        std::vector<TaskId> ids;
        for (int i = 0; i < 4; ++i) {
            ids.push_back(submit(body));
        }
        return ids;
    }

    json task(TaskId id) {
        auto r = client().task(id);
        return r ? *r : json::object();
    }

    std::string state(TaskId id) { return task(id).value("state", ""); }

    bool all_running(const std::vector<TaskId>& ids) {
        return std::all_of(ids.begin(), ids.end(),
                           [&](TaskId id) { return state(id) == "running"; });
    }

    json wait_final(TaskId id, std::chrono::seconds limit = 120s) {
        EXPECT_TRUE(eventually([&] { return is_final(state(id)); }, limit))
            << "task " << id << " is still " << state(id) << "\n" << daemon_log();
        return task(id);
    }

    json events() {
        auto e = client().events(api::EventQuery{std::nullopt, std::nullopt, 10000});
        return e ? (*e)["events"] : json::array();
    }

    std::string dir_;
    std::string socket_;
    pid_t daemon_ = 0;
};

using test_support::as_user;  // tests/users.h

}  // namespace carma::daemon_test
