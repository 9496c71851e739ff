// Fair share in the simulator (issue 23): the trace's user, exclusive, max_slowdown and nice
// columns, the generator's users and flood, charged usage per user, and the JSON's per_user and
// jain_index.

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "sim/output.h"
#include "sim/simulator.h"

namespace carma::sim {
namespace {

SimConfig config_for(const char* policy) {
    SimConfig c;
    c.gpus = *model::parse_gpu_set("2xA100-40GB");
    c.scheduler.policy = *find_policy(policy);
    c.scheduler.placement.explain = false;
    return c;
}

// This test verifies the optional columns: user, exclusive, max_slowdown and nice are read, and
// bad values are refused with the line named.
TEST(FairShareSimTest, TraceColumns) {
    auto t = parse_trace(
        "submit_offset_s,task_name,user,exclusive,max_slowdown,nice\n"
        "0,BERT_base,alice,1,,\n"
        "5,dlrm,bob,,1.3,5\n"
        "9,dlrm,,no,,-2\n",
        "x");
    ASSERT_TRUE(t) << t.error().message;
    ASSERT_EQ(t->entries.size(), 3u);
    EXPECT_EQ(t->entries[0].user, "alice");
    EXPECT_TRUE(t->entries[0].exclusive);
    EXPECT_FALSE(t->entries[0].max_slowdown);
    EXPECT_EQ(t->entries[1].user, "bob");
    EXPECT_EQ(t->entries[1].max_slowdown, 1.3);
    EXPECT_EQ(t->entries[1].nice, 5);
    EXPECT_EQ(t->entries[2].user, "");
    EXPECT_FALSE(t->entries[2].exclusive);
    EXPECT_EQ(t->entries[2].nice, -2);
    for (const char* bad : {"0,dlrm,a,maybe,,\n", "0,dlrm,a,,0.5,\n", "0,dlrm,a,,,1.5\n"}) {
        auto r = parse_trace(std::string("submit_offset_s,task_name,user,exclusive,max_slowdown,"
                                         "nice\n") + bad,
                             "x");
        ASSERT_FALSE(r) << bad;
        EXPECT_NE(r.error().message.find("line 2"), std::string::npos) << r.error().message;
    }
}

// This test verifies the generator: users=K names u1..uK with Zipf odds (u1 the most), from a
// stream of its own (the tasks are those of the trace without users), and flood=U:N adds N
// tasks of U at time 0.
TEST(FairShareSimTest, GeneratorUsersAndFlood) {
    const auto& cat = model::Catalog::embedded();
    auto spec = parse_generator("gen:400,gap=30,users=3,flood=flood:50", 5);
    ASSERT_TRUE(spec) << spec.error().message;
    EXPECT_EQ(spec->users, 3u);
    EXPECT_EQ(spec->flood_user, "flood");
    EXPECT_EQ(spec->flood_count, 50u);
    const Trace t = generate_trace(cat, *spec);
    ASSERT_EQ(t.entries.size(), 450u);
    std::map<std::string, int> count;
    for (const TraceEntry& e : t.entries) {
        ++count[e.user];
    }
    EXPECT_EQ(count["flood"], 50);
    for (std::size_t i = 0; i < 50; ++i) {
        EXPECT_EQ(t.entries[i].user, "flood");
        EXPECT_EQ(t.entries[i].submit_s, 0);
    }
    EXPECT_EQ(count["u1"] + count["u2"] + count["u3"], 400);
    EXPECT_GT(count["u1"], count["u2"]);
    EXPECT_GT(count["u2"], count["u3"]);
    const Trace plain = generate_trace(cat, GeneratorConfig{400, 30, 0, 5});
    for (std::size_t i = 0; i < 400; ++i) {
        EXPECT_EQ(plain.entries[i].task_name, t.entries[i + 50].task_name);
        EXPECT_EQ(plain.entries[i].submit_s, t.entries[i + 50].submit_s);
    }
    for (const char* bad : {"gen:10,users=0", "gen:10,flood=:3", "gen:10,flood=x:0"}) {
        EXPECT_FALSE(parse_generator(bad, 1)) << bad;
    }
}

// This test verifies that a task of the exclusive column never has a co-runner, under carma and
// a paper policy: no other attempt overlaps its attempts on its GPUs. It is also charged the
// whole GPU while it runs.
TEST(FairShareSimTest, ExclusiveNeverCollocated) {
    std::string csv = "submit_offset_s,task_name,user,exclusive\n";
    const char* names[] = {"dlrm", "efficientNet", "BERT_base", "dlrm"};
    for (int i = 0; i < 24; ++i) {
        csv += fmt::format("{},{},u{},{}\n", i * 30, names[i % 4], i % 3, i % 5 == 0 ? 1 : 0);
    }
    const Trace trace = *parse_trace(csv, "excl");
    for (const char* policy : {"carma", "oracle-MAGM", "OR-LUG"}) {
        const PolicyResult r = simulate(trace, model::Catalog::embedded(), config_for(policy));
        EXPECT_EQ(r.tasks_completed, 24) << policy;
        bool collocated_somewhere = false;
        for (std::size_t i = 0; i < r.tasks.size(); ++i) {
            for (std::size_t j = 0; j < r.tasks.size(); ++j) {
                if (i == j) {
                    continue;
                }
                for (const AttemptSpan& a : r.tasks[i].spans) {
                    for (const AttemptSpan& b : r.tasks[j].spans) {
                        const bool overlap = a.start_s < b.end_s && b.start_s < a.end_s;
                        const bool same_gpu = std::any_of(a.gpus.begin(), a.gpus.end(), [&](int g) {
                            return std::find(b.gpus.begin(), b.gpus.end(), g) != b.gpus.end();
                        });
                        if (overlap && same_gpu) {
                            collocated_somewhere = true;
                            EXPECT_FALSE(r.tasks[i].exclusive)
                                << policy << ": " << i << " shared with " << j;
                        }
                    }
                }
            }
        }
        EXPECT_TRUE(collocated_somewhere) << policy << ": the test needs sharing to mean anything";
        for (const TaskRecord& t : r.tasks) {
            if (t.exclusive && t.finish_s >= 0) {
                // The whole GPU from its first GPU activity to its end: at least the run time
                // less the start-up.
                EXPECT_GT(t.charged_gpu_s, 0.5 * (t.finish_s - t.first_start_s)) << policy;
            }
        }
    }
}

// This test verifies that `--max-slowdown 1` is charged like `--exclusive` (issue 42): under carma
// such a task keeps every co-runner away, so it pays for the whole GPU it denies others; a light
// task with neither pays for what it uses, far less.
TEST(FairShareSimTest, MaxSlowdownOneIsChargedLikeExclusive) {
    auto charged = [](const char* exclusive, const char* max_slowdown) {
        const Trace trace = *parse_trace(
            fmt::format("submit_offset_s,task_name,user,exclusive,max_slowdown\n"
                        "0,mobilenet3,alice,{},{}\n",
                        exclusive, max_slowdown),
            "bound");
        const PolicyResult r = simulate(trace, model::Catalog::embedded(), config_for("carma"));
        EXPECT_EQ(r.tasks_completed, 1);
        return r.tasks.at(0).charged_gpu_s;
    };
    const double exclusive = charged("1", "");
    const double bound_one = charged("0", "1");
    const double shared = charged("0", "");
    ASSERT_GT(exclusive, 0);
    EXPECT_NEAR(bound_one, exclusive, 1e-6 * exclusive);
    EXPECT_LT(shared, 0.8 * exclusive) << "the test needs a light task";
    EXPECT_NEAR(charged("0", "2"), std::max(shared, 0.5 * exclusive), 0.02 * exclusive);
}

// This test verifies per_user and jain_index: tasks, charged GPU-hours, mean wait and slowdown
// per user, in the JSON too; the users' charged hours add up to the tasks'.
TEST(FairShareSimTest, PerUserAndJainInJson) {
    std::string csv = "submit_offset_s,task_name,user\n";
    for (int i = 0; i < 12; ++i) {
        csv += fmt::format("{},{},{}\n", i * 60, i % 2 ? "dlrm" : "efficientNet",
                           i < 8 ? "heavy" : "light");
    }
    const Trace trace = *parse_trace(csv, "users");
    Comparison c;
    c.results.push_back(simulate(trace, model::Catalog::embedded(), config_for("carma")));
    const PolicyResult& r = c.results[0];
    ASSERT_EQ(r.per_user.size(), 2u);
    EXPECT_EQ(r.per_user[0].user, "heavy");
    EXPECT_EQ(r.per_user[0].tasks, 8);
    EXPECT_EQ(r.per_user[1].tasks, 4);
    double charged_h = 0;
    for (const TaskRecord& t : r.tasks) {
        charged_h += t.charged_gpu_s / 3600;
    }
    EXPECT_NEAR(r.per_user[0].charged_gpu_h + r.per_user[1].charged_gpu_h, charged_h, 1e-9);
    EXPECT_GT(r.per_user[0].charged_gpu_h, 0);
    EXPECT_GE(r.per_user[1].mean_slowdown, 1.0);
    EXPECT_GT(r.jain_index, 0.5);
    EXPECT_LE(r.jain_index, 1.0);
    const nlohmann::json j = to_json(c);
    const nlohmann::json& pu = j["results"][0]["per_user"];
    ASSERT_EQ(pu.size(), 2u);
    for (const char* key : {"user", "tasks", "charged_gpu_hours", "mean_wait_s", "mean_slowdown"}) {
        EXPECT_TRUE(pu[0].contains(key)) << key;
    }
    EXPECT_DOUBLE_EQ(j["results"][0]["jain_index"].get<double>(), r.jain_index);
}

// This test verifies that fair share changes who waits: a flood user's 30 tasks at time 0 and a
// light user's 3 tasks a little later; with fair share the light user's tasks wait less than
// without.
TEST(FairShareSimTest, FloodWaitsLightUserGoesFirst) {
    std::string csv = "submit_offset_s,task_name,user\n";
    const char* names[] = {"efficientNet", "BERT_large", "dlrm"};
    for (int i = 0; i < 30; ++i) {
        csv += fmt::format("0,{},flood\n", names[i % 3]);
    }
    for (int i = 0; i < 3; ++i) {
        csv += fmt::format("{},{},light\n", 600 + i * 300, names[i % 3]);
    }
    const Trace trace = *parse_trace(csv, "flood");
    auto light_wait = [&](bool on) {
        SimConfig c = config_for("carma");
        c.scheduler.carma.fair_share = on;
        const PolicyResult r = simulate(trace, model::Catalog::embedded(), c);
        for (const UserSummary& u : r.per_user) {
            if (u.user == "light") {
                return u.mean_wait_s;
            }
        }
        return -1.0;
    };
    const double on = light_wait(true), off = light_wait(false);
    EXPECT_LT(on, off) << "on " << on << " s, off " << off << " s";
}

// This test verifies that the factor counts running tasks' charge ahead (fairshare_horizon): on
// 2 GPUs alice's first task runs from t = 0; at t = 60 s alice and bob queue five more each, all
// exclusive. Bob's first takes the idle GPU. When alice's first ends, bob has been charged about
// a minute less than alice: by usage alone (horizon 0, Slurm's classic factor) bob takes that GPU
// too and holds both, while alice waits; counting his running task an hour ahead, alice takes it.
TEST(FairShareSimTest, RunningTasksCountAhead) {
    std::string csv = "submit_offset_s,task_name,user,exclusive\n0,mnist_train,alice,1\n";
    for (int i = 0; i < 5; ++i) {
        csv += "60,mnist_train,alice,1\n60,mnist_train,bob,1\n";
    }
    const Trace trace = *parse_trace(csv, "ahead");
    // Who started first after alice's first task ended, and whether bob ever held both GPUs.
    auto next_after_first = [&](double horizon_s) {
        SimConfig c = config_for("carma");
        c.fairshare_horizon_s = horizon_s;
        const PolicyResult r = simulate(trace, model::Catalog::embedded(), c);
        EXPECT_EQ(r.tasks_completed, 11);
        const double freed = r.tasks.at(0).finish_s;
        std::size_t next = 0;
        for (std::size_t i = 1; i < r.tasks.size(); ++i) {
            const double start = r.tasks[i].first_start_s;
            if (start >= freed && (next == 0 || start < r.tasks[next].first_start_s)) {
                next = i;
            }
        }
        EXPECT_NE(next, 0u) << "nothing started after the first task ended";
        return trace.entries.at(next).user;
    };
    EXPECT_EQ(next_after_first(3600), "alice");
    EXPECT_EQ(next_after_first(0), "bob");
}

// This test verifies that usage decays with the configured half-life (fairshare_half_life, `carma
// simulate --fair-share-half-life`): on one GPU alice's hour-long task runs first, then bob's
// short one; then one more of each waits. With the default week, alice's hour outweighs bob's
// two minutes and bob goes first; with a ten-second half-life alice's hour, last charged when it
// ended two minutes before bob's, has faded below bob's two minutes and she does.
TEST(FairShareSimTest, UsageDecaysWithTheHalfLife) {
    const Trace trace = *parse_trace(
        "submit_offset_s,task_name,user,exclusive\n0,Inception,alice,1\n1,mnist_train,bob,1\n"
        "10,mnist_train,alice,1\n10,mnist_train,bob,1\n",
        "decay");
    auto first_of_the_last_two = [&](double half_life_s) {
        SimConfig c = config_for("carma");
        c.gpus = *model::parse_gpu_set("1xA100-40GB");
        c.fairshare_half_life_s = half_life_s;
        const PolicyResult r = simulate(trace, model::Catalog::embedded(), c);
        EXPECT_EQ(r.tasks_completed, 4);
        EXPECT_LT(r.tasks.at(1).first_start_s, r.tasks.at(2).first_start_s);
        return r.tasks.at(2).first_start_s < r.tasks.at(3).first_start_s ? "alice" : "bob";
    };
    EXPECT_EQ(std::string(first_of_the_last_two(7 * 24 * 3600.0)), "bob");
    EXPECT_EQ(std::string(first_of_the_last_two(10)), "alice");
}

// This test verifies that a task counts in its user's factor from the moment it is placed, not
// from its first reading: on 2 GPUs bob's two tasks end 3 s apart, both while alice (who used
// nothing) and bob have three tasks each waiting. Alice's takes the first GPU that frees; 3 s
// later it is still starting, not yet charged, but expected to take the whole GPU (exclusive), so
// the second GPU goes to bob, not to alice again.
TEST(FairShareSimTest, StartingTaskCountsFromItsPlacement) {
    std::string csv = "submit_offset_s,task_name,user,exclusive\n0,mnist_train,bob,1\n"
                      "3,mnist_train,bob,1\n";
    for (int i = 0; i < 3; ++i) {
        csv += "10,mnist_train,alice,1\n10,mnist_train,bob,1\n";
    }
    const Trace trace = *parse_trace(csv, "starting");
    const PolicyResult r = simulate(trace, model::Catalog::embedded(), config_for("carma"));
    ASSERT_EQ(r.tasks_completed, 8);
    // The two tasks that started when bob's first two ended, in order.
    std::vector<std::pair<double, std::string>> next;
    for (std::size_t i = 2; i < r.tasks.size(); ++i) {
        next.emplace_back(r.tasks[i].first_start_s, trace.entries[i].user);
    }
    std::sort(next.begin(), next.end());
    ASSERT_GE(next.size(), 2u);
    EXPECT_GE(next[0].first, r.tasks[0].finish_s);
    EXPECT_LT(next[1].first - next[0].first, 10.0) << "the second GPU should free 3 s later";
    EXPECT_EQ(next[0].second, "alice");
    EXPECT_EQ(next[1].second, "bob");
}

// This test verifies the preemption columns: requeue (like exclusive) and checkpoint_s (seconds
// above 0) are read, and bad values are refused with the line named.
TEST(FairShareSimTest, PreemptionColumns) {
    auto t = parse_trace(
        "submit_offset_s,task_name,requeue,checkpoint_s\n0,dlrm,yes,600\n"
        "1,dlrm,,\n",
        "x");
    ASSERT_TRUE(t) << t.error().message;
    EXPECT_TRUE(t->entries[0].requeue);
    EXPECT_EQ(t->entries[0].checkpoint_s, 600.0);
    EXPECT_FALSE(t->entries[1].requeue);
    EXPECT_FALSE(t->entries[1].checkpoint_s);
    for (const char* bad : {"0,dlrm,perhaps,\n", "0,dlrm,1,0\n", "0,dlrm,1,-5\n"}) {
        auto r =
            parse_trace(std::string("submit_offset_s,task_name,requeue,checkpoint_s\n") + bad, "x");
        ASSERT_FALSE(r) << bad;
        EXPECT_NE(r.error().message.find("line 2"), std::string::npos) << r.error().message;
    }
}

// This test verifies fair-share preemption (core/preemption.h) in the simulator: on 2 GPUs bob's
// two hour-long exclusive tasks run from t = 0; alice's short one arrives at t = 1000 s. With
// preemption on, bob's task started last gives way (bob then holds one GPU, alice one): alice
// starts at once, bob's task is queued again and resumes from its last checkpoint (600 s of
// work kept of about 990 done). Without a checkpoint it starts over; without `requeue`, or with
// preemption off, alice waits for a GPU to free.
TEST(FairShareSimTest, PreemptionLetsTheUnderServedIn) {
    auto run = [](bool preempt, const char* requeue, const char* checkpoint) {
        const Trace trace = *parse_trace(
            fmt::format("submit_offset_s,task_name,user,exclusive,requeue,checkpoint_s\n"
                        "0,Inception,bob,1,{0},{1}\n5,Inception,bob,1,{0},{1}\n"
                        "1000,mnist_train,alice,1,,\n",
                        requeue, checkpoint),
            "preempt");
        SimConfig c = config_for("carma");
        c.preemption.enabled = preempt;
        const PolicyResult r = simulate(trace, model::Catalog::embedded(), c);
        EXPECT_EQ(r.tasks_completed, 3);
        return r;
    };
    const double solo = model::Catalog::embedded().find("Inception")->t_solo_s;
    {
        const PolicyResult r = run(true, "1", "600");
        EXPECT_EQ(r.preemptions, 1);
        const TaskRecord& stopped = r.tasks.at(1);
        ASSERT_EQ(stopped.spans.size(), 2u);
        EXPECT_EQ(stopped.spans[0].outcome, AttemptOutcome::Preempted);
        EXPECT_EQ(stopped.spans[1].outcome, AttemptOutcome::Succeeded);
        EXPECT_EQ(r.tasks.at(0).attempts, 1);
        EXPECT_LT(r.tasks.at(2).first_start_s, 1100.0) << "alice should start at once";
        EXPECT_NEAR(stopped.spans[1].end_s - stopped.spans[1].start_s, solo - 600, 30);
    }
    {
        const PolicyResult r = run(true, "1", "");
        EXPECT_EQ(r.preemptions, 1);
        const TaskRecord& stopped = r.tasks.at(1);
        ASSERT_EQ(stopped.spans.size(), 2u);
        EXPECT_NEAR(stopped.spans[1].end_s - stopped.spans[1].start_s, solo, 30);
    }
    for (const PolicyResult& r : {run(true, "", "600"), run(false, "1", "600")}) {
        EXPECT_EQ(r.preemptions, 0);
        EXPECT_GT(r.tasks.at(2).first_start_s, solo - 10) << "alice waits for a GPU to free";
        EXPECT_EQ(r.tasks.at(1).attempts, 1);
    }
}

// This test verifies that a task is stopped only where its end lets the head start: on 4 GPUs
// bob's four exclusive one-GPU tasks run; alice's two-GPU task arrives. The rule would allow a
// swap (alice at 2 GPUs' worth against bob's 3), but while all four GPUs are busy no one task of
// bob's frees two, so none is stopped. Once the first of bob's tasks ends, stopping one more
// lets her start: at most that one is stopped.
TEST(FairShareSimTest, PreemptionOnlyWhereTheHeadCanStart) {
    std::string csv = "submit_offset_s,task_name,user,exclusive,requeue,checkpoint_s\n";
    for (int i = 0; i < 4; ++i) {
        csv += fmt::format("{},Inception,bob,1,1,600\n", i);
    }
    csv += "1000,xlnet_base_cased_2,alice,1,,\n";
    const Trace trace = *parse_trace(csv, "room");
    SimConfig c = config_for("carma");
    c.gpus = *model::parse_gpu_set("4xA100-40GB");
    c.preemption.enabled = true;
    const PolicyResult r = simulate(trace, model::Catalog::embedded(), c);
    EXPECT_EQ(r.tasks_completed, 5);
    EXPECT_LE(r.preemptions, 1);
    double first_end = 1e18;
    for (std::size_t i = 0; i < 4; ++i) {
        first_end = std::min(first_end, r.tasks.at(i).spans.at(0).end_s);
    }
    EXPECT_GT(first_end, 3000.0);
    EXPECT_GE(r.tasks.at(4).first_start_s, first_end) << "alice waits for a GPU to free";
}

// This test verifies the daemon's per-user budget of stops in the simulator (issue 44): on 4
// GPUs bob's four exclusive tasks run and alice submits two; with the default budget she stops
// two of bob's, with `max_stops_per_user` 1 only one within the window, and her second task
// waits for a GPU to free.
TEST(FairShareSimTest, PreemptionStopsAreBoundedPerUser) {
    std::string csv = "submit_offset_s,task_name,user,exclusive,requeue,checkpoint_s\n";
    for (int i = 0; i < 4; ++i) {
        csv += fmt::format("{},Inception,bob,1,1,600\n", i);
    }
    csv += "1000,mnist_train,alice,1,,\n1001,mnist_train,alice,1,,\n";
    const Trace trace = *parse_trace(csv, "budget");
    auto run = [&](int max_stops) {
        SimConfig c = config_for("carma");
        c.gpus = *model::parse_gpu_set("4xA100-40GB");
        c.preemption.enabled = true;
        c.preemption.max_stops_per_user = max_stops;
        c.preemption.stops_window_s = 24 * 3600;
        const PolicyResult r = simulate(trace, model::Catalog::embedded(), c);
        EXPECT_EQ(r.tasks_completed, 6);
        return r;
    };
    const PolicyResult free = run(4);
    EXPECT_EQ(free.preemptions, 2);
    EXPECT_LT(free.tasks.at(5).first_start_s, 1100.0);
    const PolicyResult bounded = run(1);
    EXPECT_EQ(bounded.preemptions, 1);
    EXPECT_LT(bounded.tasks.at(4).first_start_s, 1100.0);
    EXPECT_GT(bounded.tasks.at(5).first_start_s, bounded.tasks.at(4).finish_s - 1e-6)
        << "alice's second task waits for a GPU: her one stop is spent";
}

}  // namespace
}  // namespace carma::sim
