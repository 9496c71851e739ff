#include "store/store.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include <SQLiteCpp/SQLiteCpp.h>
#include <fmt/format.h>

#include "store/store_fixture.h"

namespace carma::store {
namespace {

namespace fs = std::filesystem;

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

// A task with every field set to something a sloppy encoder would get wrong: non-ASCII text,
// empty and spaced arguments, a uid above INT32_MAX, a double that is not short in decimal,
// duplicate environment names in a deliberate order.
TaskRow full_task() {
    TaskRow t;
    t.spec.name = "resnet50 \xc3\xa9t\xc3\xa9";
    t.spec.command = {"python", "train.py", "--lr=0.1", "with space", "", "quote\"d"};
    t.spec.gpus = 2;
    t.spec.memory.declared_mib = 12000;
    t.spec.memory.profiled_mib = 13236;
    t.spec.memory.horus_mib = 14001;
    t.spec.memory.faketensor_mib = 15002;
    t.spec.memory.gpumemnet_mib = 16003;
    t.spec.memory.model = ModelDescriptor{25.6e6, 0.1 + 0.2, 64};
    t.spec.workload = "resnet50";
    t.uid = 4000000000u;
    t.gid = 1001;
    t.user = "alice";
    t.workdir = "/home/alice/run 1";
    t.env = {{"B", "2"}, {"A", "1"}, {"A", "dup"}, {"EMPTY", ""}};
    t.state = TaskState::Recovering;
    t.attempts = 2;
    t.max_attempts = 5;
    t.submitted_at = 1700000000.123456789;
    t.finished_at = 1700003600.5;
    t.message = "waits for 1 idle GPU";
    return t;
}

TaskRow named_task(const std::string& name, TaskState state = TaskState::Queued) {
    TaskRow t;
    t.spec.name = name;
    t.state = state;
    t.submitted_at = 100;
    return t;
}

void expect_same_model(const std::optional<ModelDescriptor>& a,
                       const std::optional<ModelDescriptor>& b) {
    ASSERT_EQ(a.has_value(), b.has_value());
    if (a) {
        EXPECT_EQ(a->parameters, b->parameters);
        EXPECT_EQ(a->activations_per_sample, b->activations_per_sample);
        EXPECT_EQ(a->batch_size, b->batch_size);
    }
}

void expect_same_task(const TaskRow& a, const TaskRow& b) {
    EXPECT_EQ(a.id, b.id);
    EXPECT_EQ(a.spec.name, b.spec.name);
    EXPECT_EQ(a.spec.command, b.spec.command);
    EXPECT_EQ(a.spec.gpus, b.spec.gpus);
    EXPECT_EQ(a.spec.memory.declared_mib, b.spec.memory.declared_mib);
    EXPECT_EQ(a.spec.memory.profiled_mib, b.spec.memory.profiled_mib);
    EXPECT_EQ(a.spec.memory.horus_mib, b.spec.memory.horus_mib);
    EXPECT_EQ(a.spec.memory.faketensor_mib, b.spec.memory.faketensor_mib);
    EXPECT_EQ(a.spec.memory.gpumemnet_mib, b.spec.memory.gpumemnet_mib);
    expect_same_model(a.spec.memory.model, b.spec.memory.model);
    EXPECT_EQ(a.spec.workload, b.spec.workload);
    EXPECT_EQ(a.uid, b.uid);
    EXPECT_EQ(a.gid, b.gid);
    EXPECT_EQ(a.user, b.user);
    EXPECT_EQ(a.workdir, b.workdir);
    EXPECT_EQ(a.env, b.env);
    EXPECT_EQ(a.state, b.state);
    EXPECT_EQ(a.attempts, b.attempts);
    EXPECT_EQ(a.max_attempts, b.max_attempts);
    EXPECT_EQ(a.submitted_at, b.submitted_at);
    EXPECT_EQ(a.finished_at, b.finished_at);
    EXPECT_EQ(a.message, b.message);
}

void expect_same_attempt(const AttemptRow& a, const AttemptRow& b) {
    EXPECT_EQ(a.task, b.task);
    EXPECT_EQ(a.number, b.number);
    EXPECT_EQ(a.gpus, b.gpus);
    EXPECT_EQ(a.dir, b.dir);
    EXPECT_EQ(a.shim_pid, b.shim_pid);
    EXPECT_EQ(a.started_at, b.started_at);
    EXPECT_EQ(a.ended_at, b.ended_at);
    EXPECT_EQ(a.outcome, b.outcome);
    EXPECT_EQ(a.exit_code, b.exit_code);
    EXPECT_EQ(a.signal, b.signal);
    EXPECT_EQ(a.recovered, b.recovered);
    EXPECT_EQ(a.energy_j, b.energy_j);
}

AttemptRow attempt(TaskId task, int number) {
    AttemptRow a;
    a.task = task;
    a.number = number;
    a.gpus = {number, number + 1};
    a.dir = "/var/lib/carma/attempts/" + std::to_string(task) + "-" + std::to_string(number);
    a.shim_pid = 4242 + number;
    a.started_at = 200.25 + number;
    return a;
}

EventRow event(TaskId task, const std::string& kind, double time) {
    return EventRow{0, time, task, kind, kind + " message"};
}

GpuSampleRow sample(double time, int gpu) {
    return GpuSampleRow{time, gpu, 30000 + gpu, 10441 - gpu, 0.5, 0.25, 0.125, 0.0625, 250.5,
                        1e6 + time};
}

class StoreTest : public StoreFixture {
protected:
    // `written` stored as a new task and read back: every field as it was (but the id the store
    // gave it), into `read`.
    void round_trip(TaskRow written, TaskRow& read) {
        auto store = open_store();
        ASSERT_NE(store, nullptr);
        auto id = store->insert_task(written);
        ASSERT_TRUE(id) << id.error().message;
        written.id = *id;
        auto back = store->task(*id);
        ASSERT_TRUE(back) << back.error().message;
        ASSERT_TRUE(back->has_value());
        expect_same_task(**back, written);
        read = **back;
    }

    // What an older CARMA left before a migration test downgrades it: one running task, "old",
    // with its first attempt (that attempt's per-GPU peak `peak_mib`), the store closed again;
    // the task's id into `id`. Its failures are fatal: call it inside ASSERT_NO_FATAL_FAILURE.
    void write_old_attempt(TaskId& id, const std::map<int, MiB>& peak_mib = {}) {
        auto store = open_store();
        ASSERT_NE(store, nullptr);
        auto inserted = store->insert_task(named_task("old", TaskState::Running));
        ASSERT_TRUE(inserted);
        id = *inserted;
        AttemptRow a = attempt(id, 1);
        a.peak_mib = peak_mib;
        ASSERT_TRUE(store->insert_attempt(a));
    }
};

// This test verifies that a task with every field set comes back exactly as it was written.
TEST_F(StoreTest, RoundTripsATaskWithEveryField) {
    TaskRow read;
    ASSERT_NO_FATAL_FAILURE(round_trip(full_task(), read));
}

// This test verifies that empty optionals, lists and strings stay empty rather than turning into
// zeros or defaults.
TEST_F(StoreTest, RoundTripsATaskWithOptionalsEmpty) {
    TaskRow read;
    ASSERT_NO_FATAL_FAILURE(round_trip(named_task(""), read));
    const MemoryInfo& memory = read.spec.memory;
    EXPECT_FALSE(memory.declared_mib || memory.profiled_mib || memory.horus_mib ||
                 memory.faketensor_mib || memory.gpumemnet_mib || memory.model);
    EXPECT_FALSE(read.finished_at);
}

// This test verifies that an unknown id reads as "no such task", not as an error.
TEST_F(StoreTest, UnknownTaskIsEmpty) {
    auto store = open_store();
    ASSERT_NE(store, nullptr);
    auto read = store->task(12345);
    ASSERT_TRUE(read) << read.error().message;
    EXPECT_FALSE(read->has_value());
}

// This test verifies that ids grow and that the id of a deleted newest task is not handed out
// again (AUTOINCREMENT), even after reopening the file.
TEST_F(StoreTest, IdsAreMonotonicAndNeverReused) {
    TaskId last = 0;
    {
        auto store = open_store();
        ASSERT_NE(store, nullptr);
        for (int i = 0; i < 3; ++i) {
            auto id = store->insert_task(named_task("t" + std::to_string(i)));
            ASSERT_TRUE(id) << id.error().message;
            EXPECT_GT(*id, last);
            last = *id;
        }
    }
    {
        SQLite::Database raw(path_, SQLite::OPEN_READWRITE);
        raw.exec("DELETE FROM tasks WHERE id = " + std::to_string(last));
    }
    auto store = open_store();
    ASSERT_NE(store, nullptr);
    auto id = store->insert_task(named_task("after delete"));
    ASSERT_TRUE(id) << id.error().message;
    EXPECT_GT(*id, last);
}

// This test verifies that update_task rewrites the row and reports an unknown id as NotFound.
TEST_F(StoreTest, UpdatesATask) {
    auto store = open_store();
    ASSERT_NE(store, nullptr);
    auto id = store->insert_task(named_task("job"));
    ASSERT_TRUE(id) << id.error().message;

    TaskRow changed = full_task();
    changed.id = *id;
    changed.state = TaskState::Failed;
    ASSERT_TRUE(store->update_task(changed));
    auto read = store->task(*id);
    ASSERT_TRUE(read && read->has_value());
    expect_same_task(**read, changed);

    // And back to empty optionals: an update must clear, not only set.
    TaskRow cleared = named_task("job");
    cleared.id = *id;
    ASSERT_TRUE(store->update_task(cleared));
    read = store->task(*id);
    ASSERT_TRUE(read && read->has_value());
    expect_same_task(**read, cleared);

    TaskRow missing = named_task("ghost");
    missing.id = *id + 100;
    auto result = store->update_task(missing);
    ASSERT_FALSE(result);
    EXPECT_EQ(result.error().code, ErrorCode::NotFound);
    EXPECT_TRUE(contains(result.error().message, "task " + std::to_string(missing.id)))
        << result.error().message;
}

// This test verifies that what waiting tasks learned is written to their rows and nothing else:
// a running or finished task keeps its own figures, and the rest of a waiting row is untouched.
TEST_F(StoreTest, RecordsWhatWaitingTasksLearned) {
    auto store = open_store();
    ASSERT_NE(store, nullptr);
    std::vector<TaskId> ids;
    for (TaskState s : {TaskState::Queued, TaskState::Held, TaskState::Recovering,
                        TaskState::Running, TaskState::Succeeded}) {
        TaskRow t = full_task();
        t.state = s;
        auto id = store->insert_task(t);
        ASSERT_TRUE(id) << id.error().message;
        ids.push_back(*id);
    }
    Learned fresh;
    fresh.need_mib = 13236;
    fresh.margin_mib = 512;
    fresh.runs = 1;
    fresh.duration_s = 240;
    fresh.basis = "history: 1 run(s)";
    std::vector<std::pair<TaskId, Learned>> updates;
    for (TaskId id : ids) {
        updates.emplace_back(id, fresh);
    }
    updates.emplace_back(ids.back() + 100, fresh);  // gone: nothing to change
    auto changed = store->set_learned_if_waiting(updates);
    ASSERT_TRUE(changed) << changed.error().message;
    EXPECT_EQ(*changed, 3);
    for (std::size_t i = 0; i < ids.size(); ++i) {
        auto read = store->task(ids[i]);
        ASSERT_TRUE(read && read->has_value());
        TaskRow expected = full_task();
        expected.id = ids[i];
        expected.state = (*read)->state;
        if (i < 3) {
            expected.spec.learned = fresh;
        }
        expect_same_task(**read, expected);
    }
    auto none = store->set_learned_if_waiting({});
    ASSERT_TRUE(none);
    EXPECT_EQ(*none, 0);

    // What re-deriving reads: the three that wait, with what they learned, environment left out.
    auto waiting = store->waiting_tasks_without_env();
    ASSERT_TRUE(waiting) << waiting.error().message;
    ASSERT_EQ(waiting->size(), 3u);
    for (std::size_t i = 0; i < 3; ++i) {
        TaskRow expected = full_task();
        expected.id = ids[i];
        expected.state = (*waiting)[i].state;
        expected.spec.learned = fresh;
        expected.env.clear();
        expect_same_task((*waiting)[i], expected);
    }
}

// This test verifies that what JSON cannot hold (NaN, bytes that are not UTF-8) is refused as
// invalid input before anything is written.
TEST_F(StoreTest, RefusesWhatJsonCannotHold) {
    auto store = open_store();
    ASSERT_NE(store, nullptr);
    TaskRow nan_model = full_task();
    nan_model.spec.memory.model->parameters = std::nan("");
    auto id = store->insert_task(nan_model);
    ASSERT_FALSE(id);
    EXPECT_EQ(id.error().code, ErrorCode::InvalidArgument);

    TaskRow binary = full_task();
    binary.spec.command.push_back("\xff\xfe");
    id = store->insert_task(binary);
    ASSERT_FALSE(id);
    EXPECT_EQ(id.error().code, ErrorCode::InvalidArgument);
    EXPECT_TRUE(contains(id.error().message, "UTF-8")) << id.error().message;

    auto all = store->tasks(true);
    ASSERT_TRUE(all);
    EXPECT_TRUE(all->empty());
}

// This test verifies that every state survives the database by name, and that unknown names
// are rejected.
TEST(TaskStateTest, NamesRoundTrip) {
    ASSERT_EQ(all_task_states().size(), 10u);
    for (TaskState s : all_task_states()) {
        EXPECT_EQ(parse_task_state(to_string(s)), s) << to_string(s);
    }
    EXPECT_EQ(to_string(TaskState::Recovering), "recovering");
    EXPECT_FALSE(parse_task_state("Queued"));
    EXPECT_FALSE(parse_task_state(""));
    EXPECT_FALSE(is_final(TaskState::Queued));
    EXPECT_FALSE(is_final(TaskState::Recovering));
    EXPECT_FALSE(is_final(TaskState::Running));
    EXPECT_TRUE(is_final(TaskState::Succeeded));
    EXPECT_TRUE(is_final(TaskState::Failed));
    EXPECT_TRUE(is_final(TaskState::Cancelled));
    EXPECT_TRUE(is_final(TaskState::Lost));
    EXPECT_TRUE(is_final(TaskState::Rejected));
    EXPECT_FALSE(is_final(TaskState::Held));
    EXPECT_TRUE(is_final(TaskState::Timeout));
    EXPECT_EQ(to_string(TaskState::Held), "held");
    EXPECT_EQ(to_string(TaskState::Timeout), "timeout");
}

// This test verifies that an array is stored all at once with its id and indices, and that the
// scheduling controls survive the round trip.
TEST_F(StoreTest, InsertsAnArrayWithItsControls) {
    auto store = open_store();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->insert_task(named_task("before")));
    TaskRow proto = named_task("sweep");
    proto.spec.time_limit_s = 5400;
    proto.spec.dependencies = {{DependencyType::AfterOk, TaskRef::of(1)},
                               {DependencyType::AfterNotOk, TaskRef{1, 3, false}}};
    proto.spec.output = "out-%A_%a.log";
    proto.spec.error = "err-%j.log";
    proto.spec.mail_types = 5;
    proto.spec.mail_user = "alice@lab";
    const std::vector<int> indices = {0, 5, 10};
    auto ids = store->insert_array(proto, indices);
    ASSERT_TRUE(ids) << ids.error().message;
    ASSERT_EQ(ids->size(), 3u);
    for (std::size_t i = 0; i < ids->size(); ++i) {
        auto t = store->task((*ids)[i]);
        ASSERT_TRUE(t && *t);
        const TaskSpec& spec = (**t).spec;
        ASSERT_TRUE(spec.array);
        EXPECT_EQ(spec.array->id, ids->front());
        EXPECT_EQ(spec.array->index, indices[i]);
        EXPECT_EQ(spec.time_limit_s, 5400);
        EXPECT_EQ(spec.dependencies, proto.spec.dependencies);
        EXPECT_EQ(spec.output, proto.spec.output);
        EXPECT_EQ(spec.error, proto.spec.error);
        EXPECT_EQ(spec.mail_types, 5u);
        EXPECT_EQ(spec.mail_user, "alice@lab");
    }
    auto plain = store->task(1);
    ASSERT_TRUE(plain && *plain);
    EXPECT_FALSE((**plain).spec.array);
    EXPECT_FALSE((**plain).spec.time_limit_s);
    EXPECT_TRUE((**plain).spec.dependencies.empty());
    EXPECT_FALSE(store->insert_array(proto, {}));

    // The members as `12_3` and `--after 12` look them up: index order, with their states; a
    // task outside any array has none, nor has a member that is not the array's first.
    auto members = store->array_members(ids->front());
    ASSERT_TRUE(members) << members.error().message;
    ASSERT_EQ(members->size(), 3u);
    for (std::size_t i = 0; i < 3; ++i) {
        EXPECT_EQ((*members)[i].id, (*ids)[i]);
        EXPECT_EQ((*members)[i].index, indices[i]);
        EXPECT_EQ((*members)[i].state, TaskState::Queued);
    }
    EXPECT_TRUE(store->array_members(1)->empty());
    EXPECT_TRUE(store->array_members((*ids)[1])->empty());
}

// This test verifies that a row written before dependencies had types ("after": [ids]) reads
// as afterok on each id, and that a dependency the store cannot read is an error naming the
// task, not a dependency silently dropped (the task would start too early).
TEST_F(StoreTest, ReadsDependenciesOfOlderRows) {
    TaskId id = 0;
    {
        auto store = open_store();
        ASSERT_NE(store, nullptr);
        auto inserted = store->insert_task(named_task("old"));
        ASSERT_TRUE(inserted);
        id = *inserted;
    }
    {
        SQLite::Database raw(path_, SQLite::OPEN_READWRITE);
        raw.exec(fmt::format("UPDATE tasks SET spec_json = json_set(spec_json, '$.after', "
                             "json('[4, 5]')) WHERE id = {}",
                             id));
    }
    auto store = open_store();
    ASSERT_NE(store, nullptr);
    auto t = store->task(id);
    ASSERT_TRUE(t && *t);
    EXPECT_EQ((**t).spec.dependencies,
              (std::vector<Dependency>{{DependencyType::AfterOk, TaskRef::of(4)},
                                       {DependencyType::AfterOk, TaskRef::of(5)}}));
    store.reset();
    {
        SQLite::Database raw(path_, SQLite::OPEN_READWRITE);
        raw.exec(fmt::format("UPDATE tasks SET spec_json = json_set(spec_json, '$.dependencies', "
                             "json('[{{\"type\": \"afterwhen\", \"task\": \"4\"}}]')) "
                             "WHERE id = {}",
                             id));
    }
    store = open_store();
    ASSERT_NE(store, nullptr);
    auto bad = store->task(id);
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().message.find(fmt::format("task {}", id)), std::string::npos)
        << bad.error().message;
}

// This test verifies that tasks(false) leaves out every final state and keeps id order.
TEST_F(StoreTest, ListsTasksWithAndWithoutFinalOnes) {
    auto store = open_store();
    ASSERT_NE(store, nullptr);
    std::vector<TaskId> live;
    for (TaskState s : all_task_states()) {
        auto id = store->insert_task(named_task(std::string(to_string(s)), s));
        ASSERT_TRUE(id) << id.error().message;
        if (!is_final(s)) {
            live.push_back(*id);
        }
    }

    auto all = store->tasks(true);
    ASSERT_TRUE(all) << all.error().message;
    ASSERT_EQ(all->size(), all_task_states().size());
    for (size_t i = 1; i < all->size(); ++i) {
        EXPECT_LT((*all)[i - 1].id, (*all)[i].id);
    }

    auto active = store->tasks(false);
    ASSERT_TRUE(active) << active.error().message;
    std::vector<TaskId> ids;
    for (const TaskRow& t : *active) {
        EXPECT_FALSE(is_final(t.state)) << to_string(t.state);
        ids.push_back(t.id);
    }
    EXPECT_EQ(ids, live);
}

// This test verifies attempts: insert, update by (task, number), listing per task in number
// order, and open_attempts finding only those without an end.
TEST_F(StoreTest, StoresAttempts) {
    auto store = open_store();
    ASSERT_NE(store, nullptr);
    auto t1 = store->insert_task(named_task("a"));
    auto t2 = store->insert_task(named_task("b"));
    ASSERT_TRUE(t1 && t2);

    AttemptRow first = attempt(*t1, 1);
    first.ended_at = 300.5;
    first.outcome = "oom";
    first.exit_code = 1;
    first.signal = 9;
    AttemptRow second = attempt(*t1, 2);
    second.recovered = true;
    AttemptRow other = attempt(*t2, 1);
    ASSERT_TRUE(store->insert_attempt(second));  // out of order on purpose
    ASSERT_TRUE(store->insert_attempt(first));
    ASSERT_TRUE(store->insert_attempt(other));

    auto listed = store->attempts(*t1);
    ASSERT_TRUE(listed) << listed.error().message;
    ASSERT_EQ(listed->size(), 2u);
    expect_same_attempt((*listed)[0], first);
    expect_same_attempt((*listed)[1], second);

    auto open = store->open_attempts();
    ASSERT_TRUE(open) << open.error().message;
    ASSERT_EQ(open->size(), 2u);
    expect_same_attempt((*open)[0], second);
    expect_same_attempt((*open)[1], other);

    second.ended_at = 400;
    second.outcome = "succeeded";
    second.exit_code = 0;
    ASSERT_TRUE(store->update_attempt(second));
    listed = store->attempts(*t1);
    ASSERT_TRUE(listed && listed->size() == 2u);
    expect_same_attempt((*listed)[1], second);
    open = store->open_attempts();
    ASSERT_TRUE(open && open->size() == 1u);
    expect_same_attempt((*open)[0], other);

    auto missing = store->update_attempt(attempt(*t1, 7));
    ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error().code, ErrorCode::NotFound);
}

// This test verifies latest_attempt_starts: per task the start of its highest-numbered attempt,
// none for a task never started, and only for the tasks asked about.
TEST_F(StoreTest, ListsTheStartsOfLatestAttempts) {
    auto store = open_store();
    ASSERT_NE(store, nullptr);
    auto running = store->insert_task(named_task("running", TaskState::Running));
    auto waiting = store->insert_task(named_task("waiting"));
    auto done = store->insert_task(named_task("done", TaskState::Succeeded));
    ASSERT_TRUE(running && waiting && done);
    AttemptRow second = attempt(*running, 2);
    second.started_at = 250.25;
    AttemptRow first = attempt(*running, 1);
    first.started_at = 900;  // an earlier attempt, whatever its stamp
    ASSERT_TRUE(store->insert_attempt(second));
    ASSERT_TRUE(store->insert_attempt(first));
    AttemptRow finished = attempt(*done, 1);
    finished.started_at = 120;
    ASSERT_TRUE(store->insert_attempt(finished));

    const std::vector<TaskId> live_ids = {*running, *waiting};
    auto live = store->latest_attempt_starts(live_ids);
    ASSERT_TRUE(live) << live.error().message;
    EXPECT_EQ(*live, (std::map<TaskId, double>{{*running, 250.25}}));
    const std::vector<TaskId> all_ids = {*running, *waiting, *done};
    auto all = store->latest_attempt_starts(all_ids);
    ASSERT_TRUE(all) << all.error().message;
    EXPECT_EQ(*all, (std::map<TaskId, double>{{*running, 250.25}, {*done, 120}}));
    auto none = store->latest_attempt_starts(std::vector<TaskId>{});
    ASSERT_TRUE(none);
    EXPECT_TRUE(none->empty());
}

// This test verifies that attempt writes the schema forbids fail with the operation, the task,
// the file and SQLite's reason, and leave nothing behind.
TEST_F(StoreTest, RejectedAttemptWritesSayWhy) {
    auto store = open_store();
    ASSERT_NE(store, nullptr);
    auto orphan = store->insert_attempt(attempt(777, 1));
    ASSERT_FALSE(orphan);
    const std::string& message = orphan.error().message;
    EXPECT_TRUE(contains(message, "insert attempt 1 of task 777")) << message;
    EXPECT_TRUE(contains(message, path_)) << message;
    EXPECT_TRUE(contains(message, "FOREIGN KEY")) << message;

    auto id = store->insert_task(named_task("a"));
    ASSERT_TRUE(id);
    ASSERT_TRUE(store->insert_attempt(attempt(*id, 1)));
    auto duplicate = store->insert_attempt(attempt(*id, 1));
    ASSERT_FALSE(duplicate);
    EXPECT_TRUE(contains(duplicate.error().message, "UNIQUE")) << duplicate.error().message;
    auto listed = store->attempts(*id);
    ASSERT_TRUE(listed);
    EXPECT_EQ(listed->size(), 1u);
}

// This test verifies event ids, and listing after an id, with a limit and for one task.
TEST_F(StoreTest, ListsEvents) {
    auto store = open_store();
    ASSERT_NE(store, nullptr);
    std::vector<std::int64_t> ids;
    const std::vector<EventRow> written = {event(1, "submitted", 10), event(0, "started", 11),
                                           event(2, "submitted", 12), event(1, "placed", 13),
                                           event(1, "exited", 14)};
    for (const EventRow& e : written) {
        auto id = store->add_event(e);
        ASSERT_TRUE(id) << id.error().message;
        if (!ids.empty()) {
            EXPECT_GT(*id, ids.back());
        }
        ids.push_back(*id);
    }

    auto all = store->events(0, 0, 100);
    ASSERT_TRUE(all) << all.error().message;
    ASSERT_EQ(all->size(), written.size());
    for (size_t i = 0; i < written.size(); ++i) {
        EXPECT_EQ((*all)[i].id, ids[i]);
        EXPECT_EQ((*all)[i].time, written[i].time);
        EXPECT_EQ((*all)[i].task, written[i].task);
        EXPECT_EQ((*all)[i].kind, written[i].kind);
        EXPECT_EQ((*all)[i].message, written[i].message);
    }

    auto after = store->events(ids[1], 0, 2);
    ASSERT_TRUE(after);
    ASSERT_EQ(after->size(), 2u);
    EXPECT_EQ((*after)[0].id, ids[2]);
    EXPECT_EQ((*after)[1].id, ids[3]);

    auto task1 = store->events(ids[0], 1, 100);
    ASSERT_TRUE(task1);
    ASSERT_EQ(task1->size(), 2u);
    EXPECT_EQ((*task1)[0].kind, "placed");
    EXPECT_EQ((*task1)[1].kind, "exited");

    auto none = store->events(ids.back(), 0, 100);
    ASSERT_TRUE(none);
    EXPECT_TRUE(none->empty());
}

// This test verifies GPU samples: since is inclusive, the GPU filter, oldest first, and a
// missing reading (NaN) coming back as NaN.
TEST_F(StoreTest, ListsGpuSamples) {
    auto store = open_store();
    ASSERT_NE(store, nullptr);
    GpuSampleRow unread = sample(30, 1);
    unread.power_w = std::nan("");
    ASSERT_TRUE(store->add_gpu_samples({sample(10, 0), sample(10, 1), sample(20, 1), sample(20, 0),
                                        sample(30, 0), unread}));
    ASSERT_TRUE(store->add_gpu_samples({}));

    auto since20 = store->gpu_samples(20, -1);
    ASSERT_TRUE(since20) << since20.error().message;
    ASSERT_EQ(since20->size(), 4u);
    EXPECT_EQ((*since20)[0].time, 20);
    EXPECT_EQ((*since20)[0].gpu, 0);
    EXPECT_EQ((*since20)[1].gpu, 1);
    EXPECT_EQ((*since20)[3].time, 30);
    EXPECT_TRUE(std::isnan((*since20)[3].power_w));

    auto gpu0 = store->gpu_samples(0, 0);
    ASSERT_TRUE(gpu0);
    ASSERT_EQ(gpu0->size(), 3u);
    const GpuSampleRow expected = sample(20, 0);
    const GpuSampleRow& got = (*gpu0)[1];
    EXPECT_EQ(got.time, expected.time);
    EXPECT_EQ(got.free_mib, expected.free_mib);
    EXPECT_EQ(got.used_mib, expected.used_mib);
    EXPECT_EQ(got.util, expected.util);
    EXPECT_EQ(got.smact, expected.smact);
    EXPECT_EQ(got.smocc, expected.smocc);
    EXPECT_EQ(got.drama, expected.drama);
    EXPECT_EQ(got.power_w, expected.power_w);
    EXPECT_EQ(got.energy_j, expected.energy_j);
}

// This test verifies that everything written is found again after closing and reopening the
// file, and that the file is in WAL mode at the current schema version.
TEST_F(StoreTest, PersistsAcrossReopen) {
    TaskRow task = full_task();
    AttemptRow live;
    {
        auto store = open_store();
        ASSERT_NE(store, nullptr);
        EXPECT_EQ(store->schema_version(), kSchemaVersion);
        auto id = store->insert_task(task);
        ASSERT_TRUE(id);
        task.id = *id;
        live = attempt(*id, 1);
        ASSERT_TRUE(store->insert_attempt(live));
        ASSERT_TRUE(store->add_event(event(*id, "placed", 5)));
        ASSERT_TRUE(store->add_gpu_samples({sample(5, 0)}));
    }
    auto store = open_store();
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->schema_version(), kSchemaVersion);
    auto read = store->task(task.id);
    ASSERT_TRUE(read && read->has_value());
    expect_same_task(**read, task);
    auto open = store->open_attempts();
    ASSERT_TRUE(open && open->size() == 1u);
    expect_same_attempt((*open)[0], live);
    auto events = store->events(0, task.id, 10);
    ASSERT_TRUE(events && events->size() == 1u);
    EXPECT_EQ((*events)[0].kind, "placed");
    auto samples = store->gpu_samples(0, -1);
    ASSERT_TRUE(samples);
    EXPECT_EQ(samples->size(), 1u);

    SQLite::Database raw(path_, SQLite::OPEN_READONLY);
    EXPECT_EQ(raw.execAndGet("PRAGMA journal_mode").getString(), "wal");
    EXPECT_EQ(raw.execAndGet("PRAGMA user_version").getInt(), kSchemaVersion);
}

// This test verifies that a database from a newer carma is refused with the file, both versions
// and what to do, and is left untouched.
TEST_F(StoreTest, RefusesANewerSchema) {
    {
        SQLite::Database raw(path_, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
        raw.exec("PRAGMA user_version = 99");
    }
    auto store = Store::open(path_);
    ASSERT_FALSE(store);
    const std::string& message = store.error().message;
    EXPECT_TRUE(contains(message, path_)) << message;
    EXPECT_TRUE(contains(message, "99")) << message;
    EXPECT_TRUE(contains(message, "version " + std::to_string(kSchemaVersion))) << message;
    EXPECT_TRUE(contains(message, "upgrade carma or point --state-dir elsewhere")) << message;

    SQLite::Database raw(path_, SQLite::OPEN_READONLY);
    EXPECT_EQ(raw.execAndGet("PRAGMA user_version").getInt(), 99);
    EXPECT_FALSE(raw.tableExists("tasks"));
}

// This test verifies that a file that is not a database is reported with its path.
TEST_F(StoreTest, RefusesAFileThatIsNotADatabase) {
    std::ofstream(path_) << std::string(4096, 'x');
    auto store = Store::open(path_);
    ASSERT_FALSE(store);
    EXPECT_TRUE(contains(store.error().message, path_)) << store.error().message;
}

// This test verifies that writers on two threads, sharing one Store or each with their own
// connection to the same file, lose no rows.
TEST_F(StoreTest, ConcurrentWritersLoseNoRows) {
    auto shared = open_store();
    auto second = open_store();
    ASSERT_NE(shared, nullptr);
    ASSERT_NE(second, nullptr);
    constexpr int kPerThread = 150;
    const auto writer = [](Store* store, const std::string& prefix) {
        for (int i = 0; i < kPerThread; ++i) {
            auto id = store->insert_task(named_task(prefix + std::to_string(i)));
            ASSERT_TRUE(id) << id.error().message;
            ASSERT_TRUE(store->add_event(event(*id, "submitted", i)));
        }
    };
    std::thread a(writer, shared.get(), "a");
    std::thread b(writer, shared.get(), "b");
    std::thread c(writer, second.get(), "c");
    a.join();
    b.join();
    c.join();

    auto all = shared->tasks(true);
    ASSERT_TRUE(all) << all.error().message;
    ASSERT_EQ(all->size(), 3u * kPerThread);
    std::set<std::string> names;
    for (const TaskRow& t : *all) {
        names.insert(t.spec.name);
    }
    EXPECT_EQ(names.size(), 3u * kPerThread);
    auto events = second->events(0, 0, -1);
    ASSERT_TRUE(events);
    EXPECT_EQ(events->size(), 3u * kPerThread);
}

// This test verifies that a missing state directory, or a file where the directory should be,
// is named in the error instead of SQLite's "unable to open database file".
TEST_F(StoreTest, MissingDirectoryIsAClearError) {
    const fs::path missing = dir_ / "no-such-dir";
    auto store = Store::open((missing / "carma.db").string());
    ASSERT_FALSE(store);
    EXPECT_EQ(store.error().code, ErrorCode::Io);
    EXPECT_TRUE(contains(store.error().message, missing.string() + " does not exist"))
        << store.error().message;

    const fs::path file = dir_ / "plain-file";
    std::ofstream(file) << "x";
    store = Store::open((file / "carma.db").string());
    ASSERT_FALSE(store);
    EXPECT_TRUE(contains(store.error().message, file.string() + " is not a directory"))
        << store.error().message;
}

// Opens the store at `path` as user nobody (in a child, when this test runs as root, since root
// writes anywhere) and returns the error message, or "" when it opened. `owned` is chowned to
// nobody first so that only the permission bits, not the owner, decide.
std::string open_error_as_unprivileged(const std::string& path, const std::vector<fs::path>& owned) {
    if (::geteuid() != 0) {
        auto store = Store::open(path);
        return store ? std::string() : store.error().message;
    }
    constexpr uid_t kNobody = 65534;
    for (const fs::path& p : owned) {
        if (::chown(p.c_str(), kNobody, kNobody) != 0) {
            return "cannot chown " + p.string() + " to nobody";
        }
    }
    int fds[2];
    if (::pipe(fds) != 0) {
        return "cannot make a pipe";
    }
    const pid_t child = ::fork();
    if (child == 0) {
        ::close(fds[0]);
        std::string message = "cannot become nobody";
        if (::setgroups(0, nullptr) == 0 && ::setgid(kNobody) == 0 && ::setuid(kNobody) == 0) {
            auto store = Store::open(path);
            message = store ? std::string() : store.error().message;
        }
        (void)!::write(fds[1], message.data(), message.size());
        ::_exit(0);
    }
    ::close(fds[1]);
    std::string out;
    char buf[512];
    ssize_t n = 0;
    while ((n = ::read(fds[0], buf, sizeof buf)) > 0) {
        out.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fds[0]);
    ::waitpid(child, nullptr, 0);
    return out;
}

// This test verifies that a directory this user cannot write is refused up front (as root, the
// check runs as user nobody: root writes anywhere).
TEST_F(StoreTest, UnwritableDirectoryIsAClearError) {
    fs::permissions(dir_, fs::perms::owner_read | fs::perms::owner_exec);
    const std::string message = open_error_as_unprivileged(path_, {dir_});
    EXPECT_TRUE(contains(message, dir_.string() + " is not writable")) << message;
}

// This test verifies that a database file this user cannot write is refused at open, where
// SQLite would otherwise fall back to read-only and fail on the first write.
TEST_F(StoreTest, ReadOnlyFileIsAClearError) {
    ASSERT_NE(open_store(), nullptr);
    fs::permissions(path_, fs::perms::owner_read);
    std::vector<fs::path> owned = {dir_, path_};
    for (const char* suffix : {"-wal", "-shm"}) {
        if (fs::exists(path_ + suffix)) {
            owned.emplace_back(path_ + suffix);
        }
    }
    const std::string message = open_error_as_unprivileged(path_, owned);
    EXPECT_TRUE(contains(message, path_)) << message;
    EXPECT_TRUE(contains(message, "not writable")) << message;
}

// This test verifies that a damaged database is refused at open with how to restore it (not
// served, answering every request with 500), and that a backup taken with Store::backup opens
// and holds the tasks.
TEST_F(StoreTest, DamagedDatabaseIsRefusedAndBackupRestores) {
    {
        auto store = open_store();
        ASSERT_NE(store, nullptr);
        for (int i = 0; i < 200; ++i) {  // enough pages that damage lands in a table
            ASSERT_TRUE(store->insert_task(named_task("task" + std::to_string(i))));
        }
    }
    const std::string backup = (dir_ / "backup.db").string();
    ASSERT_TRUE(Store::backup(path_, backup));
    struct stat st {};
    ASSERT_EQ(::stat(backup.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    EXPECT_FALSE(Store::backup(path_, backup));  // never overwrites

    {
        // Every page but the first (the header and the schema) overwritten: the tables are gone.
        const auto size = fs::file_size(path_);
        ASSERT_GT(size, 8192u);
        std::fstream f(path_, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(4096);
        const std::string junk(size - 4096, '\x5a');
        f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
    }
    auto damaged = Store::open(path_);
    ASSERT_FALSE(damaged);
    EXPECT_TRUE(contains(damaged.error().message, path_ + " is damaged") ||
                contains(damaged.error().message, "cannot open the database"))
        << damaged.error().message;
    EXPECT_TRUE(contains(damaged.error().message, "carma admin backup")) << damaged.error().message;

    auto restored = Store::open(backup);
    ASSERT_TRUE(restored) << restored.error().message;
    auto tasks = (*restored)->tasks(true);
    ASSERT_TRUE(tasks);
    EXPECT_EQ(tasks->size(), 200u);
}

// This test verifies that the database file is created readable by the daemon's user only: it
// holds every task's environment.
TEST_F(StoreTest, DatabaseIsPrivate) {
    ASSERT_NE(open_store(), nullptr);
    struct stat st {};
    ASSERT_EQ(::stat(path_.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// This test verifies retention: GPU samples and events older than the cut are dropped, newer
// ones and every task not yet finished stay.
TEST_F(StoreTest, PruneHistoryKeepsTasksAndRecentRows) {
    auto store = open_store();
    ASSERT_NE(store, nullptr);
    auto id = store->insert_task(named_task("kept"));
    ASSERT_TRUE(id);
    ASSERT_TRUE(store->add_gpu_samples({sample(100, 0), sample(200, 0), sample(300, 1)}));
    ASSERT_TRUE(store->add_event(event(*id, "old", 100)));
    ASSERT_TRUE(store->add_event(event(*id, "new", 300)));
    auto dropped = store->prune_history(250);
    ASSERT_TRUE(dropped) << dropped.error().message;
    EXPECT_EQ(*dropped, 3);  // two samples, one event
    EXPECT_EQ(store->gpu_samples(0, -1)->size(), 1u);
    auto events = store->events(0, 0, 100);
    ASSERT_TRUE(events);
    ASSERT_EQ(events->size(), 1u);
    EXPECT_EQ((*events)[0].kind, "new");
    EXPECT_TRUE(store->task(*id)->has_value());
}

// This test verifies that the energy attributed to an attempt is stored: written with the
// attempt, updated on its own while it runs, kept by the attempt's end, and unknown by default.
TEST_F(StoreTest, AttemptEnergyPersists) {
    auto store = open_store();
    ASSERT_NE(store, nullptr);
    auto id = store->insert_task(named_task("a", TaskState::Running));
    ASSERT_TRUE(id);
    AttemptRow first = attempt(*id, 1);
    ASSERT_TRUE(store->insert_attempt(first));
    EXPECT_FALSE((*store->attempts(*id))[0].energy_j);

    ASSERT_TRUE(store->set_attempt_energy(*id, 1, 1234.5));
    EXPECT_EQ((*store->attempts(*id))[0].energy_j, 1234.5);
    auto open = store->open_attempts();
    ASSERT_TRUE(open && open->size() == 1u);
    EXPECT_EQ((*open)[0].energy_j, 1234.5);  // what a restarted daemon goes on from

    first.energy_j = 2000.25;
    first.ended_at = 400;
    first.outcome = "succeeded";
    TaskRow task = named_task("a", TaskState::Succeeded);
    task.id = *id;
    task.finished_at = 400;
    ASSERT_TRUE(store->end_attempt(first, task));
    expect_same_attempt((*store->attempts(*id))[0], first);

    AttemptRow second = attempt(*id, 2);
    second.energy_j = 0.0;
    ASSERT_TRUE(store->insert_attempt(second));
    EXPECT_EQ((*store->attempts(*id))[1].energy_j, 0.0);
}

// This test verifies that a database of schema version 3 opens: it is migrated to the current
// version,
// its attempts read back with unknown energy, and energy can be recorded in it.
TEST_F(StoreTest, MigratesASchemaThreeDatabase) {
    TaskId id = 0;
    ASSERT_NO_FATAL_FAILURE(write_old_attempt(id, {{1, 4096}}));
    // Make it what schema 3 wrote: attempts without energy.
    downgrade_to(3);
    auto store = open_store();
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->schema_version(), kSchemaVersion);
    auto attempts = store->attempts(id);
    ASSERT_TRUE(attempts) << attempts.error().message;
    ASSERT_EQ(attempts->size(), 1u);
    EXPECT_FALSE((*attempts)[0].energy_j);
    EXPECT_EQ((*attempts)[0].peak_mib, (std::map<int, MiB>{{1, 4096}}));
    ASSERT_TRUE(store->set_attempt_energy(id, 1, 99.5));
    EXPECT_EQ((*store->attempts(id))[0].energy_j, 99.5);
    SQLite::Database raw(path_, SQLite::OPEN_READONLY);
    EXPECT_EQ(raw.execAndGet("PRAGMA user_version").getInt(), kSchemaVersion);
}

// This test verifies that a schema-4 database gains the attempts' node and Slurm job (empty for
// the attempts it had), and that both round-trip.
TEST_F(StoreTest, AttemptsRecordTheirNodeAndSlurmJob) {
    TaskId id = 0;
    ASSERT_NO_FATAL_FAILURE(write_old_attempt(id));
    downgrade_to(4);
    auto store = open_store();
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->schema_version(), kSchemaVersion);
    EXPECT_EQ((*store->attempts(id))[0].node, "");
    AttemptRow second = attempt(id, 2);
    second.node = "n2";
    second.slurm_job = "417";
    ASSERT_TRUE(store->insert_attempt(second));
    second.ended_at = 5;
    ASSERT_TRUE(store->update_attempt(second));
    const AttemptRow back = (*store->attempts(id))[1];
    EXPECT_EQ(back.node, "n2");
    EXPECT_EQ(back.slurm_job, "417");
}

// This test verifies schema 9 (fair share): a schema-8 database is first copied as it is to
// carma.db.schema-8 (which a carma of schema 8 can open), then gains the usage table and the
// attempts' charge and slowdown (unknown for the attempts it had); all of them round-trip, and
// a second open keeps the first copy.
TEST_F(StoreTest, MigratesToFairShareKeepingACopy) {
    TaskId id = 0;
    ASSERT_NO_FATAL_FAILURE(write_old_attempt(id));
    downgrade_to(8);
    auto store = open_store();
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->schema_version(), kSchemaVersion);
    {
        SQLite::Database copy(path_ + ".schema-8", SQLite::OPEN_READONLY);
        EXPECT_EQ(copy.execAndGet("PRAGMA user_version").getInt(), 8);
        EXPECT_EQ(copy.execAndGet("SELECT count(*) FROM attempts").getInt(), 1);
        EXPECT_FALSE(copy.tableExists("usage"));
    }
    EXPECT_FALSE((*store->attempts(id))[0].charged_gpu_s);
    AttemptRow second = attempt(id, 2);
    second.charged_gpu_s = 30.5;
    second.slowdown = 1.25;
    ASSERT_TRUE(store->insert_attempt(second));
    ASSERT_TRUE(store->set_attempt_charge(id, 1, 12.0));
    EXPECT_EQ((*store->attempts(id))[0].charged_gpu_s, 12.0);
    EXPECT_EQ((*store->attempts(id))[1].charged_gpu_s, 30.5);
    EXPECT_EQ((*store->attempts(id))[1].slowdown, 1.25);
    ASSERT_TRUE(store->save_usage({{"alice", UsageRow{3600, 1e9}}, {"bob", UsageRow{60, 1e9}}}));
    ASSERT_TRUE(store->save_usage({{"alice", UsageRow{7200, 2e9}}}));
    auto usage = store->usage();
    ASSERT_TRUE(usage) << usage.error().message;
    ASSERT_EQ(usage->size(), 1u) << "save_usage replaces every row";
    EXPECT_EQ(usage->at("alice").gpu_s, 7200);
    EXPECT_EQ(usage->at("alice").at_s, 2e9);
    store.reset();
    ASSERT_NE(open_store(), nullptr);
    SQLite::Database copy(path_ + ".schema-8", SQLite::OPEN_READONLY);
    EXPECT_EQ(copy.execAndGet("SELECT count(*) FROM attempts").getInt(), 1);
}

// A task that finished at `finished_at`, of `user`, with one attempt per entry of `energies`.
TaskId add_finished(Store& store, const std::string& user, TaskState state, double finished_at,
                    std::vector<std::optional<double>> energies) {
    TaskRow t = named_task(user + "-task", state);
    t.user = user;
    t.finished_at = finished_at;
    t.attempts = static_cast<int>(energies.size());
    auto id = store.insert_task(t);
    EXPECT_TRUE(id);
    for (std::size_t i = 0; i < energies.size(); ++i) {
        AttemptRow a = attempt(*id, static_cast<int>(i) + 1);
        a.ended_at = finished_at;
        a.outcome = "succeeded";
        a.energy_j = energies[i];
        EXPECT_TRUE(store.insert_attempt(a));
    }
    return *id;
}

std::vector<TaskId> ids_of(const std::vector<FinishedTask>& rows) {
    std::vector<TaskId> out;
    for (const FinishedTask& f : rows) {
        out.push_back(f.task.id);
    }
    return out;
}

// This test verifies the accounting query: only finished tasks, each with its own attempts in
// order, filtered by user, by state (live states are never rows) and by when they finished.
TEST_F(StoreTest, ListsFinishedTasksForAccounting) {
    auto store = open_store();
    ASSERT_NE(store, nullptr);
    const TaskId a = add_finished(*store, "alice", TaskState::Succeeded, 1000, {5.0, 7.5});
    const TaskId b = add_finished(*store, "bob", TaskState::Failed, 2000, {std::nullopt});
    const TaskId c = add_finished(*store, "alice", TaskState::Cancelled, 3000, {});
    ASSERT_TRUE(store->insert_task(named_task("waiting", TaskState::Queued)));
    ASSERT_TRUE(store->insert_task(named_task("running", TaskState::Running)));

    auto all = store->finished_tasks({});
    ASSERT_TRUE(all) << all.error().message;
    EXPECT_EQ(ids_of(*all), (std::vector<TaskId>{a, b, c}));
    ASSERT_EQ((*all)[0].attempts.size(), 2u);
    EXPECT_EQ((*all)[0].attempts[0].number, 1);
    EXPECT_EQ((*all)[0].attempts[1].energy_j, 7.5);
    ASSERT_EQ((*all)[1].attempts.size(), 1u);
    EXPECT_FALSE((*all)[1].attempts[0].energy_j);
    EXPECT_TRUE((*all)[2].attempts.empty());

    EXPECT_EQ(ids_of(*store->finished_tasks({0, "alice", {}})), (std::vector<TaskId>{a, c}));
    EXPECT_EQ(ids_of(*store->finished_tasks({0, "", {TaskState::Failed, TaskState::Cancelled}})),
              (std::vector<TaskId>{b, c}));
    EXPECT_EQ(ids_of(*store->finished_tasks({2000, "", {}})), (std::vector<TaskId>{b, c}));
    EXPECT_EQ(ids_of(*store->finished_tasks({0, "alice", {TaskState::Failed}})),
              std::vector<TaskId>{});
    EXPECT_TRUE(store->finished_tasks({0, "", {TaskState::Queued, TaskState::Running}})->empty());
    EXPECT_TRUE(store->finished_tasks({0, "nobody' OR '1'='1", {}})->empty());
}

// This test verifies that retention drops finished tasks with their attempts as it drops
// events: those that finished before the cut go, those after stay, and a task still waiting or
// running stays however old.
TEST_F(StoreTest, PruneHistoryDropsFinishedTasksWithTheirAttempts) {
    auto store = open_store();
    ASSERT_NE(store, nullptr);
    const TaskId old = add_finished(*store, "alice", TaskState::Succeeded, 200, {1.0, 2.0});
    const TaskId fresh = add_finished(*store, "alice", TaskState::Failed, 300, {3.0});
    TaskRow waiting = named_task("waiting", TaskState::Queued);
    waiting.submitted_at = 10;
    auto live = store->insert_task(waiting);
    ASSERT_TRUE(live);
    TaskRow running = named_task("running", TaskState::Running);
    running.submitted_at = 10;
    auto run_id = store->insert_task(running);
    ASSERT_TRUE(run_id);
    ASSERT_TRUE(store->insert_attempt(attempt(*run_id, 1)));

    auto dropped = store->prune_history(250);
    ASSERT_TRUE(dropped) << dropped.error().message;
    EXPECT_EQ(*dropped, 3);  // the old task and its two attempts
    EXPECT_FALSE(store->task(old)->has_value());
    EXPECT_TRUE(store->attempts(old)->empty());
    EXPECT_TRUE(store->task(fresh)->has_value());
    EXPECT_EQ(store->attempts(fresh)->size(), 1u);
    EXPECT_TRUE(store->task(*live)->has_value());
    EXPECT_EQ(store->attempts(*run_id)->size(), 1u);
    EXPECT_EQ(ids_of(*store->finished_tasks({})), std::vector<TaskId>{fresh});

    // The ids of dropped tasks are never given again.
    auto next = store->insert_task(named_task("next"));
    ASSERT_TRUE(next);
    EXPECT_GT(*next, *run_id);
}

// This test verifies that a schema-5 database gains the indexes the per-user limits and the live
// view count with, and keeps its tasks.
TEST_F(StoreTest, MigratesASchemaFiveDatabase) {
    {
        auto store = open_store();
        ASSERT_NE(store, nullptr);
        ASSERT_TRUE(store->insert_task(named_task("old")));
    }
    downgrade_to(5);
    auto store = open_store();
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->schema_version(), kSchemaVersion);
    EXPECT_EQ(store->tasks(true)->size(), 1u);
    SQLite::Database raw(path_, SQLite::OPEN_READONLY);
    EXPECT_EQ(raw.execAndGet("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name IN "
                             "('tasks_state_uid', 'tasks_finished_at')")
                  .getInt(),
              2);
}

// This test verifies listing a page at a time: ids above `after`, at most `limit`, in id order,
// live tasks only unless asked; a page of tasks by id; and the counts behind the limits and the
// live view.
TEST_F(StoreTest, PagesAndCounts) {
    auto store = open_store();
    ASSERT_NE(store, nullptr);
    std::vector<TaskId> ids;
    for (int i = 0; i < 7; ++i) {
        TaskRow t = named_task("t" + std::to_string(i),
                               i == 2 ? TaskState::Succeeded
                               : i == 3 ? TaskState::Held
                               : i == 4 ? TaskState::Running
                                        : TaskState::Queued);
        t.uid = i < 5 ? 1000 : 1001;
        t.user = i < 5 ? "alice" : "bob";
        t.env = {{"SECRET", "s"}};
        auto id = store->insert_task(t);
        ASSERT_TRUE(id);
        ids.push_back(*id);
    }
    auto first = store->tasks(true, 0, 3);
    ASSERT_TRUE(first) << first.error().message;
    ASSERT_EQ(first->size(), 3u);
    EXPECT_EQ(first->back().id, ids[2]);
    auto second = store->tasks(true, first->back().id, 3);
    ASSERT_EQ(second->size(), 3u);
    EXPECT_EQ(second->front().id, ids[3]);
    auto rest = store->tasks(true, second->back().id, 3);
    ASSERT_EQ(rest->size(), 1u);
    auto live = store->tasks(false, 0, 100);
    ASSERT_EQ(live->size(), 6u) << "the succeeded one left out";

    const std::vector<TaskId> asked = {ids[6], ids[0], 999999};
    auto some = store->tasks_by_id(asked);
    ASSERT_TRUE(some) << some.error().message;
    ASSERT_EQ(some->size(), 2u);
    EXPECT_EQ((*some)[0].id, ids[0]);
    EXPECT_TRUE((*some)[0].env.empty()) << "read without environments";

    EXPECT_EQ(*store->waiting_count(1000), 3u);  // two queued, one held
    EXPECT_EQ(*store->waiting_count(1001), 2u);
    EXPECT_EQ(*store->waiting_count(4242), 0u);
    auto counts = store->live_counts();
    ASSERT_TRUE(counts) << counts.error().message;
    std::map<std::pair<std::string, TaskState>, std::size_t> by;
    for (const StateCount& c : *counts) {
        by[{c.user, c.state}] = c.count;
    }
    EXPECT_EQ(by, (std::map<std::pair<std::string, TaskState>, std::size_t>{
                      {{"alice", TaskState::Queued}, 2},
                      {{"alice", TaskState::Held}, 1},
                      {{"alice", TaskState::Running}, 1},
                      {{"bob", TaskState::Queued}, 2}}));
    auto states = store->state_counts();
    ASSERT_TRUE(states);
    EXPECT_EQ((*states)[TaskState::Queued], 4u);
    EXPECT_EQ((*states)[TaskState::Succeeded], 1u);
    auto held = store->ids_in_state(TaskState::Held, 10);
    ASSERT_TRUE(held);
    EXPECT_EQ(*held, std::vector<TaskId>{ids[3]});
}

// This test verifies the timeline's sample buckets: at most one row per GPU and slice, the
// slice's first time and largest readings, nothing outside the span.
TEST_F(StoreTest, SampleBucketsBoundTheTimeline) {
    auto store = open_store();
    ASSERT_NE(store, nullptr);
    std::vector<GpuSampleRow> rows;
    for (int t = 0; t < 1000; ++t) {
        for (int gpu = 0; gpu < 2; ++gpu) {
            GpuSampleRow r = sample(1000 + t, gpu);
            r.used_mib = t;
            rows.push_back(r);
        }
    }
    ASSERT_TRUE(store->add_gpu_samples(rows));
    auto buckets = store->gpu_sample_buckets(1000, 1999, 10);
    ASSERT_TRUE(buckets) << buckets.error().message;
    ASSERT_EQ(buckets->size(), 20u);
    EXPECT_EQ((*buckets)[0].gpu, 0);
    EXPECT_DOUBLE_EQ((*buckets)[0].time, 1000);
    EXPECT_EQ((*buckets)[0].used_mib, 99);  // the largest of 1000..1099.9
    EXPECT_EQ((*buckets)[9].used_mib, 999);  // the last slice takes the span's end
    EXPECT_EQ((*buckets)[10].gpu, 1);
    auto part = store->gpu_sample_buckets(1500, 1509, 10);
    ASSERT_TRUE(part);
    EXPECT_EQ(part->size(), 20u);
    EXPECT_EQ((*part)[0].used_mib, 500);
}

// This test verifies the timeline's tasks a page at a time, and `ran`: only tasks with an
// attempt in the span.
TEST_F(StoreTest, SpanQueryPagesAndRan) {
    auto store = open_store();
    ASSERT_NE(store, nullptr);
    const TaskId ran = add_finished(*store, "alice", TaskState::Succeeded, 500, {1.0});
    TaskRow queued = named_task("queued");
    queued.submitted_at = 100;
    auto waiting = store->insert_task(queued);
    ASSERT_TRUE(waiting);
    auto both = store->tasks_between(SpanQuery{0, 1000, false, 0, 10});
    ASSERT_TRUE(both) << both.error().message;
    EXPECT_EQ(ids_of(*both), (std::vector<TaskId>{ran, *waiting}));
    auto only_ran = store->tasks_between(SpanQuery{0, 1000, true, 0, 10});
    ASSERT_TRUE(only_ran) << only_ran.error().message;
    EXPECT_EQ(ids_of(*only_ran), std::vector<TaskId>{ran});
    auto page = store->tasks_between(SpanQuery{0, 1000, false, 0, 1});
    EXPECT_EQ(ids_of(*page), std::vector<TaskId>{ran});
    auto next = store->tasks_between(SpanQuery{0, 1000, false, ran, 1});
    EXPECT_EQ(ids_of(*next), std::vector<TaskId>{*waiting});
    FinishedQuery q;
    q.limit = 1;
    q.after = ran;
    EXPECT_TRUE(store->finished_tasks(q)->empty());
}

}  // namespace
}  // namespace carma::store
