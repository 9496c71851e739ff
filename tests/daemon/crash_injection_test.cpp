// Crash injection: `carma serve` on emulated GPUs is killed with SIGKILL at 10 random moments
// while a stream of tasks is submitted, placed (collocated, some out of memory and relaunched)
// and finished, and restarted at once on the same state directory each time. At the end every
// submitted task must have succeeded exactly once: nothing lost, nothing run twice.
//
// Every random choice comes from one seed, printed first; CARMA_CRASH_SEED=N repeats the run's
// choices (the timing of a machine never repeats exactly, so a rerun hits nearby moments).

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support.h"
#include "api/client.h"
#include "daemon/daemon_programs.h"

extern char** environ;

namespace carma {
namespace {

using test_support::read_text;

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr int kKills = 10;
constexpr int kMinTasks = 24;  // submitted even if the kills are over sooner
constexpr int kMaxTasks = 60;
// Generous bounds for a slow shared machine (and sanitizers); the run itself takes ~30 s.
constexpr auto kRestartBound = 30s;
constexpr auto kTriggerBound = 4s;
constexpr auto kFinishBound = 120s;

// The moment of the daemon's life a kill aims at.
enum class Moment { Submission, Launch, Exit, Anytime };

const char* to_string(Moment m) {
    switch (m) {
        case Moment::Submission:
            return "during a submission";
        case Moment::Launch:
            return "during a launch";
        case Moment::Exit:
            return "during an exit";
        case Moment::Anytime:
            return "at a random moment";
    }
    return "?";
}

struct KillPlan {
    Moment moment = Moment::Anytime;
    std::chrono::milliseconds before{0};  // after the daemon answers, before arming
    std::chrono::microseconds after{0};   // after the trigger, before SIGKILL
};

struct TaskPlan {
    std::string name;
    std::string profile;
    int duration_s = 0;  // of the fake job, in unscaled seconds
    std::chrono::milliseconds gap{0};
};

// All random choices of a run, drawn up front from the seed, so that the threads' interleaving
// does not change them.
struct Plan {
    std::vector<KillPlan> kills;
    std::vector<TaskPlan> tasks;
};

Plan make_plan(std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    Plan plan;
    std::vector<Moment> moments;
    for (int i = 0; i < kKills; ++i) {
        // Three of each aimed moment, the rest anywhere.
        moments.push_back(i < 9 ? static_cast<Moment>(i % 3) : Moment::Anytime);
    }
    std::shuffle(moments.begin(), moments.end(), rng);
    for (Moment m : moments) {
        KillPlan k;
        k.moment = m;
        k.before = std::chrono::milliseconds(uniform(100, 900));
        switch (m) {
            // A submission over the socket takes about a millisecond or two.
            case Moment::Submission:
                k.after = std::chrono::microseconds(uniform(0, 2500));
                break;
            // A launch: attempt rows, the attempt directory and its fsyncs, the shim's start.
            case Moment::Launch:
                k.after = std::chrono::microseconds(uniform(0, 8000));
                break;
            // An exit: the task's last lines, the shim's exit.json, the daemon's next tick
            // (1/60 s at --time-scale 60) and the records.
            case Moment::Exit:
                k.after = std::chrono::microseconds(uniform(0, 40000));
                break;
            case Moment::Anytime:
                k.after = std::chrono::microseconds(uniform(0, 1000000));
                break;
        }
        plan.kills.push_back(k);
    }
    // Peaks of 11-29 GiB on 40 GiB GPUs, placed without memory information (OR-MAGM) beside
    // tasks the risk filter lets share (maskrcnn, Xception3, efficientNet3, mobilenet3): more
    // tasks than GPUs, so tasks share GPUs and some run out of memory.
    const std::vector<std::string> profiles = {"mobilenet3", "resnet3",  "efficientNet3",
                                               "vgg3",       "maskrcnn", "Xception3"};
    for (int i = 0; i < kMaxTasks; ++i) {
        TaskPlan t;
        t.name = fmt::format("crash-{}", i);
        t.profile = profiles[static_cast<std::size_t>(uniform(0, 5))];
        t.duration_s = uniform(30, 90);  // 0.5-1.5 s of wall time at --time-scale 60
        t.gap = std::chrono::milliseconds(uniform(20, 300));
        plan.tasks.push_back(t);
    }
    return plan;
}

std::uint64_t choose_seed() {
    if (const char* s = std::getenv("CARMA_CRASH_SEED"); s != nullptr && *s != '\0') {
        return std::stoull(s);
    }
    std::random_device rd;
    return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        if (!line.empty()) {
            out.push_back(line);
        }
    }
    return out;
}

// Processes whose command line or environment mentions `needle` (fake jobs name the run's
// directory only in CARMA_EMULATOR_FILE); not zombies, which pid 1 may be slow to reap.
std::vector<std::string> processes_mentioning(const std::string& needle) {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator("/proc", ec)) {
        const std::string pid = entry.path().filename().string();
        if (pid.find_first_not_of("0123456789") != std::string::npos ||
            pid == std::to_string(::getpid())) {
            continue;
        }
        std::string cmdline = read_text(entry.path().string() + "/cmdline");
        std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
        if (cmdline.find(needle) == std::string::npos &&
            read_text(entry.path().string() + "/environ").find(needle) == std::string::npos) {
            continue;
        }
        const std::string stat = read_text(entry.path().string() + "/stat");
        const std::size_t paren = stat.rfind(')');
        if (paren != std::string::npos && paren + 2 < stat.size() &&
            (stat[paren + 2] == 'Z' || stat[paren + 2] == 'X')) {
            continue;
        }
        out.push_back(pid + ": " + cmdline);
    }
    return out;
}

class CrashInjection : public ::testing::Test {
  protected:
    void SetUp() override {
        char tmpl[] = "/tmp/carma-crash-test-XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
        state_ = dir_ + "/state";
        socket_ = dir_ + "/carma.sock";
        marks_ = dir_ + "/markers";
        fs::create_directories(marks_ + "/done");
        fs::create_directories(state_ + "/attempts");
        inotify_ = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
        ASSERT_GE(inotify_, 0);
        // A first attempt creates attempts/<task> just before its records and its launch; a
        // task's marker appears in done/ as the last thing it does before it exits.
        attempts_watch_ = ::inotify_add_watch(inotify_, (state_ + "/attempts").c_str(), IN_CREATE);
        done_watch_ = ::inotify_add_watch(inotify_, (marks_ + "/done").c_str(), IN_CREATE);
        ASSERT_GE(attempts_watch_, 0);
        ASSERT_GE(done_watch_, 0);
    }

    void TearDown() override {
        stop_daemon(SIGTERM);
        // Jobs left behind by a failed run must not outlive it.
        for (const std::string& p : processes_mentioning(dir_)) {
            ::kill(std::stoi(p.substr(0, p.find(':'))), SIGKILL);
        }
        if (inotify_ >= 0) {
            ::close(inotify_);
        }
        if (::testing::Test::HasFailure() && std::getenv("CARMA_CRASH_KEEP") != nullptr) {
            std::cout << "kept " << dir_ << "\n";
            return;
        }
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }

    void log(const std::string& line) {
        std::lock_guard lock(log_mu_);
        const double t = std::chrono::duration<double>(Clock::now() - t0_).count();
        std::cout << fmt::format("[crash {:7.3f}] {}", t, line) << std::endl;
        std::ofstream(dir_ + "/daemon.log", std::ios::app)
            << fmt::format("=== test {:7.3f}: {}\n", t, line);
    }

    // Spawns `carma serve` and waits until it answers (not for its monitor window).
    void start_daemon() {
        // --max-attempts: a task may run out of memory more than twice when restarts drop the
        // warm-up locks of GPUs that have just received a task.
        std::vector<std::string> args = {
            CARMA_BIN,        "serve", "--gpus",   "emulated:4xA100-40GB",
            "--state-dir",    state_,  "--socket", socket_,
            "--time-scale",   "60",    "--policy", "OR-MAGM",
            "--max-attempts", "20"};
        const pid_t pid = test_support::spawn_logged(args, dir_ + "/daemon.log");
        ASSERT_GT(pid, 0) << "cannot start " << CARMA_BIN;
        daemon_.store(pid);
        api::ApiClient c(socket_);
        const auto until = Clock::now() + kRestartBound;
        while (!c.healthz()) {
            int status = 0;
            if (::waitpid(pid, &status, WNOHANG) == pid) {
                daemon_.store(0);
                FAIL() << "the daemon exited on start (status " << status << ")\n" << dump();
            }
            if (Clock::now() > until) {
                FAIL() << "the daemon did not answer within " << kRestartBound.count() << " s\n"
                       << dump();
            }
            std::this_thread::sleep_for(10ms);
        }
    }

    void stop_daemon(int sig) {
        const pid_t pid = daemon_.exchange(0);
        if (pid > 0) {
            ::kill(pid, sig);
            int status = 0;
            ::waitpid(pid, &status, 0);
        }
    }

    // Drains inotify events; true if one of `watch` came.
    bool drain_events(int watch) {
        alignas(inotify_event) char buf[4096];
        bool seen = false;
        for (;;) {
            const ssize_t n = ::read(inotify_, buf, sizeof buf);
            if (n <= 0) {
                return seen;
            }
            for (ssize_t off = 0; off < n;) {
                const auto* e = reinterpret_cast<const inotify_event*>(buf + off);
                seen = seen || e->wd == watch;
                off += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
            }
        }
    }

    // Waits for the next file created under a watched directory; false after `bound`.
    bool wait_for_creation(int watch, std::chrono::milliseconds bound) {
        drain_events(watch);
        const auto until = Clock::now() + bound;
        while (Clock::now() < until) {
            pollfd p{inotify_, POLLIN, 0};
            const auto left =
                std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
            if (::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(left.count(), 1))) > 0 &&
                drain_events(watch)) {
                return true;
            }
        }
        return false;
    }

    // Waits for the submitter to begin its next request; false after `bound` or when it is done.
    bool wait_for_submission(std::chrono::milliseconds bound) {
        std::unique_lock lock(submit_mu_);
        const std::uint64_t seen = submit_seq_;
        return submit_cv_.wait_for(lock, bound, [&] {
            return submit_seq_ != seen || submitter_done_;
        }) && submit_seq_ != seen;
    }

    // The body of one task: a start line, the fake job, and its done marker only on success.
    json task_body(const TaskPlan& t) const {
        const std::string script = fmt::format(
            "echo \"$CARMA_TASK_ID $CARMA_ATTEMPT\" >> {0}/started && "
            "{1} --profile {2} --duration-s {3} && "
            "echo \"$CARMA_TASK_ID $CARMA_ATTEMPT\" >> {0}/done/{4}",
            marks_, CARMA_FAKEJOB_PATH, t.profile, t.duration_s, t.name);
        return {{"name", t.name}, {"command", {"/bin/sh", "-c", script}}, {"workdir", dir_}};
    }

    // Submits one task until the daemon has it. A kill may cut the exchange after the daemon
    // stored the task, so after any failure to get an answer the queue is asked for the name
    // (unique, and this is the only client) before submitting again.
    void submit_until_accepted(api::ApiClient& c, const TaskPlan& t) {
        const std::string body = task_body(t).dump();
        for (;;) {
            {
                std::lock_guard lock(submit_mu_);
                ++submit_seq_;
            }
            submit_cv_.notify_all();
            auto reply = c.exchange("POST", "/v1/tasks", &body);
            if (reply) {
                std::lock_guard lock(submit_mu_);
                if (reply->status == 201) {
                    const TaskId id = json::parse(reply->body)["id"].get<TaskId>();
                    accepted_[t.name] = id;
                    acknowledged_.insert(t.name);
                } else {
                    refused_.push_back(
                        fmt::format("{}: HTTP {} {}", t.name, reply->status, reply->body));
                }
                return;
            }
            // Until the daemon answers again: did it store the task before it died?
            for (;;) {
                if (stop_submitting_.load()) {
                    std::lock_guard lock(submit_mu_);
                    refused_.push_back(t.name + ": the daemon never came back");
                    return;
                }
                auto list = c.list_tasks(true);
                if (list) {
                    for (const json& task : (*list)["tasks"]) {
                        if (task["name"] == t.name) {
                            std::lock_guard lock(submit_mu_);
                            accepted_[t.name] = task["id"].get<TaskId>();
                            stored_unacknowledged_.insert(t.name);
                            return;
                        }
                    }
                    break;  // not stored: submit again
                }
                std::this_thread::sleep_for(20ms);
            }
            std::lock_guard lock(submit_mu_);
            ++resubmissions_;
        }
    }

    void submitter(const Plan& plan, const std::atomic<bool>& kills_done) {
        api::ApiClient c(socket_);
        for (std::size_t i = 0; i < plan.tasks.size(); ++i) {
            if (static_cast<int>(i) >= kMinTasks && kills_done.load()) {
                break;
            }
            std::this_thread::sleep_for(plan.tasks[i].gap);
            submit_until_accepted(c, plan.tasks[i]);
        }
        {
            std::lock_guard lock(submit_mu_);
            submitter_done_ = true;
        }
        submit_cv_.notify_all();
    }

    // Everything needed to understand a failure: the queue, the markers, the daemon's log.
    std::string dump() {
        std::ostringstream out;
        out << "--- seed " << seed_ << " (rerun: CARMA_CRASH_SEED=" << seed_
            << " ctest -R CrashInjection --output-on-failure)\n";
        api::ApiClient c(socket_);
        if (auto list = c.list_tasks(true)) {
            out << "--- queue\n";
            for (const json& t : (*list)["tasks"]) {
                auto full = c.task(t["id"].get<TaskId>());
                const json& j = full ? *full : t;
                out << fmt::format("{} {} {} attempts={} message={}", j["id"].dump(),
                                   j["name"].dump(), j["state"].dump(), j["attempts"].dump(),
                                   j.value("message", ""));
                if (j.contains("attempt_list")) {
                    for (const json& a : j["attempt_list"]) {
                        out << fmt::format(" [{}:{}]", a.value("number", 0),
                                           a.value("outcome", std::string("open")));
                    }
                }
                out << "\n";
            }
        } else {
            out << "--- queue unavailable: " << list.error().message << "\n";
        }
        out << "--- started markers\n" << read_text(marks_ + "/started");
        out << "--- done markers\n";
        std::error_code ec;
        for (const auto& e : fs::directory_iterator(marks_ + "/done", ec)) {
            out << e.path().filename().string() << ": " << read_text(e.path().string());
        }
        out << "--- processes of this run\n";
        for (const std::string& p : processes_mentioning(dir_)) {
            out << p << "\n";
        }
        // Every daemon's log, with the test's own lines (kills, restarts) between them.
        out << "--- daemon log\n" << read_text(dir_ + "/daemon.log");
        return out.str();
    }

    std::string dir_, state_, socket_, marks_;
    std::atomic<pid_t> daemon_{0};
    std::uint64_t seed_ = 0;
    Clock::time_point t0_ = Clock::now();
    std::mutex log_mu_;
    int inotify_ = -1, attempts_watch_ = -1, done_watch_ = -1;

    std::mutex submit_mu_;
    std::condition_variable submit_cv_;
    std::uint64_t submit_seq_ = 0;
    bool submitter_done_ = false;
    std::atomic<bool> stop_submitting_{false};
    std::map<std::string, TaskId> accepted_;       // name -> id the daemon stored it under
    std::set<std::string> acknowledged_;           // answered 201
    std::set<std::string> stored_unacknowledged_;  // stored, but the kill cut the answer
    std::vector<std::string> refused_;             // any other answer: a failure
    int resubmissions_ = 0;
};

// This test verifies that SIGKILL of the daemon at any moment (a submission, a launch, an exit)
// followed by an immediate restart loses no accepted task and runs none twice.
TEST_F(CrashInjection, SigkillAtRandomMomentsLosesAndDoublesNothing) {
    seed_ = choose_seed();
    const Plan plan = make_plan(seed_);
    log(fmt::format("seed {} (rerun with CARMA_CRASH_SEED={}); directory {}", seed_, seed_, dir_));
    start_daemon();
    if (HasFatalFailure()) {
        return;
    }

    std::atomic<bool> kills_done{false};
    std::thread submit_thread([&] { submitter(plan, kills_done); });
    struct JoinGuard {
        std::thread& t;
        std::atomic<bool>& stop;
        ~JoinGuard() {
            stop.store(true);
            if (t.joinable()) {
                t.join();
            }
        }
    } join_guard{submit_thread, stop_submitting_};

    std::map<Moment, int> hit, missed;
    for (int k = 0; k < kKills; ++k) {
        const KillPlan& kp = plan.kills[static_cast<std::size_t>(k)];
        std::this_thread::sleep_for(kp.before);
        bool triggered = true;
        std::string trigger;
        switch (kp.moment) {
            case Moment::Submission:
                triggered = wait_for_submission(kTriggerBound);
                trigger = "a submission began";
                break;
            case Moment::Launch:
                triggered = wait_for_creation(attempts_watch_, kTriggerBound);
                trigger = "a first attempt's directory appeared";
                break;
            case Moment::Exit:
                triggered = wait_for_creation(done_watch_, kTriggerBound);
                trigger = "a task wrote its done marker";
                break;
            case Moment::Anytime:
                trigger = "the wait";
                break;
        }
        std::this_thread::sleep_for(kp.after);
        const pid_t victim = daemon_.load();
        stop_daemon(SIGKILL);
        (triggered ? hit : missed)[kp.moment] += 1;
        log(
            fmt::format("kill {}/{} {} (pid {}): {} ms after it answered, then {:.3f} ms after "
                        "{}{}; restarting",
                        k + 1, kKills, to_string(kp.moment), victim, kp.before.count(),
                        static_cast<double>(kp.after.count()) / 1000.0, trigger,
                        triggered ? "" : " (not seen within the bound)"));
        start_daemon();
        if (HasFatalFailure()) {
            return;
        }
    }
    kills_done.store(true);
    submit_thread.join();
    log(
        fmt::format("{} kills done; {} tasks stored ({} acknowledged, {} stored but unanswered, "
                    "{} submitted again after getting no answer)",
                    kKills, accepted_.size(), acknowledged_.size(), stored_unacknowledged_.size(),
                    resubmissions_));
    EXPECT_TRUE(refused_.empty()) << fmt::format("{}", fmt::join(refused_, "\n"));

    // Every task ends.
    api::ApiClient c(socket_);
    json tasks = json::array();
    const auto until = Clock::now() + kFinishBound;
    for (;;) {
        auto list = c.list_tasks(true);
        if (list) {
            tasks = (*list)["tasks"];
            if (std::all_of(tasks.begin(), tasks.end(), [](const json& t) {
                    return api::is_final_state(t["state"].get<std::string>());
                })) {
                break;
            }
        }
        ASSERT_LT(Clock::now(), until)
            << "tasks are still not final after " << kFinishBound.count() << " s\n"
            << dump();
        std::this_thread::sleep_for(100ms);
    }
    log("every task is final");

    // Each accepted name is exactly one task; the daemon has no task nobody submitted.
    std::map<std::string, std::vector<TaskId>> by_name;
    for (const json& t : tasks) {
        by_name[t["name"].get<std::string>()].push_back(t["id"].get<TaskId>());
    }
    for (const auto& [name, ids] : by_name) {
        EXPECT_TRUE(accepted_.contains(name)) << "task " << name << " was never submitted";
        EXPECT_EQ(ids.size(), 1u) << "task " << name << " is in the queue " << ids.size()
                                  << " times (ids " << fmt::format("{}", fmt::join(ids, ","))
                                  << ")";
    }
    const std::vector<std::string> started = lines_of(read_text(marks_ + "/started"));
    const std::multiset<std::string> starts(started.begin(), started.end());
    int relaunched = 0, oom_attempts = 0;
    for (const auto& [name, id] : accepted_) {
        SCOPED_TRACE(fmt::format("task {} (id {})", name, id));
        EXPECT_TRUE(by_name.contains(name)) << "accepted but not in the queue: lost";
        auto t = c.task(id);
        ASSERT_TRUE(t) << t.error().message;
        EXPECT_EQ((*t)["name"], name);
        EXPECT_EQ((*t)["state"], "succeeded") << t->dump(2);
        const int attempts = (*t)["attempts"].get<int>();
        relaunched += attempts > 1 ? 1 : 0;
        // Done exactly once, by its last attempt; every earlier attempt ran out of memory or
        // never started the task (a launch cut short by a kill).
        const std::vector<std::string> done = lines_of(read_text(marks_ + "/done/" + name));
        EXPECT_EQ(done, std::vector<std::string>{fmt::format("{} {}", id, attempts)})
            << "the task's own record of its successful runs";
        for (const json& a : (*t)["attempt_list"]) {
            const int n = a["number"].get<int>();
            const std::string outcome = a.value("outcome", std::string("open"));
            const std::size_t started_n = starts.count(fmt::format("{} {}", id, n));
            if (n == attempts) {
                EXPECT_EQ(outcome, "succeeded") << "attempt " << n;
            } else {
                EXPECT_TRUE(outcome == "out-of-memory" ||
                            (outcome != "succeeded" && started_n == 0))
                    << "attempt " << n << " started the task and ended " << outcome;
            }
            oom_attempts += outcome == "out-of-memory" ? 1 : 0;
            EXPECT_LE(started_n, 1u) << "attempt " << n << " started more than once";
        }
        EXPECT_EQ(starts.count(fmt::format("{} {}", id, attempts)), 1u)
            << "its successful attempt has no start line";
    }
    int collocated = 0;
    if (auto ev = c.events(api::EventQuery{std::nullopt, std::nullopt, 100000})) {
        for (const json& e : (*ev)["events"]) {
            collocated += e["kind"] == "placed" &&
                          e["message"].get<std::string>().find("collocated") != std::string::npos;
        }
    }
    log(fmt::format(
        "{} tasks checked; {} placements shared a busy GPU; {} attempts "
        "ran out of memory; {} tasks took more than one attempt; kills that met their moment: "
        "submission {}/{}, launch {}/{}, exit {}/{}",
        accepted_.size(), collocated, oom_attempts, relaunched, hit[Moment::Submission],
        hit[Moment::Submission] + missed[Moment::Submission], hit[Moment::Launch],
        hit[Moment::Launch] + missed[Moment::Launch], hit[Moment::Exit],
        hit[Moment::Exit] + missed[Moment::Exit]));

    if (HasFailure()) {
        std::cout << dump();
    }
    // Nothing of the run is left: no daemon, no supervisor, no task.
    stop_daemon(SIGTERM);
    std::vector<std::string> left;
    for (int i = 0; i < 100; ++i) {  // shims exit just after their exit.json
        left = processes_mentioning(dir_);
        if (left.empty()) {
            break;
        }
        std::this_thread::sleep_for(50ms);
    }
    EXPECT_TRUE(left.empty()) << "left running:\n" << fmt::format("{}", fmt::join(left, "\n"));
}

}  // namespace
}  // namespace carma
