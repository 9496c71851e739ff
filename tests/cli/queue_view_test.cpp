// `carma queue`'s table (cli/views/queue_view): columns, times, memory, filters, cutting,
// --format and job arrays, from task JSON as GET /v1/tasks returns it (docs/api.md).

#include "cli/views/queue_view.h"

#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace carma::cli {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr double kNow = 1764441600.0;

// A task as the daemon lists it; `fields` override the defaults.
json task(std::int64_t id, const json& fields = json::object()) {
    json t = {{"id", id},
              {"name", "resnet3"},
              {"user", "alice"},
              {"state", "queued"},
              {"gpus", 1},
              {"memory", {{"declared_mib", 12288}}},
              {"learned", {{"need_mib", nullptr}, {"margin_mib", 2048}}},
              {"submitted_at", kNow - 125},
              {"finished_at", nullptr},
              {"started_at", nullptr},
              {"message", "waits for 1 idle GPU"}};
    for (const auto& [k, v] : fields.items()) {
        t[k] = v;
    }
    return t;
}

json array_task(std::int64_t id, std::int64_t array_id, std::int64_t index,
                const json& fields = json::object()) {
    json t = task(id, fields);
    t["array"] = {{"id", array_id}, {"index", index}};
    return t;
}

std::vector<std::string> lines(const json& tasks, const QueueView& view = {}) {
    return queue_lines(tasks, view, kNow);
}

// This test verifies the header and that a waiting task shows its wait and no run time, and a
// running one its current attempt's run time and no wait.
TEST(QueueViewTest, ColumnsAndWaitVersusRunTime) {
    const json tasks = json::array(
        {task(7), task(8, {{"state", "running"},
                           {"started_at", kNow - 3725},  // 1h02m05s ago
                           {"submitted_at", kNow - 90000},
                           {"message", "running on GPU 2"}})});
    EXPECT_THAT(lines(tasks),
                ElementsAre("ID  USER   NAME     STATE    GPUS  MEM         WAIT   TIME   REASON",
                            "7   alice  resnet3  queued   1     12,288 MiB  2m05s  -      "
                            "waits for 1 idle GPU",
                            "8   alice  resnet3  running  1     12,288 MiB  -      1h02m  "
                            "running on GPU 2"));
}

// This test verifies the PRIORITY column (fair share, issue 23): shown, before REASON, only when
// a listed task has a priority (a waiting task under `carma`); an array shows its highest; %Q and
// `priority` name it in --format.
TEST(QueueViewTest, PriorityOnlyWhereTheDaemonGivesOne) {
    const json plain = json::array({task(7)});
    EXPECT_THAT(lines(plain)[0], ::testing::Not(HasSubstr("PRIORITY")));
    const json ranked = json::array(
        {task(7, {{"priority", 10000.0}}), task(8, {{"user", "bob"}, {"priority", 5000.4}}),
         task(9, {{"state", "running"}, {"started_at", kNow - 60}, {"priority", nullptr}})});
    const std::vector<std::string> shown = lines(ranked);
    EXPECT_THAT(shown[0], HasSubstr("TIME   PRIORITY  REASON"));
    EXPECT_THAT(shown[1], HasSubstr("10000     waits for 1 idle GPU"));
    EXPECT_THAT(shown[2], HasSubstr("5000      waits for 1 idle GPU"));
    EXPECT_THAT(shown[3], HasSubstr("1m00s  -         "));
    EXPECT_THAT(*parse_queue_format("%i %Q"), ElementsAre(QueueField::Id, QueueField::Priority));
    QueueView v;
    v.fields = *parse_queue_format("id,priority");
    v.expand_arrays = false;
    const json array = json::array(
        {task(20, {{"array", {{"id", 20}, {"index", 0}}}, {"priority", 900.0}}),
         task(21, {{"array", {{"id", 20}, {"index", 1}}}, {"priority", 1900.0}})});
    EXPECT_THAT(lines(array, v), ElementsAre("ID        PRIORITY", "20_[0-1]  1900"));
}

// This test verifies that recovering and held tasks wait too, that finished tasks show neither
// time, and that a running task from a daemon without started_at shows no run time.
TEST(QueueViewTest, WhichStatesWaitAndWhichRun) {
    const json tasks = json::array({task(1, {{"state", "recovering"}}),
                                    task(2, {{"state", "held"}}),
                                    task(3, {{"state", "succeeded"},
                                             {"started_at", kNow - 50},
                                             {"finished_at", kNow - 10}}),
                                    task(4, {{"state", "running"}, {"started_at", nullptr}})});
    QueueView v;
    v.fields = {QueueField::Id, QueueField::Wait, QueueField::Time};
    EXPECT_THAT(lines(tasks, v),
                ElementsAre("ID  WAIT   TIME", "1   2m05s  -", "2   2m05s  -", "3   -      -",
                            "4   -      -"));
}

// This test verifies MEM's sources, best first: the learned need plus its margin, else the
// declared need, else "?".
TEST(QueueViewTest, MemoryIsWhatCarmaPlansWith) {
    const json tasks = json::array(
        {task(1, {{"learned", {{"need_mib", 13236}, {"margin_mib", 1024}}}}),  // 14,260
         task(2),                                                             // declared
         task(3, {{"memory", {{"declared_mib", nullptr}}}}),                  // nothing known
         task(4, {{"learned", nullptr}, {"memory", nullptr}})});              // older daemon
    QueueView v;
    v.fields = {QueueField::Id, QueueField::Mem};
    EXPECT_THAT(lines(tasks, v), ElementsAre("ID  MEM", "1   14,260 MiB", "2   12,288 MiB",
                                             "3   ?", "4   ?"));
}

// This test verifies the user and state filters, and that an empty REASON prints as "-".
TEST(QueueViewTest, FiltersByUserAndState) {
    const json tasks =
        json::array({task(1), task(2, {{"user", "bob"}, {"state", "running"}}),
                     task(3, {{"user", "carol"}, {"message", ""}})});
    QueueView v;
    v.fields = {QueueField::Id, QueueField::User, QueueField::Reason};
    v.users = parse_queue_users({"bob,carol", " alice "});
    EXPECT_THAT(v.users, ElementsAre("bob", "carol", "alice"));
    v.users = parse_queue_users({"bob", "carol"});
    EXPECT_THAT(lines(tasks, v), ElementsAre("ID  USER   REASON", "2   bob    waits for 1 idle GPU",
                                             "3   carol  -"));
    v.states = *parse_queue_states({"Queued"});
    EXPECT_THAT(lines(tasks, v), ElementsAre("ID  USER   REASON", "3   carol  -"));
    EXPECT_EQ(filter_queue_tasks(tasks, v), json::array({tasks[2]}));
    v.users.clear();
    v.states.clear();
    EXPECT_EQ(filter_queue_tasks(tasks, v), tasks);
}

// This test verifies that --state takes comma lists, names an unknown state with the nearest
// one, and says when finished tasks must be fetched.
TEST(QueueViewTest, StatesAreCheckedAndSayWhetherFinishedOnesAreNeeded) {
    auto states = parse_queue_states({"running,queued", "held", "running"});
    ASSERT_TRUE(states) << states.error().message;
    EXPECT_THAT(*states, ElementsAre("running", "queued", "held"));
    EXPECT_FALSE(queue_states_need_finished(*states));
    EXPECT_TRUE(queue_states_need_finished(*parse_queue_states({"running,timeout"})));
    const auto bad = parse_queue_states({"queued,runing"});
    ASSERT_FALSE(bad);
    EXPECT_THAT(bad.error().message,
                HasSubstr("unknown state 'runing' in --state (did you mean 'running'?); states: "
                          "queued,recovering,held,running,succeeded,failed,cancelled,timeout,"
                          "lost,rejected"));
    EXPECT_THAT(parse_queue_states({"xyzzy"}).error().message,
                HasSubstr("unknown state 'xyzzy' in --state; states: queued,"));
    EXPECT_THAT(parse_queue_states({" , "}).error().message, HasSubstr("--state is empty"));
}

// This test verifies squeue's words (issue 45): `carma queue -t PD` was "unknown state 'PD'".
// Codes and long names each stand for CARMA's states, any case; a misspelt long name gets the
// nearest match.
TEST(QueueViewTest, SlurmStateCodesAndNames) {
    EXPECT_THAT(*parse_queue_states({"PD"}), ElementsAre("queued", "recovering", "held"));
    EXPECT_THAT(*parse_queue_states({"R,CD"}), ElementsAre("running", "succeeded"));
    EXPECT_THAT(*parse_queue_states({"PENDING"}), ElementsAre("queued", "recovering", "held"));
    EXPECT_THAT(*parse_queue_states({"f,CA,TO"}), ElementsAre("failed", "cancelled", "timeout"));
    EXPECT_THAT(*parse_queue_states({"OUT_OF_MEMORY"}), ElementsAre("recovering", "failed"));
    EXPECT_THAT(*parse_queue_states({"completed"}), ElementsAre("succeeded"));
    EXPECT_THAT(*parse_queue_states({"CG"}), ElementsAre("running"));
    EXPECT_THAT(*parse_queue_states({"NF"}), ElementsAre("lost"));
    EXPECT_TRUE(queue_states_need_finished(*parse_queue_states({"CD"})));
    const auto bad = parse_queue_states({"PENDNG"});
    ASSERT_FALSE(bad);
    EXPECT_THAT(bad.error().message, HasSubstr("(did you mean 'pending'?)"));
    EXPECT_THAT(bad.error().message, HasSubstr("Slurm's codes"));
}

// This test verifies both --format forms, and the errors for an unknown name, an unknown code,
// a field width and stray text.
TEST(QueueViewTest, FormatNamesAndCodes) {
    auto names = parse_queue_format("id, NAME,reason");
    ASSERT_TRUE(names) << names.error().message;
    EXPECT_THAT(*names, ElementsAre(QueueField::Id, QueueField::Name, QueueField::Reason));
    auto codes = parse_queue_format("%i %u %j %t %T %b %m %W %M %R %r");
    ASSERT_TRUE(codes) << codes.error().message;
    EXPECT_THAT(*codes, ElementsAre(QueueField::Id, QueueField::User, QueueField::Name,
                                    QueueField::State, QueueField::State, QueueField::Gpus,
                                    QueueField::Mem, QueueField::Wait, QueueField::Time,
                                    QueueField::Reason, QueueField::Reason));
    EXPECT_EQ(default_queue_fields().size(), 9u);

    EXPECT_THAT(parse_queue_format("id,nmae").error().message,
                HasSubstr("unknown field 'nmae' in --format (did you mean 'name'?); fields: "
                          "id,user,name,state,gpus,mem,wait,time,priority,reason"));
    EXPECT_THAT(parse_queue_format("%i %P").error().message,
                HasSubstr("unknown code '%P'; codes: %i id, %u user, %j name"));
    EXPECT_THAT(parse_queue_format("%.18i %j").error().message,
                HasSubstr("field widths ('%.18i') are not supported"));
    EXPECT_THAT(parse_queue_format("%i|%j").error().message,
                HasSubstr("'|' is not a %-code"));
    EXPECT_THAT(parse_queue_format("%i %").error().message, HasSubstr("ends with a lone '%'"));
    EXPECT_THAT(parse_queue_format(" , ").error().message, HasSubstr("--format is empty"));

    QueueView v;
    v.fields = *parse_queue_format("state,id");
    EXPECT_THAT(lines(json::array({task(5)}), v), ElementsAre("STATE   ID", "queued  5"));
}

// This test verifies the cut: nothing without a width (not a terminal, or --wide); with one,
// REASON is cut first and then NAME, each marked, and a table that fits is left alone.
TEST(QueueViewTest, LongNameAndReasonAreCutToTheWidth) {
    const std::string name(40, 'n');
    const std::string reason(60, 'r');
    const json tasks = json::array({task(1, {{"name", name}, {"message", reason}})});
    QueueView v;
    v.fields = {QueueField::Id, QueueField::Name, QueueField::Reason};
    EXPECT_THAT(lines(tasks, v)[1], "1   " + name + "  " + reason);  // 106 wide

    v.width = 80;  // 26 too wide: REASON gives 26
    EXPECT_THAT(lines(tasks, v)[1], "1   " + name + "  " + std::string(31, 'r') + "...");
    EXPECT_EQ(lines(tasks, v)[1].size(), 80u);

    v.width = 40;  // REASON down to 12, then NAME gives the rest (down to 8 at most)
    const std::string cut = lines(tasks, v)[1];
    EXPECT_EQ(cut, "1   " + std::string(19, 'n') + "...  " + std::string(9, 'r') + "...");
    EXPECT_EQ(cut.size(), 40u);

    v.width = 10;  // cannot fit: both at their narrowest
    EXPECT_EQ(lines(tasks, v)[1], "1   nnnnn...  rrrrrrrrr...");

    v.width = 200;
    EXPECT_THAT(lines(tasks, v)[1], "1   " + name + "  " + reason);
}

// This test verifies that names and messages cannot break the table or drive the terminal.
TEST(QueueViewTest, ControlCharactersArePrintedAsQuestionMarks) {
    QueueView v;
    v.fields = {QueueField::Name, QueueField::Reason};
    EXPECT_THAT(lines(json::array({task(1, {{"name", "a\nb"}, {"message", "\x1b[2Jx"}})}), v),
                ElementsAre("NAME  REASON", "a?b   ?[2Jx"));
}

// This test verifies that an array's listed tasks make one line where its first task stands:
// id_[ranges], states counted (running first), GPUS/MEM/NAME from its first task, the longest
// wait and run time, the first waiting task's reason; lone tasks keep their places.
TEST(QueueViewTest, AnArrayIsOneLine) {
    json tasks = json::array();
    tasks.push_back(task(11));
    for (int i = 0; i < 10; ++i) {
        json fields = {{"name", "sweep"}, {"gpus", i == 0 ? 2 : 1}};
        if (i == 1 || i == 2 || i == 4) {
            fields["state"] = "running";
            fields["started_at"] = kNow - 60.0 * i;  // the longest: index 4, 4m00s
            fields["message"] = "running on GPU 0";
        } else {
            fields["submitted_at"] = kNow - 10.0 * i;  // the longest wait: index 9, 1m30s
            fields["message"] = fmt::format("reason of index {}", i);
        }
        tasks.push_back(array_task(12 + i, 12, i, fields));
    }
    tasks.push_back(task(22));
    // Not in index order, as a listing after a re-submission could be.
    std::swap(tasks[1], tasks[3]);
    QueueView v;
    v.fields = {QueueField::Id, QueueField::Name, QueueField::State, QueueField::Gpus,
                QueueField::Wait, QueueField::Time, QueueField::Reason};
    EXPECT_THAT(lines(tasks, v),
                ElementsAre("ID        NAME     STATE                GPUS  WAIT   TIME   REASON",
                            "11        resnet3  queued               1     2m05s  -      "
                            "waits for 1 idle GPU",
                            "12_[0-9]  sweep    3 running, 7 queued  2     1m30s  4m00s  "
                            "reason of index 0",
                            "22        resnet3  queued               1     2m05s  -      "
                            "waits for 1 idle GPU"));
}

// This test verifies the indices still listed as ranges, a lone remaining task as id_index,
// and that --array (or --wide) lists every task with its own id_index.
TEST(QueueViewTest, ArrayIndicesAndExpansion) {
    json tasks = json::array();
    for (int i : {0, 1, 2, 5, 7, 8}) {
        tasks.push_back(array_task(30 + i, 30, i, {{"state", i < 2 ? "running" : "queued"},
                                                   {"started_at", kNow - 5}}));
    }
    tasks.push_back(array_task(50, 40, 3));
    QueueView v;
    v.fields = {QueueField::Id, QueueField::State, QueueField::Reason};
    EXPECT_THAT(lines(tasks, v),
                ElementsAre("ID              STATE                REASON",
                            "30_[0-2,5,7-8]  2 running, 4 queued  waits for 1 idle GPU",
                            "40_3            queued               waits for 1 idle GPU"));
    // Only running tasks: REASON is the first task's message.
    v.states = {"running"};
    EXPECT_THAT(lines(tasks, v),
                ElementsAre("ID        STATE      REASON", "30_[0-1]  2 running  waits for 1 idle GPU"));
    v.states.clear();
    v.expand_arrays = true;
    const std::vector<std::string> expanded = lines(tasks, v);
    ASSERT_EQ(expanded.size(), 8u);
    EXPECT_EQ(expanded[1], "30_0  running  waits for 1 idle GPU");
    EXPECT_EQ(expanded[7], "40_3  queued   waits for 1 idle GPU");
}

// This test verifies that an answer of another shape prints a header and dashes, never throws.
TEST(QueueViewTest, OddAnswersPrintDashes) {
    EXPECT_THAT(lines(json::object()), ::testing::SizeIs(1));
    EXPECT_THAT(lines(json::array({json::object(), json(5)})),
                ElementsAre("ID  USER  NAME  STATE  GPUS  MEM  WAIT  TIME  REASON",
                            "-   -     -     -      -     ?    -     -     -",
                            "-   -     -     -      -     ?    -     -     -"));
    EXPECT_THAT(lines(json::array({task(1, {{"array", {{"id", "x"}}}})}))[1],
                HasSubstr("1   alice"));  // a malformed array place: a lone task
}

}  // namespace
}  // namespace carma::cli
